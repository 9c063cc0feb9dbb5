"""`draftdesk`: the Typer root. Each domain adds its commands from its own cli.py `register(app)`."""

from __future__ import annotations

import typer

from webapp.domains import domain_modules

app = typer.Typer(help="Draft Desk: evaluate and monitor the support-reply drafting assistant.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
import_app = typer.Typer(help="Import KB articles, datasets, drafts and events (each file all-or-nothing).", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(import_app, name="import")


@db_app.command("upgrade")
def db_upgrade(revision: str = typer.Argument("head", help="Target revision")) -> None:
    """Apply pending migrations to the configured database."""
    from webapp.cli_support import console, load_settings
    from webapp.migrations_runner import upgrade

    settings = load_settings()
    upgrade(settings.database_url, revision)
    console.print(f"database at {revision}: {settings.database_url.split('@')[-1]}")


def _register_domains() -> None:
    for module in domain_modules("cli"):
        module.register(app, import_app)


_register_domains()


def main() -> None:
    """Entry point of the `draftdesk` console script."""
    from webapp.cli_support import guard_stdout

    guard_stdout()
    app()
