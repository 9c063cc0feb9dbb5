"""The KB sync API (issue 40): PUT/DELETE one article, POST /kb/sync for a whole export; every path appends."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.datasets.helpers import count_rows
from webapp.checks.rules import check_citations
from webapp.checks.types import Citation, DraftInput
from webapp.kb import service, sync
from webapp.kb.models import KbRevision, KbRevisionImmutable


@pytest.fixture
def ci(api_as: Callable[..., TestClient]) -> TestClient:
    return api_as(scopes=["ci"])


def rows(session: Session) -> dict[tuple[str, int], tuple]:
    session.expire_all()
    return {(r.article_id, r.revision): (r.id, r.title, r.body, r.status, r.effective_date)
            for r in session.exec(select(KbRevision)).all()}


@contextmanager
def kb_writes(engine: Engine) -> Iterator[list[str]]:
    """Collect every SQL statement that writes kb_revision."""
    seen: list[str] = []

    def spy(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if "kb_revision" in statement.lower() and statement.lstrip().split()[0].upper() in ("INSERT", "UPDATE", "DELETE"):
            seen.append(statement.lstrip().split()[0].upper())

    event.listen(engine, "before_cursor_execute", spy)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", spy)


def cites_current(session: Session, article_id: str, revision: int) -> str:
    draft = DraftInput(draft_text="Use the app.", citations=(Citation(article_id, revision),))
    return check_citations(draft, service.kb_snapshot(session=session)).status


class TestPut:
    def test_create_same_revise_deprecate_delete(self, ci: TestClient, session: Session) -> None:
        r = ci.put("/api/v1/kb/articles/KB-3001", json={"title": "2FA", "body": "Use SMS.", "effective_date": "2025-06-01"})
        assert r.status_code == 201, r.text
        assert r.json() == {"article_id": "KB-3001", "outcome": "created", "revision": 1, "state": "current", "notes": []}
        again = ci.put("/api/v1/kb/articles/KB-3001", json={"title": "2FA", "body": "Use SMS."})
        assert again.status_code == 200 and again.json()["outcome"] == "unchanged" and again.json()["revision"] == 1
        assert cites_current(session, "KB-3001", 1) == "pass"
        revised = ci.put("/api/v1/kb/articles/KB-3001", json={"title": "2FA", "body": "Use an authenticator app."})
        assert revised.status_code == 200 and (revised.json()["outcome"], revised.json()["revision"]) == ("revised", 2)
        assert (cites_current(session, "KB-3001", 1), cites_current(session, "KB-3001", 2)) == ("fail", "pass")
        dep = ci.put("/api/v1/kb/articles/KB-3001", json={"status": "deprecated"})
        assert dep.json() == {"article_id": "KB-3001", "outcome": "deprecated", "revision": 3, "state": "deprecated", "notes": []}
        assert ci.put("/api/v1/kb/articles/KB-3001", json={"status": "deprecated"}).json()["outcome"] == "unchanged"
        assert cites_current(session, "KB-3001", 2) == "fail"
        gone = ci.delete("/api/v1/kb/articles/KB-3001")
        assert gone.status_code == 200 and (gone.json()["outcome"], gone.json()["revision"]) == ("deleted", 4)
        assert ci.delete("/api/v1/kb/articles/KB-3001").json()["outcome"] == "unchanged"
        stored = rows(session)
        assert [stored[("KB-3001", n)][2:4] for n in (1, 2, 3, 4)] == [
            ("Use SMS.", "current"), ("Use an authenticator app.", "current"),
            ("Use an authenticator app.", "deprecated"), ("Use an authenticator app.", "deleted"),
        ]
        states = service.states_of(service.get_revisions(session=session, article_id="KB-3001"))
        assert set(states.values()) == {"deleted"}
        assert ci.delete("/api/v1/kb/articles/KB-404").status_code == 404

    def test_bad_revision_names_the_field_and_stores_nothing(self, ci: TestClient, session: Session) -> None:
        r = ci.put("/api/v1/kb/articles/KB-1", json={"title": "T", "body": "B", "effective_date": "someday"})
        assert r.status_code == 422
        assert r.json()["detail"] == [{
            "field": "effective_date", "message": "effective_date: 'someday' is not a date (YYYY-MM-DD)",
            "loc": ["body", "effective_date"], "msg": "effective_date: 'someday' is not a date (YYYY-MM-DD)", "type": "value_error",
        }]
        assert ci.put("/api/v1/kb/articles/KB-1", json={"body": "B"}).json()["detail"][0]["loc"] == ["body", "title"]
        assert ci.put("/api/v1/kb/articles/KB-1", json={"article_id": "KB-2", "title": "T", "body": "B"}).status_code == 422
        assert ci.put("/api/v1/kb/articles/KB-1", json={"status": "deprecated"}).json()["detail"][0]["loc"] == ["body", "title"]
        assert ci.put("/api/v1/kb/articles/bad%20id", json={"title": "T", "body": "B"}).json()["detail"][0]["loc"] == ["body", "article_id"]
        assert count_rows(session, KbRevision) == 0


def export(*items: dict) -> dict:
    return {"articles": list(items)}


class TestSync:
    def test_counts_each_outcome_and_deletes_the_missing(self, ci: TestClient, session: Session) -> None:
        first = ci.post("/api/v1/kb/sync", json=export(
            {"article_id": "KB-1", "title": "A", "body": "a"}, {"article_id": "KB-2", "title": "B", "body": "b"},
            {"article_id": "KB-3", "title": "C", "body": "c"}, {"article_id": "KB-4", "title": "D", "body": "d"},
        ))
        assert first.status_code == 200, first.text
        assert {k: first.json()[k] for k in ("created", "revised", "unchanged", "deprecated", "deleted", "revisions")} == {
            "created": 4, "revised": 0, "unchanged": 0, "deprecated": 0, "deleted": 0, "revisions": 4}
        second = ci.post("/api/v1/kb/sync", json={**export(
            {"article_id": "KB-1", "title": "A", "body": "a"}, {"article_id": "KB-2", "title": "B", "body": "b2"},
            {"article_id": "KB-3", "status": "deprecated"}, {"article_id": "KB-5", "title": "E", "body": "e"},
        ), "delete_missing": True}).json()
        assert {k: second[k] for k in ("created", "revised", "unchanged", "deprecated", "deleted", "revisions")} == {
            "created": 1, "revised": 1, "unchanged": 1, "deprecated": 1, "deleted": 1, "revisions": 4}
        assert {a["article_id"]: (a["outcome"], a["revision"], a["state"]) for a in second["articles"]} == {
            "KB-1": ("unchanged", 1, "current"), "KB-2": ("revised", 2, "current"), "KB-3": ("deprecated", 2, "deprecated"),
            "KB-4": ("deleted", 2, "deleted"), "KB-5": ("created", 1, "current")}
        # the same export again: nothing changes (KB-4 is already deleted)
        third = ci.post("/api/v1/kb/sync", json={**export(
            {"article_id": "KB-1", "title": "A", "body": "a"}, {"article_id": "KB-2", "title": "B", "body": "b2"},
            {"article_id": "KB-3", "status": "deprecated"}, {"article_id": "KB-5", "title": "E", "body": "e"},
        ), "delete_missing": True}).json()
        assert (third["revisions"], third["unchanged"]) == (0, 4)

    def test_files_in_the_import_format(self, ci: TestClient, session: Session) -> None:
        jsonl = json.dumps({"article_id": "KB-1", "revision": 2, "title": "A", "body": "a", "status": "current", "effective_date": "2026-01-02"})
        yaml_text = "- article_id: KB-2\n  revision: 1\n  title: B\n  body: b\n  status: current\n  effective_date: 2026-01-03\n"
        one = json.dumps({"article_id": "KB-3", "title": "C", "body": "c"})
        r = ci.post("/api/v1/kb/sync", json={"files": [
            {"name": "a.jsonl", "content": jsonl + "\n"}, {"name": "b.yaml", "content": yaml_text}, {"name": "c.json", "content": one}]})
        assert r.status_code == 200 and r.json()["created"] == 3, r.text
        assert service.current_revision(session=session, article_id="KB-1").revision == 2

    def test_every_bad_record_is_named_and_nothing_is_stored(self, ci: TestClient, session: Session) -> None:
        items = [{"article_id": f"KB-{i}", "title": "T", "body": "B"} for i in range(30)]
        for i in (3, 7, *range(10, 30)):
            items[i]["status"] = "archived"
        items[5] = {"article_id": "KB-5", "title": "T"}
        r = ci.post("/api/v1/kb/sync", json=export(*items))
        assert r.status_code == 422
        detail = r.json()["detail"]
        assert r.json()["errors_total"] == 23 and len(detail) == 20
        assert detail[0]["loc"] == ["body", "articles", 3, "status"]
        assert detail[0]["msg"] == "status: 'archived' is not one of current, deprecated, deleted"
        assert detail[1] == {**detail[1], "loc": ["body", "articles", 5, "body"], "msg": "missing required field: body"}
        bad_file = ci.post("/api/v1/kb/sync", json={"files": [{"name": "kb.jsonl", "content": '{"article_id": "KB-1"}\nnot json\n'}]})
        assert bad_file.status_code == 422
        assert bad_file.json()["detail"][0]["loc"] == ["body", "files", 0, "content"]
        assert bad_file.json()["detail"][0]["msg"].startswith("kb.jsonl:2: Invalid JSON at line 2")
        assert ci.post("/api/v1/kb/sync", json={"articles": []}).status_code == 422
        assert count_rows(session, KbRevision) == 0


def test_every_write_path_only_appends(ci: TestClient, session: Session, engine: Engine) -> None:
    """Issue 41: PUT, deprecate, DELETE, sync (with delete_missing) and the file import never UPDATE or DELETE a revision."""
    with kb_writes(engine) as seen:
        sync.import_kb(session=session, data=b'{"article_id": "KB-9", "revision": 1, "title": "T", "body": "b", "status": "current", "effective_date": "2026-01-01"}\n', path="kb.jsonl")
        session.commit()
        before = rows(session)
        sync.import_kb(session=session, data=b'{"article_id": "KB-9", "revision": 1, "title": "T", "body": "changed", "status": "current", "effective_date": "2026-01-01"}\n', path="kb.jsonl")
        session.commit()
        calls = [
            ci.put("/api/v1/kb/articles/KB-1", json={"title": "T", "body": "one"}),
            ci.put("/api/v1/kb/articles/KB-1", json={"title": "T", "body": "two"}),
            ci.put("/api/v1/kb/articles/KB-1", json={"status": "deprecated"}),
            ci.delete("/api/v1/kb/articles/KB-1"),
            ci.put("/api/v1/kb/articles/KB-1", json={"title": "T", "body": "back"}),
            ci.post("/api/v1/kb/sync", json={"articles": [{"article_id": "KB-2", "title": "T", "body": "x"}], "delete_missing": True}),
        ]
        assert [c.status_code for c in calls] == [201, 200, 200, 200, 200, 200]
    assert seen and set(seen) == {"INSERT"}
    after = rows(session)
    assert {k: after[k] for k in before} == before
    assert [after[("KB-1", n)][2:4] for n in range(1, 7)] == [
        ("one", "current"), ("two", "current"), ("two", "deprecated"), ("two", "deleted"), ("back", "current"), ("back", "deleted")]
    # the changed text as revision 2, then deleted (revision 3) as missing from the sync
    assert [after[("KB-9", n)][2:4] for n in (1, 2, 3)] == [("b", "current"), ("changed", "current"), ("changed", "deleted")]


def test_the_mapper_refuses_to_change_a_stored_revision(session: Session) -> None:
    sync.import_kb(session=session, data=b'{"article_id": "KB-9", "revision": 1, "title": "T", "body": "b", "status": "current", "effective_date": "2026-01-01"}\n', path="kb.jsonl")
    session.commit()
    row = session.exec(select(KbRevision)).one()
    row.body = "rewritten"
    session.add(row)
    with pytest.raises(KbRevisionImmutable):
        session.flush()
    session.rollback()
    with pytest.raises(KbRevisionImmutable):
        session.delete(session.exec(select(KbRevision)).one())
        session.flush()
    session.rollback()
    assert session.exec(select(KbRevision)).one().body == "b"
