"""JSON API: event ingestion, daily metrics, alerts, hallucination reports."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlmodel import Session

from tests.metrics.conftest import ev
from webapp.metrics.models import DailyAggregate, Event

JSON = {"Content-Type": "application/json"}


def _stored(session: Session) -> set[str]:
    session.rollback()  # a fresh snapshot: what the API committed
    return set(session.execute(select(Event.event_id)).scalars())


def _batch() -> list[dict[str, Any]]:
    days = ["2026-11-02", "2026-11-03", "2026-11-04"]
    return [
        ev(days[i % 3], i % 24, latency_ms=100.0 + 7 * i, action=("accept", "edit", "reject")[i % 3],
           sent_text="Hello" if i % 3 else "Hello there, friend")
        for i in range(1000)
    ]  # fmt: skip


@pytest.fixture
def agent(api_as: Callable[..., TestClient]) -> TestClient:
    """An assistant's token with the ingest scope."""
    return api_as(scopes=["ingest"])


class TestPostEvents:
    def test_answer_retry_shape_and_scope(self, agent: TestClient, api_as: Callable[..., TestClient]) -> None:
        batch = [ev("2026-11-02"), ev("2026-11-02", latency_ms=-5), ev("2026-11-02", action="maybe")]
        r = agent.post("/api/v1/events", json=batch)
        assert r.status_code == 200, r.text
        body = r.json()
        assert [x["status"] for x in body["results"]] == ["created", "invalid", "invalid"]
        assert body["results"][1]["field"] == "latency_ms"
        assert "greater than or equal to 0" in body["results"][1]["reason"]
        assert body["results"][2]["field"] == "action"
        assert (body["created"], body["invalid"]) == (1, 2)
        again = agent.post("/api/v1/events", json=batch[:1]).json()
        assert again["results"][0]["status"] == "duplicate" and again["created"] == 0
        assert agent.post("/api/v1/events", json={"event_id": "x"}).status_code == 422
        r = agent.post("/api/v1/events", json=[ev("2026-11-02") for _ in range(1001)])
        assert r.status_code == 413 and "1000" in r.text
        reader = api_as("support_lead", scopes=["support_lead"])  # the ingest scope is needed
        assert reader.post("/api/v1/events", json=[ev("2026-11-02")]).status_code == 403

    def test_event_537_syntax_error_named_nothing_stored(self, agent: TestClient, session: Session) -> None:
        texts = [json.dumps(e) for e in _batch()]
        texts[537] = texts[537].replace('"escalated": false', '"escalated": fals')
        r = agent.post("/api/v1/events", content="[" + ", ".join(texts) + "]", headers=JSON)
        assert r.status_code == 422, r.text
        [error] = r.json()["detail"]
        assert error["field"] == "537" and error["message"].startswith("event 537 is not valid JSON")
        # a missing comma: the event after it is named
        broken = "[" + ", ".join(texts[:12]) + " " + ", ".join(texts[12:20]) + "]"
        assert agent.post("/api/v1/events", content=broken, headers=JSON).json()["detail"][0]["field"] == "12"
        assert agent.post("/api/v1/events", content=b"[\xff]", headers=JSON).json()["detail"][0]["field"] == "(body)"
        assert _stored(session) == set()

    def test_event_537_bad_field_named_the_rest_aggregated_retry_adds_nothing(
        self, agent: TestClient, session: Session
    ) -> None:
        batch = _batch()
        batch[537]["latency_ms"] = -5
        body = json.dumps(batch)
        first = agent.post("/api/v1/events", content=body, headers=JSON).json()
        bad = first["results"][537]
        assert (bad["index"], bad["event_id"], bad["status"], bad["field"]) == (537, batch[537]["event_id"], "invalid", "latency_ms")
        assert (first["created"], first["duplicate"], first["invalid"]) == (999, 0, 1)
        assert [r["index"] for r in first["results"]] == list(range(1000))
        want = {e["event_id"] for i, e in enumerate(batch) if i != 537}
        assert _stored(session) == want
        again = agent.post("/api/v1/events", content=body, headers=JSON).json()
        assert (again["created"], again["duplicate"], again["invalid"]) == (0, 999, 1)
        assert _stored(session) == want
        # the stored all-traffic rows, worked out independently with numpy from what was sent
        star = (DailyAggregate.intent == "*", DailyAggregate.plan == "*", DailyAggregate.agent_id == "*")
        rows = {str(r.day): r for r in session.execute(select(DailyAggregate).where(*star)).scalars()}
        # day k holds events k, k+3, ...: 334, 333 and 333 of them, less event 537 on day 0: 333 each.
        # One action per day; the accepted drafts were sent with 14 characters added to "Hello"
        # (distance 14 / 19), the edited ones unchanged
        by_day = [(333, 333 * 14 / 19, 333), (333, 0.0, 333), (0, 0.0, 0)]  # 2, 3 and 4 November
        for k, (ed_n, ed_sum, n_accept) in enumerate(by_day):
            row = rows[f"2026-11-0{2 + k}"]
            assert (row.n_events, row.n_shown, row.ed_n, row.n_accept) == (333, 333, ed_n, n_accept)
            assert row.ed_sum == pytest.approx(ed_sum)
            sent = [e["latency_ms"] / 1000 for i, e in enumerate(batch) if i % 3 == k and i != 537]
            assert row.lat_p95_s == pytest.approx(np.percentile(sent, 95))

    def test_nul_and_off_calendar_times_are_invalid_fields(self, agent: TestClient, session: Session) -> None:
        batch = [
            ev("2026-11-02"),
            ev("2026-11-02", draft_text="a\u0000b"),
            {**ev("2026-11-02"), "occurred_at": "0001-01-01T00:30:00+01:00"},
            {**ev("2026-11-02"), "occurred_at": "9999-12-31T20:00:00-05:00"},
        ]
        out = agent.post("/api/v1/events", json=batch).json()
        assert [r["status"] for r in out["results"]] == ["created", "invalid", "invalid", "invalid"]
        assert out["results"][1]["field"] == "draft_text" and "NUL" in out["results"][1]["reason"]
        assert [r["field"] for r in out["results"][2:]] == ["occurred_at", "occurred_at"]
        assert _stored(session) == {batch[0]["event_id"]}


