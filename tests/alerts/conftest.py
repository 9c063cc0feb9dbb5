"""Real parts for alert tests: a local HTTP receiver and a local SMTP server (aiosmtpd), and event helpers."""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import json
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from tests.metrics.conftest import ev, load
from webapp.alerts import outbox as alerts_outbox

BASE_URL = "https://draftdesk.example.test"
DAY1 = dt.date(2026, 11, 3)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """An HTTP server in the test process: answers from a script of (status, headers), then 200."""

    url: str
    requests: list[Received] = field(default_factory=list)
    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    by_path: dict[str, int] = field(default_factory=dict)  # fixed answers for some paths
    # paths whose requests answer only once all of them are in flight at once (500 if they never are)
    together: set[str] = field(default_factory=set)
    meeting: threading.Barrier | None = None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """Start a local webhook receiver on a free loopback port."""
    state = Receiver(url="")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path in state.together:
                if state.meeting is None:
                    with lock:
                        state.meeting = state.meeting or threading.Barrier(len(state.together), timeout=30)
                try:
                    state.meeting.wait()
                except threading.BrokenBarrierError:  # served one after the other
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            with lock:
                state.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.path in state.by_path:
                    status, headers = state.by_path[self.path], {}
                else:
                    status, headers = state.script.pop(0) if state.script else (200, {})
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def free_port() -> int:
    """Return a loopback port nothing listens on (a receiver that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Mailbox:
    host: str
    port: int
    messages: list[EmailMessage] = field(default_factory=list)
    envelopes: list[Any] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)
    ca_file: str = ""


class _Handler:
    def __init__(self, box: Mailbox) -> None:
        self.box = box

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
        self.box.envelopes.append(envelope)
        self.box.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))  # type: ignore[arg-type]
        return "250 OK"


@pytest.fixture
def smtp_server() -> Iterator[Mailbox]:
    """Start aiosmtpd (plain SMTP) on a free loopback port; every message it accepts lands in .messages."""
    box = Mailbox("127.0.0.1", free_port())
    controller = Controller(_Handler(box), hostname=box.host, port=box.port)
    controller.start()
    yield box
    controller.stop()


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (it is its own CA), made with the openssl tool."""
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return str(cert), str(key)


@pytest.fixture(params=["starttls", "tls"])
def secure_smtp_server(request: pytest.FixtureRequest, tls_cert: tuple[str, str]) -> Iterator[tuple[str, Mailbox]]:
    """aiosmtpd requiring STARTTLS (or implicit TLS) and a login; yields (security mode, mailbox)."""
    cert, key = tls_cert
    box = Mailbox("127.0.0.1", free_port(), ca_file=cert)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)

    def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        box.logins.append((data.login.decode(), data.password.decode()))
        return AuthResult(success=data.password == b"s3cret-from-env")

    kwargs: dict[str, Any] = {"authenticator": authenticator, "auth_required": True}
    if request.param == "starttls":
        kwargs |= {"tls_context": ctx, "require_starttls": True}
    else:
        kwargs |= {"ssl_context": ctx, "auth_require_tls": False}  # the whole connection is TLS
    controller = Controller(_Handler(box), hostname=box.host, port=box.port, **kwargs)
    controller.start()
    yield request.param, box
    controller.stop()


def bad_accept_days(start: dt.date = DAY1, n: int = 3) -> list[dict[str, Any]]:
    """Return n days of 4 shown drafts each: 2 accepted, 2 heavily edited (accept rate 2/4 = 0.5 every day)."""
    out = []
    for i in range(n):
        day = start + dt.timedelta(days=i)
        out += [ev(day, 9), ev(day, 10)]
        out += [ev(day, 11 + k, action="edit", draft_text="Hello there", sent_text="Completely rewritten reply") for k in range(2)]
    return out


def queue_bad_days(session: Any, spec: Any) -> None:
    """Load bad_accept_days() and record its accept-rate transition in the outbox (one message a channel)."""
    load(session, spec, bad_accept_days())
    alerts_outbox.record_transitions(session=session, spec=spec)
    session.commit()


@pytest.fixture
def settings(db_url: str):  # type: ignore[no-untyped-def]
    """The test settings with a public base URL for links; the fake receivers listen on loopback, so private
    targets are allowed (tests/alerts/test_targets.py checks they are refused without the setting)."""
    from tests.conftest import SPEC_PATH, TEST_SECRET
    from webapp.core.config import Settings

    return Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH, base_url=BASE_URL,
                    alerts_allow_private_targets=True)


@contextmanager
def greeting_listener(greeting: bytes) -> Iterator[int]:
    """A TCP listener that accepts, sends `greeting` and hangs up."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(greeting)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield int(srv.getsockname()[1])
    finally:
        stop.set()
        t.join(timeout=5)
        srv.close()
