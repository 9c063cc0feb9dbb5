"""Every demo role in Chromium: the navigation shows the entries that role should see and each opens
without an error; then every page the role can reach (crawled) runs under the CSP without a violation."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from tests.browser_support import sign_in
from webapp.demo import content as c
from webapp.web.navigation import NAV

_ALL = {"labeler", "lead", "pm", "support_lead", "ml_lead", "admin"}
# Who should see each entry, written out here (the app derives it from the routes' role checks).
EXPECTED_ROLES = {
    "/": _ALL,
    "/grading": {"labeler", "lead"},
    "/grading/adjudication": {"lead"},
    "/grading/agreement": {"lead", "pm"},
    "/runs": _ALL,
    "/regression": {"lead", "pm", "admin", "support_lead", "ml_lead", "labeler"},
    "/evaluator/runs": {"lead", "pm", "ml_lead", "admin"},
    "/datasets": {"lead", "pm", "admin", "labeler"},
    "/kb": _ALL,
    "/metrics": {"support_lead", "pm", "lead", "ml_lead", "admin"},  # issue 41 item 7: the ML lead's nav has Metrics
    "/metrics/hallucinations": {"lead", "support_lead"},
    "/reviews": {"pm", "support_lead"},
    "/gates": {"pm", "support_lead", "lead", "ml_lead", "admin"},
    "/survey": {"support_lead", "pm", "lead", "ml_lead", "admin"},
    "/admin": {"admin"},
}
# Pages of one kind (a run, a draft, a case...) are crawled once each: ids are folded together.
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


def _crawl(page, base: str, key: str, problems: list[str]) -> int:  # type: ignore[no-untyped-def]
    """Follow same-site links from / (one page per kind); record CSP violations; return the pages seen."""
    queue, kinds, visited = ["/"], set(), 0
    while queue and len(kinds) < MAX_PAGES_PER_ROLE:
        path = queue.pop(0)
        if _kind(urlsplit(path).path) in kinds:
            continue
        kinds.add(_kind(urlsplit(path).path))
        page.console_errors.clear()
        response = page.goto(f"{base}{path}")
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
    return visited


def test_every_role_opens_its_navigation_and_no_page_breaks_the_csp(demo_server, new_page) -> None:  # type: ignore[no-untyped-def]
    nav_problems: list[str] = []
    csp_problems: list[str] = []
    opened = crawled = 0
    seen_roles: set[str] = set()
    for key, email, _name, roles in c.DEMO_USERS:
        page = new_page()
        page.add_init_script(COLLECT)
        sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
        hrefs = [a.get_attribute("href") for a in page.locator("nav.mainnav a").all()]
        expected = [item.href for item in NAV if set(roles) & EXPECTED_ROLES[item.href]]
        if hrefs != expected:
            nav_problems.append(f"{key}: navigation shows {hrefs}, expected {expected}")
        for href in hrefs:
            page.console_errors.clear()
            response = page.goto(f"{demo_server.url}{href}")
            page.wait_for_load_state("networkidle")
            status = response.status if response else 0
            if status >= 400:
                nav_problems.append(f"{key} {href}: HTTP {status}")
            if page.console_errors:
                nav_problems.append(f"{key} {href}: console errors {page.console_errors}")
            opened += 1
        if not set(roles) <= seen_roles:  # a second user of the same role sees the same pages
            seen_roles |= set(roles)
            crawled += _crawl(page, demo_server.url, key, csp_problems)
        page.context.close()
    assert opened >= len(c.DEMO_USERS) * 3
    assert nav_problems == [], "\n".join(nav_problems)
    assert crawled >= 40
    assert csp_problems == [], "\n".join(csp_problems)
