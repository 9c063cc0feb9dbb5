"""`draftdesk alerts channels add|list|test|remove` and `draftdesk alerts run-once`."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from sqlmodel import col
from typer.testing import CliRunner

from tests.alerts.conftest import BASE_URL, bad_accept_days, free_port
from tests.conftest import TEST_SECRET
from tests.metrics.conftest import load
from webapp.alerts import channels as alerts_channels
from webapp.alerts.models import AlertChannel, AlertOutbox


def _invoke(monkeypatch: pytest.MonkeyPatch, db_url: str, *args: str):  # type: ignore[no-untyped-def]
    from webapp.app.cli import app as cli_app

    monkeypatch.setenv("DRAFTDESK_DATABASE_URL", db_url)
    monkeypatch.setenv("DRAFTDESK_MODE", "dev")
    monkeypatch.setenv("DRAFTDESK_SECRET_KEY", TEST_SECRET)
    monkeypatch.setenv("DRAFTDESK_BASE_URL", BASE_URL)
    monkeypatch.setenv("DRAFTDESK_ALERTS_ALLOW_PRIVATE_TARGETS", "1")  # the receivers listen on loopback
    return CliRunner().invoke(cli_app, ["alerts", *args])


def test_add_list_test_remove(monkeypatch, db_url, session, receiver) -> None:  # type: ignore[no-untyped-def]
    r = _invoke(monkeypatch, db_url, "channels", "add", "--name", "ops", "--kind", "webhook", "--url", receiver.url,
                "--topic", "accept_rate", "--topic", "regression", "--no-resolved")
    assert r.exit_code == 0, r.output
    session.expire_all()
    ch = session.execute(select(AlertChannel)).scalars().one()
    assert (ch.kind, ch.topics, ch.send_resolved) == ("webhook", ["accept_rate", "regression"], False)
    assert f"signing secret: {alerts_channels.signing_secret(ch, TEST_SECRET)}" in r.output

    r = _invoke(monkeypatch, db_url, "channels", "list", "--show-secrets")
    assert r.exit_code == 0
    assert "ops\twebhook" in r.output and "topics=accept_rate,regression" in r.output and "resolved=no" in r.output
    assert alerts_channels.signing_secret(ch, TEST_SECRET) in r.output

    r = _invoke(monkeypatch, db_url, "channels", "test", "ops")
    assert r.exit_code == 0 and "test message delivered to ops (HTTP 200)" in r.output
    assert receiver.requests[0].json()["items"][0]["kind"] == "test"
    assert receiver.requests[0].headers["x-draftdesk-signature"].startswith("v1=")

    r = _invoke(monkeypatch, db_url, "channels", "remove", "ops")
    assert r.exit_code == 0 and "channel ops removed" in r.output
    session.expire_all()
    assert session.execute(select(AlertChannel)).scalars().all() == []


def test_test_of_a_channel_that_is_down_exits_1(monkeypatch, db_url, session) -> None:  # type: ignore[no-untyped-def]
    alerts_channels.add_channel(session=session, name="down", kind="slack", target=f"http://127.0.0.1:{free_port()}/", allow_private_targets=True)
    session.commit()
    r = _invoke(monkeypatch, db_url, "channels", "test", "down")
    assert r.exit_code == 1 and "failed: could not connect to 127.0.0.1" in r.output


def test_bad_channel_exits_2_naming_the_field(monkeypatch, db_url, session) -> None:  # type: ignore[no-untyped-def]
    r = _invoke(monkeypatch, db_url, "channels", "add", "--name", "m", "--kind", "email", "--smtp-host", "h",
                "--from", "a@example.test", "--to", "b@example.test", "--security", "ssl")
    assert r.exit_code == 2 and "security: must be one of starttls, tls, none" in r.output
    r = _invoke(monkeypatch, db_url, "channels", "remove", "nope")
    assert r.exit_code == 2 and "channel: no channel 'nope'" in r.output


def test_run_once_evaluates_and_delivers(monkeypatch, db_url, session, spec, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "notes.jsonl"
    r = _invoke(monkeypatch, db_url, "channels", "add", "--name", "log", "--kind", "file", "--path", str(log))
    assert r.exit_code == 0, r.output
    load(session, spec, bad_accept_days())
    r = _invoke(monkeypatch, db_url, "run-once")
    assert r.exit_code == 0, r.output
    assert "evaluated: 1 new transitions, 1 messages queued" in r.output
    assert "delivered: 1 sent, 0 to retry, 0 given up" in r.output
    [line] = log.read_text().splitlines()
    note = json.loads(line)
    assert note["items"][0]["days"] == ["2026-11-03", "2026-11-04", "2026-11-05"]
    assert f"{BASE_URL}/metrics?start=2026-11-03&end=2026-11-05" in note["text"]
    session.expire_all()
    assert session.execute(select(col(AlertOutbox.status))).scalars().all() == ["sent"]
    r = _invoke(monkeypatch, db_url, "run-once")
    assert "evaluated: 0 new transitions" in r.output
