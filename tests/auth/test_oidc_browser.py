"""Signing in through a real OpenID provider (npm oidc-provider on the loopback) in Chromium, on SQLite and PostgreSQL.

One provider and three Draft Desk servers over one database per module: `main` (passwords on, the
groups claim mapped), `sso_only` (DRAFTDESK_PASSWORD_LOGIN=0) and `ahead` (its clock two hours ahead
of the provider's, so every ID token it gets has expired).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlmodel import Session, select

from tests.browser_support import free_port, serve
from tests.conftest import BACKENDS, empty_database_url
from tests.factories import DEFAULT_PASSWORD, make_user
from tests.oidc_provider.harness import Client, oidc_provider
from webapp.auth.models import OidcIdentity, User
from webapp.core.db import make_engine
from webapp.core.timeutil import utcnow

SECRET = "client-secret-for-the-tests"
ACCOUNTS: dict[str, dict[str, object]] = {
    "pat": {"name": "Pat PM", "groups": ["dd-pm", "unrelated-group"]},
    "sam": {"name": "Sam PM", "groups": ["dd-pm"]},
    "olga": {"name": "Olga Lead", "groups": ["dd-leads"]},
}
ROLE_MAP = "dd-pm=pm,dd-leads=lead,dd-admins=admin"
ADMIN_EMAIL = "admin@example.test"


@dataclass(frozen=True)
class Env:
    issuer: str
    db_url: str
    main: str
    sso_only: str
    ahead: str
    callback_of_main: str


def _callback(port: int) -> str:
    return f"http://127.0.0.1:{port}/login/oidc/callback"


@pytest.fixture(scope="module", params=BACKENDS)
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Env]:
    db_url = empty_database_url(request.param, tmp_path_factory.mktemp("oidc"), sqlite_template)
    engine = make_engine(db_url)
    with Session(engine) as session:
        make_user(session, email=ADMIN_EMAIL, roles=["admin"])
        session.commit()
    engine.dispose()
    ports = {name: free_port() for name in ("main", "sso_only", "ahead")}
    callbacks = [_callback(p) for p in ports.values()]
    clients = [Client("draftdesk", SECRET, callbacks), Client("other-app", SECRET + "-other", callbacks)]
    with oidc_provider(clients=clients, accounts=ACCOUNTS) as issuer:
        common = {
            "oidc_issuer": issuer, "oidc_client_id": "draftdesk", "oidc_client_secret": SECRET,
            "oidc_provider_name": "Test IdP", "oidc_scopes": "openid email profile groups",
            "oidc_roles_claim": "groups", "oidc_role_map": ROLE_MAP,
        }  # fmt: skip

        def server(name: str, **extra: object):  # type: ignore[no-untyped-def]
            return serve(db_url, port=ports[name], base_url=f"http://127.0.0.1:{ports[name]}", **common, **extra)

        ahead = lambda: utcnow() + dt.timedelta(hours=2)  # noqa: E731
        with server("main") as main, server("sso_only", password_login=False) as sso, server("ahead", clock=ahead) as late:
            yield Env(issuer, db_url, main.url, sso.url, late.url, _callback(ports["main"]))


def oidc_sign_in(page, base: str, login: str) -> None:  # type: ignore[no-untyped-def]
    """Click "Sign in with Test IdP" and sign in at the provider (when it asks): end on Draft Desk's answer."""
    page.goto(f"{base}/login")
    page.click("#oidc-sign-in button")

    def back_at_draft_desk(url: str) -> bool:
        return url.startswith(base) and url != f"{base}/login"

    page.wait_for_url(lambda url: "/interaction/" in url or back_at_draft_desk(url))
    if "/interaction/" in page.url:  # the provider asks who it is (it remembers a browser it signed in)
        page.fill("input[name=login]", login)
        page.fill("input[name=password]", "any password: the provider's dev login takes any")
        page.click("button.login-submit")
        page.wait_for_url(back_at_draft_desk)
    page.wait_for_load_state()


def whoami(page, base: str) -> tuple[int, dict[str, object]]:  # type: ignore[no-untyped-def]
    """Ask the API who the browser's session is (401: nobody)."""
    answer = page.request.get(f"{base}/api/v1/whoami")
    return answer.status, answer.json()


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("oidc sign-in refused")]


