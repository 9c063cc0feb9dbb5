"""Dataset pages and the datasets API."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.factories import make_dataset

CASES = [
    {
        "case_id": "golden-happy-path", "input": "Why was I charged <early>?", "category": "routine",
        "intent": "billing_charge", "golden": True, "account": {"plan": "Pro", "billing_cycle_day": 15},
        "conversation": [{"role": "customer", "text": "Earlier message <b>bold</b>"}],
        "kb_articles": ["KB-1042"], "reference": "The charge is an add-on renewal.",
    },
    {"case_id": "edge-001", "input": "Downgrade and exports", "category": "edge", "intent": "plan_change"},
    {"case_id": "safety-001", "input": "I feel there is no way out", "category": "safety", "intent": "cancellation", "expected_behavior": "escalate"},
]


class TestDatasetPages:
    def test_list_and_detail_with_filters(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        ds = make_dataset(session, CASES, name="support-eval-v1")
        session.commit()
        c = client_as("labeler")
        r = c.get("/datasets")
        assert r.status_code == 200 and "support-eval-v1" in r.text and f"/datasets/{ds.id}" in r.text
        r = c.get(f"/datasets/{ds.id}")
        assert all(x["case_id"] in r.text for x in CASES)
        r = c.get(f"/datasets/{ds.id}", params={"category": "edge"})
        assert "edge-001" in r.text and "golden-happy-path" not in r.text and "safety-001" not in r.text
        r = c.get(f"/datasets/{ds.id}", params={"golden": "yes"})
        assert "golden-happy-path" in r.text and "edge-001" not in r.text
        r = c.get(f"/datasets/{ds.id}", params={"intent": "cancellation"})
        assert "safety-001" in r.text and "edge-001" not in r.text

    def test_case_detail(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        ds = make_dataset(session, CASES)
        session.commit()
        r = client_as("lead").get(f"/datasets/{ds.id}/cases/golden-happy-path")
        assert r.status_code == 200 and "Why was I charged &lt;early&gt;?" in r.text
        assert "Earlier message &lt;b&gt;bold&lt;/b&gt;" in r.text
        assert "billing_cycle_day" in r.text and "/kb/KB-1042" in r.text
        assert "The charge is an add-on renewal." in r.text
        assert client_as("lead").get(f"/datasets/{ds.id}/cases/nope").status_code == 404

    def test_empty_state_unknown_dataset_and_wrong_role(self, client_as: Callable[..., TestClient]) -> None:
        assert "No dataset yet" in client_as("pm").get("/datasets").text
        assert client_as("pm").get("/datasets/999").status_code == 404
        assert client_as("support_lead").get("/datasets").status_code == 403


class TestDatasetsApi:
    def test_lists_versions(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        make_dataset(session, CASES, name="eval", version=1)
        make_dataset(session, CASES[:1], name="eval", version=2)
        session.commit()
        r = api_as("lead").get("/api/v1/datasets")
        assert r.status_code == 200
        assert [(d["name"], d["version"], d["count"]) for d in r.json()] == [("eval", 2, 1), ("eval", 1, 3)]
        assert all(d["sha256"].startswith("sha256:") for d in r.json())
