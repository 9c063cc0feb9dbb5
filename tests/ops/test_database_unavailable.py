"""Issue 41 item 4: while the database does not answer, every page is a 503 error page and every API call a 503 JSON
answer, with Retry-After; once it answers again, so do they."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from fastapi.testclient import TestClient

from tests.alerts.conftest import free_port
from tests.conftest import SPEC_PATH, TEST_SECRET
from webapp.app.errors import RETRY_AFTER_S, UNAVAILABLE
from webapp.app.main import create_app
from webapp.core.config import Settings
from webapp.core.security import SESSION_COOKIE

PAGES = ["/", "/metrics", "/runs", "/grading", "/admin/users"]
API = ["/api/v1/runs", "/api/v1/datasets"]


def _assert_503(r: Any, *, api: bool, path: str = "") -> None:
    assert r.status_code == 503 and r.headers["retry-after"] == str(RETRY_AFTER_S), (path, r.status_code, r.text[:300])
    if api:
        assert r.headers["content-type"].startswith("application/json") and r.json() == {"detail": UNAVAILABLE}
    else:
        assert r.headers["content-type"].startswith("text/html") and UNAVAILABLE in r.text and "Back to the home page" in r.text


class TestClosedPort:
    """A server whose PostgreSQL URL points at a port where nothing listens (no database needed)."""

    @pytest.fixture
    def offline(self) -> Iterator[TestClient]:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing"
        app = create_app(Settings(database_url=url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH))
        with TestClient(app, raise_server_exceptions=True, follow_redirects=False) as c:
            yield c

    def test_pages_with_a_session_are_503_error_pages(self, offline: TestClient) -> None:
        offline.cookies.set(SESSION_COOKIE, "a-session-token")
        for path in PAGES:
            _assert_503(offline.get(path), api=False)

    def test_api_calls_are_503_json(self, offline: TestClient) -> None:
        for path in API:
            _assert_503(offline.get(path, headers={"Authorization": "Bearer dd_some-token"}), api=True)
        _assert_503(offline.put("/api/v1/grades/1", json={"tone": 4}, headers={"Authorization": "Bearer dd_x"}), api=True)

    def test_signing_in_is_a_503_page(self, offline: TestClient) -> None:
        from webapp.core.security import CSRF_COOKIE, csrf_token_for

        offline.get("/login")  # the login form itself needs no database
        token = csrf_token_for(TEST_SECRET, offline.cookies[CSRF_COOKIE], None)
        _assert_503(offline.post("/login", data={"email": "a@example.test", "password": "x", "csrf_token": token}), api=False)


class _Proxy:
    """A TCP forwarder to the test PostgreSQL server, which the test stops (dropping every connection) and restarts."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._conns: list[socket.socket] = []
        self._server: socket.socket | None = None

    def start(self) -> None:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen()
        self._server = srv
        threading.Thread(target=self._accept, args=(srv,), daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            # wakes the thread blocked in accept() (a plain close leaves the listener open meanwhile)
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()
        self._conns.clear()

    def _accept(self, srv: socket.socket) -> None:
        while True:
            try:
                client, _ = srv.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxy(db_url: str) -> Iterator[_Proxy | None]:
    if not db_url.startswith("postgresql"):
        yield None
        return
    parts = urlsplit(db_url)
    p = _Proxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    p.start()
    yield p
    p.stop()


@pytest.fixture
def settings(db_url: str, proxy: _Proxy | None) -> Settings:
    """The app's database URL goes through the proxy on PostgreSQL."""
    url = db_url
    if proxy is not None:
        parts = urlsplit(db_url)
        url = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}"))
    return Settings(database_url=url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH)


class TestConnectionsLost:
    def test_a_signed_in_user_gets_503_then_the_page_again(
        self, proxy: _Proxy | None, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
    ) -> None:
        if proxy is None:
            pytest.skip("SQLite is a file beside the app: there is no connection to lose")
        browser, api = client_as("admin", "lead", "pm"), api_as("admin")
        assert browser.get("/metrics").status_code == 200 and api.get("/api/v1/runs").status_code == 200
        proxy.stop()  # every connection of the pool dropped, and no new one possible
        for path in PAGES:
            _assert_503(browser.get(path, follow_redirects=False), api=False, path=path)
        for path in API:
            _assert_503(api.get(path), api=True)
        proxy.start()
        assert browser.get("/metrics").status_code == 200 and api.get("/api/v1/runs").status_code == 200
