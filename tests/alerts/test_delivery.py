"""End to end with real parts: events through the API, the outbox, a local HTTP receiver and a local SMTP server."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re

import pytest
from sqlalchemy import select
from sqlmodel import Session

from tests.alerts.conftest import BASE_URL, DAY1, bad_accept_days, free_port, queue_bad_days
from tests.conftest import TEST_SECRET
from tests.metrics.conftest import ev
from webapp.alerts import channels as alerts_channels
from webapp.alerts import delivery
from webapp.alerts import outbox as alerts_outbox
from webapp.alerts.models import AlertNotice, AlertOutbox
from webapp.core.timeutil import as_utc, utcnow
from webapp.metrics.models import Event

# aiosmtpd warns about AUTH without STARTTLS even when the whole connection is implicit TLS
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")


def _outbox(session: Session) -> list[AlertOutbox]:
    session.expire_all()
    return list(session.execute(select(AlertOutbox).order_by(AlertOutbox.id)).scalars())  # type: ignore[arg-type]


def _deliver(engine, now=None):  # type: ignore[no-untyped-def]
    return delivery.deliver_due(engine=engine, base_url=BASE_URL, secret_key=TEST_SECRET, allow_private_targets=True, now=now)


def _mail(session: Session, box, **config):  # type: ignore[no-untyped-def]
    """An email channel on the mailbox's server: plain SMTP to lead@example.test unless config says otherwise."""
    base = {"host": box.host, "port": box.port, "security": "none", "from_addr": "alerts@draftdesk.test",
            "to": "lead@example.test"}
    return alerts_channels.add_channel(session=session, name="mail", kind="email", email=base | config, allow_private_targets=True)


def _hmac_sha256(key: bytes, msg: bytes) -> str:
    """HMAC-SHA256 written out from RFC 2104 (independent of the hmac module the app uses)."""
    block = 64
    if len(key) > block:
        key = hashlib.sha256(key).digest()
    key = key.ljust(block, b"\0")
    inner = hashlib.sha256(bytes(k ^ 0x36 for k in key) + msg).digest()
    return hashlib.sha256(bytes(k ^ 0x5C for k in key) + inner).hexdigest()


