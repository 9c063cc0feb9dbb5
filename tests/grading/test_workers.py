"""`draftdesk serve --workers 2` (uvicorn's own workers): two processes answer the same graders, and
everything that must be shared (sessions, CSRF, sign-in rate limits, reservations) is in the
database, not in a worker."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlmodel import Session, select

from tests.conftest import TEST_SECRET
from tests.factories import DEFAULT_PASSWORD
from tests.grading.conftest import FORM, HX, GradingWorld, build_world
from tests.waiting import wait_for
from webapp.core.db import make_engine
from webapp.core.migrations_runner import upgrade
from webapp.core.security import CSRF_COOKIE, SESSION_COOKIE, csrf_token_for
from webapp.grading.models import Grade

DRAFTDESK = str(Path(sys.executable).with_name("draftdesk"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[str, str, GradingWorld]]:
    db_url = f"sqlite:///{tmp_path / 'workers.db'}"
    upgrade(db_url)
    engine = make_engine(db_url)
    with Session(engine, expire_on_commit=False) as session:
        world = build_world(session)
    engine.dispose()
    port = _free_port()
    env = {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_SECRET_KEY": TEST_SECRET}
    env["DRAFTDESK_MODE"] = "dev"
    proc = subprocess.Popen(
        [DRAFTDESK, "serve", "--port", str(port), "--workers", "2", "--no-access-log"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "serve.log").open("wb"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        def log() -> str:
            return (tmp_path / "serve.log").read_text(errors="replace")[-2000:]

        def both_workers_up() -> bool:
            assert proc.poll() is None, f"draftdesk serve --workers 2 exited:\n{log()}"
            try:
                healthy = httpx.get(f"{base}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False
            return healthy and len(_children(proc.pid)) >= 2

        try:  # a loaded CI machine starts two workers slowly
            wait_for(both_workers_up, timeout=180, what="two workers of draftdesk serve", interval=0.1)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{log()}") from exc
        yield base, db_url, world
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _sign_in(base: str, email: str, password: str = DEFAULT_PASSWORD) -> tuple[httpx.Client, httpx.Response]:
    # No keep-alive: every request is a new connection, so the kernel hands them to either worker.
    c = httpx.Client(base_url=base, limits=httpx.Limits(max_keepalive_connections=0), timeout=30)
    c.get("/login")
    r = c.post("/login", data={"email": email, "password": password, "csrf_token": _csrf(c)})
    return c, r


def _csrf(c: httpx.Client) -> str:
    return csrf_token_for(TEST_SECRET, c.cookies[CSRF_COOKIE], c.cookies.get(SESSION_COOKIE))


def _next(c: httpx.Client, run_id: int) -> str:
    """Ask for the next item of the run; return where the answer sends the grader."""
    return c.post(f"/grading/runs/{run_id}/next", data={"csrf_token": _csrf(c)}).headers["location"]


def test_two_workers_share_sessions_reservations_and_rate_limits(two_workers) -> None:  # type: ignore[no-untyped-def]
    base, db_url, world = two_workers
    d0, d1 = world.drafts[0].id, world.drafts[1].id
    alice, _ = _sign_in(base, "alice@example.test")
    assert _next(alice, world.run.id) == f"/grading/drafts/{d0}"
    # Twenty fresh connections: whichever worker answers knows the session and the pre-reserved next item.
    for _ in range(20):
        page = alice.get(f"/grading/drafts/{d0}")
        assert page.status_code == 200 and f"next: draft {d1} (reserved)" in page.text
    bob, _ = _sign_in(base, "bob@example.test")
    assert _next(bob, world.run.id) == f"/grading/drafts/{d0}"
    carol, _ = _sign_in(base, "carol@example.test")
    # d0's two places are held by Alice and Bob; d1 still has one free place next to Alice's reservation.
    assert _next(carol, world.run.id) == f"/grading/drafts/{d1}"
    for who, c in (("alice", alice), ("bob", bob)):
        headers = {**HX, "X-CSRF-Token": _csrf(c)}
        r = c.post(f"/grading/drafts/{d0}", data={**FORM, "next": "1"}, headers=headers)
        assert r.status_code == 200 and f"Grade saved (draft {d0})" in r.text, who
    # Sign-in failures are counted in the database: five on either worker block the sixth try.
    for _ in range(5):
        _, r = _sign_in(base, "carol@example.test", password="wrong-password")
    _, r = _sign_in(base, "carol@example.test")
    assert r.status_code == 429
    engine = make_engine(db_url)
    with Session(engine) as s:
        graders = sorted(g.grader_id for g in s.exec(select(Grade).where(Grade.draft_id == d0)))
    engine.dispose()
    assert graders == sorted([world.alice.id, world.bob.id])
    for c in (alice, bob, carol):
        c.close()
