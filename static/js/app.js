// Draft Desk page helpers (own code; htmx and plotly are served from their packages).
document.addEventListener("DOMContentLoaded", () => {
  // Forms marked data-confirm ask before submitting.
  document.body.addEventListener("submit", (ev) => {
    const msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });
});