class TestAcceptRateFires:
    def test_one_webhook_and_one_email_with_numbers_and_link(self, api_as, session, engine, receiver, smtp_server) -> None:  # type: ignore[no-untyped-def]
        hook = alerts_channels.add_channel(session=session, name="ops-hook", kind="webhook", target=receiver.url, allow_private_targets=True)
        _mail(session, smtp_server)
        session.commit()
        agent = api_as(scopes=["ingest"])
        r = agent.post("/api/v1/events", json=bad_accept_days())
        assert r.status_code == 200 and r.json()["created"] == 12

        msgs = _outbox(session)
        assert len(msgs) == 2  # one per channel, written by the ingestion request
        report = _deliver(engine)
        assert len(report.sent) == 2 and not report.retrying

        assert len(receiver.requests) == 1
        body = receiver.requests[0].json()
        assert [it["topic"] for it in body["items"]] == ["accept_rate"]
        item = body["items"][0]
        # 2 accepted of 4 shown drafts on each day: 0.5, under the 0.65 threshold for 3 consecutive days
        assert item["state"] == "firing"
        assert item["value"] == 0.5 and item["threshold"] == 0.65 and item["op"] == "<"
        assert item["days"] == ["2026-11-03", "2026-11-04", "2026-11-05"]
        assert item["segment"] == "all traffic"
        assert item["url"] == f"{BASE_URL}/metrics?start=2026-11-03&end=2026-11-05"
        assert receiver.requests[0].headers["idempotency-key"] == next(m for m in msgs if m.channel_id == hook.id).idempotency_key

        assert len(smtp_server.messages) == 1
        mail = smtp_server.messages[0]
        assert mail["To"] == "lead@example.test"
        assert "FIRING: Accept rate" in mail["Subject"]
        text = mail.get_content()
        assert "value 50.0% vs threshold 65.0%" in text
        assert "from 2026-11-03 to 2026-11-05" in text
        assert f"{BASE_URL}/metrics?start=2026-11-03&end=2026-11-05" in text

        # a retried batch (all duplicates) and another pass queue nothing new
        agent.post("/api/v1/events", json=[])
        alerts_outbox.record_transitions(session=session, spec=agent.app.state.spec)
        session.commit()
        assert len(_outbox(session)) == 2

    def test_transitions_of_one_batch_are_grouped_per_channel(self, api_as, session, engine, receiver) -> None:  # type: ignore[no-untyped-def]
        alerts_channels.add_channel(session=session, name="all", kind="slack", target=receiver.url, allow_private_targets=True)
        alerts_channels.add_channel(session=session, name="regressions-only", kind="webhook", target=receiver.url, topics=["regression"], allow_private_targets=True)
        session.commit()
        events = bad_accept_days()
        # and 2 rejects in 4 shown drafts on the last two days: reject rate 0.5 > 0.10 on 2 consecutive days
        for day in (DAY1 + dt.timedelta(days=1), DAY1 + dt.timedelta(days=2)):
            events += [ev(day, 14, action="reject"), ev(day, 15, action="reject")]
        r = api_as(scopes=["ingest"]).post("/api/v1/events", json=events)
        assert r.status_code == 200
        msgs = _outbox(session)
        assert len(msgs) == 1  # the regression-only channel gets nothing
        _deliver(engine)
        assert len(receiver.requests) == 1
        body = receiver.requests[0].json()
        assert set(body) == {"text", "blocks"}
        assert body["text"].count("[FIRING]") == 2
        assert "Accept rate" in body["text"] and "Reject rate" in body["text"]
        assert len([b for b in body["blocks"] if b["type"] == "section"]) == 2


