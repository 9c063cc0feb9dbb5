"""Issue 41 item 5: IPv6 forms carrying a private IPv4 address, numeric host forms read once by the parser that
sends, and the email channel's SMTP host under the same rules as webhooks, reported by status only."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlmodel import Session

from tests.alerts.conftest import BASE_URL, Mailbox, free_port, greeting_listener
from tests.conftest import SPEC_PATH, TEST_SECRET
from webapp.alerts import channels as alerts_channels
from webapp.alerts import delivery, targets
from webapp.alerts.models import AlertChannel
from webapp.core.config import Settings

# Each embeds 127.0.0.1, 10.0.0.1, 169.254.169.254 or 192.168.0.1 in an IPv6 address that routes to it.
EMBEDDED_PRIVATE = [
    "::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:0:a00:1",  # IPv4-mapped (two spellings), IPv4-translated
    "::127.0.0.1", "::a9fe:a9fe",  # IPv4-compatible
    "64:ff9b::7f00:1", "64:ff9b::169.254.169.254", "64:ff9b:1::808:808",  # NAT64 well-known; local-use is never public
    "2002:7f00:1::1", "2002:c0a8:1::",  # 6to4
]
# The same hosts that carry a public IPv4 address (8.8.8.8 or 93.184.215.14) stay public.
EMBEDDED_PUBLIC = ["::ffff:808:808", "64:ff9b::808:808", "2002:5db8:d70e::1"]
# Host forms the C resolver reads as 127.0.0.1 (decimal, hex, octal parts, fewer than four parts).
NUMERIC_LOOPBACK = ["2130706433", "0x7f000001", "0x7f.1", "127.1", "017700000001", "0x7f.0.0.1"]


@pytest.fixture
def settings(db_url: str) -> Settings:
    """The production default: private targets not allowed."""
    return Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH, base_url=BASE_URL)


class TestEmbeddedIPv4:
    @pytest.mark.parametrize("address", EMBEDDED_PRIVATE)
    def test_an_ipv6_address_carrying_a_private_ipv4_is_not_public(self, address: str) -> None:
        assert targets.is_public(ipaddress.ip_address(address)) is False

    @pytest.mark.parametrize("address", EMBEDDED_PUBLIC)
    def test_one_carrying_a_public_ipv4_is(self, address: str) -> None:
        assert targets.is_public(ipaddress.ip_address(address)) is True

    @pytest.mark.parametrize("address", EMBEDDED_PRIVATE)
    def test_refused_at_save_naming_the_field(self, session: Session, address: str) -> None:
        with pytest.raises(alerts_channels.AlertsError, match=r"^url: .* non-public address"):
            alerts_channels.add_channel(session=session, name="h", kind="webhook", target=f"http://[{address}]:8080/hook")
        assert session.execute(select(AlertChannel)).scalars().all() == []


class TestNumericHostForms:
    @pytest.mark.parametrize("host", NUMERIC_LOOPBACK)
    def test_read_as_the_address_the_resolver_would_use(self, host: str) -> None:
        assert targets.literal(host) == ipaddress.IPv4Address("127.0.0.1")
        # the system resolver (what a send would otherwise ask) agrees
        assert socket.getaddrinfo(host, 80, type=socket.SOCK_STREAM)[0][4][0] == "127.0.0.1"

    @pytest.mark.parametrize("host", [*NUMERIC_LOOPBACK, "0177.0.0.1", "0x7f.0x0.0x0.0x1"])
    def test_refused_at_save_naming_the_field(self, session: Session, host: str) -> None:
        with pytest.raises(alerts_channels.AlertsError, match=r"^url: "):
            alerts_channels.add_channel(session=session, name="h", kind="slack", target=f"http://{host}/hook")
        assert session.execute(select(AlertChannel)).scalars().all() == []

    def test_a_malformed_numeric_host_is_refused_even_where_private_targets_are_allowed(self, session: Session) -> None:
        for url in ("http://0177.0.0.1/hook", "http://99999999999/hook", "http://1.2.3.4.5/hook"):
            with pytest.raises(alerts_channels.AlertsError, match=r"^url: "):
                alerts_channels.add_channel(session=session, name="h", kind="webhook", target=url, allow_private_targets=True)

    @pytest.mark.parametrize("url", ["http://0177.0.0.1/hook", "http://2130706433/hook", "http://0x7f.1/hook"])
    def test_send_test_of_a_stored_one_is_refused_not_a_500(
        self, client_as: Callable[..., TestClient], session: Session, url: str
    ) -> None:
        ch = AlertChannel(name="old-hook", kind="webhook", target=url, topics=["all"], config={}, secret_nonce="ab" * 16)
        session.add(ch)
        session.commit()
        r = client_as("admin").post(f"/admin/alerts/channels/{ch.id}/test")
        assert r.status_code == 200 and 'class="flash error"' in r.text
        assert "Test message to old-hook failed: url: " in r.text


def _email(host: str, port: int) -> dict[str, object]:
    return {"host": host, "port": port, "security": "none", "from_addr": "alerts@draftdesk.test", "to": "lead@example.test"}


def _stored_mail(session: Session, host: str, port: int) -> AlertChannel:
    """An email channel stored while private targets were allowed (or before this check existed)."""
    ch = alerts_channels.add_channel(session=session, name=f"mail-{free_port()}", kind="email", email=_email(host, port),
                                     allow_private_targets=True)
    session.commit()
    return ch


class TestSmtpHost:
    @pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "10.0.0.5", "::ffff:127.0.0.1", "2130706433", "169.254.169.254"])
    def test_a_private_smtp_host_is_refused_at_save_naming_the_field(self, session: Session, host: str) -> None:
        with pytest.raises(alerts_channels.AlertsError, match=r"^smtp_host: .* non-public address.*ALLOW_PRIVATE_TARGETS=1"):
            alerts_channels.add_channel(session=session, name="m", kind="email", email=_email(host, 25))
        assert session.execute(select(AlertChannel)).scalars().all() == []

    def test_the_admin_page_refuses_it(self, client_as: Callable[..., TestClient], session: Session) -> None:
        form = {"name": "m", "kind": "email", "smtp_host": "169.254.169.254", "smtp_port": "25", "security": "none",
                "from_addr": "a@example.test", "to": "b@example.test"}
        r = client_as("admin").post("/admin/alerts/channels", data=form)
        assert r.status_code == 400 and "smtp_host: 169.254.169.254 is a loopback, private" in r.text
        assert session.execute(select(AlertChannel)).scalars().all() == []

    def test_a_stored_private_host_is_refused_at_send_and_nothing_is_sent(self, session: Session, smtp_server: Mailbox) -> None:
        ch = _stored_mail(session, smtp_server.host, smtp_server.port)
        result = delivery.send_test(ch, base_url=BASE_URL, secret_key=TEST_SECRET, allow_private_targets=False)
        assert not result.ok and result.permanent and result.error.startswith("smtp_host: 127.0.0.1 is a loopback")
        assert smtp_server.messages == []
        # the operator's setting lets it through
        assert delivery.send_test(ch, base_url=BASE_URL, secret_key=TEST_SECRET, allow_private_targets=True).ok
        assert len(smtp_server.messages) == 1

    def test_closed_port_silent_and_foreign_listeners_read_the_same(self, session: Session) -> None:
        closed_port = free_port()
        with greeting_listener(b"SSH-2.0-OpenSSH_9.6\r\n") as ssh, greeting_listener(b"HTTP/1.1 400 Bad Request\r\n\r\n") as http:
            answers = [delivery.send_test(_stored_mail(session, "127.0.0.1", p), base_url=BASE_URL, secret_key=TEST_SECRET,
                                          allow_private_targets=True) for p in (closed_port, ssh, http)]
        assert [a.error for a in answers] == [f"could not deliver to 127.0.0.1:{p}" for p in (closed_port, ssh, http)]
        assert all(a.status is None and not a.ok for a in answers)

    def test_a_refusal_is_reported_by_its_code_never_the_servers_text(self, session: Session) -> None:
        with greeting_listener(b"554 5.7.1 internal-relay.corp.example rejects you: see http://wiki.corp/smtp\r\n") as port:
            result = delivery.send_test(_stored_mail(session, "127.0.0.1", port), base_url=BASE_URL, secret_key=TEST_SECRET,
                                        allow_private_targets=True)
        assert (result.ok, result.status, result.error, result.permanent) == (False, 554, "SMTP 554", True)

    def test_the_timeout_is_ten_seconds(self) -> None:
        assert delivery.SMTP_TIMEOUT_S == 10.0 and delivery.HTTP_TIMEOUT_S == 10.0
