"""On a phone (390 px) the pages of the daily loops do not scroll sideways: wide tables scroll in their card."""

from __future__ import annotations

import pytest

from tests.browser_support import sign_in
from webapp.demo import content as c

pytestmark = pytest.mark.browser

PAGES = {
    "pm.novak@demo.draftdesk": [
        "/runs/compare?a=demo-run-1&b=demo-run-1",
        "/runs/compare/cases/golden-regression-2fa?a=demo-run-1&b=demo-run-1",
        "/runs/demo-run-1/checks",
        "/reviews",
        "/gates/pilot?run=demo-run-1",
        "/metrics",
    ],
    "lead.chen@demo.draftdesk": ["/metrics/hallucinations?status=all", "/grading", "/regression"],
}


def test_no_horizontal_scroll_at_390px(demo_server, browser) -> None:  # type: ignore[no-untyped-def]
    problems = []
    for email, paths in PAGES.items():
        ctx = browser.new_context(viewport={"width": 390, "height": 844})
        page = ctx.new_page()
        sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
        for path in paths:
            response = page.goto(f"{demo_server.url}{path}")
            assert response is not None and response.status == 200, path
            page.wait_for_load_state("networkidle")
            overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            if overflow > 0:
                problems.append(f"{path} ({email}): {overflow} px wider than the screen")
        ctx.close()
    assert problems == []


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
}


def _overflow(page) -> int:  # type: ignore[no-untyped-def]
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def test_dataset_draft_and_review_pages_do_not_scroll_sideways(demo_server, browser) -> None:  # type: ignore[no-untyped-def]
    problems = []
    opened = 0
    for email, steps in FOLLOW.items():
        ctx = browser.new_context(viewport={"width": 390, "height": 844})
        page = ctx.new_page()
        sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
        for start, selector in steps:
            page.goto(f"{demo_server.url}{start}")
            href = page.locator(selector).first.get_attribute("href")
            assert href, f"no link {selector} on {start}"
            targets = [href]
            if href.startswith("/datasets/"):
                page.goto(f"{demo_server.url}{href}")
                case = page.locator("main a[href*='/cases/']").first.get_attribute("href")
                assert case, "no case link on the dataset page"
                targets.append(case)
            for target in targets:
                response = page.goto(f"{demo_server.url}{target}")
                assert response is not None and response.status == 200, target
                page.wait_for_load_state("networkidle")
                opened += 1
                if _overflow(page) > 0:
                    problems.append(f"{target} ({email}): {_overflow(page)} px wider than the screen")
        ctx.close()
    assert opened >= 6
    assert problems == []


def test_lead_navigation_is_compact_on_a_phone(demo_server, browser) -> None:  # type: ignore[no-untyped-def]
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    page = ctx.new_page()
    sign_in(page, demo_server.url, "lead.chen@demo.draftdesk", c.DEMO_PASSWORD)
    page.goto(f"{demo_server.url}/metrics/hallucinations")
    header = page.locator("header.topbar").bounding_box()
    assert header is not None and header["height"] <= 110, f"the header takes {header} px"
    assert _overflow(page) <= 0
    links = page.locator("nav.mainnav a")
    assert links.count() >= 10  # every entry is still there, in a strip that scrolls inside itself
    strip = page.evaluate(
        "(() => { const n = document.querySelector('nav.mainnav'); const r = n.getBoundingClientRect();"
        " const cur = n.querySelector('[aria-current=page]').getBoundingClientRect();"
        " return {scrolls: n.scrollWidth > n.clientWidth, left: r.left, right: r.right, curLeft: cur.left, curRight: cur.right}; })()"
    )
    assert strip["scrolls"]
    # the current entry (near the end of the lead's list) was scrolled into the strip
    assert strip["left"] <= strip["curLeft"] and strip["curRight"] <= strip["right"], strip
    # a tap on an entry opens it
    page.locator("nav.mainnav a[href='/grading']").click()
    page.wait_for_url("**/grading")
    ctx.close()


def test_ppi_figures_stack_as_cards_on_a_phone_and_stay_a_table_on_a_desktop(demo_server, browser) -> None:
    """/ppi/runs/{run}: at 390 px every figure is a card (its name on top, one labelled line per column),
    so neither the page nor a table scrolls sideways; at desktop width the figures stay one row each."""
    layout = (
        "(() => { const rows = [...document.querySelectorAll('table.ppi-figures tbody tr')];"
        " return {"
        "  overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,"
        "  tablesScrolling: [...document.querySelectorAll('main table')].filter(t => t.scrollWidth > t.clientWidth).length,"
        "  headVisible: document.querySelector('table.ppi-figures thead').getBoundingClientRect().height > 2,"
        "  rows: rows.map(tr => { const th = tr.querySelector('th').getBoundingClientRect();"
        "    const cells = [...tr.querySelectorAll('td')].map(td => td.getBoundingClientRect());"
        "    return {right: tr.getBoundingClientRect().right, thBottom: th.bottom, thTop: th.top,"
        "            tops: cells.map(r => r.top), label: getComputedStyle(tr.querySelector('td'), '::before').content}; }),"
        " }; })()"
    )
    seen = {}
    for width in (390, 1360):
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        page = ctx.new_page()
        sign_in(page, demo_server.url, "lead.chen@demo.draftdesk", c.DEMO_PASSWORD)
        response = page.goto(f"{demo_server.url}/ppi/runs/demo-ppi")
        assert response is not None and response.status == 200
        page.wait_for_load_state("networkidle")
        seen[width] = page.evaluate(layout)
        ctx.close()
    phone, desktop = seen[390], seen[1360]
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