class TestRetries:
    def _queue(self, session, spec, target: str) -> AlertOutbox:  # type: ignore[no-untyped-def]
        alerts_channels.add_channel(session=session, name="hook", kind="webhook", target=target, allow_private_targets=True)
        queue_bad_days(session, spec)
        [msg] = _outbox(session)
        return msg

    def test_500_twice_then_200_same_key_three_times(self, session, engine, spec, receiver) -> None:  # type: ignore[no-untyped-def]
        receiver.script = [(500, {}), (500, {})]
        msg = self._queue(session, spec, receiver.url)
        t0 = as_utc(msg.next_attempt_at)
        now = t0
        waits = []
        for _ in range(3):
            _deliver(engine, now)
            [msg] = _outbox(session)
            if msg.status == "sent":
                break
            nxt = as_utc(msg.next_attempt_at)
            waits.append((nxt - now).total_seconds())
            assert _deliver(engine, nxt - dt.timedelta(seconds=1)).sent == []  # not before its time
            now = nxt
        assert len(receiver.requests) == 3
        assert {r.headers["idempotency-key"] for r in receiver.requests} == {msg.idempotency_key}
        assert msg.status == "sent" and msg.attempts == 3 and msg.sent_at is not None
        # backoff: 30 s then 60 s ceilings, jitter keeps each wait in [50%, 100%] of its ceiling
        assert 15 <= waits[0] <= 30 and 30 <= waits[1] <= 60

    @pytest.mark.parametrize(
        ("status", "state"), [(429, "pending"), (408, "pending"), (502, "pending"), (400, "failed"), (410, "failed"), (301, "failed")]
    )
    def test_transient_answers_are_retried_and_permanent_ones_given_up_at_once(  # type: ignore[no-untyped-def]
        self, session, engine, spec, receiver, status, state
    ) -> None:
        receiver.script = [(status, {})]
        msg = self._queue(session, spec, receiver.url)
        now = as_utc(msg.next_attempt_at)
        report = _deliver(engine, now)
        [msg] = _outbox(session)
        assert (msg.status, msg.attempts, msg.last_status) == (state, 1, status)
        if state == "failed":
            assert report.failed == [msg.id] and msg.last_error.startswith(f"gave up (permanent error) after 1 attempts: HTTP {status}")
        else:
            assert report.retrying == [msg.id] and 15 <= (as_utc(msg.next_attempt_at) - now).total_seconds() <= 30
            assert _deliver(engine, as_utc(msg.next_attempt_at)).sent == [msg.id]

    def test_retry_after_is_honoured(self, session, engine, spec, receiver) -> None:  # type: ignore[no-untyped-def]
        receiver.script = [(503, {"Retry-After": "120"})]
        msg = self._queue(session, spec, receiver.url)
        now = as_utc(msg.next_attempt_at)
        _deliver(engine, now)
        [msg] = _outbox(session)
        assert msg.status == "pending" and msg.last_status == 503
        assert as_utc(msg.next_attempt_at) - now == dt.timedelta(seconds=120)

    def test_receiver_down_keeps_retrying_then_gives_up_after_24h(self, api_as, session, engine, receiver) -> None:  # type: ignore[no-untyped-def]
        alerts_channels.add_channel(session=session, name="down", kind="webhook", target=f"http://127.0.0.1:{free_port()}/hook", allow_private_targets=True)
        alerts_channels.add_channel(session=session, name="up", kind="slack", target=receiver.url, allow_private_targets=True)
        session.commit()
        r = api_as(scopes=["ingest"]).post("/api/v1/events", json=bad_accept_days())
        assert r.status_code == 200 and r.json()["created"] == 12  # ingestion does not wait for any receiver
        report = _deliver(engine)
        assert len(report.sent) == 1 and len(report.retrying) == 1  # the working channel is not held up
        down = next(m for m in _outbox(session) if m.status == "pending")
        assert down.attempts == 1 and down.last_error == "could not connect to 127.0.0.1"
        now = as_utc(down.next_attempt_at)
        for _ in range(60):
            _deliver(engine, now)
            down = next(m for m in _outbox(session) if m.id == down.id)
            if down.status != "pending":
                break
            now = as_utc(down.next_attempt_at)
        assert down.status == "failed" and "gave up" in down.last_error
        assert now - as_utc(down.created_at) <= dt.timedelta(hours=24)
        assert down.attempts > 10  # hourly retries after the backoff reaches its cap

    def test_restart_between_claim_and_send_loses_nothing(self, session, engine, spec, receiver, db_url) -> None:  # type: ignore[no-untyped-def]
        msg = self._queue(session, spec, receiver.url)
        now = as_utc(msg.next_attempt_at)
        token, ids = delivery.claim_due(engine=engine, now=now)  # a worker claims ... and dies before sending
        assert ids == [msg.id]
        assert _deliver(engine, now).sent == []  # the claim holds while it is valid
        from webapp.core.db import make_engine

        fresh = make_engine(db_url)  # a restarted process
        try:
            later = now + dt.timedelta(seconds=delivery.CLAIM_S + 1)
            report = delivery.deliver_due(engine=fresh, base_url=BASE_URL, secret_key=TEST_SECRET, allow_private_targets=True, now=later)
        finally:
            fresh.dispose()
        assert report.sent == [msg.id]
        assert len(receiver.requests) == 1
        [msg] = _outbox(session)
        assert msg.status == "sent"


