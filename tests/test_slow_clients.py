"""Clients that send their request body slowly hold nobody else up.

Issue 26: a per-process admission limit (2 requests at once, held from the headers to the end of
the body) let two anonymous POSTs trickling their bodies freeze every page. Here a real uvicorn
server gets several such POSTs, each still sending while another client browses; that client's
pages must answer at once. The waits are on conditions (the server has taken the slow requests
in), and the slow bodies keep trickling until the browsing is done.
"""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from tests.conftest import SPEC_PATH, TEST_SECRET
from tests.waiting import wait_for
from webapp.app.main import create_app
from webapp.core.config import Settings

SLOW_CLIENTS = 4  # more than the 2 the admission limit let in
BODY = b"email=slow%40example.test&password=" + b"x" * 600
BYTE_EVERY_S = 0.05  # 600+ bytes: half a minute per body, far longer than the browsing below
BROWSE_TIMEOUT_S = 5.0


@contextmanager
def _server(db_url: str) -> Iterator[tuple[uvicorn.Server, int]]:
    app = create_app(Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=15, what="the server to start")
    try:
        yield server, port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        app.state.engine.dispose()


class SlowPost(threading.Thread):
    """POST /login whose body goes one byte at a time until `stop` is set (or the body ends)."""

    def __init__(self, port: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.stop = stop
        self.bytes_sent = 0
        self.finished_body = False
        self.error: BaseException | None = None

    def run(self) -> None:
        head = (
            "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(BODY)}\r\nConnection: close\r\n\r\n"
        ).encode()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
                sock.sendall(head)
                for i in range(len(BODY)):
                    if self.stop.is_set():
                        return
                    sock.sendall(BODY[i : i + 1])
                    self.bytes_sent += 1
                    self.stop.wait(BYTE_EVERY_S)
                self.finished_body = True
        except OSError as err:  # the server closing on us would also be a failure of the test
            self.error = err


def test_slow_request_bodies_do_not_hold_up_other_clients(tmp_path: Path, sqlite_template: Path) -> None:
    db = tmp_path / "slow.db"
    shutil.copyfile(sqlite_template, db)
    stop = threading.Event()
    with _server(f"sqlite:///{db}") as (server, port):
        slow = [SlowPost(port, stop) for _ in range(SLOW_CLIENTS)]
        for client in slow:
            client.start()
        try:
            # Each slow request's headers are in and the application has been called for it, and every
            # one has started sending its body.
            tasks = server.server_state.tasks  # one per request the application has been called for
            wait_for(lambda: len(tasks) >= SLOW_CLIENTS, timeout=15, what="the slow requests to be taken in")
            wait_for(lambda: all(c.bytes_sent > 0 for c in slow), timeout=15, what="the slow bodies to start")
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=BROWSE_TIMEOUT_S) as browser:
                for _ in range(3):
                    page = browser.get("/login")
                    assert page.status_code == 200 and "password" in page.text
                assert browser.get("/healthz").status_code == 200
            # the browsing was done while every slow body was still on its way
            assert not any(c.finished_body for c in slow)
            assert all(c.error is None and c.is_alive() for c in slow)
        finally:
            stop.set()
            for client in slow:
                client.join(timeout=10)
