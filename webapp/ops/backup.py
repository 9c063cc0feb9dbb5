"""`draftdesk db backup` / `db restore`, and the backup `serve` takes before it applies migrations.

SQLite: the online backup API (`sqlite3.Connection.backup`), which copies a consistent snapshot
while the app keeps writing (a plain file copy of a WAL database can miss the last commits or
catch a half-written page). PostgreSQL: `pg_dump -Fc` (PostgreSQL's own custom format, restored
with `pg_restore`); the client tools must be installed and of the server's major version or newer.
The password, if the URL has one, goes to the tools in PGPASSWORD, never on the command line
(where `ps` shows it).

Nothing is ever half-written under a name that looks finished:

- A backup is written to a hidden temporary name in the backup's own folder (`.NAME.<pid>.<random>.partial`,
  created 0600), verified, fsynced, and only then renamed to its final name (a rename within one
  folder is atomic). A backup killed midway leaves at most that temporary file, never a truncated
  file under the final name, and the next start of `db backup` or `serve` removes it; the tools
  it started die with it (webapp/ops/backup_files.py). Verification: SQLite, `PRAGMA integrity_check`, the file's size against
  the page count in its header, and every table's row count equal to the source's in the same
  snapshot; PostgreSQL, `pg_restore --list`, then every table's data read back through
  `pg_restore` and its row count compared with a count taken in the snapshot `pg_dump` used
  (`pg_export_snapshot()` / `pg_dump --snapshot`).
- A restore verifies the backup file first (the same checks, without a source to compare with),
  so a truncated or corrupt file is refused with its name before the target is touched; then
  PostgreSQL restores in one transaction (`pg_restore --single-transaction --exit-on-error`: a
  failure rolls everything back) and SQLite restores into a temporary file beside the target,
  verifies it and renames it over the target. A failed restore leaves the target as it was.

Restore only into an empty database (no tables): restoring over live data would mix two states.
For SQLite, restore with the server stopped; a target with a `-wal`, `-shm` or `-journal` file
beside it (a connection has it open, or one crashed) is refused, since the rename would pull the
file from under that connection, or SQLite would replay the stale log into the restored file.

In production mode a backup folder inside the SQLite database's folder is refused by `db backup`,
and one on the same filesystem is warned about (see `check_backup_dir`).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import inspect, make_url, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from webapp.core.db import make_engine
from webapp.core.migrations_runner import alembic_config
from webapp.ops.backup_files import (
    SIDE_FILES,
    child_options,
    create_private,
    remove_stale_temporaries,
    run_tool,
    temporary_beside,
)

SQLITE_HEADER = b"SQLite format 3\x00"
# The user tables of a PostgreSQL database, named as pg_dump names them in its COPY lines.
_PG_TABLES = text(
    "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind = 'r' AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' "
    # an extension's own tables are not dumped (or only the rows the extension asks for)
    "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e') "
    "ORDER BY 1"
)
_COPY_LINE = re.compile(rb"^COPY (\S+) .*FROM stdin;$")


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


def _run(args: list[str], env: dict[str, str] | None = None) -> str:
    done = run_tool(args, env)
    if done.returncode != 0:
        raise BackupError(f"{Path(args[0]).name} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done.stdout


def default_backup_path(database_url: str, backup_dir: Path, *, now: dt.datetime | None = None) -> Path:
    """Return backup_dir/draftdesk-<UTC time>.sqlite3 (SQLite) or .dump (PostgreSQL custom format)."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    return backup_dir / f"draftdesk-{stamp}.{'sqlite3' if is_sqlite_url(database_url) else 'dump'}"


# --- where backups go -------------------------------------------------------------------------


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return path


def check_backup_dir(*, database_url: str, backup_dir: Path, mode: str, strict: bool = True) -> str | None:
    """Refuse (strict) or report a production backup folder that lives with the SQLite data; return a warning.

    A backup in the database's own folder (or below it) is lost with that folder: the same disk,
    the same `rm`, the same restore of the folder from a snapshot. `db backup` (strict) refuses it
    in production mode; `serve`'s backup before migrating (not strict) only warns, since its job
    is to undo a bad migration, and refusing it would keep the upgraded server from starting.
    A folder elsewhere on the same filesystem is warned about, not refused: one disk is common on
    a small server, where the off-machine copy is the real protection. PostgreSQL: the data live
    on the database server, whose disks Draft Desk cannot see; nothing is checked.
    """
    if mode != "production" or not is_sqlite_url(database_url):
        return None
    data_dir = sqlite_path(database_url).resolve().parent
    folder = backup_dir.resolve()
    if folder == data_dir or data_dir in folder.parents:
        message = (
            f"backup folder {backup_dir} is inside the database's folder {data_dir}: a backup there is lost "
            f"with the data; set DRAFTDESK_BACKUP_DIR (or --output) to a folder on another disk"
        )
        if strict:
            raise BackupError(message)
        return message
    if _nearest_existing(folder).stat().st_dev == _nearest_existing(data_dir).stat().st_dev:
        return (
            f"backup folder {backup_dir} is on the same filesystem as the database {data_dir}: a failed disk "
            f"loses both; mount another disk there or copy each backup off the machine"
        )
    return None


