"""Metrics pages: charts with target/threshold lines, firing shading and version markers; table, CSV, drill-down."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable

import plotly.graph_objects as go
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.metrics.conftest import ev, load
from webapp.spec import EvalSpec


def _figures(page: str) -> dict[str, dict]:
    found = re.findall(r'data-metric="([a-z_0-9]+)" data-figure="([^"]*)"', page)
    return {m: json.loads(html.unescape(f)) for m, f in found}


def _seed(session: Session, spec: EvalSpec) -> None:
    load(
        session,
        spec,
        [
            ev("2026-11-02", cost_usd=0.09, model_version="m1", intent="billing_charge", draft_text="Your refund <b>is</b> on its way"),
            ev("2026-11-03", cost_usd=0.01, model_version="m1", intent="plan_change"),
            ev("2026-11-04", cost_usd=0.01, model_version="m2", intent="plan_change", confidence=0.9),
        ],
    )


class TestMetricsPage:
    def test_charts_have_target_threshold_firing_and_versions(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        _seed(session, spec)
        page = client_as("support_lead").get("/metrics?start=2026-11-01&end=2026-11-05")
        assert page.status_code == 200
        figs = _figures(page.text)
        assert set(figs) >= {"accept_rate", "cost_per_draft", "latency_p95_s", "calibration"}
        for fig in figs.values():
            go.Figure(fig)  # plotly validates the whole figure; raises on a bad property
        cost = figs["cost_per_draft"]
        names = [t["name"] for t in cost["data"]]
        assert names[1:] == ["target", "alert threshold"]
        assert cost["data"][0]["y"] == [None, 0.09, 0.01, 0.01, None]
        assert cost["data"][1]["y"] == [0.03, 0.03] and cost["data"][2]["y"] == [0.05, 0.05]
        firing = [s for s in cost["layout"]["shapes"] if s.get("name") == "firing"]
        assert [(s["x0"][:10], s["x1"][:10]) for s in firing] == [("2026-11-01", "2026-11-02")]  # half-day margins
        assert [a["text"] for a in cost["layout"]["annotations"]] == ["model: m2"]
        band = [t for t in figs["escalation_rate"]["data"] if t.get("legendgroup") == "target"]
        assert [t["y"][0] for t in band] == [0.06, 0.1]
        assert "alerts firing" in page.text and "Cost per draft ($) &gt; $0.0500 on a day" in page.text

    def test_htmx_filter_returns_only_the_results(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        _seed(session, spec)
        c = client_as("pm")
        frag = c.get("/metrics?start=2026-11-01&end=2026-11-05&intent=plan_change", headers={"HX-Request": "true"})
        assert frag.text.lstrip().startswith('<div id="metrics-results">')
        assert "<html" not in frag.text
        figs = _figures(frag.text)
        assert figs["cost_per_draft"]["data"][0]["y"] == [None, None, 0.01, 0.01, None]

    def test_user_text_is_escaped(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        _seed(session, spec)
        day = client_as("support_lead").get("/metrics/day/2026-11-02")
        assert day.status_code == 200
        assert "Your refund &lt;b&gt;is&lt;/b&gt;" in day.text and "<b>is</b>" not in day.text

    def test_csv_export(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        _seed(session, spec)
        r = client_as("support_lead").get("/metrics/daily.csv?start=2026-11-02&end=2026-11-03")
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

    def test_drill_down_lists_the_days_events(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        _seed(session, spec)
        r = client_as("support_lead").get("/metrics/day/2026-11-03?intent=plan_change")
        assert "1 events" in r.text and "plan_change" in r.text
        r = client_as("support_lead").get("/metrics/day/2026-11-03?intent=billing_charge")
        assert "No events on this day" in r.text

    def test_labeler_is_turned_away(self, client_as: Callable[..., TestClient]) -> None:
        assert client_as("labeler").get("/metrics").status_code == 403


class TestHallucinationQueue:
    def test_support_lead_sees_but_cannot_decide(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        from webapp.metrics import service

        load(session, spec, [ev("2026-11-02", event_id="x")])
        report = service.report_hallucination(session=session, event_id="x", note="<script>alert(1)</script>", reported_by=None)
        session.commit()
        sl = client_as("support_lead")
        page = sl.get("/metrics/hallucinations")
        assert "&lt;script&gt;" in page.text and "Confirm hallucination" not in page.text
        assert sl.post(f"/metrics/hallucinations/{report.id}/decide", data={"decision": "confirmed"}).status_code == 403
        lead = client_as("lead")
        r = lead.post(
            f"/metrics/hallucinations/{report.id}/decide", data={"decision": "dismissed", "note": "fine"},
            headers={"HX-Request": "true"},
        )
        assert r.status_code == 200 and r.headers["HX-Trigger"] == "hallucination-decided"
        assert "No pending reports" in r.text

    def test_decisions_are_kept_and_the_lead_can_undo(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        from webapp.metrics import service

        load(session, spec, [ev("2026-11-02", event_id="u", draft_text="Refunds take 10 days", sent_text="Refunds take 5 days")])
        report = service.report_hallucination(session=session, event_id="u", note="wrong window", reported_by=None)
        session.commit()
        lead = client_as("lead")
        htmx = {"HX-Request": "true"}

        def confirmed_on_the_day() -> int:
            day = lead.get("/api/v1/metrics/daily?start=2026-11-02&end=2026-11-02").json()[0]
            return int(day["hallucination_reports"])

        missing = lead.post(f"/metrics/hallucinations/{report.id}/decide", data={"decision": "confirmed"}, headers=htmx)
        assert missing.status_code == 200 and "say why the report is confirmed" in missing.text and confirmed_on_the_day() == 0
        lead.post(f"/metrics/hallucinations/{report.id}/decide", data={"decision": "confirmed", "note": "KB says 5"}, headers=htmx)
        assert confirmed_on_the_day() == 1
        page = lead.get("/metrics/hallucinations?status=all").text
        assert "<del>10</del>" in page and "<ins>5</ins>" in page and "Undo “confirmed”" in page
        r = lead.post(f"/metrics/hallucinations/{report.id}/undo", data={"status": "all"}, headers=htmx)
        assert r.status_code == 200 and "decision undone, now pending" in r.text
        assert confirmed_on_the_day() == 0
        assert "Decisions (2)" in r.text and "undo: back to pending" in r.text and "KB says 5" in r.text
        assert client_as("support_lead").post(f"/metrics/hallucinations/{report.id}/undo").status_code == 403


class TestHomeCards:
    def test_alerts_firing_and_reports_to_confirm(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        from webapp.metrics import service

        load(session, spec, [ev("2026-11-02", cost_usd=0.09, event_id="h")])
        service.report_hallucination(session=session, event_id="h", note="wrong", reported_by=None)
        session.commit()
        assert "1 alert firing" in client_as("support_lead").get("/").text
        lead_home = client_as("lead").get("/").text
        assert "1 hallucination report to confirm" in lead_home and "alert firing" not in lead_home
