"""Exactly one navigation entry is marked current on every page (the longest matching href)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests import test_link_crawl as link_crawl
from tests.conftest import login
from webapp.demo.content import DEMO_PASSWORD
from webapp.web.navigation import NAV, current_href

ROLE_EMAILS = {r: e for r, e in link_crawl.ROLE_EMAILS.items() if r != "ml_lead"}
NAV_BLOCK = re.compile(r'<nav class="mainnav"[^>]*>(.*?)</nav>', re.S)
NAV_LINK = re.compile(r'<a href="([^"]+)"([^>]*)>')
CURRENT = 'aria-current="page"'
ALSO = {"/runs": ("/drafts", "/ppi"), "/": ("/cadence",)}  # a draft's page and a run's PPI page belong to Runs, the review cadence to Home


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


demo_app = link_crawl.demo_app  # the app over a copy of the seeded demo, one per module


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
        login(client, ROLE_EMAILS[role], DEMO_PASSWORD)
        nav, _ = _marked(client.get("/").text)
        assert len(nav) >= 3, nav
        pages = 0
        for url, _, r in link_crawl.crawl(client, demo_app, nav, per_pattern=1, max_pages=250, max_depth=2):
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
        assert pages > len(nav), "the crawl reached too few pages to mean anything"
    assert problems == [], "\n".join(problems)
