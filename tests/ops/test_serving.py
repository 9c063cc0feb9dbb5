"""`serve`'s uvicorn options: behind a trusted proxy the sign-in limiter counts each client's own address."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn
from sqlmodel import Session, select

from tests.conftest import TEST_SECRET
from tests.waiting import wait_for
from webapp.app.main import create_app
from webapp.auth.models import LoginAttempt
from webapp.core.config import Settings
from webapp.core.db import make_engine
from webapp.core.security import CSRF_COOKIE, csrf_token_for
from webapp.web.serving import uvicorn_options


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(settings: Settings) -> Iterator[str]:
    """Serve create_app(settings) with `serve`'s uvicorn options in a thread; yield its base URL."""
    app = create_app(settings)
    port = free_port()
    options = uvicorn_options(host="127.0.0.1", port=port, forwarded_allow_ips=settings.forwarded_allow_ips)
    server = uvicorn.Server(uvicorn.Config(app, **{**options, "log_level": "warning", "access_log": False}))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    def started() -> bool:
        assert thread.is_alive(), "uvicorn's thread ended before it started"
        return server.started

    wait_for(started, timeout=30, what="uvicorn to start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        app.state.engine.dispose()


def failed_sign_in(base: str, client_ip: str, email: str) -> int:
    """Post a wrong password for `email` through the proxy that reports `client_ip`; return the status."""
    with httpx.Client(base_url=base, headers={"X-Forwarded-For": client_ip}, timeout=30) as c:
        c.get("/login")
        token = csrf_token_for(TEST_SECRET, c.cookies[CSRF_COOKIE])
        r = c.post("/login", data={"email": email, "password": "wrong", "csrf_token": token})
        return r.status_code


def test_uvicorn_gets_proxy_headers_and_the_allowed_proxies() -> None:
    options = uvicorn_options(host="0.0.0.0", port=80, forwarded_allow_ips="10.0.0.5", workers=3)
    assert options["proxy_headers"] is True
    assert options["forwarded_allow_ips"] == "10.0.0.5"
    assert options["workers"] == 3
    assert "workers" not in uvicorn_options(host="h", port=1, forwarded_allow_ips="127.0.0.1")
    # by default no proxy is trusted (issue #33): uvicorn's proxy-headers middleware is left out
    assert Settings(mode="dev").forwarded_allow_ips == ""
    assert uvicorn_options(host="h", port=1, forwarded_allow_ips="")["proxy_headers"] is False


@pytest.mark.parametrize(("allowed", "shared"), [("127.0.0.1", False), ("10.9.9.9", True), (None, True)])
def test_clients_behind_an_allowed_proxy_do_not_share_a_sign_in_bucket(
    db_url: str, allowed: str | None, shared: bool
) -> None:
    """With login_max_failures=1 an address is blocked after 4 failures (4 x the per-email limit).

    The proxy (127.0.0.1 here) is trusted: client A's four failures block A only, and client B's
    first failure is answered 401. When the proxy is not in the allowed list, uvicorn ignores the
    header and both clients are the proxy's one address: B is blocked by A's failures (429). The
    default (None here: the setting left alone) trusts no proxy, not even one on the same host.
    """
    settings = Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, login_max_failures=1)
    if allowed is not None:
        settings = settings.model_copy(update={"forwarded_allow_ips": allowed})
    with running(settings) as base:
        statuses = [failed_sign_in(base, "203.0.113.1", f"a{i}@example.test") for i in range(4)]
        assert statuses == [401] * 4
        assert failed_sign_in(base, "203.0.113.1", "a5@example.test") == 429
        assert failed_sign_in(base, "203.0.113.2", "b1@example.test") == (429 if shared else 401)
    engine = make_engine(db_url)
    with Session(engine) as s:
        ips = {a.ip for a in s.exec(select(LoginAttempt))}
    engine.dispose()
    assert ips == ({"127.0.0.1"} if shared else {"203.0.113.1", "203.0.113.2"})
