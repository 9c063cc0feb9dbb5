"""Metrics pages: charts with target/threshold lines, firing shading and version markers; table, CSV, drill-down."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go
import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.metrics.conftest import ev, load, settle
from webapp.core.spec import EvalSpec
from webapp.metrics import reports
from webapp.metrics.models import HallucinationReport

HTMX = {"HX-Request": "true"}


def _figures(page: str) -> dict[str, dict]:
    found = re.findall(r'data-metric="([a-z_0-9]+)" data-figure="([^"]*)"', page)
    return {m: json.loads(html.unescape(f)) for m, f in found}


@pytest.fixture
def sl(session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> TestClient:
    """A support lead; three days: cost $0.09 (alert fires), then $0.01 twice; model m2 from the 4th."""
    load(session, spec, [
        ev("2026-11-02", cost_usd=0.09, model_version="m1", intent="billing_charge", draft_text="Your refund <b>is</b> on its way"),
        ev("2026-11-03", cost_usd=0.01, model_version="m1", intent="plan_change"),
        ev("2026-11-04", cost_usd=0.01, model_version="m2", intent="plan_change", confidence=0.9),
    ])
    return client_as("support_lead")


class TestMetricsPage:
    def test_charts_have_target_threshold_firing_and_versions(self, sl: TestClient) -> None:
        page = sl.get("/metrics?start=2026-11-01&end=2026-11-05")
        assert page.status_code == 200
        figs = _figures(page.text)
        assert set(figs) >= {"accept_rate", "cost_per_draft", "latency_p95_s", "calibration"}
        for fig in figs.values():
            go.Figure(fig)  # plotly validates the whole figure; raises on a bad property
        cost = figs["cost_per_draft"]
        names = [t["name"] for t in cost["data"]]
        assert names[1:] == ["target", "alert threshold", "hollow: fewer than 50 events"]  # every day is quiet
        assert cost["data"][0]["y"] == [None, 0.09, 0.01, 0.01, None]
        assert cost["data"][1]["y"] == [0.03, 0.03] and cost["data"][2]["y"] == [0.05, 0.05]
        firing = [s for s in cost["layout"]["shapes"] if s.get("name") == "firing"]
        assert [(s["x0"][:10], s["x1"][:10]) for s in firing] == [("2026-11-01", "2026-11-02")]  # half-day margins
        assert [a["text"] for a in cost["layout"]["annotations"]] == ["model: m2"]
        band = [t for t in figs["escalation_rate"]["data"] if t.get("legendgroup") == "target"]
        assert [t["y"][0] for t in band] == [0.06, 0.1]
        assert "alerts firing" in page.text and "Cost per draft ($) &gt; $0.0500 on a day" in page.text
        # nothing drawn on the server: each chart is an empty box that plotly.js fills from its data-figure
        box = r'id="chart-([a-z_0-9]+)" data-metric="[a-z_0-9]+" data-figure="[^"]*">(.*?)</div>'
        boxes = dict(re.findall(box, page.text, re.S))
        assert set(boxes) == set(figs) and len(boxes) == 9  # every chart, the calibration chart too
        assert set(boxes.values()) == {""} and "<svg" not in page.text
        # the page loads plotly.js's basic bundle (from node_modules), then the script that draws
        assert '<script src="/static/vendor/plotly-basic.min.js" defer></script>' in page.text
        assert page.text.index("plotly-basic.min.js") < page.text.index("/static/js/metrics.js")
        for m, fig in figs.items():
            if m != "calibration":
                assert {"target", "alert threshold"} <= {t["name"] for t in fig["data"]}, m

    def test_days_waiting_for_the_rebuilder_are_named_and_show_their_stored_figures(
        self, session: Session, spec: EvalSpec, sl: TestClient
    ) -> None:
        # two more events on 3 Nov, posted under `serve`: stale until the rebuilder's next pass
        load(session, spec, [ev("2026-11-03", cost_usd=0.05), ev("2026-11-03", cost_usd=0.05)], rebuild=False)
        page = sl.get("/metrics?start=2026-11-01&end=2026-11-05")
        assert "Updating 2026-11-03 (2 new events since " in page.text
        assert "UTC): new events are added to the figures within 30 s" in page.text
        assert _figures(page.text)["cost_per_draft"]["data"][0]["y"] == [None, 0.09, 0.01, 0.01, None]  # the stored day
        settle(session, spec)
        session.commit()
        page = sl.get("/metrics?start=2026-11-01&end=2026-11-05")
        assert "Updating" not in page.text
        # (0.01 + 0.05 + 0.05) / 3, worked out by hand
        assert _figures(page.text)["cost_per_draft"]["data"][0]["y"][2] == pytest.approx(0.11 / 3, rel=1e-12)

    def test_htmx_filter_returns_only_the_results(self, sl: TestClient) -> None:
        frag = sl.get("/metrics?start=2026-11-01&end=2026-11-05&intent=plan_change", headers=HTMX)
        assert frag.text.lstrip().startswith('<div id="metrics-results">')
        assert "<html" not in frag.text
        figs = _figures(frag.text)
        assert figs["cost_per_draft"]["data"][0]["y"] == [None, None, 0.01, 0.01, None]

    def test_applying_the_view_already_shown_pushes_no_history_entry(self, sl: TestClient) -> None:
        form = "/metrics?start=2026-11-01&end=2026-11-05&intent=plan_change&plan=&agent_id="

        def push(url: str, current: str) -> str | None:
            r = sl.get(url, headers={**HTMX, "HX-Current-URL": f"http://testserver{current}"})
            assert r.status_code == 200
            return r.headers.get("hx-push-url")

        # the dropdown's request from the unfiltered view: the form's hx-push-url pushes it (no header)
        assert push(form, "/metrics?start=2026-11-01&end=2026-11-05") is None
        # Apply right after, from the URL just pushed: the same view, no second entry
        assert push(form, form) == "false"
        # the same parameters in another order, blanks left out: still the same view
        assert push(form, "/metrics?intent=plan_change&end=2026-11-05&start=2026-11-01") == "false"
        # another segment or range is a new entry
        assert push(form, "/metrics?start=2026-11-01&end=2026-11-05&intent=billing_charge") is None
        assert push(form, "/metrics?start=2026-11-02&end=2026-11-05&intent=plan_change") is None
        # a quick range that resolves to the view shown: no entry either; to another view: the canonical URL
        quick = "/metrics?range=7d&start=2026-11-01&end=2026-11-05"
        seven = sl.get(quick, headers=HTMX).headers["hx-push-url"]
        assert seven.startswith("/metrics?start=") and "range" not in seven
        assert push(quick, seven) == "false"
        assert push(quick, "/metrics?start=2026-11-01&end=2026-11-05") == seven
        # without htmx (a plain GET), no header at all
        plain = sl.get(form, headers={"HX-Current-URL": f"http://testserver{form}"})
        assert plain.headers.get("hx-push-url") is None

    def test_drill_down_lists_the_days_events_with_user_text_escaped(self, sl: TestClient) -> None:
        day = sl.get("/metrics/day/2026-11-02")
        assert day.status_code == 200
        assert "Your refund &lt;b&gt;is&lt;/b&gt;" in day.text and "<b>is</b>" not in day.text
        r = sl.get("/metrics/day/2026-11-03?intent=plan_change")
        assert "1 events" in r.text and "plan_change" in r.text
        assert "No events on this day" in sl.get("/metrics/day/2026-11-03?intent=billing_charge").text

    def test_csv_export(self, sl: TestClient) -> None:
        r = sl.get("/metrics/daily.csv?start=2026-11-02&end=2026-11-03")
        assert r.headers["content-type"].startswith("text/csv")
        lines = r.text.strip().splitlines()
        # the same units and decimals as the page; the unit is in the column name
        assert lines[0].startswith(
            "day,events,drafts_shown,accept_rate_pct,reject_rate_pct,edit_distance,escalation_rate_pct,"
            "handle_time_s,latency_p95_s,hallucination_reports,cost_per_draft_usd,"
        )
        # one accepted draft costing $0.09, sent as "Hello": 100% accepted, 0% rejected, edit distance
        # 30 edits / 32 characters = 0.9375 -> 0.938, no escalation, no handle time or latency
        assert lines[1].startswith("2026-11-02,1,1,100.0,0.0,0.938,0.0,,,0,0.0900,")
        assert len(lines) == 3

    def test_labeler_is_turned_away(self, client_as: Callable[..., TestClient]) -> None:
        assert client_as("labeler").get("/metrics").status_code == 403


def _report(session: Session, spec: EvalSpec, event_id: str, note: str, **kw: Any) -> HallucinationReport:
    """An event on 2 Nov, reported as a hallucination (pending)."""
    load(session, spec, [ev("2026-11-02", event_id=event_id, **kw)])
    report = reports.report_hallucination(session=session, event_id=event_id, note=note, reported_by=None)
    session.commit()
    return report


class TestHallucinationQueue:
    def test_support_lead_sees_but_cannot_decide(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        report = _report(session, spec, "x", "<script>alert(1)</script>")
        sl = client_as("support_lead")
        page = sl.get("/metrics/hallucinations")
        assert "&lt;script&gt;" in page.text and "Confirm hallucination" not in page.text
        assert sl.post(f"/metrics/hallucinations/{report.id}/decide", data={"decision": "confirmed"}).status_code == 403
        data = {"decision": "dismissed", "note": "fine"}
        r = client_as("lead").post(f"/metrics/hallucinations/{report.id}/decide", data=data, headers=HTMX)
        assert r.status_code == 200 and r.headers["HX-Trigger"] == "hallucination-decided"
        assert "No pending reports" in r.text

    def test_decisions_are_kept_and_the_lead_can_undo(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        texts = {"draft_text": "Refunds take 10 days", "sent_text": "Refunds take 5 days"}
        report = _report(session, spec, "u", "wrong window", **texts)
        lead = client_as("lead")
        decide = f"/metrics/hallucinations/{report.id}/decide"

        def confirmed_on_the_day() -> int:
            day = lead.get("/api/v1/metrics/daily?start=2026-11-02&end=2026-11-02").json()[0]
            return int(day["hallucination_reports"])

        missing = lead.post(decide, data={"decision": "confirmed"}, headers=HTMX)
        assert missing.status_code == 200 and "say why the report is confirmed" in missing.text and confirmed_on_the_day() == 0
        lead.post(decide, data={"decision": "confirmed", "note": "KB says 5"}, headers=HTMX)
        assert confirmed_on_the_day() == 1
        page = lead.get("/metrics/hallucinations?status=all").text
        assert "<del>10</del>" in page and "<ins>5</ins>" in page and "Undo “confirmed”" in page
        r = lead.post(f"/metrics/hallucinations/{report.id}/undo", data={"status": "all"}, headers=HTMX)
        assert r.status_code == 200 and "decision undone, now pending" in r.text
        assert confirmed_on_the_day() == 0
        assert "Decisions (2)" in r.text and "undo: back to pending" in r.text and "KB says 5" in r.text
        assert client_as("support_lead").post(f"/metrics/hallucinations/{report.id}/undo").status_code == 403

    def test_home_cards_alerts_firing_and_reports_to_confirm(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        _report(session, spec, "h", "wrong", cost_usd=0.09)
        assert "1 alert firing" in client_as("support_lead").get("/").text
        lead_home = client_as("lead").get("/").text
        assert "1 hallucination report to confirm" in lead_home and "alert firing" not in lead_home


def _event_ids(page: str) -> list[str]:
    return re.findall(r'<div class="muted mono">([^<]+)</div>', page)


def _missed(page: str) -> list[str]:
    return re.findall(r'<div class="kpi metrics-missed" data-metric="([a-z_0-9]+)">', page)


class TestDayDrillDown:
    def test_filters_and_missed_targets(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        # 2026-11-03: 3 accepts, a minor edit (1 of 10 chars), a major one (5 of 10), 2 rejects, 1 escalated
        load(session, spec, [
            *[ev("2026-11-03", hour=9 + i, event_id=f"acc{i}") for i in range(3)],
            ev("2026-11-03", hour=13, event_id="edit-minor", action="edit", draft_text="abcdefghij", sent_text="abcdefghiX"),
            ev("2026-11-03", hour=14, event_id="edit-major", action="edit", draft_text="abcdefghij", sent_text="abcdeXXXXX"),
            ev("2026-11-03", hour=15, event_id="rej1", action="reject"),
            ev("2026-11-03", hour=16, event_id="rej2", action="reject"),
            ev("2026-11-03", hour=17, event_id="esc1", action="escalate", escalated=True),
            ev("2026-11-04", event_id="next-day"),
        ])
        c = client_as("support_lead")
        everything = c.get("/metrics/day/2026-11-03")
        assert everything.status_code == 200
        assert _event_ids(everything.text) == ["acc0", "acc1", "acc2", "edit-minor", "edit-major", "rej1", "rej2", "esc1"]
        assert _event_ids(c.get("/metrics/day/2026-11-03?show=reject").text) == ["rej1", "rej2"]
        assert _event_ids(c.get("/metrics/day/2026-11-03?show=edit").text) == ["edit-minor", "edit-major"]
        assert _event_ids(c.get("/metrics/day/2026-11-03?show=escalation").text) == ["esc1"]
        # the filter links carry the counts of the day
        for label in ("Rejects (2)", "Edits (2)", "Escalations (1)", "All events (8)"):
            assert label in everything.text
        # only the edit over the minor-edit limit (0.2) is flagged as not counted as accepted
        assert everything.text.count(">major</span>") == 1
        page = client_as("pm").get("/metrics/day/2026-11-03").text
        # worked by hand: 8 shown; accepted = 3 + the minor edit = 4 -> 50% (target > 75%); rejects 2/8 = 25%
        # (target < 5%); escalations 1/8 = 12.5% (target 8% +- 2 pts); edit distance (0+0+0+0.1+0.5)/5 = 0.12 (< 0.2: met)
        assert _missed(page) == ["accept_rate", "reject_rate", "escalation_rate"]
        assert "target missed (&gt; 75.0%)" in page and "Reject rate 25.0% (target &lt; 5.0%)" in page
        assert 'href="/metrics/day/2026-11-03?start=2026-11-03&amp;end=2026-11-03&amp;show=reject"' in page
        other = client_as("pm").get("/metrics/day/2026-11-04").text
        # one accepted draft, no escalation: 0% is outside 8% +- 2 pts, the only target missed
        assert _missed(other) == ["escalation_rate"]
        assert "Missed 1 target on this day" in other and "see the escalations" in other

    def test_an_unknown_filter_is_refused_by_name(self, client_as: Callable[..., TestClient]) -> None:
        r = client_as("support_lead").get("/metrics/day/2026-11-03?show=accepts")
        assert r.status_code == 422 and "show: must be one of reject, edit, escalation" in r.text


class TestRangeErrorsAndQuickRanges:
    def test_range_errors_reshow_the_page_or_fragment_with_the_message(self, sl: TestClient) -> None:
        r = sl.get("/metrics?start=2026-11-05&end=2026-11-01&intent=plan_change")
        assert r.status_code == 422
        assert "<html" in r.text and 'class="toolbar card metrics-filters"' in r.text  # the page, not a bare error
        error = re.search(r'<p id="metrics-range-error"[^>]*>([^<]*)</p>', r.text)
        assert error and error.group(1) == "To (2026-11-01) is before From (2026-11-05): the range is reversed"
        assert 'name="start" value="2026-11-05"' in r.text and 'name="end" value="2026-11-01"' in r.text
        assert '<option value="plan_change" selected>' in r.text
        assert "data-figure" not in r.text
        r = sl.get("/metrics?start=2026-13-01&end=2026-11-05&plan=pro")
        assert r.status_code == 422
        assert "From: &#39;2026-13-01&#39; is not a date (YYYY-MM-DD)" in r.text
        assert 'name="end" value="2026-11-05"' in r.text
        # the htmx fragment carries the message beside the inputs
        r = sl.get("/metrics?start=2026-11-05&end=2026-11-01&intent=plan_change", headers=HTMX)
        assert r.status_code == 200  # htmx swaps only 2xx answers
        assert r.text.lstrip().startswith('<div id="metrics-results">') and "<html" not in r.text
        oob = re.search(r'<p id="metrics-range-error"[^>]*hx-swap-oob="true">([^<]*)</p>', r.text)
        assert oob and "is before From (2026-11-05)" in oob.group(1)
        # a valid answer clears the message
        ok = sl.get("/metrics?start=2026-11-01&end=2026-11-05", headers=HTMX)
        assert re.search(r'<p id="metrics-range-error"[^>]*hx-swap-oob="true"></p>', ok.text)

    def test_quick_ranges_resolve_to_dates_and_keep_the_filters(self, spec: EvalSpec, sl: TestClient) -> None:
        # the last day with events is 2026-11-04
        r = sl.get("/metrics?range=7d&intent=plan_change", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/metrics?start=2026-10-29&end=2026-11-04&intent=plan_change"
        page = sl.get("/metrics?start=2026-10-29&end=2026-11-04&intent=plan_change").text
        active = re.findall(r'data-range="([a-z0-9]+)"[^>]*aria-current="true"', page)
        assert active == ["7d"]
        pilot = spec.online_metrics.pilot
        assert f'href="/metrics?start={pilot.start}&amp;end={pilot.end}&amp;intent=plan_change"' in page
        frag = sl.get("/metrics?range=pilot&start=2026-10-01&end=2026-10-02", headers=HTMX)
        assert frag.headers["HX-Push-Url"] == f"/metrics?start={pilot.start}&end={pilot.end}"
        assert f'name="start" value="{pilot.start}"' in frag.text and 'id="metrics-dates" class="metrics-dates" hx-swap-oob="true"' in frag.text


class TestChartAnnotations:
    def test_pilot_shading_hollow_low_days_and_event_counts(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        low = spec.metrics.low_volume_events
        # 2026-10-31: as many events as the threshold (filled); 2026-11-01: one fewer (hollow); 2026-11-02: none
        events = [ev("2026-10-31", hour=8 + i % 10) for i in range(low)]
        events += [ev("2026-11-01", hour=8 + i % 10, draft_shown=i > 0, action="accept" if i else None) for i in range(low - 1)]
        load(session, spec, events)
        figs = _figures(client_as("support_lead").get("/metrics?start=2026-10-31&end=2026-11-02").text)
        acc = figs["accept_rate"]
        go.Figure(acc)
        assert acc["data"][0]["marker"]["symbol"] == ["circle", "circle-open", "circle"]
        assert acc["data"][0]["customdata"][0] == [f"{low} events", ""]
        # the day's events, and the drafts shown behind its accept rate (one draft was not shown)
        assert acc["data"][0]["customdata"][1][0] == f"{low - 1} events ({low - 2} drafts shown)"
        assert "low volume" in acc["data"][0]["customdata"][1][1]
        assert "%{customdata[0]}" in acc["data"][0]["hovertemplate"]
        assert acc["data"][-1]["name"] == f"hollow: fewer than {low} events"
        pilot = [s for s in acc["layout"]["shapes"] if s.get("name") == "pilot window"]
        # the pilot starts 2026-11-02, the last day of the range: shaded from half a day before it to the range's end
        assert [(s["x0"], s["x1"]) for s in pilot] == [("2026-11-01T12:00:00", "2026-11-02T12:00:00")]
        before = _figures(client_as("support_lead").get("/metrics?start=2026-10-31&end=2026-11-01").text)
        assert not [s for s in before["accept_rate"]["layout"]["shapes"] if s.get("name") == "pilot window"]

    def test_panel_state_matches_the_alerts_api(self, sl: TestClient) -> None:
        page = sl.get("/metrics").text
        by_metric = {m: st for st, m in re.findall(r'metrics-alert-([a-z]+)" data-alert-state.*?id="chart-([a-z_0-9]+)"', page, re.S)}
        api = {a["metric"]: a["state"] for a in sl.get("/api/v1/alerts").json()}
        assert by_metric == api
        # by hand: $0.09 on 2026-11-02 (> $0.05: firing), $0.01 the next day (resolved); one edit-free day each
        assert by_metric["cost_per_draft"] == "resolved" and by_metric["accept_rate"] == "ok"
        assert "alert: resolved" in page
