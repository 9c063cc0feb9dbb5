"""`draftdesk regression seed-golden|export|list|baseline`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from webapp.core.cli_support import cli_session, console, fail
from webapp.runs.cli import run_or_exit

if TYPE_CHECKING:
    from sqlmodel import Session


def suite_lines(*, session: Session, run: str | None) -> list[str]:
    """Return one tab-separated line per case (id, source, note), with its status and reason in `run` when named."""
    from webapp.core.db import stored_id  # loaded by the command, not by `draftdesk --help`
    from webapp.regression import service

    results: dict[str, service.SuiteResult] = {}
    if run:
        r = run_or_exit(session=session, ref=run)
        results = {x.case_id: x for x in service.run_report(session=session, run_id=stored_id(r.id))}
    lines = []
    for c in service.list_cases(session=session):
        res = results.get(c.case_id)
        tail = f"\t{res.status}\t{res.reason}" if res else ""
        lines.append(f"{c.case_id}\t{c.source}\t{c.note}{tail}")
    return lines


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the regression commands (there is deliberately no command that edits or removes a case)."""
    reg = typer.Typer(help="The append-only regression suite.", no_args_is_help=True)
    app.add_typer(reg, name="regression")

    @reg.command("seed-golden")
    def seed_golden(
        by: str = typer.Option(..., "--by", help="Email of the user the cases are recorded as added by"),
        dataset: int = typer.Option(None, "--dataset-id", help="Dataset id (default: the newest with golden cases)"),
    ) -> None:
        """Append the golden examples of a dataset that are not in the suite yet."""
        from webapp.auth.service import get_user_by_email  # loaded by the command, not by `draftdesk --help`
        from webapp.core.db import stored_id
        from webapp.regression import service

        with cli_session() as session:
            user = get_user_by_email(session=session, email=by)
            if user is None:
                fail(f"--by: no user with email {by!r}")
            try:
                added = service.seed_golden(session=session, created_by=stored_id(user.id), dataset_id=dataset)
            except service.RegressionError as exc:
                fail(str(exc))
            total = service.count_cases(session=session)
        console.print(f"added {len(added)} golden case(s): {', '.join(c.case_id for c in added) or '-'}; suite has {total}")

    @reg.command("export")
    def export(file: Path = typer.Argument(..., help="JSONL file to write (the dataset format guide's schema)")) -> None:
        """Write the suite as JSONL that `prompt-evaluator evaluate-dataset` and `draftdesk import` read."""
        from webapp.regression import service  # loaded by the command, not by `draftdesk --help`

        with cli_session() as session:
            text = service.export_jsonl(session=session)
        tmp = file.with_name(file.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(file)  # all or nothing: a reader never sees half a file
        console.print(f"wrote {text.count(chr(10))} case(s) to {file}")

    @reg.command("list")
    def list_cases(run: str = typer.Option(None, "--run", help="Show each case's result for this run")) -> None:
        """List the suite's cases, optionally with their results for a run."""

        with cli_session() as session:
            lines = suite_lines(session=session, run=run)
        for line in lines:
            console.print(line, highlight=False, markup=False)

    @reg.command("baseline")
    def baseline(
        run: str = typer.Argument(..., help="Run name or id"),
        unmark: bool = typer.Option(False, "--unmark", help="Stop the run being the baseline"),
    ) -> None:
        """Mark a run as the baseline of its dataset (or unmark it)."""
        from webapp.core.db import stored_id  # loaded by the command, not by `draftdesk --help`
        from webapp.regression import service

        with cli_session() as session:
            r = run_or_exit(session=session, ref=run)
            if unmark:
                service.unmark_baseline(session=session, run_id=stored_id(r.id))
            else:
                service.mark_baseline(session=session, run_id=stored_id(r.id))
            name = r.name
        console.print(f"{name} is {'no longer' if unmark else 'now'} the baseline")
