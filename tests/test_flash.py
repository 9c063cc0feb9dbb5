"""One-time messages ride in a signed, short-lived cookie, never in the URL (issue 33, "?flash=").

A crafted link (`/grading/adjudication?flash=...`) made the app say anything in its own voice;
now pages read only webapp.web.flash's signed cookie, consumed on read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.conftest import TEST_SECRET
from tests.grading.conftest import GradingWorld, build_world, post_form
from webapp.web.flash import FLASH_COOKIE, Flash, encode_flash

CRAFTED = "Your session expired: sign in again at evil.example"


@pytest.fixture
def world(session: Session) -> GradingWorld:
    return build_world(session)


def _pages(world: GradingWorld) -> list[tuple[str, str]]:
    """(role, path) of every page that used to show ?flash= or ?error= text."""
    case_pk = world.drafts[0].case_pk
    return [
        ("labeler", "/grading"),
        ("labeler", f"/grading/drafts/{world.drafts[0].id}"),
        ("lead", "/grading/adjudication"),
        ("labeler", f"/grading/references/{case_pk}"),
        ("admin", "/admin/alerts"),
        ("pm", "/cadence"),
        ("admin", "/admin/users"),
        ("admin", "/admin/tokens"),
        ("pm", f"/gates/pilot?run={world.run.name}"),
        ("lead", f"/ppi/runs/{world.run.name}"),
    ]


def test_a_crafted_flash_or_error_url_shows_no_message(
    world: GradingWorld, client_as: Callable[..., TestClient]
) -> None:
    for role, path in _pages(world):
        c = client_as(role)
        for param in ("flash", "error", "removed", "created", "changed", "revoked"):
            r = c.get(path + ("&" if "?" in path else "?") + urlencode({param: CRAFTED}))
            assert r.status_code == 200, (path, param)
            assert "evil.example" not in r.text, (path, param)


def _cookie(message: Flash, secret: str = TEST_SECRET) -> str:
    return encode_flash(secret, message)


@pytest.mark.parametrize(
    ("why", "value"),
    [
        ("unsigned", "0" * 64 + "." + _cookie(Flash(text=CRAFTED, path="/grading/adjudication", expires=9e9)).split(".")[1]),
        ("signed with another key", _cookie(Flash(text=CRAFTED, path="/grading/adjudication", expires=9e9), "other")),
        ("stale", _cookie(Flash(text=CRAFTED, path="/grading/adjudication", expires=time.time() - 1))),
        ("for another page", _cookie(Flash(text=CRAFTED, path="/grading", expires=9e9))),
        ("malformed", "abc"),
    ],
)
def test_a_forged_stale_or_misdirected_cookie_is_ignored(
    world: GradingWorld, client_as: Callable[..., TestClient], why: str, value: str
) -> None:
    lead = client_as("lead")
    lead.cookies.set(FLASH_COOKIE, value, path="/grading/adjudication")
    assert "evil.example" not in lead.get("/grading/adjudication").text, why


def test_a_real_message_is_shown_once_as_an_error(world: GradingWorld, client_as: Callable[..., TestClient]) -> None:
    lead = client_as("lead")
    r = post_form(lead, "/grading/adjudication/999999/resolve", {"factual_accuracy": "pass"})
    assert r.status_code == 303 and r.headers["location"] == "/grading/adjudication"
    assert "Path=/grading/adjudication" in r.headers["set-cookie"] and "HttpOnly" in r.headers["set-cookie"]
    first = lead.get("/grading/adjudication")
    assert "Adjudication 999999:" in first.text and 'class="flash error"' in first.text
    assert f"{FLASH_COOKIE}=" in first.headers["set-cookie"] and "Max-Age=0" in first.headers["set-cookie"]
    assert "Adjudication 999999:" not in lead.get("/grading/adjudication").text  # consumed: a reload does not repeat it


@pytest.mark.parametrize(
    ("role", "post", "data", "page", "said"),
    [
        ("pm", "/cadence/done", {"kind": "bogus", "period": "2026-W45"}, "/cadence", "kind: must be one of"),
        ("pm", "/gates/pilot/signoff", {"run": "run-1", "decision": "maybe"}, "/gates/pilot?run=run-1",
         "must be go or no"),
    ],
    ids=["cadence", "gate sign-off"],
)
def test_refusals_on_other_pages_ride_in_the_signed_cookie(
    world: GradingWorld, client_as: Callable[..., TestClient], role: str, post: str, data: dict[str, str], page: str,
    said: str,
) -> None:
    c = client_as(role)
    r = post_form(c, post, data)
    assert r.status_code == 303 and r.headers["location"] == page and "error" not in r.headers["location"]
    assert said in c.get(page).text
    assert said not in c.get(page).text


class TestReplay:
    """A copied flash value is bound to its browser session and read once (issue 41)."""

    def _flashed(self, lead: TestClient) -> str:
        r = post_form(lead, "/grading/adjudication/999999/resolve", {"factual_accuracy": "pass"})
        assert r.status_code == 303
        value = r.cookies.get(FLASH_COOKIE) or lead.cookies.get(FLASH_COOKIE, path="/grading/adjudication")
        assert value
        return value

    def test_a_replay_in_another_session_shows_nothing(
        self, world: GradingWorld, client_as: Callable[..., TestClient]
    ) -> None:
        value = self._flashed(client_as("lead", email="lead-a@example.test"))
        other = client_as("lead", email="lead-b@example.test")
        other.cookies.set(FLASH_COOKIE, value, path="/grading/adjudication")
        assert "Adjudication 999999:" not in other.get("/grading/adjudication").text

    def test_a_second_read_in_the_same_session_shows_nothing(
        self, world: GradingWorld, client_as: Callable[..., TestClient]
    ) -> None:
        lead = client_as("lead")
        value = self._flashed(lead)
        assert "Adjudication 999999:" in lead.get("/grading/adjudication").text
        lead.cookies.set(FLASH_COOKIE, value, path="/grading/adjudication")  # the consumed value, put back
        assert "Adjudication 999999:" not in lead.get("/grading/adjudication").text
