"""`db backup` / `db restore` round trip on both databases, and the backup `serve` takes before migrating."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import MetaData, select, text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from tests.conftest import PG_URL, TEST_SECRET
from webapp.app import cli
from webapp.core.db import make_engine
from webapp.core.migrations_runner import alembic_config, upgrade
from webapp.ops import backup as ops_backup
from webapp.ops.backup import BackupError
from webapp.web import serving


@contextmanager
def new_database(like_url: str, tmp_path: Path) -> Iterator[str]:
    """A database that does not exist yet on like_url's backend (a new PostgreSQL database, dropped afterwards)."""
    if like_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'restored' / 'fresh.db'}"
        return
    name = f"{make_url(PG_URL).database}_restore_{uuid.uuid4().hex[:8]}"
    admin = make_engine(PG_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def fresh_url(demo_db_url: str, tmp_path: Path) -> Iterator[str]:
    """A database that does not exist yet on the demo's backend."""
    with new_database(demo_db_url, tmp_path) as url:
        yield url


def all_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the public schema, each table's rows sorted."""
    engine = make_engine(url)
    try:
        meta = MetaData()
        meta.reflect(engine)
        with engine.connect() as conn:
            return {
                name: sorted((tuple(r) for r in conn.execute(select(table))), key=repr)
                for name, table in meta.tables.items()
            }
    finally:
        engine.dispose()


def test_backup_then_restore_into_a_fresh_database_gives_every_table_equal_never_into_a_full_one(
    demo_db_url: str, fresh_url: str, tmp_path: Path
) -> None:
    before = all_rows(demo_db_url)
    assert len(before) >= 40 and sum(map(len, before.values())) > 1000  # the demo is really there
    assert before["alembic_version"] and before["grade"] and before["metric_event"]
    path = ops_backup.backup(demo_db_url, tmp_path / "backups" / "one")
    assert path.stat().st_size > 0
    assert [p.name for p in path.parent.iterdir()] == ["one"]  # no temporary file left beside it
    assert path.stat().st_mode & 0o777 == 0o600  # password hashes inside: the owner's alone
    with pytest.raises(BackupError, match="not empty .* restore into a new, empty database"):
        ops_backup.restore(demo_db_url, path)
    ops_backup.restore(fresh_url, path)
    assert all_rows(fresh_url) == before
    # The restored database goes on: its id sequences continue after the restored rows.
    engine = make_engine(fresh_url)
    with engine.begin() as conn:
        top = conn.execute(text("SELECT max(id) FROM login_attempt")).scalar() or 0
        conn.execute(
            text("INSERT INTO login_attempt (email, ip, success, at) VALUES ('x@example.test', '::1', false, CURRENT_TIMESTAMP)")
        )
        assert conn.execute(text("SELECT max(id) FROM login_attempt")).scalar() == top + 1
    engine.dispose()


def test_backup_and_restore_errors_name_the_file_or_the_missing_pg_dump(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "taken").write_text("x")
    with pytest.raises(BackupError, match="taken: already exists"):
        ops_backup.backup(db_url, tmp_path / "taken")
    with pytest.raises(BackupError, match="nope: no such backup file"):
        ops_backup.restore(db_url, tmp_path / "nope")
    if PG_URL:  # the PostgreSQL client tools are there: a server that does not answer is named, no traceback
        with pytest.raises(BackupError, match=r"(?s)^database: cannot read it \(.*\); no backup was written to .*x\.dump$"):
            ops_backup.backup("postgresql+psycopg://u:secret@127.0.0.1:1/none", tmp_path / "x.dump")
        assert not (tmp_path / "x.dump").exists()
    monkeypatch.setenv("PATH", str(tmp_path))  # no pg_dump there
    with pytest.raises(BackupError, match="pg_dump not found on PATH: install PostgreSQL's client tools"):
        ops_backup.backup("postgresql+psycopg://u:secret@127.0.0.1:1/none", tmp_path / "x.dump")


def test_libpq_password_in_the_environment_and_default_file_names(tmp_path: Path) -> None:
    url, env = ops_backup.libpq_target("postgresql+psycopg://bob:s3cret@db.example:5433/dd")
    assert url == "postgresql://bob@db.example:5433/dd" and env["PGPASSWORD"] == "s3cret"
    now = dt.datetime(2026, 11, 27, 7, 5, 9, tzinfo=dt.UTC)
    assert ops_backup.default_backup_path("sqlite:///x.db", tmp_path, now=now) == tmp_path / "draftdesk-20261127T070509Z.sqlite3"
    assert ops_backup.default_backup_path("postgresql+psycopg://h/d", tmp_path, now=now).name == "draftdesk-20261127T070509Z.dump"


def _serve(url: str, backup_dir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int | str], Any]:
    """Run `draftdesk serve` with uvicorn replaced; return the ports it would have served and the result.

    uvicorn would get the app warmed up (webapp/app/warmup.py): link rules read, routes built, templates compiled.
    """
    served: list[int | str] = []
    monkeypatch.setattr(serving, "run", lambda app, **kw: served.append(kw["port"]) if app.state.link_rules else None)
    env = {"DRAFTDESK_DATABASE_URL": url, "DRAFTDESK_SECRET_KEY": TEST_SECRET}
    env["DRAFTDESK_BACKUP_DIR"] = str(backup_dir)
    return served, CliRunner().invoke(cli.app, ["serve", "--port", "8123", "--no-background"], env=env)


