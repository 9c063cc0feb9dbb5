// Draft Desk page helpers (own code; htmx and plotly are served from their packages).
// No inline script or style anywhere (Content-Security-Policy): behaviour and computed sizes live here.

// Progress bars carry their share in data-width; set it through the CSSOM, which CSP allows.
function applyWidths(root) {
  root.querySelectorAll("[data-width]").forEach((el) => {
    const pct = Math.max(0, Math.min(100, parseFloat(el.getAttribute("data-width")) || 0));
    el.style.width = pct + "%";
  });
}

document.addEventListener("DOMContentLoaded", () => {
  applyWidths(document);
  // Forms marked data-confirm ask before submitting.
  document.body.addEventListener("submit", (ev) => {
    const msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });
});

// Fragments swapped in by htmx get their widths too.
document.addEventListener("htmx:load", (ev) => applyWidths(ev.detail.elt));
