"""`db backup` / `db restore` round trip on both databases, and the backup `serve` takes before migrating."""

from __future__ import annotations

import datetime as dt
import gc
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import MetaData, select, text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from tests.conftest import PG_URL, TEST_SECRET
from webapp import cli, serving
from webapp.db import make_engine
from webapp.migrations_runner import alembic_config, upgrade
from webapp.ops import backup as ops_backup
from webapp.ops.backup import BackupError


@pytest.fixture
def fresh_url(demo_db_url: str, tmp_path: Path) -> Iterator[str]:
    """A database that does not exist yet on the demo's backend (a new PostgreSQL database, dropped afterwards)."""
    if demo_db_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'restored' / 'fresh.db'}"
        return
    name = f"dd_restore_{uuid.uuid4().hex[:10]}"
    admin = make_engine(PG_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


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
    monkeypatch.setenv("PATH", str(tmp_path))  # no pg_dump there
    with pytest.raises(BackupError, match="pg_dump not found on PATH: install PostgreSQL's client tools"):
        ops_backup.backup("postgresql+psycopg://u:secret@127.0.0.1:1/none", tmp_path / "x.dump")


def test_libpq_password_in_the_environment_and_default_file_names(tmp_path: Path) -> None:
    url, env = ops_backup.libpq_target("postgresql+psycopg://bob:s3cret@db.example:5433/dd")
    assert url == "postgresql://bob@db.example:5433/dd" and env["PGPASSWORD"] == "s3cret"
    now = dt.datetime(2026, 11, 27, 7, 5, 9, tzinfo=dt.UTC)
    assert ops_backup.default_backup_path("sqlite:///x.db", tmp_path, now=now) == tmp_path / "draftdesk-20261127T070509Z.sqlite3"
    assert ops_backup.default_backup_path("postgresql+psycopg://h/d", tmp_path, now=now).name == "draftdesk-20261127T070509Z.dump"


def _serve(url: str, backup_dir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], Any]:
    """Run `draftdesk serve` with uvicorn replaced; return the ports it would have served and the result.

    uvicorn would get the app warmed up (webapp/warmup.py): link rules read, routes built, objects frozen.
    """
    served: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: served.append("frozen"))  # not the test process's own objects
    monkeypatch.setattr(serving, "run", lambda app, **kw: served.append(kw["port"]) if app.state.link_rules else None)
    env = {"DRAFTDESK_DATABASE_URL": url, "DRAFTDESK_SECRET_KEY": TEST_SECRET}
    env["DRAFTDESK_BACKUP_DIR"] = str(backup_dir)
    return served, CliRunner().invoke(cli.app, ["serve", "--port", "8123", "--no-background"], env=env)


class TestServeBacksUpBeforeMigrating:
    def _served(self, url: str, backup_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
        served, out = _serve(url, backup_dir, monkeypatch)
        assert out.exit_code == 0 and served == ["frozen", 8123], out.output
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