# --- writing a file that is complete or absent -----------------------------------------------


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def _atomic_file(final: Path, suffix: str) -> Iterator[Path]:
    """Yield a temporary file beside `final` (created empty, 0600); after the block, fsync it and rename it to
    `final` (else delete it)."""
    temporary = temporary_beside(final, suffix)
    create_private(temporary)
    try:
        yield temporary
        _fsync(temporary)
        os.replace(temporary, final)
        _fsync(final.parent)  # the rename itself survives a power cut
    finally:
        temporary.unlink(missing_ok=True)
        for extra in SIDE_FILES:
            Path(f"{temporary}{extra}").unlink(missing_ok=True)


def backup(database_url: str, output: Path) -> Path:
    """Write a verified backup of the database to `output` (its folder is created); return the path."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackupError(f"{output.parent}: cannot create the backup folder ({exc.strerror})") from None
    if output.exists():
        raise BackupError(f"{output}: already exists; choose another --output")
    remove_stale_temporaries(output.parent)  # those of a backup killed before it could remove its own
    try:
        with _atomic_file(output, "partial") as temporary:
            if is_sqlite_url(database_url):
                _backup_sqlite(sqlite_path(database_url), temporary)
            else:
                _backup_postgresql(database_url, temporary)
            temporary.chmod(0o600)  # created so (backup_files.create_private); kept so whatever a tool did
    except BackupError as exc:
        raise BackupError(f"{exc}; no backup was written to {output}") from None
    except OSError as exc:
        raise BackupError(f"{output}: cannot write the backup ({exc.strerror or exc}); no backup was written to {output}") from None
    except sqlite3.Error as exc:
        raise BackupError(f"database: cannot read it ({exc}); no backup was written to {output}") from None
    return output


# --- SQLite ---------------------------------------------------------------------------------------


def _sqlite_tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    return [name for (name,) in rows]


def _sqlite_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in _sqlite_tables(conn)}


def _copy_sqlite(source: sqlite3.Connection, target: Path) -> None:
    """Copy the source's snapshot into the file `target` with the online backup API (one step)."""
    dst = sqlite3.connect(target)
    try:
        source.backup(dst)
        # A backup is a single file: no WAL beside it to lose when it is copied off the machine.
        dst.execute("PRAGMA journal_mode=DELETE")
    finally:
        dst.close()


def _backup_sqlite(source: Path, temporary: Path) -> None:
    if not source.exists():
        raise BackupError(f"{source}: no such database file")
    src = sqlite3.connect(source, timeout=30)
    try:
        src.execute("BEGIN")  # one read snapshot for the counts and the copy
        expected = _sqlite_counts(src)
        _copy_sqlite(src, temporary)
        src.rollback()
    finally:
        src.close()
    found = verify_sqlite_backup(temporary, display=temporary)
    if found != expected:
        raise BackupError(f"{temporary}: the copy's row counts differ from the database's")


def _sqlite_size_problem(path: Path) -> str | None:
    size = path.stat().st_size
    with path.open("rb") as fh:
        header = fh.read(100)
    if size == 0:
        return "the file is empty"
    if len(header) < 100 or not header.startswith(SQLITE_HEADER):
        return "not a SQLite database file"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96] and pages > 0
    if header_valid and size != page_size * pages:
        return f"{size} bytes where its header says {page_size * pages}: truncated"
    if size % page_size:
        return f"{size} bytes, not a whole number of {page_size}-byte pages: truncated"
    return None


def verify_sqlite_backup(path: Path, *, display: Path | None = None) -> dict[str, int]:
    """Check a SQLite backup file (size, integrity, a Draft Desk schema); return each table's row count."""
    name = display or path

    def refuse(why: str) -> BackupError:
        return BackupError(f"{name}: not a complete Draft Desk backup ({why})")

    problem = _sqlite_size_problem(path)
    if problem:
        raise refuse(problem)
    try:
        # immutable: read the file as it is, no lock and no -wal/-shm created beside it.
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except sqlite3.DatabaseError as exc:
        raise refuse(str(exc)) from None
    try:
        result = [row[0] for row in conn.execute("PRAGMA integrity_check(20)")]
        if result != ["ok"]:
            raise refuse("integrity_check: " + "; ".join(result[:3]))
        counts = _sqlite_counts(conn)
        if "alembic_version" not in counts or counts["alembic_version"] != 1:
            raise refuse("no alembic_version row: not a Draft Desk database")
        return counts
    except sqlite3.DatabaseError as exc:
        raise refuse(str(exc)) from None
    finally:
        conn.close()


def _refuse_busy_sqlite_target(target: Path) -> None:
    for extra in ("-wal", "-shm", "-journal"):
        side = Path(f"{target}{extra}")
        if side.exists():
            raise BackupError(
                f"{side}: exists, so {target.name} is open (or was left by a crash); stop the server "
                f"and restore into a new database file"
            )