class TestSignature:
    def test_hmac_over_timestamp_and_body_verifies_independently(self, session, engine, spec, receiver) -> None:  # type: ignore[no-untyped-def]
        ch = alerts_channels.add_channel(session=session, name="signed", kind="webhook", target=receiver.url, allow_private_targets=True)
        secret = alerts_channels.signing_secret(ch, TEST_SECRET)  # what `channels add` prints for the receiver
        queue_bad_days(session, spec)
        _deliver(engine)
        [req] = receiver.requests
        ts = req.headers["x-draftdesk-timestamp"]
        assert abs(int(ts) - utcnow().timestamp()) < 60
        expected = "v1=" + _hmac_sha256(secret.encode(), ts.encode() + b"." + req.body)
        assert req.headers["x-draftdesk-signature"] == expected
        tampered = req.body.replace(b"0.65", b"0.95")
        assert "v1=" + _hmac_sha256(secret.encode(), ts.encode() + b"." + tampered) != expected
        assert json.loads(req.body)["idempotency_key"] == req.headers["idempotency-key"]

    def test_secret_depends_on_app_key_and_channel(self, session) -> None:  # type: ignore[no-untyped-def]
        a = alerts_channels.add_channel(session=session, name="a", kind="webhook", target="https://x.test/a")
        b = alerts_channels.add_channel(session=session, name="b", kind="webhook", target="https://x.test/b")
        assert alerts_channels.signing_secret(a, "k1") == alerts_channels.signing_secret(a, "k1")
        assert alerts_channels.signing_secret(a, "k1") != alerts_channels.signing_secret(b, "k1")
        assert alerts_channels.signing_secret(a, "k1") != alerts_channels.signing_secret(a, "k2")
        assert a.secret_nonce not in alerts_channels.signing_secret(a, "k1")


