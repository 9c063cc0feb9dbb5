"""On a phone (390 px) the pages of the daily loops do not scroll sideways: wide tables scroll in their card."""

from __future__ import annotations

from typing import Any

from tests.browser_support import sign_in
from webapp.demo import content as c

PAGES = {
    "pm.novak@demo.draftdesk": [
        "/runs/compare?a=demo-run-1&b=demo-run-1",
        "/runs/compare/cases/golden-regression-2fa?a=demo-run-1&b=demo-run-1",
        "/runs/demo-run-1/checks",
        "/reviews",
        "/gates/pilot?run=demo-run-1",
        "/metrics",
    ],
    "lead.chen@demo.draftdesk": [
        "/metrics/hallucinations?status=all", "/grading", "/regression",
        # a returned grade's "returned: <comment>" badge (814 px before the grading phone rules)
        "/grading/adjudication?status=rework", "/grading/adjudication?status=open",
    ],
    # a draft the labeler has graded: the model signals' check badges (438 px before)
    "agent.rivera@demo.draftdesk": ["/grading/drafts/1"],
}
# Pages reached by following the first link of a kind from a start page (their ids depend on the demo).
FOLLOW = {
    "pm.novak@demo.draftdesk": [
        ("/datasets", "main a[href^='/datasets/']"),  # a dataset
        ("/runs/demo-run-1", "main a[href^='/drafts/']"),  # a draft
        ("/reviews", "main a[href^='/reviews/20']"),  # a review period
    ],
    "lead.chen@demo.draftdesk": [
        ("/datasets", "main a[href^='/datasets/']"),
        ("/grading", "main a[href^='/grading/runs/']"),
    ],
    "agent.rivera@demo.draftdesk": [],
}
NAV_STRIP = (
    "(() => { const n = document.querySelector('nav.mainnav'); const r = n.getBoundingClientRect();"
    " const cur = n.querySelector('[aria-current=page]').getBoundingClientRect();"
    " return {scrolls: n.scrollWidth > n.clientWidth, left: r.left, right: r.right,"
    " curLeft: cur.left, curRight: cur.right}; })()"
)
PPI_LAYOUT = (
    "(() => { const rows = [...document.querySelectorAll('table.ppi-figures tbody tr')];"
    " return {"
    "  overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,"
    "  tablesScrolling: [...document.querySelectorAll('main table')]"
    "    .filter(t => t.scrollWidth > t.clientWidth).length,"
    "  headVisible: document.querySelector('table.ppi-figures thead').getBoundingClientRect().height > 2,"
    "  rows: rows.map(tr => { const th = tr.querySelector('th').getBoundingClientRect();"
    "    const cells = [...tr.querySelectorAll('td')].map(td => td.getBoundingClientRect());"
    "    return {right: tr.getBoundingClientRect().right, thBottom: th.bottom, thTop: th.top, tops:"
    "      cells.map(r => r.top), label: getComputedStyle(tr.querySelector('td'), '::before').content}; }),"
    " }; })()"
)


def _overflow(page) -> int:  # type: ignore[no-untyped-def]
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def _phone(browser, server, email: str, width: int = 390):  # type: ignore[no-untyped-def]
    page = browser.new_context(viewport={"width": width, "height": 844 if width == 390 else 900}).new_page()
    sign_in(page, server.url, email, c.DEMO_PASSWORD)
    return page


def _open(page, url: str) -> None:  # type: ignore[no-untyped-def]
    response = page.goto(url)
    assert response is not None and response.status == 200, url
    page.wait_for_load_state("networkidle")


def test_no_sideways_scroll_at_390px_and_compact_navigation(demo_server: Any, browser: Any) -> None:
    """Listed pages, then a dataset, a case, a draft and a review period found by following links;
    the lead's navigation is a strip that scrolls inside itself and keeps the current entry in view;
    the PPI figures stack as cards on a phone and stay a table on a desktop."""
    problems = []
    opened = 0
    for email, paths in PAGES.items():
        page = _phone(browser, demo_server, email)
        targets = list(paths)
        for start, selector in FOLLOW[email]:
            page.goto(f"{demo_server.url}{start}")
            href = page.locator(selector).first.get_attribute("href")
            assert href, f"no link {selector} on {start}"
            targets.append(href)
            if href.startswith("/datasets/"):
                page.goto(f"{demo_server.url}{href}")
                case = page.locator("main a[href*='/cases/']").first.get_attribute("href")
                assert case, "no case link on the dataset page"
                targets.append(case)
        for path in targets:
            _open(page, f"{demo_server.url}{path}")
            if path.startswith("/grading/drafts/"):  # the graded draft shows its model signals, badges and all
                assert page.locator(".grading-meta .badge").count() >= 3, path
            if "status=rework" in path:
                assert page.locator(".grading-side .badge", has_text="returned:").count() >= 1, path
            opened += 1
            if _overflow(page) > 0:
                problems.append(f"{path} ({email}): {_overflow(page)} px wider than the screen")
        page.context.close()
    assert opened >= 15
    assert problems == []

    page = _phone(browser, demo_server, "lead.chen@demo.draftdesk")
    page.goto(f"{demo_server.url}/metrics/hallucinations")
    header = page.locator("header.topbar").bounding_box()
    assert header is not None and header["height"] <= 110, f"the header takes {header} px"
    assert _overflow(page) <= 0
    assert page.locator("nav.mainnav a").count() >= 10  # every entry is still there, in a strip that scrolls
    strip = page.evaluate(NAV_STRIP)
    assert strip["scrolls"]
    # the current entry (near the end of the lead's list) was scrolled into the strip
    assert strip["left"] <= strip["curLeft"] and strip["curRight"] <= strip["right"], strip
    page.locator("nav.mainnav a[href='/grading']").click()  # a tap on an entry opens it
    page.wait_for_url("**/grading")

    # /ppi/runs/{run}: at 390 px every figure is a card (its name on top, one labelled line per column),
    # so neither the page nor a table scrolls sideways; at desktop width the figures stay one row each.
    _open(page, f"{demo_server.url}/ppi/runs/demo-ppi")
    phone = page.evaluate(PPI_LAYOUT)
    page.context.close()
    page = _phone(browser, demo_server, "lead.chen@demo.draftdesk", 1360)
    _open(page, f"{demo_server.url}/ppi/runs/demo-ppi")
    desktop = page.evaluate(PPI_LAYOUT)
    page.context.close()
    assert len(phone["rows"]) == 5  # four criteria and the pass rate
    assert phone["overflow"] <= 0 and phone["tablesScrolling"] == 0
    assert not phone["headVisible"]
    for row in phone["rows"]:
        assert row["right"] <= 390
        # the figure's name on top, then its columns one under another, each with its label
        assert all(top >= row["thBottom"] - 1 for top in row["tops"])
        assert row["tops"] == sorted(row["tops"]) and len(set(row["tops"])) == len(row["tops"])
        assert row["label"] == '"Estimate [95%]"'
    assert desktop["overflow"] <= 0 and desktop["tablesScrolling"] == 0 and desktop["headVisible"]
    for row in desktop["rows"]:
        assert all(abs(top - row["thTop"]) <= 1 for top in row["tops"])  # one line of cells
        assert row["label"] in ("none", "normal")