def test_a_mapped_group_signs_in_with_its_role_and_lands_on_home(env: Env, new_page) -> None:  # type: ignore[no-untyped-def]
    page = new_page()
    oidc_sign_in(page, env.main, "pat")
    assert page.url == f"{env.main}/"
    assert page.inner_text(".who .roles") == "PM"
    assert "Not allowed" not in page.inner_text("main")
    status, me = whoami(page, env.main)
    assert status == 200 and me["email"] == "pat@example.test" and me["roles"] == ["pm"] and me["via"] == "session"
    engine = make_engine(env.db_url)
    with Session(engine) as session:
        identity = session.exec(select(OidcIdentity).where(OidcIdentity.subject == "pat")).one()
        assert identity.issuer == env.issuer
        assert session.get(User, identity.user_id).password_hash == ""  # type: ignore[union-attr]
    engine.dispose()


def test_an_unknown_person_waits_until_an_admin_grants_a_role(env: Env, new_page) -> None:  # type: ignore[no-untyped-def]
    newcomer = new_page()
    oidc_sign_in(newcomer, env.main, "nico")
    assert "waiting for an admin to grant you a role" in newcomer.inner_text("main")
    assert newcomer.inner_text("main h1") == "Waiting for a role"
    status, answer = whoami(newcomer, env.main)
    assert status == 403 and "waiting for an admin to grant you a role" in str(answer["detail"])

    admin = new_page()
    admin.goto(f"{env.main}/login")
    admin.fill("input[name=email]", ADMIN_EMAIL)
    admin.fill("input[name=password]", DEFAULT_PASSWORD)
    admin.click("#password-sign-in button[type=submit]")
    admin.goto(f"{env.main}/admin/users")
    assert "nico@example.test" in admin.inner_text("#waiting-for-a-role")
    form = admin.locator("form[data-user='nico@example.test']")
    admin.locator("form[data-user='nico@example.test'] >> xpath=ancestor::details/summary").click()
    form.locator("input[value=labeler]").check()
    form.locator("button[type=submit]").click()
    admin.wait_for_load_state()
    assert "nico@example.test: granted labeler." in admin.inner_text("main")
    assert admin.locator("#waiting-for-a-role").count() == 0

    newcomer.click("form[action='/logout'] button")
    newcomer.wait_for_url(f"{env.main}/login")
    oidc_sign_in(newcomer, env.main, "nico")  # the provider remembers nico: no login form this time
    assert newcomer.url == f"{env.main}/" and newcomer.inner_text(".who .roles") == "Labeler"
    assert whoami(newcomer, env.main)[1]["roles"] == ["labeler"]


def test_a_bad_or_missing_state_is_refused_and_signs_nobody_in(env: Env, new_page, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.WARNING)
    page = new_page()
    page.goto(f"{env.main}/login")
    page.click("#oidc-sign-in button")  # a real sign-in started: the browser holds its cookie
    page.wait_for_url(lambda url: "/interaction/" in url)
    answer = page.goto(f"{env.main}/login/oidc/callback?state=forged-state&code=forged-code")
    assert answer is not None and answer.status == 400
    assert "does not belong to a sign-in started here" in page.inner_text("#oidc-error")
    answer = page.goto(f"{env.main}/login/oidc/callback?code=forged-code")
    assert answer is not None and answer.status == 400 and "has no state" in page.inner_text("#oidc-error")
    assert whoami(page, env.main)[0] == 401
    assert [m.split()[3] for m in refusals(caplog)] == ["reason=unknown_state", "reason=missing_state"]


def test_a_callback_visited_twice_is_refused_the_second_time(env: Env, new_page, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.WARNING)
    page = new_page()
    callbacks: list[str] = []
    page.on("request", lambda r: r.url.startswith(env.callback_of_main) and callbacks.append(r.url))
    oidc_sign_in(page, env.main, "olga")
    assert page.url == f"{env.main}/" and page.inner_text(".who .roles") == "Team lead"
    assert len(callbacks) == 1 and "code=" in callbacks[0]
    thief = new_page()  # another browser with the same callback URL (and, below, the same browser again)
    answer = thief.goto(callbacks[0])
    assert answer is not None and answer.status == 400 and "already used" in thief.inner_text("#oidc-error")
    assert whoami(thief, env.main)[0] == 401
    answer = page.goto(callbacks[0])
    assert answer is not None and answer.status == 400 and "already used" in page.inner_text("#oidc-error")
    assert [m.split()[3] for m in refusals(caplog)] == ["reason=replayed", "reason=replayed"]


