"""Issue 43, done means: the demo's PPI run is decided by the sequence, and its page draws the sequence's path against the
threshold (plotly) with the stored decision marked, and shows the decision with its time and grades."""

from __future__ import annotations

import re

from tests.browser_support import sign_in, wait_until
from webapp.demo import content as c
from webapp.ppi.demo import RUN_NAME


def test_the_demo_ppi_page_shows_the_sequences_decision_and_draws_it_on_the_path(demo_server, new_page) -> None:  # type: ignore[no-untyped-def]
    email = next(e for key, e, _n, _r in c.DEMO_USERS if key == "lead")
    page = new_page()
    sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
    page.goto(f"{demo_server.url}/ppi/runs/{RUN_NAME}")
    state = page.locator("#ppi-until-state").inner_text()
    assert "graded until decided" in state and email in state
    decided = page.locator("#ppi-decisions-table tr:has(.ppi-decided)")
    assert decided.count() >= 1
    row = decided.first
    said = row.locator(".ppi-decided").inner_text()
    match = re.fullmatch(r"decided (pass|fail) \d{4}-\d\d-\d\d \d\d:\d\d UTC on (\d+) grades", said)
    assert match is not None, said
    verdict, grades = match.group(1), int(match.group(2))
    assert grades >= 30
    badge = {"pass": "passes", "fail": "fails"}[verdict]
    assert row.locator(".badge").inner_text() == badge
    # the chart of that criterion: the band, the threshold's dashed line, and the star where the decision was made
    wait_until(page, "document.querySelectorAll('.ppi-sequence-path[data-drawn]').length === 4")
    charts = page.evaluate(
        "[...document.querySelectorAll('.ppi-sequence-path')].map(el => ({title: el.layout.title.text,"
        " traces: el.data.map(t => ({name: t.name, x: t.x})), lines: el.layout.shapes.map(s => [s.y0, s.line.dash])}))"
    )
    title = row.locator("th").inner_text()
    (chart,) = [ch for ch in charts if ch["title"] == title]
    star = [t for t in chart["traces"] if t["name"].startswith("decided")]
    assert len(star) == 1 and star[0]["x"] == [grades] and star[0]["name"] == f"decided: {badge}"
    threshold = float(row.get_attribute("data-threshold") or "nan")
    assert chart["lines"] == [[threshold, "dash"]]
    assert page.locator("#ppi-sequence-paths .ppi-sequence-path .main-svg").count() >= 4
    # the calls hold while drawn drafts wait (graded in draw order): not marked provisional, and no further sample offered
    assert page.locator(".badge.provisional").count() == 0
    assert page.locator("form[action$='/further-sample']").count() == 0


def test_the_lead_stops_grading_until_decided_with_the_pages_button(demo_server, new_page) -> None:  # type: ignore[no-untyped-def]
    email = next(e for key, e, _n, _r in c.DEMO_USERS if key == "lead")
    page = new_page()
    sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
    page.goto(f"{demo_server.url}/ppi/runs/{RUN_NAME}")
    button = page.locator("#ppi-until-decided-stop button[type=submit]")
    assert button.inner_text() == "Stop grading until decided"
    decided = page.locator("#ppi-decisions-table .ppi-decided").count()
    assert decided >= 1
    button.click()
    page.wait_for_url(f"{demo_server.url}/ppi/runs/{RUN_NAME}")
    body = page.locator("main").inner_text()
    assert f"{RUN_NAME}: no longer graded until decided; the queue serves the whole sample again; stored decisions stay." in body
    assert "This run is not graded until decided" in page.locator("#ppi-until-state").inner_text()
    assert page.locator("#ppi-until-decided-stop").count() == 0
    assert page.locator("#ppi-decisions-table .ppi-decided").count() == decided  # the stored decisions stay
