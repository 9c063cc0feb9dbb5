"""Admin flows in Chromium: sign in (to the home page) and out; a new token is shown once with a copy
button; an import says it is working."""

from __future__ import annotations

from tests.browser_support import sign_in, wait_until
from tests.factories import make_user

KB_FORM = "form[action='/admin/imports/kb']"


def test_sign_in_token_once_and_copied_import_working_sign_out(live_server, new_page, tmp_path) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(lambda s: make_user(s, email="root@example.test", roles=["admin"]))
    page = new_page()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    sign_in(page, live_server.url, "root@example.test")
    assert page.locator("h1").inner_text().startswith("Good to see you")
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
    # (a reload shows no token and creates none: tests/admin/test_pages.py::TestTokens)

    page.goto(f"{live_server.url}/admin/imports")
    kb = tmp_path / "kb.jsonl"
    kb.write_text('{"article_id": "KB-1", "revision": 1, "title": "T", "body": "B", "status": "current",'
                  ' "effective_date": "2026-01-01"}\n')
    # Stop the navigation after the page's own handlers ran, to look at the form while it is "sending".
    page.evaluate("window.addEventListener('submit', (ev) => ev.preventDefault())")
    page.locator(f"{KB_FORM} input[type=file]").set_input_files(str(kb))
    page.locator(f"{KB_FORM} button[type=submit]").click()
    wait_until(page, f"document.querySelector(\"{KB_FORM} button[type=submit]\").disabled")
    assert page.locator(f"{KB_FORM} button[type=submit]").inner_text() == "Importing…"
    assert page.locator(KB_FORM).get_attribute("aria-busy") == "true"
    # Without the interception the same form imports and the page says so.
    page.goto(f"{live_server.url}/admin/imports")
    page.locator(f"{KB_FORM} input[type=file]").set_input_files(str(kb))
    page.locator(f"{KB_FORM} button[type=submit]").click()
    page.wait_for_url("**/admin/imports/kb")
    assert "1 revision(s) stored" in page.content()
    page.click('button:text-is("Sign out")')
    page.wait_for_url("**/login")
    assert page.console_errors == []
