"""No page shows a link its viewer cannot open: crawl the demo as each role and follow every link."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from html import unescape
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.conftest import SPEC_PATH, TEST_SECRET, DemoTemplate, login
from webapp.app.main import create_app
from webapp.core.config import Settings
from webapp.demo.content import DEMO_PASSWORD, DEMO_USERS
from webapp.web.links import rule_for

# Each test here takes more than a few seconds (see docs/development.md: running subsets).
pytestmark = pytest.mark.slow


ROLE_EMAILS = {roles[0]: email for key, email, _, roles in DEMO_USERS if key != "labeler2"}
# Links that change state or leave the page tree are not followed.
SKIP_PREFIXES = ("/static/", "/api/", "/logout", "/login")
HREF = re.compile(r"""<a\b[^>]*?\bhref="([^"#][^"]*)\"""", re.IGNORECASE)


@pytest.fixture(scope="module")
def demo_app(tmp_path_factory: pytest.TempPathFactory, demo_template: DemoTemplate) -> Iterator[FastAPI]:
    """The app over a copy of the seeded demo (SQLite: the links shown do not depend on the backend)."""
    db = demo_template.copy("sqlite", tmp_path_factory.mktemp("crawl"))
    app = create_app(Settings(database_url=db, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH))
    yield app
    app.state.engine.dispose()


def crawl(
    client: TestClient, app: FastAPI, start: Iterable[str],
    *, per_pattern: int, max_pages: int, max_depth: int = 999,
) -> Iterator[tuple[str, str, httpx.Response]]:
    """Yield (url, the page linking to it, its answer) breadth-first from `start`, following the links of each
    page that is not a 403 (to `max_depth`), at most `per_pattern` links to each route."""
    queue = deque((url, "(start)", 0) for url in start)
    seen = {url for url, _, _ in queue}
    counts: dict[str, int] = {}
    for _ in range(max_pages):
        if not queue:
            return
        url, source, depth = queue.popleft()
        r = client.get(url, follow_redirects=True)
        yield url, source, r
        if r.status_code == 403 or depth >= max_depth or "text/html" not in r.headers.get("content-type", ""):
            continue
        for href in HREF.findall(r.text):
            target = unescape(href)
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or not parts.path.startswith("/"):
                continue
            if parts.path.startswith(SKIP_PREFIXES):
                continue
            rule = rule_for(app, parts.path)  # the route a path matches: visit a few of each kind
            key = rule.path if rule else parts.path
            if target not in seen and counts.get(key, 0) < per_pattern:
                counts[key] = counts.get(key, 0) + 1
                seen.add(target)
                queue.append((target, url, depth + 1))


@pytest.mark.parametrize("role", sorted(ROLE_EMAILS))
def test_no_visible_link_leads_to_403(demo_app: FastAPI, role: str) -> None:
    with TestClient(demo_app) as client:
        login(client, ROLE_EMAILS[role], DEMO_PASSWORD)
        forbidden: list[str] = []
        pages = 0
        for url, source, r in crawl(client, demo_app, ["/"], per_pattern=3, max_pages=400):
            pages += 1
            assert r.status_code < 500, f"{url} -> {r.status_code}"
            if r.status_code == 403:
                forbidden.append(f"{url} (linked from {source})")
        assert pages > 10, "the crawl reached too few pages to mean anything"
        assert forbidden == [], f"{role} sees links to pages that answer 403:\n" + "\n".join(forbidden)
