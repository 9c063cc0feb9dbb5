"""`draftdesk jobs`: the background jobs as their own process, beside `serve --no-background`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func, select
from sqlmodel import Session

from tests.conftest import SPEC_PATH, TEST_SECRET
from tests.metrics.conftest import ev, load
from tests.waiting import wait_for
from webapp.metrics import stale
from webapp.metrics.models import DailyAggregate
from webapp.spec import EvalSpec

DRAFTDESK = str(Path(sys.executable).with_name("draftdesk"))


def jobs_env(db_url: str) -> dict[str, str]:
    return {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_SECRET_KEY": TEST_SECRET, "DRAFTDESK_SPEC": str(SPEC_PATH)}


def test_the_jobs_process_rebuilds_stale_days_and_stops_cleanly_on_sigterm(
    db_url: str, session: Session, spec: EvalSpec, tmp_path: Path
) -> None:
    # events posted to `serve --no-background`: their days are marked stale, nothing rebuilds them
    load(session, spec, [ev("2026-11-02"), ev("2026-11-02", action="reject"), ev("2026-11-03")], rebuild=False)
    assert stale.stale_days(session)
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


def test_stale_days_are_left_alone_without_the_jobs(session: Session, spec: EvalSpec) -> None:
    # the control: nothing else in this setting rebuilds (so the first test's rebuild is the process's)
    load(session, spec, [ev("2026-11-02")], rebuild=False)
    session.expire_all()
    assert stale.stale_days(session) and session.execute(select(func.count()).select_from(DailyAggregate)).scalar_one() == 0
