"""Admin pages: users, tokens, imports by upload; only admins get in."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.conftest import login
from tests.datasets.helpers import count_rows
from tests.factories import make_dataset, make_run, make_user
from webapp.auth import service as auth_service
from webapp.auth.models import ApiToken, User
from webapp.datasets.models import Dataset, EvalCase
from webapp.grading.grades import record_grade
from webapp.grading.scores import validate_scores
from webapp.kb.models import KbArticle, KbRevision
from webapp.runs.models import Draft, Run

ADMIN_GETS = ["/admin", "/admin/users", "/admin/tokens", "/admin/imports"]
ADMIN_POSTS = ["/admin/users", "/admin/users/1/active", "/admin/tokens", "/admin/tokens/1/revoke", "/admin/imports/kb", "/admin/imports/dataset", "/admin/imports/drafts"]


def kb_line(aid: str, status: str = "current", **extra: object) -> str:
    rec = {"article_id": aid, "revision": 1, "title": aid, "body": "Body", "status": status, "effective_date": "2026-01-01", **extra}
    return json.dumps(rec)


class TestAccess:
    # (posts without a CSRF token are refused: tests/test_route_security.py, for every route)
    @pytest.mark.parametrize("role", ["labeler", "lead", "pm", "support_lead"])
    def test_other_roles_get_403_everywhere(self, client_as: Callable[..., TestClient], role: str) -> None:
        c = client_as(role)
        for url in ADMIN_GETS:
            assert c.get(url).status_code == 403, url
        for url in ADMIN_POSTS:
            assert c.post(url).status_code == 403, url


class TestUsers:
    def test_pages_load_then_create_and_deactivate(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        admin = client_as("admin")
        for url in ADMIN_GETS:
            assert admin.get(url).status_code == 200, url
        r = admin.post(
            "/admin/users",
            data={"email": "new.agent@example.test", "name": "New <Agent>", "password": "a-long-password", "role": ["labeler", "lead"]},
            follow_redirects=True,
        )
        assert r.status_code == 200 and "Created new.agent@example.test" in r.text
        assert "New &lt;Agent&gt;" in r.text
        user = auth_service.get_user_by_email(session=session, email="new.agent@example.test")
        assert auth_service.user_roles(session=session, user_id=user.id) == {"labeler", "lead"}
        # The new user signs in, then is deactivated: the session stops working at once.
        agent = TestClient(admin.app)
        login(agent, "new.agent@example.test", "a-long-password")
        assert agent.get("/kb").status_code == 200
        r = admin.post(f"/admin/users/{user.id}/active", data={"active": "0"}, follow_redirects=True)
        assert "deactivated" in r.text
        assert agent.get("/kb", follow_redirects=False).status_code == 303
        session.expire_all()
        assert session.get(User, user.id).is_active is False
        admin.post(f"/admin/users/{user.id}/active", data={"active": "1"})
        session.expire_all()
        assert session.get(User, user.id).is_active is True

    def test_bad_input_and_deactivating_oneself_are_explained(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        c = client_as("admin", email="boss@example.test")
        r = c.post("/admin/users", data={"email": "x@example.test", "password": "short", "role": ["pm"]})
        assert r.status_code == 400 and "at least 8 characters" in r.text
        r = c.post("/admin/users", data={"email": "y@example.test", "password": "long-enough-1"})
        assert r.status_code == 400 and "role" in r.text
        me = auth_service.get_user_by_email(session=session, email="boss@example.test")
        r = c.post(f"/admin/users/{me.id}/active", data={"active": "0"})
        assert r.status_code == 400 and "cannot deactivate yourself" in r.text


class TestTokens:
    def test_create_shows_token_once_then_revoke(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        admin = client_as("admin", email="root@example.test")
        r = admin.post(
            "/admin/tokens", data={"email": "root@example.test", "name": "pilot tool", "scope": ["ingest"]},
            follow_redirects=False,
        )
        assert r.status_code == 303
        created_url = r.headers["location"]
        r = admin.get(created_url)
        assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
        plain = r.text.split('id="plain-token">')[1].split("<")[0]
        assert plain.startswith("dd_")
        # A reload neither shows the token again nor creates a second one.
        again = admin.get(created_url)
        assert again.status_code == 200 and plain not in again.text and "already shown once" in again.text
        token = session.exec(select(ApiToken).where(ApiToken.name == "pilot tool")).one()
        assert token.scope_list == ["ingest"] and plain not in token.token_hash
        listing = admin.get("/admin/tokens").text
        assert token.prefix in listing and plain not in listing
        api = TestClient(admin.app, headers={"Authorization": f"Bearer {plain}"})
        assert api.get("/api/v1/whoami").status_code == 200
        r = admin.post(f"/admin/tokens/{token.id}/revoke", follow_redirects=True)
        assert "revoked" in r.text
        assert api.get("/api/v1/whoami").status_code == 401
        r = admin.post("/admin/tokens", data={"email": "root@example.test", "name": "x", "scope": ["pm"]})
        assert r.status_code == 400 and "does not hold the role pm" in r.text


class TestImports:
    def test_kb_dataset_drafts_upload_and_bad_files(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        admin = client_as("admin")
        kb = "\n".join([kb_line("KB-1"), kb_line("KB-2")]).encode()
        r = admin.post("/admin/imports/kb", files={"file": ("kb.jsonl", kb)})
        assert r.status_code == 200 and "2 revision(s) stored" in r.text
        ds = b'{"id": "a", "input": "x", "category": "routine"}\n{"id": "b", "input": "y"}\n'
        r = admin.post("/admin/imports/dataset", files={"file": ("eval.jsonl", ds)}, data={"name": "support"})
        assert r.status_code == 200 and "support version 1 imported" in r.text
        r = admin.post("/admin/imports/dataset", files={"file": ("eval.jsonl", ds)}, data={"name": "support"})
        assert "Nothing to import" in r.text and "already holds this file" in r.text
        drafts = b'{"case_id": "a", "draft_text": "Hi", "confidence": 0.9}\n{"case_id": "b", "draft_text": null, "escalated": true}\n'
        r = admin.post("/admin/imports/drafts", files={"file": ("d.jsonl", drafts)}, data={"run": "r1", "dataset": "support", "model": "m"})
        assert r.status_code == 200 and "2 draft(s) created" in r.text
        session.expire_all()
        assert count_rows(session, KbRevision) == 2 and count_rows(session, EvalCase) == 2 and count_rows(session, Draft) == 2
        r = admin.post("/admin/imports/dataset", files={"file": ("data.csv", b"id,input\n")})
        assert r.status_code == 400 and "Unsupported dataset file format: .csv. Supported formats: .jsonl, .yaml, .yml" in r.text
        r = admin.post("/admin/imports/kb", data={"x": "1"})
        assert r.status_code == 400 and "choose a file" in r.text

    @pytest.mark.parametrize("kind", ["kb", "dataset", "drafts"])
    def test_bad_line_500_of_600_shows_file_line_and_writes_nothing(self, session: Session, client_as: Callable[..., TestClient], kind: str) -> None:
        admin = client_as("admin")
        data: dict[str, str] = {}
        if kind == "kb":
            lines = [kb_line(f"KB-{i}") for i in range(1, 601)]
            lines[499] = kb_line("KB-500", status="archived")
        elif kind == "dataset":
            lines = [json.dumps({"id": f"c{i}", "input": "x"}) for i in range(1, 601)]
            lines[499] = json.dumps({"id": "c1", "input": "dup"})
        else:
            admin.post("/admin/imports/dataset", files={"file": ("eval.jsonl", "".join(json.dumps({"id": f"c{i}", "input": "x"}) + "\n" for i in range(1, 601)).encode())})
            lines = [json.dumps({"case_id": f"c{i}", "draft_text": "x"}) for i in range(1, 601)]
            lines[499] = json.dumps({"case_id": "c500", "draft_text": "x", "confidence": "high"})
            data = {"run": "bad-run", "dataset": "eval"}
        r = admin.post(f"/admin/imports/{kind}", files={"file": ("big.jsonl", "\n".join(lines).encode())}, data=data)
        assert r.status_code == 400
        assert "big.jsonl:500:" in r.text and "Nothing was written" in r.text
        session.expire_all()
        assert count_rows(session, KbArticle) == 0 and count_rows(session, Run) == 0
        assert count_rows(session, Dataset) == (1 if kind == "drafts" else 0)

    def test_upload_cannot_change_graded_drafts(self, session: Session, client_as: Callable[..., TestClient], spec) -> None:  # type: ignore[no-untyped-def]
        admin = client_as("admin")
        admin.post("/admin/imports/dataset", files={"file": ("eval.jsonl", b'{"id": "a", "input": "x"}\n')}, data={"name": "eval"})
        admin.post("/admin/imports/drafts", files={"file": ("d.jsonl", b'{"case_id": "a", "draft_text": "Hi"}\n')}, data={"run": "r1", "dataset": "eval"})
        session.expire_all()
        draft = session.exec(select(Draft)).one()
        grader = make_user(session, email="g@example.test", roles=["labeler"])
        scores = validate_scores(spec=spec, data={"factual_accuracy": "pass", "citation_relevance": 4, "tone": 4, "completeness": 4})
        record_grade(session=session, spec=spec, draft_id=draft.id, grader_id=grader.id, scores=scores)  # type: ignore[arg-type]
        session.commit()
        r = admin.post("/admin/imports/drafts", files={"file": ("d.jsonl", b'{"case_id": "a", "draft_text": "Bye"}\n')}, data={"run": "r1"})
        assert r.status_code == 400 and "d.jsonl:1:" in r.text and "a (line 1, 1 grade)" in r.text
        session.expire_all()
        assert session.exec(select(Draft)).one().draft_text == "Hi"


def test_home_cards_admin_sees_what_to_import_then_everyone_the_newest_run(
    session: Session, client_as: Callable[..., TestClient]
) -> None:
    r = client_as("admin").get("/")
    assert "No KB yet — import one" in r.text and "No dataset yet" in r.text and "No runs yet" in r.text
    ds = make_dataset(session, [{"case_id": "a"}])
    make_run(session, ds, [{"case_id": "a", "draft_text": "x"}], name="older")
    make_run(session, ds, [], name="newest-one")
    session.commit()
    r = client_as("labeler").get("/")
    assert "Newest run: newest-one" in r.text and "No KB yet" not in r.text