def _restore_sqlite(target: Path, source: Path) -> None:
    expected = verify_sqlite_backup(source)
    _refuse_busy_sqlite_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _atomic_file(target, "restoring") as temporary:
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            _copy_sqlite(src, temporary)
        finally:
            src.close()
        if verify_sqlite_backup(temporary, display=temporary) != expected:
            raise BackupError(f"{source}: the restored copy differs from the backup")
        _refuse_busy_sqlite_target(target)  # opened meanwhile: leave it alone


# --- PostgreSQL -----------------------------------------------------------------------------------


def _backup_postgresql(database_url: str, temporary: Path) -> None:
    url, env = libpq_target(database_url)
    pg_dump = _tool("pg_dump")
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                # pg_dump reads the snapshot this transaction holds, so the counts are the dump's.
                snapshot = conn.execute(text("SELECT pg_export_snapshot()")).scalar_one()
                tables = list(conn.execute(_PG_TABLES).scalars())
                expected = {name: conn.execute(text(f"SELECT count(*) FROM {name}")).scalar_one() for name in tables}
                _run(
                    [pg_dump, "--format=custom", "--no-owner", f"--snapshot={snapshot}", f"--file={temporary}", f"--dbname={url}"],
                    env,
                )
    except DBAPIError as exc:
        raise BackupError(f"database: cannot read it ({str(exc.orig).strip()})") from None
    finally:
        engine.dispose()
    found = verify_postgresql_backup(temporary, display=temporary)
    differ = sorted(name for name, rows in expected.items() if found.get(name) != rows)
    if differ:
        raise BackupError(f"{temporary}: row counts differ from the database's in {', '.join(differ[:5])}")


def verify_postgresql_backup(path: Path, *, display: Path | None = None) -> dict[str, int]:
    """Check a pg_dump custom-format file by reading every table's data back; return each table's row count."""
    name = display or path

    def refuse(why: str) -> BackupError:
        return BackupError(f"{name}: not a complete Draft Desk backup ({why})")

    pg_restore = _tool("pg_restore")
    try:
        listing = _run([pg_restore, "--list", str(path)])
    except BackupError as exc:
        raise refuse(str(exc)) from None
    data_entries = sum(1 for line in listing.splitlines() if " TABLE DATA " in line)
    counts, stderr, code = _count_copy_rows(pg_restore, path)
    if code != 0:
        raise refuse(f"pg_restore stopped reading its data (exit {code}): {stderr.strip()}")
    if len(counts) != data_entries:
        raise refuse(f"{data_entries} tables listed, {len(counts)} tables' data found")
    if not any(table.endswith(".alembic_version") for table in counts):
        raise refuse("no alembic_version table: not a Draft Desk database")
    return counts


def _count_copy_rows(pg_restore: str, path: Path) -> tuple[dict[str, int], str, int]:
    """Stream the file's data as SQL and count the rows of each COPY block (one line per row in COPY text)."""
    counts: dict[str, int] = {}
    table = ""  # the table whose COPY block is being read; "" between blocks
    # stderr to a file, not a pipe: a pipe nobody reads while stdout streams could fill and stall pg_restore.
    with tempfile.TemporaryFile() as errors:
        with subprocess.Popen(
            [pg_restore, "--data-only", "--file=-", str(path)], stdout=subprocess.PIPE, stderr=errors, **child_options()
        ) as proc:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.rstrip(b"\n")
                if table:
                    if line == b"\\.":
                        table = ""
                    else:
                        counts[table] += 1
                elif match := _COPY_LINE.match(line):
                    table = match.group(1).decode()
                    counts[table] = 0
            code = proc.wait()
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    if table:
        return counts, stderr or f"the data of {table} ends early", code or 1
    return counts, stderr, code


def _restore_postgresql(database_url: str, source: Path) -> None:
    verify_postgresql_backup(source)
    url, env = libpq_target(database_url)
    # One transaction: a failure anywhere rolls back every table, so the database stays empty.
    _run([_tool("pg_restore"), "--no-owner", "--single-transaction", "--exit-on-error", f"--dbname={url}", str(source)], env)


# --- restore --------------------------------------------------------------------------------------


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
    """Restore a verified backup made by `backup` into an empty database, all or nothing."""
    if not source.is_file():
        raise BackupError(f"{source}: no such backup file")
    if is_sqlite_url(database_url):
        # Before table_names, whose connection would create the very -wal/-shm files looked for.
        _refuse_busy_sqlite_target(sqlite_path(database_url))
    try:
        existing = table_names(database_url)
    except DBAPIError as exc:
        raise BackupError(f"database: cannot open it ({str(exc.orig).strip()}); nothing was restored") from None
    if existing:
        raise BackupError(
            f"database: not empty ({len(existing)} tables, e.g. {sorted(existing)[0]}); restore into a new, empty database"
        )
    try:
        if is_sqlite_url(database_url):
            _restore_sqlite(sqlite_path(database_url), source)
        else:
            _restore_postgresql(database_url, source)
    except BackupError as exc:
        raise BackupError(f"{exc}; the database was not changed") from None
    except (OSError, sqlite3.Error) as exc:
        raise BackupError(f"{source}: cannot restore it ({getattr(exc, 'strerror', None) or exc}); the database was not changed") from None


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
