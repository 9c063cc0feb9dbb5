"""plotly.js draws every /metrics chart of the demo in the browser, with its target and alert threshold lines,
a toolbar that never covers a title, a legend compact on a phone, and the weekly human-graded quality chart.

Each chart is an empty box with its figure (`data-figure`), drawn by plotly.js; target and threshold are
line traces (a legend entry and a hover value, which plotly shapes lack), pilot window and firing periods
rectangle shapes, version changes line shapes. What plotly drew in the DOM is checked against the figure.
"""

from __future__ import annotations

import json
from typing import Any

from tests.browser_support import sign_in, wait_until
from webapp.demo import content as c

SUPPORT_LEAD = next(email for key, email, _n, _r in c.DEMO_USERS if key == "support_lead")

# every chart box is plotly's, finished drawing (data-drawn is set when Plotly.newPlot has resolved)
ALL_DRAWN = """() => {
  const charts = Array.from(document.querySelectorAll('.metrics-chart'));
  return charts.length === 9 && charts.every(el => el.dataset.drawn && el.classList.contains('js-plotly-plot')
    && el.querySelector('.main-svg'));
}"""

# per chart: the figure it was given, and what plotly drew of its lines and shapes
DRAWN = """() => Array.from(document.querySelectorAll('.metrics-chart')).map(el => {
  const fig = JSON.parse(el.getAttribute('data-figure'));
  const plot = el.querySelector('.draglayer .nsewdrag').getBoundingClientRect();
  const traces = Array.from(el.querySelectorAll('.scatterlayer .trace')).map(t => {
    const line = t.querySelector('path.js-line');
    const box = line ? line.getBoundingClientRect() : null;
    return {
      stroke: line ? getComputedStyle(line).stroke : null,
      dash: line ? getComputedStyle(line).strokeDasharray : null,
      box: box ? {left: box.left, right: box.right, top: box.top, bottom: box.bottom} : null,
    };
  });
  return {
    metric: el.dataset.metric, names: fig.data.map(t => t.name), types: fig.data.map(t => t.type), ys: fig.data.map(t => t.y),
    shapes: (fig.layout.shapes || []).map(s => s.name), drawnShapes: el.querySelectorAll('.shapelayer path').length,
    plot: {left: plot.left, right: plot.right, top: plot.top, bottom: plot.bottom}, traces: traces,
    bars: el.querySelectorAll('.barlayer .point').length,
    title: (el.querySelector('.gtitle') || {}).textContent,
    state: el.closest('.metrics-chart-card').dataset.alertState || null,
  };
})"""

GREEN, RED = "rgb(23, 128, 61)", "rgb(180, 35, 24)"  # charts.py's target (#17803d) and alert (#b42318) colours


def _open(new_page: Any, url: str, width: int = 1440, height: int = 900) -> Any:
    page = new_page()
    page.set_viewport_size({"width": width, "height": height})
    sign_in(page, url, SUPPORT_LEAD, c.DEMO_PASSWORD)
    page.goto(f"{url}/metrics")
    wait_until(page, f"({ALL_DRAWN})()", timeout_s=30)
    return page


def _overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]


# per chart: the rows its legend takes, the legend's entries, those drawn past the chart's right edge, the plot's height
LEGEND = """() => Array.from(document.querySelectorAll('.metrics-chart')).map(el => {
  const box = el.getBoundingClientRect();
  const texts = Array.from(el.querySelectorAll('.legendtext'));
  const rows = new Set(Array.from(el.querySelectorAll('.legend .traces')).map(t => Math.round(t.getBoundingClientRect().top)));
  return {
    metric: el.dataset.metric, rows: rows.size, texts: texts.map(t => t.textContent),
    cut: texts.filter(t => t.getBoundingClientRect().right > box.right + 0.5).map(t => t.textContent),
    plot: el.querySelector('.draglayer .nsewdrag').getBoundingClientRect().height,
  };
})"""
QUALITY = """() => { const el = document.querySelector('#chart-human-quality');
  return {points: el.querySelectorAll('.scatterlayer .point').length,
          errorbars: el.querySelectorAll('.errorbar').length,
          shapes: el.querySelectorAll('.shapelayer path').length,
          ticks: Array.from(el.querySelectorAll('.xtick text')).map(t => t.textContent)}; }"""
QUALITY_DRAWN = (
    "(() => { const el = document.querySelector('#chart-human-quality');"
    " return !!(el && el.dataset.drawn && el.querySelector('.main-svg')); })()"
)


def _draws_every_chart_with_target_threshold_and_shapes(page: Any) -> None:
    from webapp.metrics.targets import METRIC_LABELS

    charts = page.evaluate(f"({DRAWN})()")
    assert len(charts) == 9
    states = dict(page.evaluate(
        "Array.from(document.querySelectorAll('.metrics-alerts tr[data-metric]'))"
        ".map(r => [r.dataset.metric, r.querySelector('.badge').textContent])"
    ))
    for ch in charts:
        m = ch["metric"]
        if m == "calibration":
            assert ch["bars"] > 0 and ch["types"][:2] == ["bar", "scatter"]
            continue
        assert ch["title"] == METRIC_LABELS[m]
        # the target and the threshold: in the figure, then drawn as lines of their colour and dash
        # across the plot area, level, and inside it
        for name, colour in (("target", GREEN), ("alert threshold", RED)):
            i = ch["names"].index(name)
            assert ch["ys"][i][0] == ch["ys"][i][1], (m, name)  # level
            drawn = ch["traces"][i]
            assert drawn["stroke"] == colour and drawn["dash"] not in (None, "none"), (m, name, drawn)
            box, plot = drawn["box"], ch["plot"]
            assert box["bottom"] - box["top"] < 4, (m, name, box)  # a horizontal line
            assert box["right"] - box["left"] > 0.9 * (plot["right"] - plot["left"]), (m, name)  # across the chart
            assert plot["top"] - 2 <= box["top"] <= plot["bottom"] + 2, (m, name, box, plot)  # on screen
        # every shape of the figure (pilot window, firing periods, version changes) is drawn
        assert "pilot window" in ch["shapes"], m
        assert ch["drawnShapes"] == len(ch["shapes"]), m
        # the panel's alert state is the alerts table's
        assert ch["state"] == states[m], m


