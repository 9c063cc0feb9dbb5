"""The pipeline's API (issue 40): runs and drafts pushed by the team's CI with a `ci` token."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, col, func, select

from tests.checks.conftest import World, build_world, drafts_a
from tests.factories import make_user
from webapp.core.db import stored_id
from webapp.datasets.models import Dataset
from webapp.grading.models import Grade
from webapp.runs import pipeline
from webapp.runs.models import Draft, Run

RUN = {"name": "ci-1", "dataset": "eval", "model_version": "m-2", "prompt_version": "p-7", "retrieval_version": "r-3", "commit": "abc123"}


@pytest.fixture
def world(session: Session) -> World:
    return build_world(session)


@pytest.fixture
def ci(api_as: Callable[..., TestClient], world: World) -> TestClient:
    return api_as(scopes=["ci"])


def _drafts(session: Session, name: str) -> int:
    run = session.exec(select(Run).where(Run.name == name)).one()
    return session.exec(select(func.count()).select_from(Draft).where(col(Draft.run_id) == run.id)).one()


class TestCreateRun:
    def test_created_then_the_same_again_then_a_conflict(self, ci: TestClient) -> None:
        r = ci.post("/api/v1/runs", json=RUN)
        assert r.status_code == 201, r.text
        body = r.json()
        assert (body["name"], body["model"], body["model_version"], body["retrieval_version"], body["commit"]) == (
            "ci-1", "m-2", "m-2", "r-3", "abc123"
        )
        assert body["state"] == "open" and body["closed_at"] is None and body["dataset"]["name"] == "eval"
        again = ci.post("/api/v1/runs", json=RUN)
        assert again.status_code == 200 and again.json()["id"] == body["id"]
        other = ci.post("/api/v1/runs", json={**RUN, "commit": "def456", "prompt_version": "p-8"})
        assert other.status_code == 409
        assert "prompt_version, commit" in other.json()["detail"]

    def test_dataset_by_version_and_unknown_dataset(self, ci: TestClient) -> None:
        assert ci.post("/api/v1/runs", json={**RUN, "dataset": "eval@1"}).status_code == 201
        assert ci.post("/api/v1/runs", json={**RUN, "dataset": "eval@2"}).status_code == 422
        missing = ci.post("/api/v1/runs", json={**RUN, "name": "ci-2", "dataset": "nope"})
        assert missing.status_code == 422 and "nope" in missing.json()["detail"]


class TestDrafts:
    def test_batch_stored_once_and_retry_unchanged(self, ci: TestClient, session: Session) -> None:
        ci.post("/api/v1/runs", json=RUN)
        r = ci.post("/api/v1/runs/ci-1/drafts", json=drafts_a())
        assert r.status_code == 201 and r.json() == {"created": 8, "unchanged": 0, "replaced": 0}
        again = ci.post("/api/v1/runs/ci-1/drafts", json=drafts_a())
        assert again.status_code == 200 and again.json() == {"created": 0, "unchanged": 8, "replaced": 0}
        assert _drafts(session, "ci-1") == 8

    def test_a_bad_batch_names_index_and_field_and_stores_nothing(self, ci: TestClient, session: Session) -> None:
        ci.post("/api/v1/runs", json=RUN)
        batch: list[Any] = drafts_a()
        batch[2] = {**batch[2], "confidence": "high"}
        batch[5] = {k: v for k, v in batch[5].items() if k != "draft_text"}
        batch[6] = {**batch[6], "case_id": "zz9"}
        batch.append(7)
        r = ci.post("/api/v1/runs/ci-1/drafts", json=batch)
        assert r.status_code == 422
        body = r.json()
        assert [e["loc"] for e in body["detail"]] == [
            ["body", 2, "confidence"], ["body", 5, "draft_text"], ["body", 6, "case_id"], ["body", 8, "(record)"]
        ]
        assert body["detail"][0]["msg"] == "confidence: must be a number or null, not 'high'"
        assert body["detail"][0]["type"] == "value_error" and body["errors_total"] == 4
        assert _drafts(session, "ci-1") == 0

    def test_at_most_20_listed_with_the_total(self, ci: TestClient) -> None:
        ci.post("/api/v1/runs", json=RUN)
        batch = [{"case_id": "g1", "sample_index": i, "draft_text": 5} for i in range(30)]
        body = ci.post("/api/v1/runs/ci-1/drafts", json=batch).json()
        assert len(body["detail"]) == 20 and body["errors_total"] == 30
        assert body["detail"][19]["loc"] == ["body", 19, "draft_text"]

    def test_over_the_limit_is_413(self, ci: TestClient) -> None:
        ci.post("/api/v1/runs", json=RUN)
        batch = [{"case_id": "g1", "sample_index": i, "draft_text": "x"} for i in range(1001)]
        r = ci.post("/api/v1/runs/ci-1/drafts", json=batch)
        assert r.status_code == 413 and "at most 1000" in r.json()["detail"]

    def test_other_content_is_409_unless_replaced_while_open(self, ci: TestClient, session: Session) -> None:
        ci.post("/api/v1/runs", json=RUN)
        ci.post("/api/v1/runs/ci-1/drafts", json=drafts_a())
        changed = copy.deepcopy(drafts_a())
        changed[1]["draft_text"] = "A different answer."
        refused = ci.post("/api/v1/runs/ci-1/drafts", json=changed)
        assert refused.status_code == 409 and "record 2 (r1 sample 0)" in refused.json()["detail"]
        done = ci.post("/api/v1/runs/ci-1/drafts?replace=true", json=changed)
        assert done.status_code == 200 and done.json() == {"created": 0, "unchanged": 7, "replaced": 1}
        ci.post("/api/v1/runs/ci-1/complete")
        changed[1]["draft_text"] = "Yet another answer."
        closed = ci.post("/api/v1/runs/ci-1/drafts?replace=true", json=changed)
        assert closed.status_code == 409 and "completed" in closed.json()["detail"]
        retry = ci.post("/api/v1/runs/ci-1/drafts", json=drafts_a()[:1])
        assert retry.status_code == 200 and retry.json()["unchanged"] == 1

    def test_a_graded_draft_keeps_its_text_even_with_replace(self, ci: TestClient, session: Session) -> None:
        ci.post("/api/v1/runs", json=RUN)
        ci.post("/api/v1/runs/ci-1/drafts", json=drafts_a())
        run = session.exec(select(Run).where(Run.name == "ci-1")).one()
        draft = session.exec(select(Draft).where(Draft.run_id == run.id).order_by(col(Draft.id))).first()
        assert draft is not None
        grader = make_user(session, email="grader@example.test", roles=["labeler"])
        session.add(Grade(draft_id=stored_id(draft.id), grader_id=stored_id(grader.id), factual_accuracy="pass", citation_relevance=4, tone=4, completeness=4))
        session.commit()
        changed = copy.deepcopy(drafts_a())
        changed[0]["draft_text"] = "New text nobody graded."
        r = ci.post("/api/v1/runs/ci-1/drafts?replace=true", json=changed)
        assert r.status_code == 409 and "already have grades" in r.json()["detail"]


def _at_once(n: int, call: Callable[[], Any]) -> list[Any]:
    """Run `call` in n threads released together; return their results."""
    barrier = threading.Barrier(n)

    def go() -> Any:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(n) as pool:
        return [f.result() for f in [pool.submit(go) for _ in range(n)]]


class TestConcurrentRetries:
    def test_identical_creates_at_once_make_one_run(self, app: Any, ci: TestClient, session: Session) -> None:
        token = ci.headers["Authorization"]

        def create() -> int:
            with TestClient(app, headers={"Authorization": token}) as c:
                return c.post("/api/v1/runs", json=RUN).status_code

        assert sorted(_at_once(4, create)) == [200, 200, 200, 201]
        assert session.exec(select(func.count()).select_from(Run).where(Run.name == "ci-1")).one() == 1

    def test_identical_batches_at_once_store_once(self, app: Any, ci: TestClient, session: Session) -> None:
        ci.post("/api/v1/runs", json=RUN)
        token = ci.headers["Authorization"]

        def push() -> tuple[int, dict[str, int]]:
            with TestClient(app, headers={"Authorization": token}) as c:
                r = c.post("/api/v1/runs/ci-1/drafts", json=drafts_a())
                return r.status_code, r.json()

        results = sorted(_at_once(3, push), key=lambda p: p[0])
        assert [code for code, _ in results] == [200, 200, 201]
        assert results[2][1]["created"] == 8 and all(body["unchanged"] == 8 for _, body in results[:2])
        assert _drafts(session, "ci-1") == 8

    def test_the_unique_name_answers_a_create_whose_lookup_missed(
        self, ci: TestClient, session: Session, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The race made certain: the run is stored (by "another request") after this request looked for
        # it; its insert then hits the unique name and it answers the stored run, or the conflict.
        assert ci.post("/api/v1/runs", json=RUN).status_code == 201
        real = pipeline._run_named
        calls: list[str] = []

        def first_misses(s: Session, name: str) -> Run | None:
            calls.append(name)
            return None if len(calls) == 1 else real(s, name)

        monkeypatch.setattr(pipeline, "_run_named", first_misses)
        assert ci.post("/api/v1/runs", json=RUN).status_code == 200
        calls.clear()
        r = ci.post("/api/v1/runs", json={**RUN, "notes": "other"})
        assert r.status_code == 409 and "notes" in r.json()["detail"]


class TestDatasets:
    JSONL = '{"id": "c1", "input": "Where is my refund?", "metadata": {"category": "routine"}}\n'

    def test_created_then_identical_then_a_new_version(self, ci: TestClient) -> None:
        r = ci.post("/api/v1/datasets", json={"name": "pipe", "format": "jsonl", "content": self.JSONL})
        assert r.status_code == 201, r.text
        body = r.json()
        assert (body["dataset"]["name"], body["dataset"]["version"], body["created"]) == ("pipe", 1, True)
        assert any("mix" in w or "categor" in w for w in body["warnings"])
        same = ci.post("/api/v1/datasets", json={"name": "pipe", "format": "jsonl", "content": self.JSONL})
        assert same.status_code == 200 and same.json()["created"] is False and "nothing imported" in same.json()["message"]
        other = self.JSONL.replace("refund", "parcel")
        assert ci.post("/api/v1/datasets", json={"name": "pipe", "format": "jsonl", "content": other}).json()["dataset"]["version"] == 2

    def test_a_bad_record_is_refused_with_its_line_and_nothing_stored(self, ci: TestClient, session: Session) -> None:
        content = self.JSONL + '{"id": "c2"}\n'
        r = ci.post("/api/v1/datasets", json={"name": "bad", "format": "jsonl", "content": content})
        assert r.status_code == 422
        assert r.json()["detail"].startswith("bad.jsonl:2: ")
        assert session.exec(select(func.count()).select_from(Dataset).where(Dataset.name == "bad")).one() == 0

    def test_yaml(self, ci: TestClient) -> None:
        content = "- id: y1\n  input: Hello\n  metadata:\n    category: routine\n"
        r = ci.post("/api/v1/datasets", json={"name": "yml", "format": "yaml", "content": content})
        assert r.status_code == 201 and r.json()["dataset"]["format"] == ".yaml"


class TestWhoMayCall:
    def test_ml_lead_and_admin_by_session_with_csrf_and_others_not(self, world: World, client_as: Callable[..., TestClient]) -> None:
        ml = client_as("ml_lead")
        assert ml.post("/api/v1/runs", json=RUN).status_code == 201
        token = ml.headers.pop("X-CSRF-Token")
        refused = ml.post("/api/v1/runs", json=RUN)
        assert refused.status_code == 403 and "CSRF" in refused.text
        ml.headers["X-CSRF-Token"] = token
        assert client_as("pm", "lead", "labeler", "support_lead").post("/api/v1/runs", json=RUN).status_code == 403

    def test_a_bearer_token_needs_no_csrf_token(self, ci: TestClient) -> None:
        assert "X-CSRF-Token" not in ci.headers
        assert ci.post("/api/v1/runs", json=RUN).status_code == 201
