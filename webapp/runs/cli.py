"""`draftdesk import drafts FILE --run NAME` and `draftdesk runs`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from webapp.core.cli_support import cli_session, fail
from webapp.datasets.records import RecordError, read_file

if TYPE_CHECKING:  # SQLModel and the services load when a command runs, not for `draftdesk --help` (issue 36 item 7)
    from sqlmodel import Session

    from webapp.runs.models import Run


def run_or_exit(*, session: Session, ref: str | int) -> Run:
    """Return the run named `ref` (or numbered, when no run has that name); else print the error and exit 2.

    The one lookup behind every command that takes a run (RUN or --run): the runs service decides
    what matches, so the pages, the API and the CLI agree on it; an unknown run is bad input (2).
    """
    from webapp.runs.service import RunNotFound, resolve_run

    try:
        return resolve_run(session=session, ref=ref)
    except RunNotFound as exc:
        fail(str(exc))


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the drafts import and the runs list."""

    @import_app.command("drafts")
    def import_drafts(
        file: Path = typer.Argument(..., help="JSONL of drafts keyed by case_id"),
        run: str = typer.Option(..., "--run", help="Run name (created when new)"),
        dataset: str = typer.Option(None, "--dataset", help="Dataset name or id the run is over (needed for a new run)"),
        model: str = typer.Option(None, "--model", help="Model that drafted"),
        prompt_version: str = typer.Option(None, "--prompt-version", help="Prompt version"),
        notes: str = typer.Option(None, "--notes", help="Free-text notes on the run"),
    ) -> None:
        """Import a run's drafts (one transaction; the same file again changes nothing)."""
        try:
            data = read_file(file)
            from webapp.runs import hooks as runs_hooks

            with cli_session() as session:
                result = runs_hooks.import_drafts(
                    session=session,
                    data=data,
                    path=str(file),
                    run_name=run,
                    dataset=dataset,
                    model=model,
                    prompt_version=prompt_version,
                    notes=notes,
                )
                summary = result.summary
        except RecordError as exc:
            typer.echo(exc.location, err=True)
            raise typer.Exit(2) from None
        typer.echo(summary)

    @app.command("runs")
    def runs_list() -> None:
        """List runs, newest first: name, id, model, prompt version, dataset, drafts."""
        from webapp.runs import service

        with cli_session() as session:
            rows = service.list_runs(session=session)
            lines = [
                f"{s.run.name}\tid {s.run.id}\t{s.run.model or '-'}\t{s.run.prompt_version or '-'}\t"
                f"{s.dataset.name + ' v' + str(s.dataset.version) if s.dataset else '-'}\t{s.drafts} drafts\t"
                f"{s.run.created_at:%Y-%m-%d %H:%M}"
                for s in rows
            ]
        if not lines:
            typer.echo("no runs yet: draftdesk import drafts FILE --run NAME --dataset NAME")
        for line in lines:
            typer.echo(line)
