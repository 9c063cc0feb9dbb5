// Draft Desk page helpers (own code; htmx and plotly are served from their packages).
document.addEventListener("DOMContentLoaded", () => {
  // Forms marked data-confirm ask before submitting.
  document.body.addEventListener("submit", (ev) => {
    const msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
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
