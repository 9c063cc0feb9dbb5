"""`draftdesk import kb FILE`."""

from __future__ import annotations

from pathlib import Path

import typer

from webapp.core.cli_support import cli_session
from webapp.datasets.records import RecordError, read_file


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the KB import command."""

    @import_app.command("kb")
    def import_kb(file: Path = typer.Argument(..., help="KB revisions as JSONL or YAML (see docs)")) -> None:
        """Import KB articles and revisions (one transaction; a changed text becomes a new revision, stored ones never change)."""
        try:
            data = read_file(file)
            from webapp.kb import sync  # SQLModel and the services: loaded by the command, not by --help

            with cli_session() as session:
                result = sync.import_kb(session=session, data=data, path=str(file))
        except RecordError as exc:
            typer.echo(exc.location, err=True)
            raise typer.Exit(2) from None
        typer.echo(f"KB imported from {file}: {result.summary}")