class TestServeBacksUpBeforeMigrating:
    def _served(self, url: str, backup_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
        served, out = _serve(url, backup_dir, monkeypatch)
        assert out.exit_code == 0 and served == [8123], out.output
        return out.output

    def test_only_when_migrations_are_pending_on_a_database_with_tables(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        url = f"sqlite:///{tmp_path / 'old.db'}"
        backups = tmp_path / "backups"
        # A new database: nothing to lose, no backup; serve migrates it.
        self._served(url, backups, monkeypatch)
        assert not backups.exists()
        # At the newest revision: nothing to apply, no backup.
        self._served(url, backups, monkeypatch)
        assert not backups.exists()
        # One migration behind: a backup, then the upgrade.
        command.downgrade(alembic_config(url), "-1")
        before = all_rows(url)
        output = self._served(url, backups, monkeypatch)
        (taken,) = backups.iterdir()
        assert f"backup before applying migrations: {taken}" in output
        assert all_rows(f"sqlite:///{taken}") == before
        assert not ops_backup.pending_migrations(url)

    def test_no_backup_no_migration(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        url = f"sqlite:///{tmp_path / 'old.db'}"
        upgrade(url, "0005_grading_queue")
        blocked = tmp_path / "blocked"
        blocked.write_text("a file where the backup folder should be")
        served, out = _serve(url, blocked, monkeypatch)
        assert served == [] and out.exit_code == 1, out.output
        assert "cannot create the backup folder" in out.output
        assert "no migration was applied" in out.output
        assert ops_backup.pending_migrations(url)  # still at 0005


def test_db_backup_and_restore_commands(tmp_path: Path) -> None:
    src = f"sqlite:///{tmp_path / 'src.db'}"
    upgrade(src)
    engine = make_engine(src)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO login_attempt (email, ip, success, at) VALUES ('a@x.test', '1.2.3.4', true, CURRENT_TIMESTAMP)"))
    engine.dispose()
    runner = CliRunner()
    out = runner.invoke(cli.app, ["db", "backup", "--output", str(tmp_path / "b.sqlite3")], env={"DRAFTDESK_DATABASE_URL": src})
    assert out.exit_code == 0 and "backup written" in out.output, out.output
    dst = f"sqlite:///{tmp_path / 'dst.db'}"
    out = runner.invoke(cli.app, ["db", "restore", str(tmp_path / "b.sqlite3")], env={"DRAFTDESK_DATABASE_URL": dst})
    assert out.exit_code == 0, out.output
    assert all_rows(dst) == all_rows(src)
    out = runner.invoke(cli.app, ["db", "restore", str(tmp_path / "b.sqlite3")], env={"DRAFTDESK_DATABASE_URL": dst})
    assert out.exit_code == 2 and "not empty" in out.output


# --- interrupted backups and restores ----------------------------------------------------------


def seed_rows(url: str, n: int = 2000) -> None:
    """Give the database enough rows to span many SQLite pages and several pg_dump data blocks."""
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO login_attempt (email, ip, success, at) VALUES (:e, '10.0.0.1', false, CURRENT_TIMESTAMP)"),
            [{"e": f"user{i}-{uuid.uuid4().hex}@example.test"} for i in range(n)],
        )
    engine.dispose()


def row_counts(url: str) -> dict[str, int]:
    """Each public table's row count (nothing for a SQLite file that does not exist)."""
    return {name: len(rows) for name, rows in all_rows(url).items()} if ops_backup.table_names(url) else {}


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.fixture
def target_url(db_url: str, tmp_path: Path) -> Iterator[str]:
    """A new, empty database on db_url's backend, to restore into."""
    with new_database(db_url, tmp_path) as url:
        yield url


def cut_offsets(backup_file: Path, sqlite: bool) -> list[int]:
    """Where to cut a backup: nothing, inside the header, page/block boundaries, the middle, one byte short."""
    size = backup_file.stat().st_size
    cuts = {0, 10, 99, size // 3, size // 2, size - 1}
    if sqlite:
        cuts |= {4096, 4096 * (size // 4096 // 2), size - 4096}  # whole pages missing: a size/header mismatch
    return sorted(cut for cut in cuts if 0 <= cut < size)


class TestTruncatedBackupIsRefused:
    def test_restore_names_the_file_leaves_the_target_unchanged_and_the_good_backup_still_restores(
        self, db_url: str, target_url: str, tmp_path: Path
    ) -> None:
        seed_rows(db_url)
        folder = tmp_path / "backups"
        good = ops_backup.backup(db_url, folder / "good")
        sqlite = db_url.startswith("sqlite")
        before = row_counts(target_url)
        cuts = cut_offsets(good, sqlite)
        assert len(cuts) >= 6
        for cut in cuts:
            bad = folder / f"cut-at-{cut}"
            bad.write_bytes(good.read_bytes()[:cut])
            with pytest.raises(BackupError) as refused:
                ops_backup.restore(target_url, bad)
            assert str(refused.value).startswith(f"{bad}: not a complete Draft Desk backup ("), (cut, refused.value)
            assert str(refused.value).endswith("the database was not changed")
            assert row_counts(target_url) == before, cut
            if sqlite:
                assert leftovers(tmp_path / "restored") == []  # no target file, no temporary file
        ops_backup.restore(target_url, good)
        assert all_rows(target_url) == all_rows(db_url)
        assert row_counts(target_url)["login_attempt"] == 2000

    def test_a_restore_that_fails_midway_rolls_back_everything(
        self, db_url: str, target_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Even past the file checks, a restore is one transaction (PostgreSQL) or one rename (SQLite)."""
        seed_rows(db_url)
        good = ops_backup.backup(db_url, tmp_path / "backups" / "good")
        bad = tmp_path / "backups" / "bad"
        bad.write_bytes(good.read_bytes()[: good.stat().st_size * 2 // 3])
        if db_url.startswith("sqlite"):
            real_copy = ops_backup._copy_sqlite

            def copy_then_fail(source: Any, target: Path) -> None:
                real_copy(source, target)
                with target.open("r+b") as fh:
                    fh.truncate(target.stat().st_size // 2)
                raise OSError(28, "No space left on device")

            monkeypatch.setattr(ops_backup, "_copy_sqlite", copy_then_fail)
            source = good
        else:
            # Skip the file checks: pg_restore itself meets the cut, after it has created tables and rows.
            monkeypatch.setattr(ops_backup, "verify_postgresql_backup", lambda *a, **k: {})
            source = bad
        with pytest.raises(BackupError, match="the database was not changed"):
            ops_backup.restore(target_url, source)
        assert row_counts(target_url) == {}
        if db_url.startswith("sqlite"):
            assert leftovers(tmp_path / "restored") == []
        monkeypatch.undo()
        ops_backup.restore(target_url, good)
        assert all_rows(target_url) == all_rows(db_url)

    def test_a_sqlite_target_in_use_is_refused(self, tmp_path: Path) -> None:
        src = f"sqlite:///{tmp_path / 'src.db'}"
        upgrade(src)
        good = ops_backup.backup(src, tmp_path / "b.sqlite3")
        target = tmp_path / "dst.db"
        Path(f"{target}-wal").write_bytes(b"")  # what an open WAL connection (or a crash) leaves
        with pytest.raises(BackupError, match=r"dst\.db-wal: exists, so dst\.db is open .* stop the server"):
            ops_backup.restore(f"sqlite:///{target}", good)
        assert not target.exists()


def fake_pg_dump(folder: Path, then: str) -> dict[str, str]:
    """PATH with a pg_dump that runs the real one, cuts its file in half, then does `then`; return the env."""
    folder.mkdir()
    script = folder / "pg_dump"
    real = shutil.which("pg_dump")
    assert real is not None
    script.write_text(
        "#!/bin/sh\n"
        f'{real} "$@" || exit $?\n'
        'for a in "$@"; do case "$a" in --file=*) f="${a#--file=}";; esac; done\n'
        'truncate -s "$(( $(stat -c %s "$f") / 2 ))" "$f"\n'
        f"{then}\n"
    )
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}


# The child process copies the database, cuts the copy in half, then is killed (SIGKILL: no clean-up).
SQLITE_KILLED_MIDWAY = """
import os, signal, sys
from webapp.app import cli
from webapp.ops import backup as ops_backup
real_copy = ops_backup._copy_sqlite
def copy_and_die(source, target):
    real_copy(source, target)
    with open(target, "r+b") as fh:
        fh.truncate(os.path.getsize(target) // 2)
    os.kill(os.getpid(), signal.SIGKILL)
ops_backup._copy_sqlite = copy_and_die
sys.argv = ["draftdesk", "db", "backup", "--output", sys.argv[1]]
cli.main()
"""


class TestInterruptedBackupLeavesNoFileUnderItsName:
    def test_killed_midway(self, db_url: str, tmp_path: Path) -> None:
        seed_rows(db_url)
        final = tmp_path / "backups" / "draftdesk-killed.bak"
        env = {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_MODE": "dev"}
        if db_url.startswith("sqlite"):
            args = [sys.executable, "-c", SQLITE_KILLED_MIDWAY, str(final)]
        else:
            env["PATH"] = fake_pg_dump(tmp_path / "bin", then="kill -9 $PPID")["PATH"]  # kills draftdesk itself
            args = [sys.executable, "-c", "from webapp.app import cli; cli.main()", "db", "backup", "--output", str(final)]
        done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
        assert done.returncode == -signal.SIGKILL, done.stderr
        assert not final.exists()
        # What a kill leaves: only a hidden temporary file, which no restore or glob of backups picks up.
        assert all(name.startswith(".draftdesk-killed.bak.") and name.endswith(".partial") for name in leftovers(final.parent))
        # The next backup is whole.
        ops_backup.backup(db_url, final)
        assert final.exists()

    def test_a_backup_cut_short_without_an_error_is_refused(
        self, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A copy that ends early yet reports success (a tool's bug, a full disk unnoticed) fails verification."""
        seed_rows(db_url)
        final = tmp_path / "backups" / "short"
        if db_url.startswith("sqlite"):
            real_copy = ops_backup._copy_sqlite

            def short_copy(source: Any, target: Path) -> None:
                real_copy(source, target)
                with target.open("r+b") as fh:
                    fh.truncate(target.stat().st_size - 4096)

            monkeypatch.setattr(ops_backup, "_copy_sqlite", short_copy)
        else:
            monkeypatch.setenv("PATH", fake_pg_dump(tmp_path / "bin", then="exit 0")["PATH"])
        with pytest.raises(BackupError, match=rf"not a complete Draft Desk backup .*; no backup was written to {final}$"):
            ops_backup.backup(db_url, final)
        assert leftovers(final.parent) == []

    def test_an_error_during_the_write_leaves_nothing(
        self, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        final = tmp_path / "backups" / "failed"
        if db_url.startswith("sqlite"):
            def failing_copy(source: Any, target: Path) -> None:
                target.write_bytes(b"SQLite format 3\x00" + b"\x00" * 5000)
                raise OSError(28, "No space left on device")

            monkeypatch.setattr(ops_backup, "_copy_sqlite", failing_copy)
        else:
            monkeypatch.setenv("PATH", fake_pg_dump(tmp_path / "bin", then="exit 3")["PATH"])
        with pytest.raises(BackupError, match=rf"; no backup was written to {final}$"):
            ops_backup.backup(db_url, final)
        assert leftovers(final.parent) == []


def test_a_backup_taken_while_the_app_writes_is_verified_and_consistent(db_url: str, target_url: str, tmp_path: Path) -> None:
    """The row counts checked are the copy's own snapshot's, so writes meanwhile neither fail nor skew the check."""
    seed_rows(db_url, 300)
    stop = threading.Event()
    written: list[int] = []

    def write_until_stopped() -> None:
        while not stop.is_set():
            seed_rows(db_url, 5)  # one transaction of 5 rows
            written.append(5)

    writer = threading.Thread(target=write_until_stopped)
    writer.start()
    try:
        paths = [ops_backup.backup(db_url, tmp_path / "backups" / f"b{i}") for i in range(3)]
    finally:
        stop.set()
        writer.join()
    assert written, "the writer never wrote during the backups"
    ops_backup.restore(target_url, paths[-1])
    restored = row_counts(target_url)["login_attempt"]
    assert 300 <= restored <= 300 + sum(written) and restored % 5 == 0  # whole transactions only


# --- backups apart from the data ----------------------------------------------------------------


def _db_backup(url: str, *, backup_dir: Path, mode: str, output: Path | None = None) -> Any:
    env = {"DRAFTDESK_DATABASE_URL": url, "DRAFTDESK_MODE": mode, "DRAFTDESK_SECRET_KEY": TEST_SECRET}
    env["DRAFTDESK_BACKUP_DIR"] = str(backup_dir)
    args = ["db", "backup", *(["--output", str(output)] if output else [])]
    return CliRunner().invoke(cli.app, args, env=env)


class TestBackupFolderApartFromTheData:
    @pytest.fixture
    def data_url(self, tmp_path: Path) -> str:
        (tmp_path / "data").mkdir()
        url = f"sqlite:///{tmp_path / 'data' / 'draftdesk.db'}"
        upgrade(url)
        return url

    def test_production_refuses_a_folder_inside_the_database_folder(self, data_url: str, tmp_path: Path) -> None:
        inside = tmp_path / "data" / "backups"
        out = _db_backup(data_url, backup_dir=inside, mode="production")
        assert out.exit_code == 2, out.output
        assert f"backup folder {inside} is inside the database's folder {tmp_path / 'data'}" in " ".join(out.output.split())
        assert not inside.exists()
        # --output into the database's own folder: the same.
        out = _db_backup(data_url, backup_dir=tmp_path / "elsewhere", mode="production", output=tmp_path / "data" / "b.sqlite3")
        assert out.exit_code == 2 and "inside the database's folder" in out.output, out.output
        assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["draftdesk.db"]

    def test_production_warns_about_the_same_filesystem_and_backs_up(self, data_url: str, tmp_path: Path) -> None:
        elsewhere = tmp_path / "elsewhere"
        out = _db_backup(data_url, backup_dir=elsewhere, mode="production")
        assert out.exit_code == 0, out.output
        assert "warning: backup folder" in out.output and "is on the same filesystem as the database" in out.output
        (written,) = elsewhere.iterdir()
        assert f"backupwritten:{written}" in "".join(out.output.split())  # rich wraps long paths

    def test_dev_mode_and_postgresql_are_not_checked(self, data_url: str, tmp_path: Path) -> None:
        inside = tmp_path / "data" / "backups"
        out = _db_backup(data_url, backup_dir=inside, mode="dev")
        assert out.exit_code == 0 and "warning" not in out.output, out.output
        assert len(list(inside.iterdir())) == 1
        pg = "postgresql+psycopg://u@127.0.0.1/dd"
        assert ops_backup.check_backup_dir(database_url=pg, backup_dir=tmp_path, mode="production") is None

    def test_another_filesystem_is_quiet(self, data_url: str, tmp_path: Path) -> None:
        other = Path("/dev/shm")  # tmpfs on Linux: another filesystem than the test's temporary folder
        assert other.stat().st_dev != tmp_path.stat().st_dev
        assert ops_backup.check_backup_dir(database_url=data_url, backup_dir=other / "dd-backups", mode="production") is None

    def test_serve_only_warns_since_its_backup_undoes_a_migration(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        url = f"sqlite:///{tmp_path / 'old.db'}"
        upgrade(url, "0005_grading_queue")
        served, out = _serve(url, tmp_path / "backups", monkeypatch)
        assert out.exit_code == 0 and served == [8123], out.output
        # The warning is a JSON log line, like everything serve writes on stderr.
        (warning,) = [json.loads(line) for line in out.output.splitlines() if line.startswith("{")]
        assert warning["level"] == "WARNING" and warning["logger"] == "webapp.ops.backup"
        assert warning["message"].startswith("backup folder") and "inside the database's folder" in warning["message"]
        (taken,) = (tmp_path / "backups").iterdir()
        assert f"backup before applying migrations: {taken}" in out.output
