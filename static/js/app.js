// Draft Desk page helpers (own code; htmx and plotly are served from their packages).
// No inline script or style anywhere (Content-Security-Policy): behaviour and computed sizes live here.

// Progress bars carry their share in data-width; set it through the CSSOM, which CSP allows.
function applyWidths(root) {
  root.querySelectorAll("[data-width]").forEach((el) => {
    const pct = Math.max(0, Math.min(100, parseFloat(el.getAttribute("data-width")) || 0));
    el.style.width = pct + "%";
  });
}

// On a phone the navigation is a strip that scrolls sideways: bring the current entry into it
// (scrollLeft only: scrollIntoView would also scroll the page).
function revealCurrentNav() {
  const nav = document.querySelector("nav.mainnav");
  const current = nav && nav.querySelector('[aria-current="page"]');
  if (!current || nav.scrollWidth <= nav.clientWidth) return;
  nav.scrollLeft = Math.max(0, current.offsetLeft - nav.offsetLeft - (nav.clientWidth - current.offsetWidth) / 2);
}

document.addEventListener("DOMContentLoaded", () => {
  applyWidths(document);
  revealCurrentNav();
  // Forms marked data-confirm ask before submitting.
  document.body.addEventListener("submit", (ev) => {
    const msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) { ev.preventDefault(); return; }
    // Forms marked data-busy (imports, re-checks) say they are working and cannot be sent twice.
    const busy = ev.target.getAttribute("data-busy");
    if (busy !== null && !ev.defaultPrevented) {
      const button = ev.submitter || ev.target.querySelector("button[type=submit]");
      ev.target.classList.add("is-busy");
      ev.target.setAttribute("aria-busy", "true");
      if (button) {
        button.dataset.label = button.textContent;
        button.textContent = busy || "Working…";
        // Disable after the browser has read the form, so the button's own name/value is still sent.
        window.setTimeout(() => { button.disabled = true; }, 0);
      }
    }
  });
  // htmx forms with data-busy get their button back when the answer has arrived.
  document.body.addEventListener("htmx:afterRequest", (ev) => {
    const form = ev.detail.elt && ev.detail.elt.closest && ev.detail.elt.closest("form[data-busy]");
    if (!form) return;
    form.classList.remove("is-busy");
    form.removeAttribute("aria-busy");
    form.querySelectorAll("button[data-label]").forEach((b) => { b.textContent = b.dataset.label; b.disabled = false; });
  });
  // Buttons with data-copy-target copy that element's text to the clipboard and say so.
  document.body.addEventListener("click", async (ev) => {
    const button = ev.target.closest("[data-copy-target]");
    if (!button) return;
    const source = document.getElementById(button.getAttribute("data-copy-target"));
    if (!source) return;
    try {
      await navigator.clipboard.writeText(source.textContent.trim());
      button.textContent = "Copied";
    } catch (err) {
      // Without clipboard access (plain HTTP, permissions), select the text for a manual copy.
      window.getSelection().selectAllChildren(source);
      button.textContent = "Press Ctrl+C";
    }
  });
});

// Fragments swapped in by htmx get their widths too.
document.addEventListener("htmx:load", (ev) => applyWidths(ev.detail.elt));
