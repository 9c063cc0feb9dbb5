"""No page shows a link its viewer cannot open: crawl the demo as each role and follow every link."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from html import unescape
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.conftest import SPEC_PATH, TEST_SECRET, DemoTemplate, login
from webapp.config import Settings
from webapp.links import rule_for
from webapp.main import create_app

# Each test here takes more than a few seconds (see docs/development.md: running subsets).
pytestmark = pytest.mark.slow


DEMO_PASSWORD = "demo-password"
ROLE_EMAILS = {
    "labeler": "agent.rivera@demo.draftdesk",
    "lead": "lead.chen@demo.draftdesk",
    "pm": "pm.novak@demo.draftdesk",
    "support_lead": "support.haddad@demo.draftdesk",
    "ml_lead": "ml.ito@demo.draftdesk",
    "admin": "admin@demo.draftdesk",
}
# Links that change state or leave the page tree are not followed.
SKIP_PREFIXES = ("/static/", "/api/", "/logout", "/login")
PER_PATTERN = 3
HREF = re.compile(r"""<a\b[^>]*?\bhref="([^"#][^"]*)\"""", re.IGNORECASE)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory, demo_template: DemoTemplate) -> str:
    """A copy of the seeded demo (SQLite: what links a page shows does not depend on the backend)."""
    return demo_template.copy("sqlite", tmp_path_factory.mktemp("crawl"))


@pytest.fixture(scope="module")
def demo_app(demo_db: str) -> Iterator[FastAPI]:
    app = create_app(
        Settings(database_url=demo_db, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH)
    )
    yield app
    app.state.engine.dispose()


def _pattern(app: FastAPI, path: str) -> str:
    """Return the route template a path matches (so the crawl visits a few of each kind)."""
    rule = rule_for(app, path)
    return rule.path if rule else path


@pytest.mark.parametrize("role", sorted(ROLE_EMAILS))
def test_no_visible_link_leads_to_403(demo_app: FastAPI, role: str) -> None:
    with TestClient(demo_app) as client:
        login(client, ROLE_EMAILS[role], DEMO_PASSWORD)
        seen: set[str] = set()
        per_pattern: dict[str, int] = {}
        queue: deque[tuple[str, str]] = deque([("/", "(start)")])
        forbidden: list[str] = []
        pages = 0
        while queue and pages < 400:
            url, source = queue.popleft()
            r = client.get(url, follow_redirects=True)
            pages += 1
            if r.status_code == 403:
                forbidden.append(f"{url} (linked from {source})")
                continue
            assert r.status_code < 500, f"{url} -> {r.status_code}"
            if "text/html" not in r.headers.get("content-type", ""):
                continue
            for href in HREF.findall(r.text):
                target = unescape(href)
                parts = urlsplit(target)
                if parts.scheme or parts.netloc or not parts.path.startswith("/"):
                    continue
                if parts.path.startswith(SKIP_PREFIXES) or target in seen:
                    continue
                key = _pattern(demo_app, parts.path)
                if per_pattern.get(key, 0) >= PER_PATTERN:
                    continue
                per_pattern[key] = per_pattern.get(key, 0) + 1
                seen.add(target)
                queue.append((target, url))
        assert pages > 10, "the crawl reached too few pages to mean anything"
        assert forbidden == [], f"{role} sees links to pages that answer 403:\n" + "\n".join(forbidden)
