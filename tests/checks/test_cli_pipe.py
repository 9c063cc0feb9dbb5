"""`draftdesk check RUN | head -1`: the results are stored, and the closed pipe ends the output quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func
from sqlmodel import Session, select

from tests.factories import make_dataset, make_run
from webapp.checks.models import DraftCheck
from webapp.checks.types import CHECK_KEYS

ROOT = Path(__file__).resolve().parents[2]
N = 400


def test_check_piped_to_a_reader_of_one_line_stores_the_results(session: Session, db_url: str) -> None:
    # Three-word drafts without a score or an intent: every draft fails, so the report runs to
    # thousands of table lines (well over a pipe's 64 KiB) and the command writes after the reader has gone.
    ids = [f"routine-case-with-a-long-identifier-{i:04d}-" + "x" * 60 for i in range(N)]
    ds = make_dataset(session, [{"case_id": c, "category": "routine"} for c in ids], name="big")
    make_run(session, ds, [{"case_id": c, "draft_text": "a short reply"} for c in ids], name="never-drafts")
    session.commit()
    # tests/conftest.py stamps every test database at head: the CLI's own upgrade finds nothing to do.
    env = {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_MODE": "dev", "COLUMNS": "80"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from webapp.app.cli import main; main()", "check", "never-drafts"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # like `| head -1`: one line, then the reader is gone
    proc.stdout.close()
    code = proc.wait(timeout=300)
    err = proc.stderr.read()
    assert first.startswith(f"never-drafts: 0/{N} examples of the eval set")
    assert err == ""  # quiet: no BrokenPipeError traceback
    assert code == 1  # the CI gate's own verdict (golden/safety/pass rate), not a pipe error
    session.expire_all()
    stored = session.exec(select(func.count()).select_from(DraftCheck)).one()
    assert stored == N * len(CHECK_KEYS)