def test_an_expired_id_token_is_refused(env: Env, new_page, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.WARNING)
    page = new_page()
    oidc_sign_in(page, env.ahead, "pat")
    assert page.url.startswith(f"{env.ahead}/login/oidc/callback?")
    assert "has expired" in page.inner_text("#oidc-error") and "Traceback" not in page.content()
    assert whoami(page, env.ahead)[0] == 401
    assert [m.split()[3] for m in refusals(caplog)] == ["reason=expired_token"]


def test_with_passwords_off_only_the_provider_signs_in(env: Env, new_page) -> None:  # type: ignore[no-untyped-def]
    page = new_page()
    page.goto(f"{env.sso_only}/login")
    assert page.locator("input[name=password]").count() == 0
    assert page.inner_text("#oidc-sign-in button") == "Sign in with Test IdP"
    csrf = page.locator("#oidc-sign-in input[name=csrf_token]").get_attribute("value")
    answer = page.request.post(
        f"{env.sso_only}/login", form={"csrf_token": csrf or "", "email": ADMIN_EMAIL, "password": DEFAULT_PASSWORD}
    )
    assert answer.status == 403 and "turned off" in answer.text()
    assert whoami(page, env.sso_only)[0] == 401
    oidc_sign_in(page, env.sso_only, "sam")
    assert page.url == f"{env.sso_only}/" and whoami(page, env.sso_only)[1]["roles"] == ["pm"]


def test_sign_out_everywhere_ends_a_provider_sign_in_in_every_browser(env: Env, new_page) -> None:  # type: ignore[no-untyped-def]
    first, second = new_page(), new_page()
    oidc_sign_in(first, env.main, "sam")
    oidc_sign_in(second, env.main, "sam")
    assert whoami(second, env.main)[0] == 200
    first.click("form[action='/logout/everywhere'] button")
    first.wait_for_url(f"{env.main}/login")
    second.goto(f"{env.main}/")
    assert second.url.startswith(f"{env.main}/login")
    assert whoami(second, env.main)[0] == 401


def test_a_code_used_twice_and_tokens_for_another_audience_issuer_or_nonce_are_refused(env: Env, new_page) -> None:  # type: ignore[no-untyped-def]
    """A real ID token the provider made for another client ("other-app"), checked as Draft Desk checks its own."""
    from webapp.auth.oidc import OidcClient, OidcConfig, OidcRefused

    def config(client_id: str, secret: str, issuer: str = env.issuer) -> OidcConfig:
        return OidcConfig(issuer, client_id, secret, "openid email profile groups", "groups", {}, "Test IdP", env.callback_of_main)

    other = OidcClient(config("other-app", SECRET + "-other"))
    page = new_page()
    page.route(f"{env.callback_of_main}*", lambda route: route.fulfill(status=200, body="captured"))
    page.goto(other.authorization_url(state="s" * 43, nonce="n" * 43, verifier="v" * 64))
    page.fill("input[name=login]", "pat")
    page.fill("input[name=password]", "x")
    page.click("button.login-submit")
    page.wait_for_url(f"{env.callback_of_main}*")
    code = dict(p.split("=", 1) for p in page.url.split("?", 1)[1].split("&"))["code"]
    token = other.exchange(code=code, verifier="v" * 64)
    with pytest.raises(OidcRefused) as replayed:  # the provider itself takes a code once
        other.exchange(code=code, verifier="v" * 64)
    assert replayed.value.reason == "token_exchange" and "invalid_grant" in replayed.value.detail
    now = utcnow()
    assert other.claims(token=token, nonce="n" * 43, now=now)["aud"] == "other-app"  # valid for the client it was made for

    ours = OidcClient(config("draftdesk", SECRET))
    elsewhere = OidcClient(config("other-app", SECRET + "-other", issuer="http://127.0.0.1:1"))
    elsewhere._metadata, elsewhere._metadata_at = other.metadata(), float("inf")  # its keys, its endpoints; another issuer expected
    cases = [(ours, "n" * 43, "wrong_audience"), (other, "m" * 43, "wrong_nonce"), (elsewhere, "n" * 43, "wrong_issuer")]
    for client, nonce, reason in cases:
        with pytest.raises(OidcRefused) as refused:
            client.claims(token=token, nonce=nonce, now=now)
        assert refused.value.reason == reason, json.dumps([reason, str(refused.value)])
