"""An email channel cannot carry the server's secrets to an admin's SMTP server (issue 33, item 4).

The SMTP password comes only from a DRAFTDESK_SMTP_* variable, and never goes out without TLS:
refused when the channel is saved (naming the field) and again at send time for a channel stored before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlmodel import Session

from tests.alerts.conftest import BASE_URL, Mailbox, _Handler, free_port
from tests.conftest import TEST_SECRET
from webapp.alerts import channels as alerts_channels
from webapp.alerts import delivery
from webapp.alerts.models import AlertChannel

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")

SECRET = "the-servers-secret-key-value"
FORM = {"name": "mail", "kind": "email", "smtp_port": "", "username": "me", "from_addr": "a@example.test",
        "to": "me@example.test"}


@pytest.fixture
def attackers_server() -> Iterator[Mailbox]:
    """An SMTP server that takes AUTH PLAIN over a plain connection and keeps every password it is sent."""
    box = Mailbox("127.0.0.1", free_port())

    def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        box.logins.append((data.login.decode(), data.password.decode()))
        return AuthResult(success=True)

    controller = Controller(_Handler(box), hostname=box.host, port=box.port, authenticator=authenticator,
                            auth_require_tls=False)
    controller.start()
    yield box
    controller.stop()


@pytest.mark.parametrize("env", ["DRAFTDESK_SECRET_KEY", "DRAFTDESK_DATABASE_URL", "HOME", "DRAFTDESK_SMTP_", "DRAFTDESK_SMTP_x-y"])
def test_the_page_refuses_a_password_variable_outside_the_prefix(client_as: Callable[..., TestClient], session: Session, attackers_server: Mailbox, env: str) -> None:
    form = FORM | {"smtp_host": attackers_server.host, "smtp_port": str(attackers_server.port), "security": "starttls",
                   "password_env": env}
    r = client_as("admin").post("/admin/alerts/channels", data=form)
    assert r.status_code == 400
    assert "password_env: must name a variable starting with DRAFTDESK_SMTP_" in r.text
    assert session.execute(select(AlertChannel)).scalars().all() == []


def test_a_login_without_tls_is_refused(client_as: Callable[..., TestClient], session: Session, attackers_server: Mailbox) -> None:
    form = FORM | {"smtp_host": attackers_server.host, "smtp_port": str(attackers_server.port), "security": "none",
                   "password_env": "DRAFTDESK_SMTP_PASSWORD"}
    r = client_as("admin").post("/admin/alerts/channels", data=form)
    assert r.status_code == 400 and "security: a login needs starttls or tls" in r.text
    assert session.execute(select(AlertChannel)).scalars().all() == []
    # the same rules from the command line and the service
    with pytest.raises(alerts_channels.AlertsError, match="^password_env: must name a variable starting with DRAFTDESK_SMTP_"):
        alerts_channels.add_channel(session=session, name="m", kind="email", email={
            "host": "smtp.example.test", "security": "tls", "username": "me", "password_env": "DRAFTDESK_SECRET_KEY",
            "from_addr": "a@example.test", "to": "b@example.test"})


@pytest.mark.parametrize(("env", "security", "field"), [("DRAFTDESK_SECRET_KEY", "none", "password_env"),
                                                         ("DRAFTDESK_SMTP_PASSWORD", "none", "security")])
def test_a_channel_stored_before_the_rules_never_sends_the_value(
    client_as: Callable[..., TestClient], session: Session, attackers_server: Mailbox, monkeypatch: pytest.MonkeyPatch, env: str, security: str, field: str
) -> None:
    monkeypatch.setenv(env, SECRET)
    ch = AlertChannel(name="old-mail", kind="email", target="", topics=["all"], config={
        "host": attackers_server.host, "port": attackers_server.port, "security": security, "username": "me",
        "password_env": env, "from_addr": "a@example.test", "to": ["me@example.test"], "ca_file": ""})
    session.add(ch)
    session.commit()
    result = delivery.send_test(ch, base_url=BASE_URL, secret_key=TEST_SECRET)
    assert not result.ok and result.permanent and result.error.startswith(f"{field}: ")
    r = client_as("admin").post(f"/admin/alerts/channels/{ch.id}/test")  # the "Send test" button
    assert f"Test message to old-mail failed: {field}: " in r.text
    assert attackers_server.logins == [] and attackers_server.messages == []
    assert SECRET not in r.text
