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
// and zooming by touch works without it; double-tap resets the axes. The legend is compact there:
// two columns of smaller text (two rows instead of three for the full set of entries, so the plot
// keeps its height), and an entry with a `meta.narrow_name` (the hollow-marker note) uses it.
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

  // the figure as drawn at the current width: the server's figure, with a compact legend on a phone
  function fitted(fig) {
    if (!narrow.matches) { return fig; }
    var legend = Object.assign({}, fig.layout.legend, {
      font: { size: 9 }, traceorder: "normal", entrywidth: 0.5, entrywidthmode: "fraction"
    });
    var data = fig.data.map(function (t) {
      return t.meta && t.meta.narrow_name ? Object.assign({}, t, { name: t.meta.narrow_name }) : t;
    });
    return { data: data, layout: Object.assign({}, fig.layout, { legend: legend }) };
  }

  function draw(root) {
    var pending = [];
    // the daily metric charts, and the weekly human-graded quality chart (its own class: it is no daily metric)
    root.querySelectorAll(".metrics-chart[data-figure], .quality-chart[data-figure]").forEach(function (el) {
      var source = el.getAttribute("data-figure");
      if (el.__drawnFrom === source) { return; }  // already shows this figure
      el.__drawnFrom = source;
      var fig = fitted(JSON.parse(source));
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
  // a phone turned sideways (or a window resized) past the breakpoint: the toolbar and the legend follow
  narrow.addEventListener("change", function () {
    document.querySelectorAll(".metrics-chart.js-plotly-plot[data-figure], .quality-chart.js-plotly-plot[data-figure]").forEach(function (el) {
      var fig = fitted(JSON.parse(el.getAttribute("data-figure")));
      window.Plotly.react(el, fig.data, fig.layout, config());
    });
  });
})();
