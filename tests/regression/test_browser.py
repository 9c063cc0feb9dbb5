"""The PM compares two runs in Chromium: filter the case table, open a case side by side, come back."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from tests.browser_support import sign_in
from tests.checks.conftest import build_world
from tests.factories import make_user
from webapp.checks import service as checks_service
from webapp.core.spec import EvalSpec

pytestmark = pytest.mark.browser


def _seed(session: Session, spec: EvalSpec) -> None:
    world = build_world(session)
    for run in (world.a, world.b):
        checks_service.check_run(session=session, spec=spec, run_id=run.id)
    make_user(session, email="pm@example.test", roles=["pm"])


def test_pm_filters_cases_and_opens_one_side_by_side(live_server, new_page, spec: EvalSpec) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(lambda s: _seed(s, spec))
    page = new_page()
    sign_in(page, live_server.url, "pm@example.test")
    page.goto(f"{live_server.url}/runs/compare?a=run-a&b=run-b")
    rows = page.locator("table.compare-cases tbody tr")
    assert rows.count() == 8
    # 6/8 -> 5/8 of the set's examples: down 12.5 points, the plan's alert fires beside a p of 1.000 (issue 41).
    noise = page.inner_text(".compare-noise")
    assert "3 of 8 cases changed (1 fixed, 2 broke): exact McNemar p = 1.000: the paired test alone cannot rule out chance" in noise
    assert "within noise" not in noise and "down 12.5 points" in page.inner_text("#compare-drop")
    # Filtering swaps the table in place and the URL follows.
    page.select_option("select[name=outcome]", "broke")
    page.wait_for_selector("text=2 of 8 cases")
    assert rows.count() == 2 and "outcome=broke" in page.url
    assert [rows.nth(i).locator("td").first.inner_text().split()[0] for i in range(2)] == ["g1", "s2"]
    page.click("table.compare-cases a:has-text('g1')")
    page.wait_for_url("**/runs/compare/cases/g1?*")
    assert page.locator(".compare-side").count() == 2
    assert "Citations current" in page.locator(".compare-side").nth(1).inner_text()
    page.go_back()
    page.wait_for_selector("text=2 of 8 cases")
    assert page.locator("table.compare-cases tbody tr").count() == 2
    assert page.console_errors == []
