"""Back and forward through URLs that htmx pushed, with htmx's history cache cleared: every step is a whole page.

With no snapshot htmx asks the server again (`HX-History-Restore-Request`); a server answering with its
fragment would leave a bare table without the navigation or the form. Clearing the cache forces that path.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from tests.browser_support import sign_in, wait_until
from webapp.demo import content as c

CLEAR_CACHE = "sessionStorage.removeItem('htmx-history-cache')"
# A whole page has the site navigation and the page's filter form; a fragment has neither.
IS_WHOLE_PAGE = "!!document.querySelector('nav') && !!document.querySelector('form.toolbar, form.regression-picker')"


def _query(page) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    return parse_qs(urlsplit(page.url).query)


# Counts htmx's history restores (injected by Playwright before the page's own scripts).
COUNT_RESTORES = "window.__restores = 0; document.addEventListener('htmx:historyRestore', () => { window.__restores += 1; });"


def _step(page, move: str) -> None:  # type: ignore[no-untyped-def]
    page.evaluate(CLEAR_CACHE)
    before = page.evaluate("window.__restores")
    page.go_back() if move == "back" else page.go_forward()
    wait_until(page, f"window.__restores > {before}")
    assert page.evaluate(IS_WHOLE_PAGE), f"{move} to {page.url} showed a fragment, not the page"


def test_kb_search_and_run_filters_back_and_forth_without_history_cache(demo_server, new_page) -> None:  # type: ignore[no-untyped-def]
    lead = next(email for _key, email, _name, roles in c.DEMO_USERS if "lead" in roles)
    page = new_page()
    page.add_init_script(COUNT_RESTORES)
    sign_in(page, demo_server.url, lead, c.DEMO_PASSWORD)
    page.goto(f"{demo_server.url}/kb")
    all_rows = page.locator("#kb-results tbody tr").count()
    article = page.inner_text("#kb-results tbody tr:first-child td:first-child").strip()
    page.fill("form.toolbar input[name=q]", article)  # the form searches as one types (one pushed URL)
    wait_until(page, "location.search.includes('q=')")
    page.wait_for_load_state("networkidle")
    found_rows = page.locator("#kb-results tbody tr").count()
    assert 0 < found_rows < all_rows

    _step(page, "back")
    assert _query(page).get("q", [""]) == [""]
    assert page.locator("#kb-results tbody tr").count() == all_rows

    _step(page, "forward")
    assert _query(page)["q"] == [article]
    assert page.locator("#kb-results tbody tr").count() == found_rows
    assert page.input_value("form.toolbar input[name=q]") == article

    page.goto(f"{demo_server.url}/runs/{c.RUN_NAME}")
    shown = "#draft-results tbody tr"
    everything = page.locator(shown).count()
    page.select_option("form.toolbar select[name=golden]", "yes")
    wait_until(page, "location.search.includes('golden=yes')")
    page.wait_for_load_state("networkidle")
    golden = page.locator(shown).count()
    categories = page.eval_on_selector_all("form.toolbar select[name=category] option", "els => els.map(e => e.value)")
    category = categories[1]
    page.select_option("form.toolbar select[name=category]", category)
    wait_until(page, f"location.search.includes('category={category}')")
    page.wait_for_load_state("networkidle")
    both = page.locator(shown).count()
    assert 0 < golden < everything and both <= golden

    _step(page, "back")  # golden only
    assert _query(page)["golden"] == ["yes"] and _query(page).get("category", [""]) == [""]
    assert page.locator(shown).count() == golden
    _step(page, "back")  # everything
    assert page.locator(shown).count() == everything
    assert page.input_value("form.toolbar select[name=golden]") == ""
    _step(page, "forward")
    assert page.locator(shown).count() == golden
    _step(page, "forward")
    assert _query(page)["category"] == [category]
    assert page.input_value("form.toolbar select[name=category]") == category
    assert page.locator(shown).count() == both
    assert page.console_errors == []
