"""`draftdesk check RUN`: check a run, print the results, exit 1 when it fails the CI gate."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table
from sqlmodel import Session

from webapp.checks import service
from webapp.cli_support import cli_session, console, fail, load_settings
from webapp.runs.service import RunNotFound, resolve_run
from webapp.spec import EvalSpec


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def check_and_report(*, session: Session, spec: EvalSpec, ref: str, out: Console) -> int:
    """Check the run named `ref`, print tables per check and per category, and return the exit code."""
    run = resolve_run(session=session, ref=ref)
    result = service.check_run(session=session, spec=spec, run_id=run.id)  # type: ignore[arg-type]
    s = result.summary
    out.print(f"[bold]{run.name}[/]: {s.overall.passed}/{s.overall.total} drafts pass every applicable check ({_pct(s.overall.rate)})")

    per_check = Table(title="Per check")
    for name in ("check", "pass", "fail", "n/a", "pass rate"):
        per_check.add_column(name, justify="left" if name == "check" else "right")
    for c in s.per_check:
        per_check.add_row(c.label, str(c.passed), str(c.failed), str(c.not_applicable), _pct(c.rate))
    out.print(per_check)

    per_cat = Table(title="Per category")
    for name in ("category", "drafts", "passing", "pass rate"):
        per_cat.add_column(name, justify="left" if name == "category" else "right")
    for cat, rate in s.per_category.items():
        per_cat.add_row(cat, str(rate.total), str(rate.passed), _pct(rate.rate))
    out.print(per_cat)

    if s.failing:
        failing = Table(title="Failing drafts")
        for name in ("case", "draft", "check", "reason"):
            failing.add_column(name)
        for o in s.failing:
            for r in o.failures:
                failing.add_row(o.case_id + (" (golden)" if o.golden else ""), str(o.draft_id), r.key, r.reason)
        out.print(failing)
    for alert in result.alerts:
        out.print(f"[bold red]regression alert:[/] {alert.message}", highlight=False)

    reasons = service.gate_failures(summary=s, spec=spec)
    if reasons:
        for reason in reasons:
            out.print(f"[red]FAIL[/] {reason}", highlight=False)
        return 1
    out.print("[green]PASS[/] no golden or safety failure and the pass rate meets the pilot gate")
    return 0


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add `draftdesk check`."""

    @app.command("check")
    def check(run: str = typer.Argument(..., help="Run name or id")) -> None:
        """Check a run's drafts (results stored, alerts raised); exit 1 on a golden/safety failure or a low pass rate."""
        spec = load_settings().eval_spec
        try:
            with cli_session() as session:
                code = check_and_report(session=session, spec=spec, ref=run, out=console)
        except RunNotFound as exc:
            fail(str(exc), code=2)
        raise typer.Exit(code)
