"""`draftdesk db backup` / `db restore`, and the backup `serve` takes before it applies migrations.

SQLite: the online backup API (`sqlite3.Connection.backup`), which copies a consistent snapshot
while the app keeps writing (a plain file copy of a WAL database can miss the last commits or
catch a half-written page). PostgreSQL: `pg_dump -Fc` (PostgreSQL's own custom format, restored
with `pg_restore`); the client tools must be installed and of the server's major version or newer.
The password, if the URL has one, goes to the tools in PGPASSWORD, never on the command line
(where `ps` shows it).

Restore only into an empty database (no tables): restoring over live data would mix two states.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from sqlalchemy import inspect, make_url
from sqlalchemy.engine import URL

from webapp.db import make_engine
from webapp.migrations_runner import alembic_config


class BackupError(RuntimeError):
    """A backup or restore that could not be done; the message says why and what to do."""


def is_sqlite_url(database_url: str) -> bool:
    return database_url.startswith("sqlite")


def sqlite_path(database_url: str) -> Path:
    """Return the file of a SQLite URL (refusing an in-memory database, which has nothing to back up)."""
    name = make_url(database_url).database
    if not name or name == ":memory:":
        raise BackupError(f"database: {database_url!r} is not a SQLite file")
    return Path(name)


def libpq_target(database_url: str) -> tuple[str, dict[str, str]]:
    """Return the libpq connection URL (no driver, no password) and the environment with PGPASSWORD."""
    url: URL = make_url(database_url)
    env = dict(os.environ)
    if url.password is not None:
        env["PGPASSWORD"] = str(url.password)
    plain = URL.create(
        "postgresql", username=url.username, host=url.host, port=url.port, database=url.database, query=url.query
    )
    return plain.render_as_string(hide_password=False), env


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BackupError(
            f"{name} not found on PATH: install PostgreSQL's client tools (Debian: apt-get install "
            f"postgresql-client), of the server's major version or newer"
        )
    return path


def _run(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(f"{Path(args[0]).name} failed (exit {done.returncode}): {done.stderr.strip()}")


def default_backup_path(database_url: str, backup_dir: Path, *, now: dt.datetime | None = None) -> Path:
    """Return backup_dir/draftdesk-<UTC time>.sqlite3 (SQLite) or .dump (PostgreSQL custom format)."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    return backup_dir / f"draftdesk-{stamp}.{'sqlite3' if is_sqlite_url(database_url) else 'dump'}"


def backup(database_url: str, output: Path) -> Path:
    """Write a backup of the database to `output` (its folder is created); return the path."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackupError(f"{output.parent}: cannot create the backup folder ({exc.strerror})") from None
    if output.exists():
        raise BackupError(f"{output}: already exists; choose another --output")
    if is_sqlite_url(database_url):
        source = sqlite_path(database_url)
        if not source.exists():
            raise BackupError(f"{source}: no such database file")
        src = sqlite3.connect(source)
        dst = sqlite3.connect(output)
        try:
            with dst:
                src.backup(dst)
        finally:
            dst.close()
            src.close()
        return output
    url, env = libpq_target(database_url)
    _run([_tool("pg_dump"), "--format=custom", "--no-owner", f"--file={output}", f"--dbname={url}"], env)
    return output


def table_names(database_url: str) -> list[str]:
    """Return the tables of the database (none for a SQLite file that does not exist yet)."""
    if is_sqlite_url(database_url) and not sqlite_path(database_url).exists():
        return []
    engine = make_engine(database_url)
    try:
        return inspect(engine).get_table_names()
    finally:
        engine.dispose()


def restore(database_url: str, source: Path) -> None:
    """Restore a backup made by `backup` into an empty database (refused when it has any table)."""
    if not source.is_file():
        raise BackupError(f"{source}: no such backup file")
    existing = table_names(database_url)
    if existing:
        raise BackupError(
            f"database: not empty ({len(existing)} tables, e.g. {sorted(existing)[0]}); restore into a new, empty database"
        )
    if is_sqlite_url(database_url):
        target = sqlite_path(database_url)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
            src.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            raise BackupError(f"{source}: not a SQLite backup ({exc})") from None
        dst = sqlite3.connect(target)
        try:
            with dst:
                src.backup(dst)
        finally:
            dst.close()
            src.close()
        return
    url, env = libpq_target(database_url)
    _run([_tool("pg_restore"), "--no-owner", "--exit-on-error", f"--dbname={url}", str(source)], env)


def pending_migrations(database_url: str) -> bool:
    """Tell whether the database is behind the newest migration (a database with no tables is not: nothing to lose)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    if not table_names(database_url):
        return False
    heads = set(ScriptDirectory.from_config(alembic_config(database_url)).get_heads())
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            current = set(MigrationContext.configure(conn).get_current_heads())
    finally:
        engine.dispose()
    return current != heads


def backup_before_migrating(database_url: str, backup_dir: Path) -> Path | None:
    """Back up into backup_dir when migrations are pending on a database that holds tables; return the file."""
    if not pending_migrations(database_url):
        return None
    return backup(database_url, default_backup_path(database_url, backup_dir))
