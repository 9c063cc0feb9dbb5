"""The support lead opens the metrics page, filters by intent, and the charts redraw (htmx, no reload)."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from tests.browser.conftest import sign_in
from tests.browser_support import wait_until
from tests.factories import make_user
from tests.metrics.conftest import ev, settle
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
    settle(session, spec)


def test_filter_by_intent_redraws_the_charts(live_server, new_page) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(_seed)
    page = new_page()
    sign_in(page, live_server.url, "sl@example.test")
    page.goto(f"{live_server.url}/metrics?start=2026-11-02&end=2026-11-04")
    page.wait_for_selector("#chart-accept_rate[data-drawn='1'] .main-svg")
    # the new chart is drawn once the swap has settled: until then it has no data
    y = "(document.getElementById('chart-accept_rate').data || [{}])[0].y"
    assert page.evaluate(y) == [0.75, 0.75, 0.75]
    assert page.locator("#chart-accept_rate .legendtext").all_text_contents()[:2] == ["target", "alert threshold"]
    # the calibration chart draws its bars (a trace type plotly.js must know)
    page.wait_for_selector("#chart-calibration[data-drawn='1'] .main-svg")
    assert page.evaluate("document.getElementById('chart-calibration')._fullData.map(t => t.type)")[:2] == ["bar", "scatter"]
    assert page.locator("#chart-calibration .bars .point").count() > 0
    page.evaluate("window.__sameDocument = true")  # survives only if the page is not reloaded
    page.select_option("select[name=intent]", "plan_change")
    wait_until(page, f"JSON.stringify({y}) === '[0,0,0]'")  # wait_for_function needs eval, which the CSP forbids
    assert page.evaluate("window.__sameDocument") is True
    assert "intent=plan_change" in page.url  # the filtered view can be bookmarked
    assert page.locator("#chart-accept_rate[data-drawn='1'] .main-svg").count() >= 1
    assert "intent = plan_change" in page.locator("#metrics-results").inner_text()
    assert page.console_errors == []


def _seed_varied(session: Session) -> None:
    """Three weeks of events over two intents and two plans, with actions that vary day to day."""
    import datetime as dt
    import random

    from tests.conftest import SPEC_PATH

    spec = load_spec(SPEC_PATH)
    make_user(session, email="sl@example.test", roles=["support_lead"])
    rng = random.Random(3)
    events = []
    for i in range(21):
        day = dt.date(2026, 11, 2) + dt.timedelta(days=i)
        for _ in range(rng.randint(4, 9)):
            action = rng.choice(["accept", "accept", "accept", "edit", "reject", "escalate"])
            events.append(
                ev(day, hour=rng.randint(8, 18), intent=rng.choice(["billing_charge", "plan_change"]),
                   plan=rng.choice(["pro", "team"]), action=action, escalated=action == "escalate",
                   sent_text=rng.choice(["Hello", "Hello there", "Hi"]), latency_ms=rng.randint(500, 7000),
                   handle_time_s=rng.randint(60, 500), cost_usd=rng.choice([0.01, 0.02, 0.04]),
                   confidence=rng.random())
            )
    ingest.ingest_events(session=session, spec=spec, items=events)
    settle(session, spec)


_SETTLED = """(want) => {
  const results = document.getElementById('metrics-results');
  if (!results || !results.innerText.includes(want)) return false;
  if (document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')) return false;
  return Array.from(document.querySelectorAll('.metrics-chart')).every(el =>
    el.data && el.data.length && el.querySelector('.main-svg') && el.dataset.drawn && el.classList.contains('js-plotly-plot') &&
    JSON.stringify(el.data[0].y) === JSON.stringify(JSON.parse(el.getAttribute('data-figure')).data[0].y));
}"""

_LAYOUT = """() => Array.from(document.querySelectorAll('.metrics-chart')).map(el => {
  const card = el.closest('.metrics-chart-card').getBoundingClientRect();
  const title = el.querySelector('.gtitle');
  const t = title ? title.getBoundingClientRect() : null;
  const modebar = el.querySelector('.modebar');
  return {
    id: el.id, metric: el.dataset.metric, plotly: el.classList.contains('js-plotly-plot'),
    title: title ? title.textContent : null,
    inside: !!t && t.top >= card.top && t.bottom <= card.bottom && t.left >= card.left && t.right <= card.right,
    modebar: modebar ? getComputedStyle(modebar).position : null,
    x: el.data[0].x, y: el.data[0].y,
  };
})"""


def _assert_charts_match_api(page, base: str, query: str) -> None:  # type: ignore[no-untyped-def]
    from webapp.metrics.targets import METRIC_LABELS

    charts = page.evaluate(_LAYOUT)
    assert len(charts) == 9
    api = page.request.get(f"{base}/api/v1/metrics/daily?{query}").json()
    for c in charts:
        assert c["plotly"], f"{c['id']} lost plotly's class"
        assert c["modebar"] == "absolute", f"{c['id']}: the plotly toolbar is unstyled"
        assert c["inside"], f"{c['id']}: its title {c['title']!r} is not inside its own panel"
        if c["metric"] == "calibration":
            continue
        assert c["title"] == METRIC_LABELS[c["metric"]]
        assert c["x"] == [d["day"] for d in api]
        assert c["y"] == pytest.approx([d[c["metric"]] for d in api], nan_ok=True)
    # the calibration card ends above the daily table
    cal = page.locator("#chart-calibration").locator("xpath=ancestor::div[contains(@class,'metrics-chart-card')]").bounding_box()
    table = page.locator("section:has(.metrics-table)").bounding_box()
    assert cal["y"] + cal["height"] <= table["y"]


def test_charts_keep_their_titles_and_values_after_two_filter_changes(live_server, new_page) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(_seed_varied)
    page = new_page()
    sign_in(page, live_server.url, "sl@example.test")
    page.goto(f"{live_server.url}/metrics?start=2026-11-02&end=2026-11-22")
    wait_until(page, f"({_SETTLED})('2026-11-02')")
    _assert_charts_match_api(page, live_server.url, "start=2026-11-02&end=2026-11-22")

    page.select_option("select[name=intent]", "plan_change")
    wait_until(page, f"({_SETTLED})('intent = plan_change')")
    _assert_charts_match_api(page, live_server.url, "start=2026-11-02&end=2026-11-22&intent=plan_change")

    page.fill("input[name=start]", "2026-11-09")
    page.locator("input[name=start]").dispatch_event("change")
    wait_until(page, f"({_SETTLED})('2026-11-09 – 2026-11-22')")
    _assert_charts_match_api(page, live_server.url, "start=2026-11-09&end=2026-11-22&intent=plan_change")
    assert page.console_errors == []
