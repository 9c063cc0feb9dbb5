"""`draftdesk import dataset FILE` and `draftdesk datasets`."""

from __future__ import annotations

from pathlib import Path

import typer

from webapp.core.cli_support import cli_session, load_settings
from webapp.datasets.records import RecordError, read_file, read_records


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the dataset import and list commands."""

    @import_app.command("dataset")
    def import_dataset(
        file: Path = typer.Argument(..., help="Dataset file in the format guide's JSONL or YAML"),
        name: str = typer.Option(None, "--name", help="Dataset name (default: the file name without extension)"),
    ) -> None:
        """Import an eval dataset; the same file again is a no-op, a changed file a new version."""
        try:
            # Read and parse the file before loading the services or opening (and migrating) the
            # database, so malformed or hostile input is refused within the start-up time.
            data = read_file(file)
            read_records(data, path=file)
            from webapp.datasets import service

            settings = load_settings()
            with cli_session(settings) as session:
                result = service.import_dataset(
                    session=session, data=data, path=str(file), name=name, spec=settings.eval_spec
                )
        except RecordError as exc:
            typer.echo(exc.location, err=True)
            raise typer.Exit(2) from None
        typer.echo(result.message)
        # The file is imported either way; what departs from the plan is said on stderr.
        for w in result.plan_warnings:
            typer.echo(f"warning: {file}: {w}", err=True)
        for cw in result.case_warnings:
            typer.echo(f"warning: {file}:{cw.line}: {cw.message}", err=True)

    @app.command("datasets")
    def datasets_list() -> None:
        """List imported datasets (name, version, cases, hash)."""
        from webapp.datasets import service

        with cli_session() as session:
            rows = service.list_datasets(session=session)
        if not rows:
            typer.echo("no datasets yet: draftdesk import dataset FILE")
        for ds in rows:
            typer.echo(f"{ds.name}\tv{ds.version}\t{ds.count} cases\t{ds.format}\t{ds.sha256}\tid {ds.id}")
