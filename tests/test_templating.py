"""Pages that answer htmx with a fragment: the fragment for htmx, the page for a history restore, Vary always."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient


def test_fragment_page_and_history_restore(client_as: Callable[..., TestClient]) -> None:
    lead = client_as("lead")
    page = lead.get("/kb")
    fragment = lead.get("/kb", headers={"HX-Request": "true"})
    restore = lead.get("/kb", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in page.text and "<html" not in fragment.text and "<html" in restore.text
    for r in (page, fragment, restore):
        assert "HX-Request" in r.headers["vary"]
