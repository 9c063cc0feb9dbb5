"""JSON API: event ingestion, daily metrics, alerts, hallucination reports."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from tests.metrics.conftest import ev


class TestPostEvents:
    def test_per_event_answers_and_retry(self, api_as: Callable[..., TestClient]) -> None:
        agent = api_as(scopes=["ingest"])
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

    def test_batch_limit_and_shape(self, api_as: Callable[..., TestClient]) -> None:
        agent = api_as(scopes=["ingest"])
        assert agent.post("/api/v1/events", json={"event_id": "x"}).status_code == 422
        r = agent.post("/api/v1/events", json=[ev("2026-11-02") for _ in range(1001)])
        assert r.status_code == 413 and "1000" in r.text

    def test_needs_ingest_scope(self, api_as: Callable[..., TestClient]) -> None:
        reader = api_as("support_lead", scopes=["support_lead"])
        assert reader.post("/api/v1/events", json=[ev("2026-11-02")]).status_code == 403


class TestDailyApi:
    def test_one_object_per_day_with_targets(self, api_as: Callable[..., TestClient]) -> None:
        api_as(scopes=["ingest"]).post(
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

    def test_bad_range_is_422(self, api_as: Callable[..., TestClient]) -> None:
        lead = api_as("support_lead", scopes=["support_lead"])
        assert lead.get("/api/v1/metrics/daily?start=2026-11-03&end=2026-11-01").status_code == 422
        r = lead.get("/api/v1/metrics/daily?start=yesterday&end=2026-11-01")
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == "start"


class TestAlertsApi:
    def test_states_and_history(self, api_as: Callable[..., TestClient]) -> None:
        api_as(scopes=["ingest"]).post(
            "/api/v1/events",
            json=[ev("2026-11-02", cost_usd=0.09), ev("2026-11-03", cost_usd=0.01), ev("2026-11-04", cost_usd=0.08)],
        )
        alerts = {a["metric"]: a for a in api_as("pm", scopes=["pm"]).get("/api/v1/alerts").json()}
        cost = alerts["cost_per_draft"]
        assert cost["state"] == "firing" and cost["value"] == 0.08
        assert [(h["day"], h["to"]) for h in cost["history"]] == [("2026-11-02", "firing"), ("2026-11-03", "resolved"), ("2026-11-04", "firing")]
        assert cost["firing_periods"] == [["2026-11-02", "2026-11-02"], ["2026-11-04", "2026-11-04"]]


class TestHallucinationApi:
    def test_flag_then_confirm(self, api_as: Callable[..., TestClient], client_as: Callable[..., TestClient]) -> None:
        agent = api_as(scopes=["ingest"])
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
        no_note = lead.post(f"/metrics/hallucinations/{report_id}/decide", data={"decision": "confirmed"}, follow_redirects=False)
        assert no_note.status_code == 422 and "note: say why the report is confirmed" in no_note.text
        done = lead.post(
            f"/metrics/hallucinations/{report_id}/decide", data={"decision": "confirmed", "note": "KB: 30 days"},
            follow_redirects=False,
        )
        assert done.status_code == 303
        day = api_as("support_lead", scopes=["support_lead"]).get("/api/v1/metrics/daily?start=2026-11-02&end=2026-11-02").json()[0]
        assert day["hallucination_reports"] == 1 and day["target_met"]["hallucination_reports"] is False
