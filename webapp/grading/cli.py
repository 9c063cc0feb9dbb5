"""`draftdesk grading export|agreement|status`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from webapp.core.cli_support import cli_session, console, fail, load_settings
from webapp.runs.cli import run_or_exit


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the grading commands."""
    grading = typer.Typer(help="Human grading: exports, status and agreement.", no_args_is_help=True)
    app.add_typer(grading, name="grading")

    @grading.command("export")
    def export(
        run: str = typer.Argument(..., help="Run name or id"),
        file: Path = typer.Argument(..., help="File to write (.csv or .jsonl)"),
    ) -> None:
        """Write a run's final grades with both graders' scores and the adjudication as CSV or JSONL."""
        from webapp.core.db import stored_id  # these load when the command runs, not for `draftdesk --help`
        from webapp.grading.export import export_csv, export_jsonl, export_rows

        suffix = file.suffix.lower()
        if suffix not in (".csv", ".jsonl"):
            fail(f"{file}: the file name must end in .csv or .jsonl")
        with cli_session() as session:
            r = run_or_exit(session=session, ref=run)
            run_id = stored_id(r.id)
            fn = export_csv if suffix == ".csv" else export_jsonl
            text = fn(session=session, run_id=run_id)
            n = len(export_rows(session=session, run_id=run_id))
        tmp = file.with_name(file.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(file)  # all or nothing: a reader never sees half a file
        console.print(f"wrote {n} final grade(s) of run {r.name} to {file}")

    @grading.command("status")
    def status(run: str = typer.Argument(..., help="Run name or id")) -> None:
        """Print how many drafts of a run need grades, are in adjudication, or have a final grade."""
        from webapp.core.db import stored_id  # these load when the command runs, not for `draftdesk --help`
        from webapp.grading.status import grading_status

        with cli_session() as session:
            r = run_or_exit(session=session, ref=run)
            counts = grading_status(session=session, run_id=stored_id(r.id)).counts
        console.print(json.dumps(counts))

    @grading.command("agreement")
    def agreement(run: str = typer.Option(None, "--run", help="Run name or id (default: all runs)")) -> None:
        """Print the agreement report as JSON (the same numbers as the page and the API)."""
        from webapp.grading.agreement import agreement_report  # loaded when the command runs

        with cli_session() as session:
            run_id = None
            if run:
                run_id = run_or_exit(session=session, ref=run).id
            report = agreement_report(session=session, spec=load_settings().eval_spec, run_id=run_id)
        console.print_json(report.model_dump_json())
