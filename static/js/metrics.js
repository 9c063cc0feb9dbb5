// The metrics page's charts: plotly.js draws each `.metrics-chart` from its `data-figure` (the
// figure dict built in webapp/metrics/charts.py: the daily line, target and alert threshold lines,
// pilot window and firing shading, version markers).
//
// Both this file and plotly.js's basic bundle are `defer` scripts, run in order once the page is
// parsed. The charts are drawn one at a time, those in view first (Grafana draws the panels in view
// first the same way): on a laptop the first chart sits below the fold, and drawing all eleven in
// one go held the page for about a second. Between two charts the browser gets its turn (scrolling,
// clicks), and before each one the next chart is chosen again, so a chart scrolled into view jumps
// the queue. Each chart's `data-drawn` counts its draws and is set once plotly has finished drawing
// it. Performance marks (tests and benchmarks wait on these): `metrics-view-drawn` once every chart
// in view at the first visit is drawn (at once when none is), `metrics-charts-drawn` once every
// chart is.
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

  var CHARTS = ".metrics-chart[data-figure], .quality-chart[data-figure]";
  var queue = [];        // chart elements waiting to be drawn, in page order
  var pumping = false;

  function mark(name) {
    if (window.performance && performance.mark) { performance.mark(name); }
  }

  function inView(el) {
    var r = el.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight && r.width > 0;
  }

  // draw the next chart (one in view first), then give the browser its turn before the one after
  function pump(done) {
    queue = queue.filter(function (el) { return el.isConnected; });  // swapped out by htmx meanwhile
    if (!queue.length) { pumping = false; done(); return; }
    var i = queue.findIndex(inView);
    var el = queue.splice(i < 0 ? 0 : i, 1)[0];
    var source = el.getAttribute("data-figure");
    el.__drawnFrom = source;
    var next = function () { setTimeout(function () { pump(done); }, 0); };
    var failed = function (err) { console.error("chart " + el.id + " not drawn", err); next(); };
    try {
      var fig = fitted(JSON.parse(source));
      window.Plotly.newPlot(el, fig.data, fig.layout, config()).then(function () {
        el.dataset.drawn = String(Number(el.dataset.drawn || 0) + 1);
        el.dispatchEvent(new CustomEvent("metrics:chart-drawn", { bubbles: true }));
        next();
      }, failed);
    } catch (err) { failed(err); }  // one bad figure leaves the others drawn
  }

  // queue the charts under `root` that do not show their figure yet; `done` runs once the queue is empty
  function draw(root, done) {
    root.querySelectorAll(CHARTS).forEach(function (el) {
      if (el.__drawnFrom !== el.getAttribute("data-figure") && queue.indexOf(el) < 0) { queue.push(el); }
    });
    // started after the current task: the page's own start (htmx, DOMContentLoaded) does not wait for a chart
    if (!pumping) { pumping = true; setTimeout(function () { pump(done || function () {}); }, 0); }
  }

  // The latest choice is the one shown. The quick links are other elements than the filter form, so
  // htmx does not queue their requests behind the form's, and an answer to an earlier request arriving
  // after a later one's was taken too: its target (#metrics-results) had already been replaced, so its
  // results went nowhere, but its out-of-band parts (the range error, the quick links) and its URL
  // did, over the later answer's charts. An answer to any but the latest request of the form and its
  // links is now dropped before htmx reads it. The listener sits on the requesting element itself: the
  // answer's events fire there, and a quick link may have left the page (replaced by an answer's
  // quick links) by then, so they would not reach the document. (Not hx-sync "replace": htmx logs every
  // aborted request as a console error; not "queue": htmx drops a queued request whose element left.)
  var latest = null;
  document.addEventListener("htmx:beforeRequest", function (ev) {
    var elt = ev.detail.elt;
    if (!(elt && elt.closest && elt.closest("form.metrics-filters"))) { return; }
    var xhr = latest = ev.detail.xhr;
    elt.addEventListener("htmx:beforeOnLoad", function stale(loaded) {
      if (loaded.detail.xhr !== xhr) { return; }  // another request of the same element
      elt.removeEventListener("htmx:beforeOnLoad", stale);
      if (xhr !== latest) { loaded.preventDefault(); }
    });
  });

  if (!window.Plotly) { return; }  // plotly.js did not load: the table and alerts still give the numbers
  // plotly.js has been parsed and run (it is the defer script before this one): benchmarks read it
  mark("metrics-plotly-ready");
  var firstView = Array.prototype.filter.call(document.querySelectorAll(CHARTS), inView);
  function viewDrawn() { return firstView.every(function (el) { return el.dataset.drawn; }); }
  if (viewDrawn()) { mark("metrics-view-drawn"); } else {
    document.addEventListener("metrics:chart-drawn", function onDrawn() {
      if (viewDrawn()) { mark("metrics-view-drawn"); document.removeEventListener("metrics:chart-drawn", onDrawn); }
    });
  }
  draw(document, function () { mark("metrics-charts-drawn"); });
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