class TestReadApi:
    def test_daily_and_bad_ranges(self, agent: TestClient, api_as: Callable[..., TestClient]) -> None:
        agent.post(
            "/api/v1/events",
            json=[ev("2026-11-02", intent="billing_charge", action="accept"), ev("2026-11-02", intent="plan_change", action="reject")],
        )
        lead = api_as("support_lead", scopes=["support_lead"])
        days = lead.get("/api/v1/metrics/daily?start=2026-11-01&end=2026-11-03").json()
        assert [d["day"] for d in days] == ["2026-11-01", "2026-11-02", "2026-11-03"]
        assert days[0]["accept_rate"] is None and days[0]["target_met"]["accept_rate"] is None
        assert days[1]["accept_rate"] == 0.5 and days[1]["target_met"]["accept_rate"] is False
        assert set(days[1]["target_met"]) == {
            "accept_rate", "reject_rate", "edit_distance", "escalation_rate", "handle_time_s",
            "latency_p95_s", "hallucination_reports", "cost_per_draft",
        }
        (billing,) = lead.get("/api/v1/metrics/daily?start=2026-11-02&end=2026-11-02&intent=billing_charge").json()
        assert billing["accept_rate"] == 1.0 and billing["reject_rate"] == 0.0
        assert lead.get("/api/v1/metrics/daily?start=2026-11-03&end=2026-11-01").status_code == 422
        r = lead.get("/api/v1/metrics/daily?start=yesterday&end=2026-11-01")
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == "start"

    def test_alert_states_and_history(self, agent: TestClient, api_as: Callable[..., TestClient]) -> None:
        agent.post(
            "/api/v1/events",
            json=[ev("2026-11-02", cost_usd=0.09), ev("2026-11-03", cost_usd=0.01), ev("2026-11-04", cost_usd=0.08)],
        )
        alerts = {a["metric"]: a for a in api_as("pm", scopes=["pm"]).get("/api/v1/alerts").json()}
        cost = alerts["cost_per_draft"]
        assert cost["state"] == "firing" and cost["value"] == 0.08
        assert [(h["day"], h["to"]) for h in cost["history"]] == [("2026-11-02", "firing"), ("2026-11-03", "resolved"), ("2026-11-04", "firing")]
        assert cost["firing_periods"] == [["2026-11-02", "2026-11-02"], ["2026-11-04", "2026-11-04"]]


    def test_flag_a_hallucination_then_confirm(
        self, agent: TestClient, api_as: Callable[..., TestClient], client_as: Callable[..., TestClient]
    ) -> None:
        agent.post("/api/v1/events", json=[ev("2026-11-02", event_id="h1")])
        r = agent.post(
            "/api/v1/events/h1/hallucination-reports",
            json={"note": "refund window is 30 days, not 60", "citations": [{"article_id": "KB-5001", "revision": 1}]},
        )
        assert r.status_code == 201 and r.json()["status"] == "pending"
        assert agent.post("/api/v1/events/nope/hallucination-reports", json={}).status_code == 404
        lead = client_as("lead")
        page = lead.get("/metrics/hallucinations")
        assert "refund window is 30 days" in page.text
        report_id = r.json()["id"]
        assert "KB-5001 revision 1" in page.text and "not in the KB" in page.text
        bad = agent.post("/api/v1/events/h1/hallucination-reports", json={"citations": [{"article_id": 5}]})
        assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "citations"
        # each wrong field named, with what it must be; nothing is stored
        for body, field, message in [
            ({"note": 5}, "note", "must be a string"),
            ({"note": None}, "note", "must be a string"),
            ({"citations": "KB-5001"}, "citations", "must be a list of {article_id: text, revision: whole number}"),
            ({"citations": [{"article_id": "KB-5001", "revision": "1"}]}, "citations", "must be a list of {article_id: text, revision: whole number}"),
        ]:
            wrong = agent.post("/api/v1/events/h1/hallucination-reports", json=body)
            assert (wrong.status_code, wrong.json()["detail"]) == (422, [{"field": field, "message": message}]), body
        no_revision = agent.post("/api/v1/events/h1/hallucination-reports", json={"citations": [{"article_id": "KB-5001"}]})
        assert no_revision.status_code == 201 and no_revision.json()["note"] == ""
        no_note = lead.post(f"/metrics/hallucinations/{report_id}/decide", data={"decision": "confirmed"}, follow_redirects=False)
        assert no_note.status_code == 422 and "note: say why the report is confirmed" in no_note.text
        done = lead.post(
            f"/metrics/hallucinations/{report_id}/decide", data={"decision": "confirmed", "note": "KB: 30 days"},
            follow_redirects=False,
        )
        assert done.status_code == 303
        day = api_as("support_lead", scopes=["support_lead"]).get("/api/v1/metrics/daily?start=2026-11-02&end=2026-11-02").json()[0]
        assert day["hallucination_reports"] == 1 and day["target_met"]["hallucination_reports"] is False
