"""Every page of every role, crawled in Chromium on the demo, runs under the CSP without a single violation."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from tests.browser.conftest import sign_in
from webapp.demo import content as c

pytestmark = pytest.mark.browser

# Pages of one kind (a run, a draft, a case...) are visited once each: ids are folded together.
MAX_PAGES_PER_ROLE = 40
# Injected by Playwright ahead of the page's own scripts (CSP does not apply to it): records violations.
COLLECT = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} at ${e.sourceFile}:${e.lineNumber} ${e.sample}`);
});
"""


def _kind(path: str) -> str:
    return re.sub(r"/\d+", "/N", re.sub(r"/(?:[a-z]+-)+\d{3}\b", "/CASE", path))


def test_no_csp_violation_on_any_page_of_any_role(demo_server, new_page) -> None:  # type: ignore[no-untyped-def]
    problems: list[str] = []
    visited = 0
    seen_roles: set[str] = set()
    for key, email, _name, roles in c.DEMO_USERS:
        if set(roles) <= seen_roles:
            continue  # a second user of the same role sees the same pages
        seen_roles |= set(roles)
        page = new_page()
        page.add_init_script(COLLECT)
        sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
        queue, kinds = ["/"], set()
        while queue and len(kinds) < MAX_PAGES_PER_ROLE:
            path = queue.pop(0)
            if _kind(urlsplit(path).path) in kinds:
                continue
            kinds.add(_kind(urlsplit(path).path))
            page.console_errors.clear()
            response = page.goto(f"{demo_server.url}{path}")
            if response is None or "text/html" not in response.headers.get("content-type", ""):
                continue
            page.wait_for_load_state("networkidle")
            visited += 1
            violations = page.evaluate("window.__csp")
            refused = [m for m in page.console_errors if "Content Security Policy" in m]
            if violations or refused:
                problems.append(f"{key} {path}: {violations or refused}")
            for href in page.eval_on_selector_all("a[href^='/']", "els => els.map(e => e.getAttribute('href'))"):
                last = urlsplit(href).path.rsplit("/", 1)[-1]
                if not href.startswith(("/api/", "/static/", "/logout")) and "." not in last:  # no downloads
                    queue.append(href)
        page.context.close()
    assert visited >= 40
    assert problems == [], "\n".join(problems)
