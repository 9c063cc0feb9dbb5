// The metrics page's charts: plotly.js draws each `.metrics-chart` from its `data-figure` (the
// figure dict built in webapp/metrics/charts.py: the daily line, target and alert threshold lines,
// pilot window and firing shading, version markers).
//
// Both this file and plotly.js's basic bundle are `defer` scripts, run in order once the page is
// parsed, so the charts are drawn before DOMContentLoaded. Each chart's `data-drawn` counts its
// draws and is set once plotly has finished drawing it; the `metrics-charts-drawn` performance
// mark is set when every chart of the first visit is drawn (tests and benchmarks wait on these).
//
// On a narrow screen (a phone) plotly's toolbar is not shown: it would sit over the chart's title,
// and zooming by touch works without it; double-tap resets the axes.
//
// After an htmx swap the new results are drawn once the swap has *settled*: during a swap the new
// chart elements (same ids as the old ones) briefly carry the old elements' class and style, and
// htmx puts the new ones back when it settles. A chart drawn before that loses plotly's
// `js-plotly-plot` class (and with it plotly's styling).
(function () {
  var narrow = window.matchMedia("(max-width: 640px)");

  function config() {
    return { displaylogo: false, responsive: true, displayModeBar: narrow.matches ? false : "hover" };
  }

  function draw(root) {
    var pending = [];
    // the daily metric charts, and the weekly human-graded quality chart (its own class: it is no daily metric)
    root.querySelectorAll(".metrics-chart[data-figure], .quality-chart[data-figure]").forEach(function (el) {
      var source = el.getAttribute("data-figure");
      if (el.__drawnFrom === source) { return; }  // already shows this figure
      el.__drawnFrom = source;
      var fig = JSON.parse(source);
      pending.push(window.Plotly.newPlot(el, fig.data, fig.layout, config()).then(function () {
        el.dataset.drawn = String(Number(el.dataset.drawn || 0) + 1);
      }));
    });
    return Promise.all(pending);
  }

  if (!window.Plotly) { return; }  // plotly.js did not load: the table and alerts still give the numbers
  // plotly.js has been parsed and run (it is the defer script before this one): benchmarks read it
  if (window.performance && performance.mark) { performance.mark("metrics-plotly-ready"); }
  draw(document).then(function () {
    if (window.performance && performance.mark) { performance.mark("metrics-charts-drawn"); }
  });
  document.addEventListener("htmx:afterSettle", function () { draw(document); });
  // Back or Forward to a pushed URL: htmx puts the page back (settled at once), with new chart elements
  document.addEventListener("htmx:historyRestore", function () { draw(document); });
  // a phone turned sideways (or a window resized) past the breakpoint: the toolbar follows
  narrow.addEventListener("change", function () {
    document.querySelectorAll(".metrics-chart.js-plotly-plot, .quality-chart.js-plotly-plot").forEach(function (el) {
      window.Plotly.react(el, el.data, el.layout, config());
    });
  });
})();
