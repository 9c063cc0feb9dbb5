// The metrics page's charts: drawn first as SVG by the server (in the HTML), then replaced by the
// interactive plotly chart of the same figure (`data-figure`) once plotly.js has loaded.
//
// plotly.js (4.8 MB, over a second to parse and run) is not in the page's <head>: it would hold
// up DOMContentLoaded. It is loaded here after the page's `load` event, when the browser is idle.
// Nothing here needs htmx: the script is `async`, and draws are keyed to htmx's events.
//
// After an htmx swap the new results carry their SVG charts already; plotly draws them once the
// swap has *settled*: during a swap the new chart elements (same ids as the old ones) briefly
// carry the old elements' class and style, and htmx puts the new ones back when it settles. A
// chart drawn before that loses plotly's `js-plotly-plot` class (and with it plotly's styling).
(function () {
  var marks = window.performance && performance.mark ? performance : null;
  var script = document.currentScript;
  var plotlySrc = script && script.getAttribute("data-plotly-src");
  if (marks) { marks.mark("metrics-js-start"); }

  function draw(root) {
    if (!window.Plotly) { return 0; }
    var n = 0;
    root.querySelectorAll(".metrics-chart[data-figure]").forEach(function (el) {
      var source = el.getAttribute("data-figure");
      if (el.__drawnFrom === source) { return; }  // already shows this figure
      var fig = JSON.parse(source);
      var picture = el.querySelector(":scope > svg.metrics-svg");
      if (picture) { picture.remove(); }  // plotly's chart takes the server-drawn picture's place
      window.Plotly.newPlot(el, fig.data, fig.layout, { displaylogo: false, responsive: true });
      el.__drawnFrom = source;
      el.dataset.drawn = String(Number(el.dataset.drawn || 0) + 1);
      n += 1;
    });
    return n;
  }

  // every chart shows a picture: the server's SVG, or plotly's own
  function allVisible() {
    return Array.prototype.every.call(document.querySelectorAll(".metrics-chart"), function (el) {
      return !!el.querySelector("svg");
    });
  }

  function loadPlotly() {
    if (window.Plotly || !plotlySrc || document.querySelector("script[data-plotly]")) { return; }
    var s = document.createElement("script");
    s.src = plotlySrc;
    s.async = true;
    s.setAttribute("data-plotly", "");
    s.addEventListener("load", function () {
      draw(document);
      // the moment every chart is interactive (benchmarks read it)
      if (marks && allVisible()) { marks.mark("metrics-charts-interactive"); }
    });
    document.head.appendChild(s);
  }

  function first() {
    // the server's SVG charts are in the DOM once it is parsed; the mark waits for the frame that
    // paints them (a task queued from requestAnimationFrame runs after that frame): the moment the
    // first visit's charts are visible, by the browser's clock (benchmarks read it)
    if (!marks || !allVisible()) { return; }
    window.requestAnimationFrame(function () {
      window.setTimeout(function () { marks.mark("metrics-charts-drawn"); }, 0);
    });
  }
  // this script is `async`: it may run before the parser has reached the charts. The document
  // turns "interactive" when parsing ends, before the deferred scripts (htmx, app.js) have been
  // fetched and run, which DOMContentLoaded waits for; the charts need neither.
  if (document.readyState === "loading") {
    document.addEventListener("readystatechange", function parsed() {
      if (document.readyState === "loading") { return; }
      document.removeEventListener("readystatechange", parsed);
      first();
    });
  } else {
    first();
  }

  function later() {
    if (window.requestIdleCallback) {
      window.requestIdleCallback(loadPlotly, { timeout: 1000 });
    } else {
      window.setTimeout(loadPlotly, 0);
    }
  }
  if (document.readyState === "complete") {
    later();
  } else {
    window.addEventListener("load", later);
  }
  document.addEventListener("htmx:afterSettle", function () { draw(document); });
})();
