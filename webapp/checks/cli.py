"""`draftdesk check RUN`: check a run, print the results, exit 1 when it fails the CI gate."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from webapp.core.cli_support import cli_session, console, load_settings
from webapp.runs.cli import run_or_exit

if TYPE_CHECKING:  # SQLModel, the spec and the services load when `check` runs, not for `draftdesk --help` (issue 36 item 7)
    from sqlmodel import Session

    from webapp.checks import service
    from webapp.checks.ci_gate import CiVerdict
    from webapp.checks.schemas import NewAlert
    from webapp.core.spec import EvalSpec
    from webapp.runs.models import Run


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


@dataclass
class CheckReport:
    """What `draftdesk check` did and found, ready to print once the transaction is committed."""

    run_name: str
    result: service.RunCheckSummary
    alerts: list[NewAlert]  # the regression alerts this check raised
    verdict: CiVerdict

    @property
    def reasons(self) -> list[str]:
        return self.verdict.reasons

    @property
    def alert_messages(self) -> list[str]:
        return [a.message for a in self.alerts]

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict.passes else 1


def check(*, session: Session, spec: EvalSpec, ref: str) -> CheckReport:
    """Check the run named `ref` (results stored, alerts raised) and decide the CI gate; print nothing but an unknown run's error (exit 2)."""
    return check_verdict(session=session, spec=spec, run=run_or_exit(session=session, ref=ref))


def check_verdict(*, session: Session, spec: EvalSpec, run: Run) -> CheckReport:
    """Check the run (results stored, alerts raised) and decide the CI gate: `draftdesk check` and the API's verdict.

    The one function behind both (POST /api/v1/runs/{run}/checks and /complete call it), so the
    command line and the team's CI never disagree on a run.
    """
    from webapp.checks import hooks, service

    assert run.id is not None
    result = service.check_run(session=session, spec=spec, run_id=run.id)
    alerts = service.raised_alerts(session=session, spec=spec, result=result)
    verdict = hooks.ci_verdict(session=session, spec=spec, summary=result.summary)
    return CheckReport(run.name, result, alerts, verdict)


def stored_verdict(*, session: Session, spec: EvalSpec, run: Run) -> CheckReport | None:
    """Return the CI gate's verdict on the run's stored check results without checking again; None if never checked.

    The same report as check_verdict's, from the results of the last check (it raises no alert).
    """
    from webapp.checks import hooks, service

    assert run.id is not None
    summary = service.run_summary(session=session, run_id=run.id)
    if summary.checked_at is None:
        return None
    result = service.RunCheckSummary(
        run_id=run.id, drafts=summary.drafts, kb_version=summary.kb_version or "", checked_at=summary.checked_at, summary=summary
    )
    return CheckReport(run.name, result, [], hooks.ci_verdict(session=session, spec=spec, summary=summary))


def report_text(report: CheckReport) -> str:
    """Return what `draftdesk check` prints for the report in a CI log (not a terminal: 80 columns, no colours)."""
    out = Console(record=True, width=80, color_system=None, force_terminal=False, file=io.StringIO())
    print_report(report, out)
    return out.export_text()


def print_report(report: CheckReport, out: Console) -> int:
    """Print the tables per check and per category, the failing drafts and the verdict; return the exit code."""
    from webapp.checks.rules import PROBLEM_LABELS

    s = report.result.summary
    ex = s.examples
    # The run's figure is the pilot gate's (examples of the eval set); the drafts' figure follows it.
    out.print(
        f"[bold]{report.run_name}[/]: {ex.passing}/{ex.total} examples of the eval set pass every automated check "
        f"({_pct(ex.rate)}); {s.overall.passed}/{s.overall.total} drafts pass every applicable check ({_pct(s.overall.rate)})",
        highlight=False,
    )
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
        failing = Table(title="Drafts that do not pass")
        for name in ("case", "draft", "check", "reason"):
            failing.add_column(name)
        for o in s.failing:
            for r in o.failures:
                failing.add_row(o.case_id + (" (golden)" if o.golden else ""), str(o.draft_id), PROBLEM_LABELS[r.key], r.reason)
        out.print(failing)
    for message in report.alert_messages:
        out.print(f"[bold red]regression alert:[/] {message}", highlight=False)
    if report.verdict.drop:
        out.print(f"drop alert: {report.verdict.drop}", highlight=False)

    if report.reasons:
        for reason in report.reasons:
            out.print(f"[red]FAIL[/] {reason}", highlight=False)
        if report.verdict.not_checked:
            out.print("Not read by this verdict: " + "; ".join(report.verdict.not_checked), highlight=False)
    else:
        # What was read and what was not: this verdict is never the pilot gate's (issue 41).
        out.print(f"[green]PASS[/] the CI verdict: {report.verdict.summary}", highlight=False)
    return report.exit_code


def check_and_report(*, session: Session, spec: EvalSpec, ref: str, out: Console) -> int:
    """Check the run named `ref`, print the report, and return the exit code (tests call it in one session)."""
    return print_report(check(session=session, spec=spec, ref=ref), out)


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add `draftdesk check`."""

    @app.command("check")
    def check_cmd(run: str = typer.Argument(..., help="Run name or id")) -> None:
        """Check a run's drafts (results stored, alerts raised); exit 1 when the CI verdict fails (pilot criterion 1, golden, safety, drop alert)."""
        spec = load_settings().eval_spec
        # The results are committed when this block ends, before anything is printed, so a
        # reader that stops early (`| head -1`) cannot lose them.
        with cli_session() as session:
            report = check(session=session, spec=spec, ref=run)
        print_report(report, console)
        raise typer.Exit(report.exit_code)
