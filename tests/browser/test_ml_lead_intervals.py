"""The ML lead in Chromium: from the navigation to the judge's runs and a run's intervals, which read "the call holds
while drawn drafts wait" beside a passing figure (the demo's run is graded until decided) and give each undecided figure "about K more drafts"; the page says who draws and that the
gate reads the plan's way."""

from __future__ import annotations

import re

from tests.browser_support import sign_in
from webapp.demo import content as c
from webapp.ppi.demo import RUN_NAME


def test_the_ml_lead_walks_from_the_nav_to_the_intervals_and_the_gate_agrees(demo_server, new_page) -> None:
    email = next(e for key, e, _n, _r in c.DEMO_USERS if key == "ml_lead")
    page = new_page()
    sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
    page.click("nav.mainnav a:has-text('Evaluator & judge')")
    page.wait_for_url(re.compile(r"/evaluator/runs$"))
    judge_rows = page.locator("#judge-runs tbody tr")
    assert judge_rows.count() == 4  # demo-ppi and three production weeks: 257 drafts judged
    page.click(f"#judge-runs a:has-text('Intervals of {RUN_NAME}')")
    page.wait_for_url(re.compile(rf"/ppi/runs/{RUN_NAME}$"))
    rows = {
        page.locator("table.ppi-figures tbody tr").nth(i).locator("th").inner_text(): page.locator("table.ppi-figures tbody tr")
        .nth(i)
        .locator("td[data-label=Gate]")
        .inner_text()
        for i in range(page.locator("table.ppi-figures tbody tr").count())
    }
    factual = rows["Factual accuracy (pass share)"]
    # the demo's run is graded until decided, in draw order: the call holds while drawn drafts wait (not provisional)
    assert factual.startswith("passes") and "the call holds while 3 drawn drafts wait" in factual and "undecided" not in factual
    # each undecided figure says what decides it: K more drafts to draw, or (K within the drafts drawn) grading them
    ks = {
        title: re.search(r"about (\d+) more drafts? to draw would decide|grading the drafts already drawn should decide", text)
        for title, text in rows.items()
        if "undecided" in text
    }
    assert ks and all(m is not None for m in ks.values()), rows
    assert "Team leads draw it" in page.inner_text("main")
    assert page.locator("form[action$='/further-sample']").count() == 0
    # the demo's plan reads human grading the plan's way (gates.human_grading: plan): the page says the gate does not
    # use these intervals, and the gate reads the graded drafts' averages (with intervals chosen, the gate gives the
    # same K: tests/ppi/test_pages_lead_the_way.py)
    assert "the pilot gate does not" in page.inner_text("main")
    page.goto(f"{demo_server.url}/gates/pilot?run={RUN_NAME}")
    gate = page.inner_text("#criterion-human_grading")
    assert "the plan's reading" in gate and "more drafts to draw" not in gate
