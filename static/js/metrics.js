// Draw every plotly figure on the metrics page; redraw after htmx swaps in new results.
(function () {
  function draw(root) {
    if (!window.Plotly) { return; }
    root.querySelectorAll(".metrics-chart[data-figure]").forEach(function (el) {
      var fig = JSON.parse(el.getAttribute("data-figure"));
      window.Plotly.react(el, fig.data, fig.layout, { displaylogo: false, responsive: true });
      el.dataset.drawn = String(Number(el.dataset.drawn || 0) + 1);
    });
  }
  // deferred scripts (plotly, this one) have run by DOMContentLoaded: draw then, without waiting
  // for the page's other resources as the load event would
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { draw(document); });
  } else {
    draw(document);
  }
  document.addEventListener("htmx:afterSwap", function (evt) { draw(evt.detail.target.ownerDocument || document); });
})();
