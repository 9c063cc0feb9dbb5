"""`draftdesk`: the Typer root, which loads a domain's commands only when one of them runs.

Why lazy: loading every domain's cli.py (and through them the services, pandas, plotly, the
FastAPI app...) cost ~2.5 s before any command started, so even refusing a 355-byte alias bomb
took seconds. Each domain still declares its commands in its own cli.py `register(app,
import_app)`; this module only knows which domain provides which command name (COMMANDS and
IMPORT_COMMANDS below). Running `draftdesk NAME ...` imports that one domain's cli.py, registers
it on a scratch Typer app and takes the command named NAME from it. `draftdesk --help` (and
`draftdesk import --help`) load every listed domain, so the listing and the one-line help are
those the domains declare, never a copy. tests/test_cli_startup.py checks that the tables name
exactly the commands the domains register, so a new command cannot be left out of them.

The alternative, importing the heavy libraries inside each command body, would have to be kept
up by every domain in every module its cli.py imports (a service importing pandas at the top
undoes it); the table is one place, and its test catches omissions.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import typer
from typer.core import TyperGroup

from webapp.core.domains import domain_modules

# Top-level command -> the domain whose cli.py registers it (or a key of CLI_MODULES), in the order `--help` lists them.
COMMANDS: dict[str, str] = {
    "demo": "server",
    "serve": "server",
    "jobs": "server",
    "users": "auth",
    "tokens": "auth",
    "datasets": "datasets",
    "runs": "runs",
    "check": "checks",
    "regression": "regression",
    "grading": "grading",
    "metrics": "metrics",
    "evaluate-dataset": "evaluator",
    "ppi": "ppi",
    "gates": "gates",
    "alerts": "alerts",
    "remote": "remote",
}
# `draftdesk import NAME` -> the domain whose cli.py registers it.
IMPORT_COMMANDS: dict[str, str] = {
    "kb": "kb",
    "dataset": "datasets",
    "drafts": "runs",
    "events": "metrics",
}


# Command modules that are not a domain's cli.py: running the server is no domain's business, so
# `serve`, `jobs` and `demo` live in webapp/app/server_cli.py, where a newcomer looks for them.
# `remote` is the CI client (the draftdesk_remote package, also installed alone: remote/pyproject.toml),
# mounted by webapp/app/remote_cli.py.
CLI_MODULES: tuple[str, ...] = ("server", "remote")


def cli_module(name: str) -> ModuleType:
    """Import the command module named in COMMANDS: webapp/app/server_cli.py ("server"), remote_cli.py, or webapp.<domain>.cli."""
    if name == "server":
        from webapp.app import server_cli

        return server_cli
    if name == "remote":
        from webapp.app import remote_cli

        return remote_cli
    (module,) = domain_modules("cli", [name])
    return module


@cache
def domain_commands(domain: str) -> tuple[TyperGroup, TyperGroup]:
    """Import the command module and return its top-level and `import` commands as click groups."""
    module = cli_module(domain)
    root, imports = typer.Typer(), typer.Typer()
    module.register(root, imports)
    return typer.main.get_group(root), typer.main.get_group(imports)


class _LazyGroup(TyperGroup):
    """A group whose commands beyond its own come from the domain named in `lazy`."""

    lazy: ClassVar[dict[str, str]] = {}
    part: ClassVar[int] = 0  # 0: the domain's top-level commands, 1: its `import` commands

    # (ctx is a typer.Context; the base class declares the click Context that typer ships privately,
    # and the command returned is one of typer's click commands, a type it does not export either)
    def list_commands(self, ctx: Any) -> list[str]:
        """Return the group's own commands, then the lazy ones in table order."""
        own = super().list_commands(ctx)
        return own + [name for name in self.lazy if name not in own]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """Return the command, importing its domain's cli.py the first time it is asked for."""
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self.lazy:
            command = domain_commands(self.lazy[cmd_name])[self.part].commands.get(cmd_name)
        return command


class _RootGroup(_LazyGroup):
    lazy = COMMANDS


class _ImportGroup(_LazyGroup):
    lazy = IMPORT_COMMANDS
    part = 1


app = typer.Typer(
    cls=_RootGroup, help="Draft Desk: evaluate and monitor the support-reply drafting assistant.", no_args_is_help=True
)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
import_app = typer.Typer(
    cls=_ImportGroup, help="Import KB articles, datasets, drafts and events (each file all-or-nothing).", no_args_is_help=True
)
app.add_typer(db_app, name="db")
app.add_typer(import_app, name="import")


@db_app.command("upgrade")
def db_upgrade(revision: str = typer.Argument("head", help="Target revision")) -> None:
    """Apply pending migrations to the configured database."""
    from webapp.core.cli_support import console, load_settings
    from webapp.core.migrations_runner import upgrade

    settings = load_settings()
    upgrade(settings.database_url, revision)
    console.print(f"database at {revision}: {settings.database_url.split('@')[-1]}")


@db_app.command("backup")
def db_backup(
    output: Path = typer.Option(None, "--output", help="Backup file (default: DRAFTDESK_BACKUP_DIR/draftdesk-<UTC time>.sqlite3|.dump)"),
) -> None:
    """Back up the database (SQLite's online backup, or pg_dump's custom format), verified before it takes its name."""
    from webapp.core.cli_support import console, err_console, fail, load_settings
    from webapp.ops.backup import BackupError, backup, check_backup_dir, default_backup_path

    settings = load_settings()
    target = output or default_backup_path(settings.database_url, settings.backup_dir)
    try:
        warning = check_backup_dir(database_url=settings.database_url, backup_dir=target.parent, mode=settings.mode)
        if warning:
            err_console.print(f"warning: {warning}", highlight=False, markup=False, soft_wrap=True)
        path = backup(settings.database_url, target)
    except BackupError as exc:
        fail(str(exc))
    console.print(f"backup written: {path}")


@db_app.command("restore")
def db_restore(path: Path = typer.Argument(..., help="A file written by `db backup`")) -> None:
    """Restore a verified backup into the configured database, which must be new and empty (all or nothing)."""
    from webapp.core.cli_support import console, fail, load_settings
    from webapp.ops.backup import BackupError, restore

    settings = load_settings()
    try:
        restore(settings.database_url, path)
    except BackupError as exc:
        fail(str(exc))
    console.print(f"restored {path} into {settings.database_url.split('@')[-1]}")


@db_app.command("prune")
def db_prune() -> None:
    """Delete expired sessions, old sign-in attempts, delivered alert messages and (per setting) old events."""
    from webapp.core.cli_support import console, load_settings
    from webapp.core.db import make_engine
    from webapp.core.migrations_runner import upgrade
    from webapp.ops.retention import Retention, prune_database, retention_line

    settings = load_settings()
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        report = prune_database(engine, Retention.from_settings(settings), tz=settings.eval_spec.tz)
    finally:
        engine.dispose()
    console.print(
        f"pruned {report.sessions} expired sessions, {report.login_attempts} sign-in attempts, "
        f"{report.outbox} delivered alert messages, {report.events} events"
        + (f" in {len(report.event_batches)} batches" if len(report.event_batches) > 1 else "")
        + f", {report.facts} settled facts"
    )
    console.print(retention_line(report.pruned_before))


def main() -> None:
    """Entry point of the `draftdesk` console script."""
    from webapp.core.cli_support import guard_stdout

    guard_stdout()
    app()
