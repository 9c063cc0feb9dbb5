"""Exactly one navigation entry is marked current on every page (the longest matching href)."""

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
from webapp.navigation import NAV, current_href

ROLE_EMAILS = {
    "labeler": "agent.rivera@demo.draftdesk",
    "lead": "lead.chen@demo.draftdesk",
    "pm": "pm.novak@demo.draftdesk",
    "support_lead": "support.haddad@demo.draftdesk",
    "admin": "admin@demo.draftdesk",
}
NAV_BLOCK = re.compile(r'<nav class="mainnav"[^>]*>(.*?)</nav>', re.S)
NAV_LINK = re.compile(r'<a href="([^"]+)"([^>]*)>')
HREF = re.compile(r"""<a\b[^>]*?\bhref="([^"#][^"]*)\"""", re.IGNORECASE)
CURRENT = 'aria-current="page"'
ALSO = {"/runs": ("/drafts", "/ppi"), "/": ("/cadence",)}  # a draft's page and a run's PPI page belong to Runs, the review cadence to Home
SKIP_PREFIXES = ("/static/", "/api/", "/logout", "/login")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", "/"),
        ("/grading", "/grading"),
        ("/grading/drafts/12", "/grading"),
        ("/grading/adjudication", "/grading/adjudication"),
        ("/grading/adjudication/4", "/grading/adjudication"),
        ("/grading/agreement", "/grading/agreement"),
        ("/metrics/hallucinations", "/metrics/hallucinations"),
        ("/metrics/day/2026-11-05", "/metrics"),
        ("/admin/alerts", "/admin"),
        ("/gradingx", None),  # a shared prefix is not a folder
        ("/drafts/18", "/runs"),
        ("/login", None),
    ],
)
def test_current_entry_is_the_longest_matching_href(path: str, expected: str | None) -> None:
    assert current_href(list(NAV), path) == expected


@pytest.fixture(scope="module")
def demo_app(tmp_path_factory: pytest.TempPathFactory, demo_template: DemoTemplate) -> Iterator[FastAPI]:
    db = demo_template.copy("sqlite", tmp_path_factory.mktemp("navcrawl"))
    app = create_app(Settings(database_url=db, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH))
    yield app
    app.state.engine.dispose()


def _marked(html: str) -> tuple[list[str], list[str]]:
    """Return (every nav href, the hrefs marked aria-current="page") of a page."""
    block = NAV_BLOCK.search(html)
    if block is None:
        return [], []
    links = NAV_LINK.findall(block.group(1))
    return [h for h, _ in links], [h for h, attrs in links if 'aria-current="page"' in attrs]


@pytest.mark.slow
@pytest.mark.parametrize("role", sorted(ROLE_EMAILS))
def test_every_page_marks_exactly_one_nav_entry(demo_app: FastAPI, role: str) -> None:
    """Open every nav page of the role, then one page of each kind linked from them, and count the marks."""
    problems: list[str] = []
    with TestClient(demo_app) as client:
        login(client, ROLE_EMAILS[role], "demo-password")
        nav, _ = _marked(client.get("/").text)
        assert len(nav) >= 3, nav
        queue: deque[tuple[str, int]] = deque((href, 0) for href in nav)
        seen = set(nav)
        patterns: set[str] = set()
        pages = 0
        while queue and pages < 250:
            url, depth = queue.popleft()
            r = client.get(url)
            if r.status_code != 200 or "text/html" not in r.headers.get("content-type", ""):
                continue
            pages += 1
            hrefs, marked = _marked(r.text)
            path = urlsplit(url).path
            # worked out here without the app's function: the nav hrefs that are the path or a folder above it
            owners = [(len(p), h) for h in hrefs for p in (h, *ALSO.get(h, ())) if path == p or (p != "/" and path.startswith(p + "/"))]
            expected = [max(owners)[1]] if owners else []
            if not expected:
                problems.append(f"{url}: belongs to no navigation entry")
            if marked != expected:
                problems.append(f"{url}: marked {marked}, expected {expected}")
            # and nothing else on the page claims to be the current page (filters use aria-current="true")
            currents = r.text.count(CURRENT)
            if currents != len(expected):
                problems.append(f"{url}: {currents} times {CURRENT} in the page")
            if depth >= 2:
                continue
            for href in HREF.findall(r.text):
                target = unescape(href)
                parts = urlsplit(target)
                if parts.scheme or parts.netloc or not parts.path.startswith("/") or parts.path.startswith(SKIP_PREFIXES):
                    continue
                rule = rule_for(demo_app, parts.path)
                key = rule.path if rule else parts.path
                if target in seen or key in patterns:
                    continue
                patterns.add(key)
                seen.add(target)
                queue.append((target, depth + 1))
        assert pages > len(nav), "the crawl reached too few pages to mean anything"
    assert problems == [], "\n".join(problems)
