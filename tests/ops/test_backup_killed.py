"""Issue 41 item 4: a killed `db backup` leaves no tool running, its temporary file is 0600 from the start, and the
next start of `db backup` or `serve` removes it."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.ops.test_backup import SQLITE_KILLED_MIDWAY, _serve, leftovers, seed_rows
from webapp.core.db import make_engine
from webapp.ops import backup as ops_backup
from webapp.ops import backup_files

ROOT = Path(__file__).resolve().parents[2]


def _children(pid: int, name: str) -> list[int]:
    """The processes whose parent is `pid` and whose command is `name` (read from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if int(fields[1]) == pid and comm == name:
            out.append(int(entry.name))
    return out


def _running(pid: int) -> bool:
    """Tell whether a process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(predicate: Callable[[], object], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _partials(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.endswith(".partial")] if folder.exists() else []


class TestKilledMidDump:
    def test_pg_dump_dies_with_the_backup_and_the_next_serve_removes_the_partial(
        self, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        if not db_url.startswith("postgresql"):
            pytest.skip("pg_dump is PostgreSQL's; the SQLite case is the test below")
        seed_rows(db_url, n=50)
        engine = make_engine(db_url)
        probe = f"zz_dump_gate_{uuid.uuid4().hex[:8]}"
        backups = tmp_path / "backups"
        final = backups / "draftdesk-killed.dump"
        # A partitioned table without partitions: the backup's row counts skip it (no rows of its own) while
        # pg_dump locks it; holding it ACCESS EXCLUSIVE keeps pg_dump waiting, mid-dump, for as long as the test needs.
        with engine.begin() as conn:
            conn.execute(text(f"CREATE TABLE {probe} (a int) PARTITION BY RANGE (a)"))
        gate = engine.connect()
        gate.begin()
        gate.execute(text(f"LOCK TABLE {probe} IN ACCESS EXCLUSIVE MODE"))
        try:
            env = {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_MODE": "dev"}
            proc = subprocess.Popen(
                [sys.executable, "-c", "from webapp.app import cli; cli.main()", "db", "backup", "--output", str(final)],
                env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
            assert _wait(lambda: _children(proc.pid, "pg_dump")), "pg_dump did not start"
            [dump] = _children(proc.pid, "pg_dump")
            [partial] = _partials(backups)
            assert stat.S_IMODE(partial.stat().st_mode) == 0o600  # from the start, not once written
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            assert _wait(lambda: not _running(dump), timeout=10), "pg_dump kept running after its parent was killed"
        finally:
            gate.rollback()
            gate.close()
            with engine.begin() as conn:
                conn.execute(text(f"DROP TABLE IF EXISTS {probe}"))
            engine.dispose()
        assert not final.exists() and [p.name for p in _partials(backups)] == [partial.name]
        served, result = _serve(db_url, backups, monkeypatch)
        assert result.exit_code == 0, result.output
        assert f"removed the temporary file of an interrupted backup: {partial}" in result.output
        assert leftovers(backups) == []

    def test_a_killed_sqlite_backup_leaves_a_0600_partial_that_the_next_backup_removes(self, db_url: str, tmp_path: Path) -> None:
        if not db_url.startswith("sqlite"):
            pytest.skip("the PostgreSQL case is the test above")
        seed_rows(db_url, n=50)
        final = tmp_path / "backups" / "draftdesk-killed.sqlite3"
        env = {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_MODE": "dev"}
        done = subprocess.run([sys.executable, "-c", SQLITE_KILLED_MIDWAY, str(final)], env=env, cwd=ROOT, capture_output=True)
        assert done.returncode == -signal.SIGKILL, done.stderr
        [partial] = _partials(final.parent)
        assert stat.S_IMODE(partial.stat().st_mode) == 0o600
        again = final.with_name("draftdesk-next.sqlite3")
        ops_backup.backup(db_url, again)
        assert leftovers(final.parent) == [again.name] and stat.S_IMODE(again.stat().st_mode) == 0o600


class TestStaleTemporaries:
    def test_only_those_of_gone_processes_are_removed(self, tmp_path: Path) -> None:
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        dead_pid = int(gone.stdout)
        mine = tmp_path / f".draftdesk-a.dump.{os.getpid()}.0123abcd.partial"  # this process: a backup at work
        other = tmp_path / f".draftdesk-b.dump.{os.getppid()}.0123abcd.partial"  # a live process: another backup
        dead = tmp_path / f".draftdesk-c.dump.{dead_pid}.0123abcd.partial"
        legacy = tmp_path / ".draftdesk-d.dump.89abcdef.partial"  # written before names carried the process id
        unrelated = tmp_path / "draftdesk-e.dump"
        for p in (mine, other, dead, legacy, unrelated):
            p.write_bytes(b"x")
        Path(f"{dead}-journal").write_bytes(b"j")
        removed = backup_files.remove_stale_temporaries(tmp_path)
        assert sorted(removed) == sorted([dead, legacy])
        assert sorted(leftovers(tmp_path)) == sorted(p.name for p in (mine, other, unrelated))

    def test_a_failed_backup_removes_its_temporary(self, tmp_path: Path) -> None:
        folder = tmp_path / "backups"
        with pytest.raises(ops_backup.BackupError, match="no such database file"):
            ops_backup.backup(f"sqlite:///{tmp_path / 'missing.db'}", folder / "x.sqlite3")
        assert leftovers(folder) == []
