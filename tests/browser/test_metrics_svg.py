"""The metrics charts are on screen before plotly.js loads (server-drawn SVG), then become interactive.

plotly.js is held back with page.route until the test lets it through, so what the page shows
before is exactly what a first visit shows while the 4.8 MB bundle is still on its way.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import sign_in
from tests.browser.test_metrics_page import _seed_varied
from tests.browser_support import wait_until

pytestmark = pytest.mark.browser

PLOTLY = "**/static/vendor/plotly.min.js"

# every chart shows the server's SVG, laid out with a real size, and nothing of plotly's
_SVG_SHOWN = """() => {
  const charts = Array.from(document.querySelectorAll('.metrics-chart'));
  return charts.length === 9 && charts.every(el => {
    const s = el.querySelector(':scope > svg.metrics-svg');
    const box = s && s.getBoundingClientRect();
    return box && box.width > 300 && box.height >= 280 && getComputedStyle(s).visibility === 'visible'
      && !el.querySelector('.main-svg');
  });
}"""

# every chart is plotly's, drawn from its current data-figure, and no SVG picture is left
_INTERACTIVE = """() => {
  if (document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')) return false;
  const charts = Array.from(document.querySelectorAll('.metrics-chart'));
  return charts.length === 9 && charts.every(el => el.querySelector('.main-svg') && !el.querySelector('svg.metrics-svg')
    && el.data && JSON.stringify(el.data[0].y) === JSON.stringify(JSON.parse(el.getAttribute('data-figure')).data[0].y));
}"""

_MARK = "performance.getEntriesByName('{}').length"
_LINES = """(id) => Array.from(document.querySelectorAll('#' + id + ' svg.metrics-svg path')).map(p => [p.getAttribute('stroke'), p.getAttribute('d')])"""


def _svg_lines(page: Any, chart: str) -> dict[str, str]:
    return dict(page.evaluate(f"({_LINES})('{chart}')"))


def test_charts_show_before_plotly_then_become_interactive_and_follow_htmx(
    live_server: Any, new_page: Any
) -> None:
    live_server.seed(_seed_varied)
    page = new_page()
    sign_in(page, live_server.url, "sl@example.test")
    held: list[Any] = []
    page.route(PLOTLY, lambda route: held.append(route))  # answered only when the test says so
    page.goto(f"{live_server.url}/metrics?start=2026-11-02&end=2026-11-22")

    # plotly.js is asked for after the page has loaded, and the charts are there without it
    wait_until(page, "document.readyState === 'complete'")
    wait_until(page, f"({_SVG_SHOWN})()")
    # the mark follows the frame that paints the charts (requestAnimationFrame, then a task): on a
    # busy machine that frame can come after the check above, so wait for it, then check it is one
    wait_until(page, _MARK.format("metrics-charts-drawn") + " > 0")
    assert page.evaluate(_MARK.format("metrics-charts-drawn")) == 1
    wait_until(page, "!!document.querySelector('script[data-plotly]')")
    assert page.evaluate("typeof window.Plotly") == "undefined"
    assert page.evaluate(_MARK.format("metrics-charts-interactive")) == 0
    accept = page.locator("#chart-accept_rate svg.metrics-svg")
    assert accept.get_attribute("aria-label") == "Accept rate"
    assert {"target", "alert threshold"} <= set(accept.locator(".metrics-svg-key").all_inner_texts())
    lines = _svg_lines(page, "chart-accept_rate")
    assert {"#2456c7", "#17803d", "#b42318"} <= set(lines)  # the daily line, the target, the alert threshold
    for stroke in ("#17803d", "#b42318"):  # target and threshold lines lie inside the visible chart
        box = accept.locator(f"path[stroke='{stroke}']").bounding_box()
        card = accept.bounding_box()
        assert box and card and card["y"] < box["y"] < card["y"] + card["height"]

    # an htmx filter change before plotly has come: the new results carry their own SVG charts
    page.select_option("select[name=intent]", "plan_change")
    wait_until(page, "document.getElementById('metrics-results').innerText.includes('intent = plan_change')")
    wait_until(page, f"({_SVG_SHOWN})()")
    assert (
        _svg_lines(page, "chart-accept_rate")["#2456c7"] != lines["#2456c7"]
    )  # another segment, another line

    # plotly arrives: it replaces every SVG with the interactive chart of the same figure
    assert len(held) == 1
    held[0].continue_()
    wait_until(page, f"({_INTERACTIVE})()", timeout_s=30)
    wait_until(
        page, _MARK.format("metrics-charts-interactive") + " > 0"
    )  # (set once the last chart is drawn)
    assert page.evaluate(_MARK.format("metrics-charts-interactive")) == 1
    assert page.locator("#chart-accept_rate .legendtext").all_text_contents()[:2] == [
        "target",
        "alert threshold",
    ]

    # a later range change: the new results show as SVG at once and plotly redraws them once settled
    page.click("a.metrics-quick-link[data-range='7d']")
    wait_until(
        page, "document.getElementById('metrics-results').innerText.includes('2026-11-16 – 2026-11-22')"
    )
    wait_until(page, f"({_INTERACTIVE})()")
    page.wait_for_timeout(200)  # past htmx's settle delay, when a chart drawn too early loses its class
    assert page.evaluate(
        "Array.from(document.querySelectorAll('.metrics-chart')).every(el => el.classList.contains('js-plotly-plot'))"
    )
    assert page.evaluate("document.getElementById('chart-accept_rate').data[0].x.length") == 7
    assert page.console_errors == []


def test_charts_without_javascript(live_server: Any, browser: Any) -> None:
    live_server.seed(_seed_varied)
    ctx = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 844})
    try:
        page = ctx.new_page()
        sign_in(page, live_server.url, "sl@example.test")
        page.goto(f"{live_server.url}/metrics?start=2026-11-02&end=2026-11-22")
        charts = page.locator(".metrics-chart svg.metrics-svg")
        assert charts.count() == 9
        for i in range(9):
            box = charts.nth(i).bounding_box()
            assert box and box["height"] >= 280 and 300 < box["width"] <= 390
        assert (
            page.evaluate("document.documentElement.scrollWidth") <= 390
        )  # no sideways scrolling on a phone
    finally:
        ctx.close()
