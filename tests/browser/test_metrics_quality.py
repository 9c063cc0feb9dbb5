"""plotly.js draws the demo's weekly human-graded quality chart on /metrics: a point and error bar per week, the target."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.conftest import sign_in
from tests.browser_support import wait_until
from webapp.demo import content as c

pytestmark = pytest.mark.browser

SUPPORT_LEAD = next(email for key, email, _n, _r in c.DEMO_USERS if key == "support_lead")
DRAWN = "(() => { const el = document.querySelector('#chart-human-quality'); return !!(el && el.dataset.drawn && el.querySelector('.main-svg')); })()"


def test_the_weekly_quality_chart_draws_each_week_with_its_interval(demo_server: Any, new_page: Any) -> None:
    page = new_page()
    sign_in(page, demo_server.url, SUPPORT_LEAD, c.DEMO_PASSWORD)
    page.goto(f"{demo_server.url}/metrics")
    wait_until(page, DRAWN, timeout_s=30)
    fig = json.loads(page.get_attribute("#chart-human-quality", "data-figure") or "{}")
    drawn = page.evaluate(
        """() => { const el = document.querySelector('#chart-human-quality');
        return {points: el.querySelectorAll('.scatterlayer .point').length,
                errorbars: el.querySelectorAll('.errorbar').length,
                shapes: el.querySelectorAll('.shapelayer path').length,
                ticks: Array.from(el.querySelectorAll('.xtick text')).map(t => t.textContent)}; }"""
    )
    weeks = [x for trace in fig["data"] for x in trace["x"]]
    assert sorted(weeks) == ["2026-W45", "2026-W46", "2026-W47"]
    assert drawn["points"] == 3 and drawn["errorbars"] == 3  # one marker and one error bar per week
    assert drawn["shapes"] == 1  # the target line
    assert drawn["ticks"] == ["2026-W45", "2026-W46", "2026-W47"]
    card = page.locator(".metrics-chart-card:has(#chart-human-quality)")
    assert card.get_attribute("data-alert-state") == "firing"
    assert page.console_errors == []
