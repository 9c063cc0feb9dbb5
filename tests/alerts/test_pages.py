"""The admin page and API of alert channels, and the background worker that `draftdesk serve` runs."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select

from tests.alerts.conftest import BASE_URL, bad_accept_days, free_port, queue_bad_days
from tests.conftest import TEST_SECRET
from tests.metrics.conftest import load
from tests.waiting import wait_for
from webapp.alerts import background as alerts_background
from webapp.alerts import channels as alerts_channels
from webapp.alerts import delivery, outbox
from webapp.alerts.models import AlertChannel
from webapp.app.main import create_app
from webapp.core.config import Settings
from webapp.web.flash import FLASH_COOKIE


def _deliveries_in_three_states(session, spec, receiver) -> None:  # type: ignore[no-untyped-def]
    """Queue one message on each of three channels: one is delivered, one retries, one is refused for good."""
    alerts_channels.add_channel(session=session, name="works", kind="slack", target=receiver.url, allow_private_targets=True)
    alerts_channels.add_channel(session=session, name="down", kind="webhook", target=f"http://127.0.0.1:{free_port()}/x", allow_private_targets=True)
    alerts_channels.add_channel(session=session, name="refuses", kind="slack", target=receiver.url + "/refuses", allow_private_targets=True)
    queue_bad_days(session, spec)
    receiver.by_path["/hook/refuses"] = 404


class TestChannelsPage:
    def test_page_and_api_show_last_deliveries_sent_retrying_given_up(  # type: ignore[no-untyped-def]
        self, client_as, api_as, session, spec, engine, receiver
    ) -> None:
        _deliveries_in_three_states(session, spec, receiver)
        report = delivery.deliver_due(engine=engine, base_url=BASE_URL, secret_key=TEST_SECRET, allow_private_targets=True)
        assert (len(report.sent), len(report.retrying), len(report.failed)) == (1, 1, 1)
        page = client_as("admin").get("/admin/alerts")
        assert page.status_code == 200
        html = page.text
        for name in ("works", "down", "refuses"):
            assert f"{name} <span class=\"badge\">" in html
        assert ">sent<" in html and "retrying" in html and "next attempt" in html
        assert "given up" in html and "gave up (permanent error) after 1 attempts: HTTP 404" in html
        assert "Accept rate" in html and "50.0% vs threshold 65.0%" in html
        r = api_as("admin").get("/api/v1/alerts/channels")
        assert r.status_code == 200
        states = {c["name"]: c["deliveries"][0]["state"] for c in r.json()}
        assert states == {"works": "sent", "down": "retrying", "refuses": "given up"}
        down = next(c for c in r.json() if c["name"] == "down")["deliveries"][0]
        assert down["next_attempt_at"] and down["last_error"] == "could not connect to 127.0.0.1"
        assert api_as("support_lead").get("/api/v1/alerts/channels").status_code == 403

    def test_add_webhook_shows_its_signing_secret(self, client_as, session) -> None:  # type: ignore[no-untyped-def]
        admin = client_as("admin")
        r = admin.post(
            "/admin/alerts/channels",
            data={"name": "ops", "kind": "webhook", "url": "https://hooks.example.test/in", "topic": ["accept_rate", "no_data"],
                  "send_resolved": "1"},
            follow_redirects=False,
        )
        # post-redirect-get: a reload of the answer page repeats a GET, never the POST
        assert r.status_code == 303 and r.headers["location"] == "/admin/alerts"
        page = admin.get("/admin/alerts")
        session.expire_all()
        ch = session.execute(select(AlertChannel)).scalars().one()
        assert ch.topics == ["accept_rate", "no_data"] and ch.send_resolved
        assert "Channel ops added." in page.text
        assert alerts_channels.signing_secret(ch, TEST_SECRET) in page.text
        assert page.headers["cache-control"] == "no-store"
        reload = admin.get("/admin/alerts")  # the message is shown once; still one channel
        assert "Channel ops added." not in reload.text and alerts_channels.signing_secret(ch, TEST_SECRET) not in reload.text
        session.expire_all()
        assert len(session.execute(select(AlertChannel)).scalars().all()) == 1

    def test_a_forged_flash_cookie_is_ignored(self, client_as) -> None:  # type: ignore[no-untyped-def]
        admin = client_as("admin")
        admin.cookies.set(FLASH_COOKIE, 'abc.{"text":"Send your password to x","kind":"ok","ref":null,"path":"/admin/alerts","expires":9e9}', path="/admin/alerts")
        assert "Send your password" not in admin.get("/admin/alerts").text

    def test_bad_form_names_the_field_and_creates_nothing(self, client_as, session) -> None:  # type: ignore[no-untyped-def]
        admin = client_as("admin")
        r = admin.post("/admin/alerts/channels", data={"name": "mail", "kind": "email", "smtp_host": "smtp.example.test",
                                                       "from_addr": "a@example.test", "to": "not-an-address"})
        assert r.status_code == 400 and "to: one or more email addresses" in r.text
        r = admin.post("/admin/alerts/channels", data={"name": "disk", "kind": "file", "url": "/etc/passwd"})
        assert r.status_code == 400 and "kind: must be one of slack, webhook, email" in r.text
        session.expire_all()
        assert session.execute(select(AlertChannel)).scalars().all() == []

    def test_send_test_reports_the_answer(self, client_as, session, receiver) -> None:  # type: ignore[no-untyped-def]
        ok = alerts_channels.add_channel(session=session, name="hook", kind="webhook", target=receiver.url, allow_private_targets=True)
        bad = alerts_channels.add_channel(session=session, name="gone", kind="slack", target=f"http://127.0.0.1:{free_port()}/", allow_private_targets=True)
        session.commit()
        admin = client_as("admin")
        r = admin.post(f"/admin/alerts/channels/{ok.id}/test", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/admin/alerts"
        page = admin.get("/admin/alerts")
        assert "Test message delivered to hook (HTTP 200)" in page.text
        assert page.text.count("Test message delivered to hook") == 1  # one banner, not two
        # the card lists the delivered test instead of "Nothing sent yet"; the other channel has sent nothing
        start = page.text.index("hook <span")
        hook_card = page.text[start:page.text.index("</section>", start)]
        assert "Nothing sent yet" not in hook_card and "Test message" in hook_card and ">sent<" in hook_card
        assert page.text.count("Nothing sent yet") == 1
        assert receiver.requests[0].json()["items"][0]["alert"] == "Test message"
        admin.get("/admin/alerts")  # a reload sends nothing again
        assert len(receiver.requests) == 1
        r = admin.post(f"/admin/alerts/channels/{bad.id}/test")  # the client follows the 303
        assert r.status_code == 200 and r.url.path == "/admin/alerts"
        assert 'class="flash error"' in r.text and "Test message to gone failed: could not connect to 127.0.0.1" in r.text
        assert r.text.count("Test message to gone failed") == 1
        start = r.text.index("gone <span")
        gone_card = r.text[start:r.text.index("</section>", start)]
        assert "given up" in gone_card and "Nothing sent yet" not in r.text
        # a test is never queued for the worker: nothing pending
        assert outbox.outbox_counts(session=session).get("pending", 0) == 0

    def test_remove(self, client_as, session) -> None:  # type: ignore[no-untyped-def]
        ch = alerts_channels.add_channel(session=session, name="old", kind="slack", target="https://x.test/")
        session.commit()
        r = client_as("admin").post(f"/admin/alerts/channels/{ch.id}/delete", follow_redirects=False)
        assert r.status_code == 303
        session.expire_all()
        assert session.execute(select(AlertChannel)).scalars().all() == []


class TestBackgroundWorker:
    def test_serve_lifespan_evaluates_and_delivers(self, db_url, session, spec, receiver) -> None:  # type: ignore[no-untyped-def]
        alerts_channels.add_channel(session=session, name="hook", kind="slack", target=receiver.url, allow_private_targets=True)
        load(session, spec, bad_accept_days())  # stored (and committed) by a bulk import: no request hook ran
        settings = Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, base_url=BASE_URL,
                            background_jobs=True, alerts_interval_seconds=0.2, alerts_allow_private_targets=True)
        app = create_app(settings)
        try:
            with TestClient(app):
                wait_for(lambda: bool(receiver.requests), timeout=20, what="the background worker's delivery")
        finally:
            app.state.engine.dispose()
        assert len(receiver.requests) == 1
        assert "Accept rate" in receiver.requests[0].json()["text"]

    def test_without_background_jobs_nothing_is_sent(self, app, db_url, session, spec, receiver, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        alerts_channels.add_channel(session=session, name="hook", kind="slack", target=receiver.url, allow_private_targets=True)
        load(session, spec, bad_accept_days())
        started: list[object] = []

        async def recorded(app_: object, record: object = None) -> None:  # record: webapp/app/jobs.py's pass recorder
            started.append(app_)

        # The worker is started (or not) when the app starts: record it instead of waiting to see whether it sends.
        monkeypatch.setattr(alerts_background, "run", recorded)
        with TestClient(app):
            pass
        assert started == [] and receiver.requests == []
        on = create_app(Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, background_jobs=True))
        try:
            with TestClient(on):
                pass
        finally:
            on.state.engine.dispose()
        assert started == [on]  # the same check sees the worker when background jobs are on