def _draws_the_weekly_quality_chart_with_its_intervals(page: Any) -> None:
    wait_until(page, QUALITY_DRAWN, timeout_s=30)
    fig = json.loads(page.get_attribute("#chart-human-quality", "data-figure") or "{}")
    drawn = page.evaluate(QUALITY)
    assert sorted({x for trace in fig["data"] for x in trace["x"]}) == ["2026-W45", "2026-W46", "2026-W47"]
    # one marker and one error bar per criterion and week (four criteria, side by side)
    assert len(fig["data"]) == 4 and drawn["points"] == drawn["errorbars"] == sum(len(t["x"]) for t in fig["data"]) == 12
    assert drawn["shapes"] == 1  # the team's target line (3.5 for every criterion)
    assert drawn["ticks"] == ["2026-W45", "2026-W46", "2026-W47"]
    card = page.locator(".metrics-chart-card:has(#chart-human-quality)")
    assert card.get_attribute("data-alert-state") == "firing"


def _toolbar_never_covers_a_title(page: Any, width: int) -> None:
    for i in range(9):
        chart = page.locator(".metrics-chart").nth(i)
        chart.scroll_into_view_if_needed()
        chart.hover()  # plotly shows its toolbar while the pointer is over the chart
        title = chart.locator(".gtitle").bounding_box()
        assert title is not None
        buttons = chart.locator(".modebar-btn")
        if width == 390:  # on a phone there is none: it would sit over the title
            assert buttons.count() == 0
            continue
        assert buttons.count() > 0 and page.evaluate(
            "(el) => getComputedStyle(el).position", chart.locator(".modebar").element_handle()
        ) == "absolute"  # plotly's own styling applied (its <style> is allowed by the CSP)
        bar = chart.locator(".modebar").bounding_box()
        assert bar is not None and not _overlaps(title, bar), (i, title, bar)
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scrolling


def _legend_is_compact_on_a_phone(page: Any, width: int) -> None:
    """At 390 px a chart's legend (target, alert threshold, pilot window, the hollow-marker note) is two
    columns of smaller text on two rows, none cut at the chart's edge, the note under its short name;
    at desktop width it is one row with the full name. (Three rows used to leave the plot ~110 px.)"""
    charts = page.evaluate(f"({LEGEND})()")
    assert len(charts) == 9
    low = 50  # the spec's metrics.low_volume_events: the demo has quiet days on every daily chart
    note = f"hollow: < {low} events" if width == 390 else f"hollow: fewer than {low} events"
    for ch in charts:
        assert ch["cut"] == [], ch
        assert ch["rows"] <= (2 if width == 390 else 1), ch
        if ch["metric"] != "calibration":
            assert ch["texts"] == ["target", "alert threshold", "pilot window", note], ch
            assert ch["plot"] >= 140, ch  # the chart keeps room to read the line


# recorded from the page's start: the order charts are drawn in, and a scroll to the last chart once
# the HTML is parsed, before the deferred scripts run (readyState "interactive" comes before them)
SCROLLED_TO_THE_END = """
window.__drawnOrder = [];
document.addEventListener('metrics:chart-drawn', e => window.__drawnOrder.push(e.target.id));
document.addEventListener('readystatechange', () => {
  if (document.readyState === 'interactive') document.getElementById('chart-calibration').scrollIntoView();
});
"""


def _draws_the_charts_in_view_first(new_page: Any, url: str) -> None:
    """A visitor at the last chart when the scripts run sees the charts in view drawn first, then the rest."""
    page = new_page()
    sign_in(page, url, SUPPORT_LEAD, c.DEMO_PASSWORD)
    page.add_init_script(SCROLLED_TO_THE_END)
    page.goto(f"{url}/metrics")
    wait_until(page, f"({ALL_DRAWN})() && performance.getEntriesByName('metrics-charts-drawn').length === 1", timeout_s=30)
    in_view = page.evaluate("""() => Array.from(document.querySelectorAll('.metrics-chart, .quality-chart'))
        .filter(el => { const r = el.getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0; }).map(el => el.id)""")
    order = page.evaluate("window.__drawnOrder")
    assert "chart-calibration" in in_view and "chart-accept_rate" not in in_view
    assert sorted(order) == sorted(set(order)) and len(order) == 10  # each chart drawn once
    assert set(order[: len(in_view)]) == set(in_view), order  # the ones in view before any other
    view, every = (page.evaluate(f"performance.getEntriesByName('{m}')[0].startTime")
                   for m in ("metrics-view-drawn", "metrics-charts-drawn"))
    assert view < every


def test_metrics_charts_at_desktop_and_phone_widths(demo_server: Any, new_page: Any) -> None:
    """One browser, one page per width: the desktop drawing checks first, then layout checks per width."""
    for width, height in ((1440, 900), (390, 844)):
        page = _open(new_page, demo_server.url, width, height)
        if width == 1440:
            _draws_every_chart_with_target_threshold_and_shapes(page)
            _draws_the_weekly_quality_chart_with_its_intervals(page)
        _legend_is_compact_on_a_phone(page, width)
        _toolbar_never_covers_a_title(page, width)
        assert page.console_errors == []
    _draws_the_charts_in_view_first(new_page, demo_server.url)
