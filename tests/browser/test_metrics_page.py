"""The support lead opens the metrics page, filters by intent, and the charts redraw (htmx, no reload)."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from tests.browser.conftest import sign_in
from tests.factories import make_user
from tests.metrics.conftest import ev
from webapp.metrics import ingest
from webapp.spec import load_spec

pytestmark = pytest.mark.browser


def _seed(session: Session) -> None:
    from tests.conftest import SPEC_PATH

    spec = load_spec(SPEC_PATH)
    make_user(session, email="sl@example.test", roles=["support_lead"])
    events = []
    for day in ("2026-11-02", "2026-11-03", "2026-11-04"):
        events += [ev(day, intent="billing_charge", action="accept", latency_ms=1000) for _ in range(3)]
        events += [ev(day, intent="plan_change", action="reject", latency_ms=5000)]
    ingest.ingest_events(session=session, spec=spec, items=events)


def test_filter_by_intent_redraws_the_charts(live_server, new_page) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(_seed)
    page = new_page()
    sign_in(page, live_server.url, "sl@example.test")
    page.goto(f"{live_server.url}/metrics?start=2026-11-02&end=2026-11-04")
    page.wait_for_selector("#chart-accept_rate[data-drawn='1'] .main-svg")
    y = "document.getElementById('chart-accept_rate').data[0].y"
    assert page.evaluate(y) == [0.75, 0.75, 0.75]
    assert page.locator("#chart-accept_rate .legendtext").all_text_contents()[1:] == ["target", "alert threshold"]
    # plotly's basic bundle draws every trace type the page uses (an unknown type would draw nothing)
    page.wait_for_selector("#chart-calibration[data-drawn='1'] .main-svg")
    assert page.evaluate("document.getElementById('chart-calibration')._fullData.map(t => t.type)")[:2] == ["bar", "scatter"]
    assert page.locator("#chart-calibration .bars .point").count() > 0
    page.evaluate("window.__sameDocument = true")  # survives only if the page is not reloaded
    page.select_option("select[name=intent]", "plan_change")
    page.wait_for_function(f"JSON.stringify({y}) === '[0,0,0]'")
    assert page.evaluate("window.__sameDocument") is True
    assert "intent=plan_change" in page.url  # the filtered view can be bookmarked
    assert page.locator("#chart-accept_rate[data-drawn='1'] .main-svg").count() >= 1
    assert "intent = plan_change" in page.locator("#metrics-results").inner_text()
    assert page.console_errors == []
