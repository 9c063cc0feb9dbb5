"""KB browser pages and the KB API."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.factories import make_article


@pytest.fixture
def kb(session: Session) -> None:
    make_article(session, "KB-1042", title="Annual add-on renewals", intent="billing_charge", body="Add-ons bill on their own cycle.")
    make_article(session, "KB-3001", [(2, "deprecated"), (4, "current")], title="Two-factor <authentication>", intent="account_security")
    make_article(session, "KB-9000", [(1, "deleted")], title="Fax support")
    session.commit()


class TestKbList:
    def test_lists_and_searches(self, kb: None, client_as: Callable[..., TestClient]) -> None:
        c = client_as("labeler")
        r = c.get("/kb")
        assert r.status_code == 200
        for aid in ("KB-1042", "KB-3001", "KB-9000"):
            assert aid in r.text
        assert "Two-factor &lt;authentication&gt;" in r.text  # escaped
        r = c.get("/kb", params={"q": "renewals"})
        assert 'href="/kb/KB-1042"' in r.text and 'href="/kb/KB-3001"' not in r.text
        r = c.get("/kb", params={"q": "security"})
        assert 'href="/kb/KB-3001"' in r.text and 'href="/kb/KB-1042"' not in r.text
        r = c.get("/kb", params={"status": "deleted"})
        assert 'href="/kb/KB-9000"' in r.text and 'href="/kb/KB-1042"' not in r.text
        assert "No article matches" in c.get("/kb", params={"q": "zzz"}).text
        r = c.get("/kb", params={"q": "KB-10"}, headers={"HX-Request": "true"})  # htmx: only the results
        assert r.status_code == 200 and 'href="/kb/KB-1042"' in r.text and "<html" not in r.text

    def test_empty_state_tells_admin_to_import(self, client_as: Callable[..., TestClient]) -> None:
        r = client_as("admin").get("/kb")
        assert "The knowledge base is empty" in r.text and "/admin/imports" in r.text


class TestKbArticle:
    def test_shows_every_revision_with_status(self, kb: None, client_as: Callable[..., TestClient]) -> None:
        r = client_as("support_lead").get("/kb/KB-3001")
        assert r.status_code == 200
        assert 'id="rev-4"' in r.text and 'id="rev-2"' in r.text
        assert "deprecated — must not be cited" in r.text
        assert r.text.index('id="rev-4"') < r.text.index('id="rev-2"')  # newest first
        r = client_as("lead").get("/kb/KB-9000")
        assert "deleted — must not be cited" in r.text
        assert client_as("pm").get("/kb/KB-0").status_code == 404  # an unknown article

    def test_anonymous_is_sent_to_login(self, client: TestClient) -> None:
        r = client.get("/kb", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login")


class TestKbApi:
    def test_articles_json(self, kb: None, api_as: Callable[..., TestClient]) -> None:
        r = api_as("pm").get("/api/v1/kb/articles")
        assert r.status_code == 200
        by_id = {a["article_id"]: a for a in r.json()}
        assert by_id["KB-3001"]["current_revision"] == 4
        assert [(v["revision"], v["status"]) for v in by_id["KB-3001"]["revisions"]] == [(4, "current"), (2, "deprecated")]
        assert by_id["KB-9000"]["status"] == "deleted"

    def test_ingest_only_token_is_refused(self, api_as: Callable[..., TestClient]) -> None:
        assert api_as(scopes=["ingest"]).get("/api/v1/kb/articles").status_code == 403
