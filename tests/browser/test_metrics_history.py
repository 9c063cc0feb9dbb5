"""/metrics: a dropdown applies on change; pressing Apply afterwards adds no second history entry (issue 25, item 12)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import sign_in
from tests.browser.test_metrics_page import _seed_varied
from tests.browser_support import wait_until

pytestmark = pytest.mark.browser

IDLE = "!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
DRAWN = (
    "Array.from(document.querySelectorAll('.metrics-chart')).every(el => el.dataset.drawn"
    " && el.querySelector('.main-svg') && el.data && JSON.stringify(el.data[0].y)"
    " === JSON.stringify(JSON.parse(el.getAttribute('data-figure')).data[0].y))"
)


def test_one_dropdown_change_is_one_history_entry_and_back_returns(live_server: Any, new_page: Any) -> None:
    live_server.seed(_seed_varied)
    page = new_page()
    sign_in(page, live_server.url, "sl@example.test")
    first = f"{live_server.url}/metrics?start=2026-11-02&end=2026-11-22"
    page.goto(first)
    wait_until(page, DRAWN)
    before = page.evaluate("history.length")

    page.select_option("select[name=intent]", "plan_change")  # applies at once
    wait_until(page, f"{IDLE} && document.getElementById('metrics-results').innerText.includes('intent = plan_change')")
    assert page.evaluate("history.length") == before + 1
    assert "intent=plan_change" in page.url

    # Apply, out of habit: the same view again, fetched, but no second entry
    with page.expect_response(lambda r: "/metrics?" in r.url and r.request.headers.get("hx-request") == "true") as answer:
        page.click("form.metrics-filters button[type=submit]")
    assert answer.value.headers.get("hx-push-url") == "false"
    wait_until(page, f"{IDLE} && {DRAWN}")
    assert page.evaluate("history.length") == before + 1

    # another change is another entry
    page.select_option("select[name=plan]", "pro")
    wait_until(page, f"{IDLE} && document.getElementById('metrics-results').innerText.includes('plan = pro')")
    assert page.evaluate("history.length") == before + 2

    # Back twice: the intent-only view, then the first one, each drawn
    page.go_back()
    wait_until(page, f"location.search.includes('intent=plan_change') && !location.search.includes('plan=pro') && {IDLE}")
    wait_until(page, f"document.querySelector('select[name=plan]').value === '' && {DRAWN}")
    assert page.evaluate("document.querySelector('select[name=intent]').value") == "plan_change"
    page.go_back()
    wait_until(page, f"location.href === '{first}' && {IDLE}")
    wait_until(page, f"document.querySelector('select[name=intent]').value === '' && {DRAWN}")
    assert "intent = " not in page.locator("#metrics-results").inner_text()
    assert page.console_errors == []