class TestIngestionIsolation:
    def test_a_failing_hook_rolls_back_to_its_savepoint_and_ingestion_succeeds(self, api_as, session, spec, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        alerts_channels.add_channel(session=session, name="hook", kind="slack", target="https://x.test/")
        session.commit()
        real = alerts_outbox.enqueue

        def broken_enqueue(**kwargs):  # type: ignore[no-untyped-def]
            real(**kwargs)  # writes its rows, then fails: they must be rolled back, the events kept
            raise RuntimeError("boom")

        monkeypatch.setattr(alerts_outbox, "enqueue", broken_enqueue)
        r = api_as(scopes=["ingest"]).post("/api/v1/events", json=bad_accept_days())
        assert r.status_code == 200 and r.json()["created"] == 12
        session.expire_all()
        assert len(session.execute(select(Event)).scalars().all()) == 12
        assert _outbox(session) == []
        assert session.execute(select(AlertNotice)).scalars().all() == []  # not recorded: the periodic pass will
        monkeypatch.setattr(alerts_outbox, "enqueue", real)
        result = alerts_outbox.record_transitions(session=session, spec=spec)
        assert len(result.messages) == 1


# RFC 5322 section 3.6.4: msg-id = "<" id-left "@" id-right ">", id-left = dot-atom-text,
# id-right = dot-atom-text / no-fold-literal; atext is the printable ASCII without specials (3.2.3).
ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
DOT_ATOM = rf"{ATEXT}+(?:\.{ATEXT}+)*"
MSG_ID = re.compile(rf"<(?P<left>{DOT_ATOM})@(?P<right>{DOT_ATOM}|\[[\x21-\x5a\x5e-\x7e]*\])>")


class TestMessageId:
    def test_channels_test_email_has_a_valid_message_id(self, session, smtp_server) -> None:  # type: ignore[no-untyped-def]
        ch = _mail(session, smtp_server)
        session.commit()
        assert delivery.send_test(ch, base_url=BASE_URL, secret_key=TEST_SECRET, allow_private_targets=True).ok
        [mail] = smtp_server.messages
        found = MSG_ID.fullmatch(mail["Message-ID"].strip())
        assert found is not None, mail["Message-ID"]
        assert ":" not in found["left"]

    def test_any_key_gives_a_valid_stable_id(self) -> None:
        for key in ("dd-" + "ab" * 20, "test:3:9f2c", "a b", "x..y", "ünïcode"):
            mid = delivery.message_id(key)
            assert MSG_ID.fullmatch(mid), (key, mid)
            assert delivery.message_id(key) == mid
        assert delivery.message_id("dd-0123") == "<dd-0123@draftdesk.alerts>"  # the outbox key is kept as it is
        assert delivery.message_id("test:3:9f2c") != delivery.message_id("test:4:9f2c")


class TestEmailSecurity:
    def test_starttls_or_tls_with_password_from_the_environment(self, session, secure_smtp_server, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        security, box = secure_smtp_server
        ch = _mail(session, box, security=security, username="alerts", password_env="DRAFTDESK_SMTP_TEST_PASSWORD",
                   to="lead@example.test, pm@example.test", ca_file=box.ca_file)
        session.commit()
        assert "s3cret" not in json.dumps(ch.config)  # only the variable's name is stored
        missing = delivery.send_test(ch, base_url=BASE_URL, secret_key=TEST_SECRET, allow_private_targets=True)
        assert not missing.ok and "DRAFTDESK_SMTP_TEST_PASSWORD" in missing.error
        monkeypatch.setenv("DRAFTDESK_SMTP_TEST_PASSWORD", "s3cret-from-env")
        result = delivery.send_test(ch, base_url=BASE_URL, secret_key=TEST_SECRET, allow_private_targets=True)
        assert result.ok, result.error
        assert box.logins == [("alerts", "s3cret-from-env")]
        [mail] = box.messages
        assert box.envelopes[0].rcpt_tos == ["lead@example.test", "pm@example.test"]
        assert mail["Subject"] == "[Draft Desk] TEST: Test message"

    def test_an_untrusted_certificate_is_refused(self, session, secure_smtp_server, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        security, box = secure_smtp_server
        monkeypatch.setenv("DRAFTDESK_SMTP_TEST_PASSWORD", "s3cret-from-env")
        ch = _mail(session, box, security=security, username="alerts", password_env="DRAFTDESK_SMTP_TEST_PASSWORD")
        result = delivery.send_test(ch, base_url=BASE_URL, secret_key=TEST_SECRET, allow_private_targets=True)
        # reported as any failure before an SMTP reply (issue 41: status only, never the reason)
        assert not result.ok and result.error == f"could not deliver to {box.host}:{box.port}"
        assert box.logins == [] and box.messages == []  # the password never left over an unverified link


class TestChannelsApart:
    def _item(self, n: int) -> dict:  # type: ignore[type-arg]
        return {"key": f"t:{n}", "kind": "metric", "topic": "accept_rate", "state": "firing", "alert": "Accept rate",
                "rule": "r", "window": "w", "days": [], "segment": "all traffic", "path": "/metrics"}

    def test_slow_receivers_are_served_side_by_side(self, session, engine, receiver) -> None:  # type: ignore[no-untyped-def]
        for name in ("a", "b"):
            alerts_channels.add_channel(session=session, name=name, kind="slack", target=f"{receiver.url}/{name}", allow_private_targets=True)
        # the receiver answers neither until both are in flight: served one after the other, both fail
        receiver.together = {"/hook/a", "/hook/b"}
        alerts_outbox.enqueue(session=session, items=[self._item(1)])
        session.commit()
        report = _deliver(engine)
        assert len(report.sent) == 2 and sorted(r.path for r in receiver.requests) == ["/hook/a", "/hook/b"]

    def test_a_failing_receiver_keeps_its_other_messages_for_the_next_pass(self, session, engine) -> None:  # type: ignore[no-untyped-def]
        alerts_channels.add_channel(session=session, name="down", kind="slack", target=f"http://127.0.0.1:{free_port()}/", allow_private_targets=True)
        alerts_outbox.enqueue(session=session, items=[self._item(1)])
        alerts_outbox.enqueue(session=session, items=[self._item(2)])
        session.commit()
        report = _deliver(engine)
        assert len(report.retrying) == 1
        first, second = _outbox(session)
        assert first.attempts == 1 and second.attempts == 0
        assert second.claimed_until is None and second.claim_token is None  # free for the next pass
