"""Admin flows in Chromium: a new token is shown once with a copy button; an import says it is working."""

from __future__ import annotations

import pytest

from tests.browser_support import sign_in, wait_until
from tests.factories import make_user

pytestmark = pytest.mark.browser


def test_token_is_revealed_once_and_copied(live_server, new_page) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(lambda s: make_user(s, email="root@example.test", roles=["admin"]))
    page = new_page()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    sign_in(page, live_server.url, "root@example.test")
    page.goto(f"{live_server.url}/admin/tokens")
    page.select_option("select[name=email]", "root@example.test")
    page.fill("input[name=name]", "pilot tool")
    page.click("form[action='/admin/tokens'] button[type=submit]")
    page.wait_for_url("**/admin/tokens/*/created")
    plain = page.inner_text("#plain-token")
    assert plain.startswith("dd_")
    page.click("[data-copy-target=plain-token]")
    wait_until(page, "document.querySelector('[data-copy-target]').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()") == plain
    # A reload shows no token and creates none.
    page.reload()
    assert page.locator("#plain-token").count() == 0 and "already shown once" in page.content()
    page.goto(f"{live_server.url}/admin/tokens")
    assert page.content().count("pilot tool") == 1
    assert page.console_errors == []


def test_import_button_says_it_is_working(live_server, new_page, tmp_path) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(lambda s: make_user(s, email="root2@example.test", roles=["admin"]))
    page = new_page()
    sign_in(page, live_server.url, "root2@example.test")
    page.goto(f"{live_server.url}/admin/imports")
    kb = tmp_path / "kb.jsonl"
    kb.write_text('{"article_id": "KB-1", "revision": 1, "title": "T", "body": "B", "status": "current", "effective_date": "2026-01-01"}\n')
    # Stop the navigation after the page's own handlers ran, to look at the form while it is "sending".
    page.evaluate("window.addEventListener('submit', (ev) => ev.preventDefault())")
    form = page.locator("form[action='/admin/imports/kb']")
    form.locator("input[type=file]").set_input_files(str(kb))
    form.locator("button[type=submit]").click()
    wait_until(page, "document.querySelector(\"form[action='/admin/imports/kb'] button[type=submit]\").disabled")
    assert form.locator("button[type=submit]").inner_text() == "Importing…"
    assert form.get_attribute("aria-busy") == "true"
    # Without the interception the same form imports and the page says so.
    page.goto(f"{live_server.url}/admin/imports")
    form = page.locator("form[action='/admin/imports/kb']")
    form.locator("input[type=file]").set_input_files(str(kb))
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/admin/imports/kb")
    assert "1 revision(s) created" in page.content()
