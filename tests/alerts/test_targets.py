"""Webhook and Slack targets: no loopback, private or link-local addresses unless the operator allows them,
checked when saved and on the addresses resolved at every send; answers reported by status only (issue 33, item 4)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlmodel import Session

from tests.alerts.conftest import BASE_URL, Receiver, free_port, greeting_listener
from tests.conftest import SPEC_PATH, TEST_SECRET
from webapp.alerts import channels as alerts_channels
from webapp.alerts import delivery, targets
from webapp.alerts.models import AlertChannel
from webapp.core.config import Settings

PRIVATE_URLS = [
    "http://127.0.0.1:8080/hook",
    "http://10.1.2.3/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]:8080/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://192.168.0.10/hook",
    "http://100.64.0.1/hook",
    "http://0.0.0.0:9000/",
    "http://localhost:8080/hook",
    "https://api.localhost/hook",
]


@pytest.fixture
def settings(db_url: str) -> Settings:
    """The production default: private targets not allowed."""
    return Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH, base_url=BASE_URL)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names this test resolves itself (the lookup a DNS server would answer), every other name as usual."""
    table: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in table:
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in table[host]]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return table


def _hook(session: Session, url: str, kind: str = "webhook") -> AlertChannel:
    """A channel saved while private targets were allowed (or before this check existed)."""
    ch = alerts_channels.add_channel(session=session, name=f"ch-{free_port()}", kind=kind, target=url, allow_private_targets=True)
    session.commit()
    return ch


def _send(ch: AlertChannel, *, allow: bool) -> delivery.SendResult:
    return delivery.send_test(ch, base_url=BASE_URL, secret_key=TEST_SECRET, allow_private_targets=allow)


class TestAddresses:
    @pytest.mark.parametrize(
        ("address", "public"),
        [("127.0.0.1", False), ("10.0.0.1", False), ("169.254.169.254", False), ("::1", False), ("fe80::1", False),
         ("::ffff:10.0.0.1", False), ("100.64.0.1", False), ("fc00::1", False), ("224.0.0.1", False),
         ("93.184.215.14", True), ("2606:4700::1111", True), ("::ffff:93.184.215.14", True)],
    )
    def test_only_global_unicast_is_public(self, address: str, public: bool) -> None:
        assert targets.is_public(ipaddress.ip_address(address)) is public


class TestAtSave:
    @pytest.mark.parametrize("url", PRIVATE_URLS)
    def test_private_literals_and_localhost_are_refused_naming_the_field(self, session: Session, url: str) -> None:
        with pytest.raises(alerts_channels.AlertsError, match=r"^url: .* non-public address.*DRAFTDESK_ALERTS_ALLOW_PRIVATE_TARGETS=1"):
            alerts_channels.add_channel(session=session, name="h", kind="webhook", target=url)
        assert session.execute(select(AlertChannel)).scalars().all() == []
        # the operator's setting lets them through
        assert alerts_channels.add_channel(session=session, name="h", kind="slack", target=url, allow_private_targets=True).id

    def test_the_admin_page_refuses_them(self, client_as: Callable[..., TestClient], session: Session) -> None:
        r = client_as("admin").post("/admin/alerts/channels", data={"name": "meta", "kind": "webhook", "url": PRIVATE_URLS[2]})
        assert r.status_code == 400 and "url: 169.254.169.254 is a loopback, private, link-local" in r.text
        assert session.execute(select(AlertChannel)).scalars().all() == []


class TestAtSend:
    @pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "10.0.0.7", "169.254.169.254"])
    def test_a_stored_private_target_is_refused_and_nothing_is_sent(self, session: Session, receiver: Receiver, host: str) -> None:
        ch = _hook(session, receiver.url.replace("127.0.0.1", host))
        result = _send(ch, allow=False)
        assert not result.ok and result.permanent and result.status is None
        assert result.error.startswith(f"url: {host.strip('[]')} is a loopback, private, link-local")
        assert receiver.requests == []

    def test_a_name_that_now_resolves_to_loopback_is_refused_at_send(
        self, session: Session, receiver: Receiver, dns: dict[str, list[str]]
    ) -> None:
        port = receiver.url.split(":")[2].split("/")[0]
        dns["hooks.example.test"] = ["93.184.215.14"]
        ch = _hook(session, f"http://hooks.example.test:{port}/hook", kind="slack")  # public when saved
        dns["hooks.example.test"] = ["127.0.0.1"]  # ... then the name's owner points it at the server itself
        result = _send(ch, allow=False)
        assert not result.ok and "url: hooks.example.test is a loopback, private" in result.error
        dns["hooks.example.test"] = ["93.184.215.14", "10.0.0.1"]  # one private answer among public ones
        assert "non-public" in _send(ch, allow=False).error
        assert receiver.requests == []

    def test_the_request_goes_to_the_checked_address_with_the_name_as_host(
        self, session: Session, receiver: Receiver, dns: dict[str, list[str]]
    ) -> None:
        port = receiver.url.split(":")[2].split("/")[0]
        dns["hooks.example.test"] = ["127.0.0.1"]
        ch = _hook(session, f"http://hooks.example.test:{port}/hook")
        result = _send(ch, allow=True)
        assert result.ok and result.status == 200
        [req] = receiver.requests
        assert req.path == "/hook" and req.headers["host"] == f"hooks.example.test:{port}"


class TestWhatIsReported:
    def test_an_error_answer_is_reported_by_its_status_never_its_body(self, session: Session, receiver: Receiver) -> None:
        ch = _hook(session, receiver.url)
        receiver.script = [(500, {})]  # the receiver answers "ok" as its body
        result = _send(ch, allow=True)
        assert (result.ok, result.status, result.error) == (False, 500, "HTTP 500")

    def test_closed_port_and_a_listener_that_is_no_http_server_read_the_same(self, session: Session) -> None:
        with greeting_listener(b"SSH-2.0-OpenSSH_9.6\r\n") as port:
            not_http = _send(_hook(session, f"http://127.0.0.1:{port}/"), allow=True)
        closed = _send(_hook(session, f"http://127.0.0.1:{free_port()}/"), allow=True)
        assert closed.error == not_http.error == "could not connect to 127.0.0.1"
        assert closed.status is None and not_http.status is None

    def test_the_test_button_reports_the_refusal_without_sending(self, client_as: Callable[..., TestClient], session: Session, receiver: Receiver) -> None:
        ch = _hook(session, receiver.url)
        r = client_as("admin").post(f"/admin/alerts/channels/{ch.id}/test")
        assert r.status_code == 200 and 'class="flash error"' in r.text
        assert f"Test message to {ch.name} failed: url: 127.0.0.1 is a loopback, private" in r.text
        assert receiver.requests == []
