// The PPI charts (the run's forest plot, the judge's agreement across runs): plotly.js draws each
// `.ppi-chart` from its `data-figure` (built in webapp/ppi/charts.py). Both scripts are `defer`:
// they run in order once the page is parsed. Each chart's `data-drawn` is set once plotly has drawn
// it (the browser tests wait on it). The tables next to the charts carry the same numbers.
(function () {
  var narrow = window.matchMedia("(max-width: 640px)");
  document.querySelectorAll(".ppi-chart[data-figure]").forEach(function (el) {
    var fig = JSON.parse(el.getAttribute("data-figure"));
    var config = { displaylogo: false, responsive: true, displayModeBar: narrow.matches ? false : "hover" };
    Plotly.newPlot(el, fig.data, fig.layout, config).then(function () {
      el.setAttribute("data-drawn", "1");
    });
  });
})();
