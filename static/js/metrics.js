// Draw every plotly figure on the metrics page; redraw after htmx has swapped in new results.
//
// The charts are drawn once the swap has *settled*: during an htmx swap the new chart elements
// (same ids as the old ones) briefly carry the old elements' class and style, and htmx puts the
// new ones back when it settles. A chart drawn before that loses plotly's `js-plotly-plot` class
// (and with it plotly's styling: toolbars over the plot, titles under the wrong panel).
(function () {
  // deferred scripts run in order: plotly.js has been parsed and run by now (benchmarks read the mark)
  if (window.performance && performance.mark) { performance.mark("metrics-js-start"); }
  function draw(root) {
    if (!window.Plotly) { return; }
    root.querySelectorAll(".metrics-chart[data-figure]").forEach(function (el) {
      var source = el.getAttribute("data-figure");
      if (el.__drawnFrom === source) { return; }  // already shows this figure
      var fig = JSON.parse(source);
      window.Plotly.newPlot(el, fig.data, fig.layout, { displaylogo: false, responsive: true });
      el.__drawnFrom = source;
      el.dataset.drawn = String(Number(el.dataset.drawn || 0) + 1);
    });
  }
  // deferred scripts (plotly, this one) have run by DOMContentLoaded: draw then, without waiting
  // for the page's other resources as the load event would
  function first() {
    draw(document);
    // the moment the first visit's charts are drawn, by the browser's clock (benchmarks read it)
    if (window.performance && performance.mark) { performance.mark("metrics-charts-drawn"); }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", first);
  } else {
    first();
  }
  // After an htmx swap, draw once the swap has settled: htmx restores the new elements' classes
  // when it settles, which would strip plotly's own from a chart drawn earlier.
  document.addEventListener("htmx:afterSettle", function () { draw(document); });
})();
