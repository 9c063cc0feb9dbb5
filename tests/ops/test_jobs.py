"""`draftdesk jobs`: the background jobs as their own process, beside `serve --no-background`."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlmodel import Session

from tests.conftest import SPEC_PATH, TEST_SECRET
from tests.factories import make_user
from tests.metrics.conftest import ev
from tests.waiting import wait_for
from webapp.app.main import create_app
from webapp.auth import service as auth_service
from webapp.core.config import Settings
from webapp.core.spec import EvalSpec
from webapp.metrics import stale
from webapp.metrics.models import DailyAggregate

DRAFTDESK = str(Path(sys.executable).with_name("draftdesk"))


def jobs_env(db_url: str) -> dict[str, str]:
    return {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_SECRET_KEY": TEST_SECRET, "DRAFTDESK_SPEC": str(SPEC_PATH)}


def test_the_jobs_process_rebuilds_stale_days_and_stops_cleanly_on_sigterm(
    db_url: str, session: Session, spec: EvalSpec, tmp_path: Path
) -> None:
    # events posted to `serve --separate-jobs`: the request stores them and marks their days stale,
    # and leaves the rebuild to the jobs process (no job runs in the server's app either)
    app = create_app(Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH, separate_jobs=True))
    user = make_user(session, email="assistant@example.test", roles=["labeler"])
    _, token = auth_service.create_token(session=session, user=user, name="assistant", scopes=["ingest"])
    session.commit()
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as assistant:
        r = assistant.post("/api/v1/events", json=[ev("2026-11-02"), ev("2026-11-02", action="reject"), ev("2026-11-03")])
        assert r.status_code == 200 and r.json()["created"] == 3
    session.expire_all()
    assert stale.stale_days(session) == {dt.date(2026, 11, 2), dt.date(2026, 11, 3)}
    assert session.execute(select(func.count()).select_from(DailyAggregate)).scalar_one() == 0
    log = tmp_path / "jobs.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([DRAFTDESK, "jobs"], env=jobs_env(db_url), stdout=out, stderr=subprocess.STDOUT)
        try:

            def rebuilt() -> bool:
                assert proc.poll() is None, log.read_text()
                session.expire_all()
                return not stale.stale_days(session)

            wait_for(rebuilt, timeout=60, what="the jobs process to rebuild the stale days")
            stored = session.execute(
                select(DailyAggregate.day, DailyAggregate.n_events, DailyAggregate.n_reject).where(
                    DailyAggregate.intent == "*", DailyAggregate.plan == "*", DailyAggregate.agent_id == "*"
                ).order_by(DailyAggregate.day)
            ).all()
            assert [(str(d), n, r) for d, n, r in stored] == [("2026-11-02", 2, 1), ("2026-11-03", 1, 0)]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    assert '"jobs: stopped"' in log.read_text()


def test_an_unmigrated_database_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    out = subprocess.run([DRAFTDESK, "jobs"], env=jobs_env(url), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "the database is not migrated (no tables, or migrations pending): start `draftdesk serve` first" in out.stderr + out.stdout


def test_without_separate_jobs_the_events_request_rebuilds_its_days(db_url: str, session: Session) -> None:
    # serve --no-background (tests, scripts): nothing else would rebuild, so the request does
    app = create_app(Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH))
    user = make_user(session, email="assistant@example.test", roles=["labeler"])
    _, token = auth_service.create_token(session=session, user=user, name="assistant", scopes=["ingest"])
    session.commit()
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as assistant:
        assert assistant.post("/api/v1/events", json=[ev("2026-11-02")]).json()["created"] == 1
    session.expire_all()
    assert stale.stale_days(session) == set()
    assert session.execute(select(func.count()).select_from(DailyAggregate)).scalar_one() > 0
