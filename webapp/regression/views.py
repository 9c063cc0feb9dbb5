"""The regression pages' view models, one per page, each built by a named query function.

The pages (webapp.regression.pages) resolve the request, ask grading what the viewer may see
(blind grading) and pass it in; these functions read the database and return the typed view the
template renders (webapp.web.templating.render_view).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from sqlmodel import Session

from webapp.checks.draft_checks import DraftChecks
from webapp.checks.rules import CHECK_LABELS
from webapp.core.blind import SignalsView
from webapp.core.spec import EvalSpec
from webapp.datasets.models import Dataset
from webapp.regression import alerts, comparison, service
from webapp.regression.alerts import PassRateDifference
from webapp.regression.case_pair import CasePair
from webapp.regression.drop import CompareDrop
from webapp.regression.models import RegressionAlert, RegressionCase
from webapp.regression.schemas import CaseFilters
from webapp.regression.service import SuiteReport, SuiteResult
from webapp.runs.models import Run


@dataclass(frozen=True)
class SuitePageView:
    """/regression: the suite, its progress towards the target, and its results in one run."""

    cases: list[RegressionCase]
    report: SuiteReport | None
    results: dict[str, SuiteResult]  # by case id
    hidden: set[str]  # case ids whose pass or fail blind grading hides from the viewer
    counts: dict[str, int]
    run: Run | None
    runs: list[tuple[Run, Dataset]]
    target: int
    months: int
    flash: str | None
    flash_kind: str = "warn"


def hidden_cases(report: SuiteReport | None, signals: SignalsView | None) -> set[str]:
    """Return the cases whose pass or fail comes from drafts the viewer has not graded (blind grading)."""
    if report is None or signals is None:
        return set()
    return {
        r.case_id for r in report.results if r.status in ("pass", "fail") and any(signals.hides(d) for d in r.draft_ids)
    }


def added_notice(*, session: Session, cases: list[RegressionCase], added: str) -> str | None:
    """Say, after "Add to suite" (no JS), that the next run must include the case just added."""
    if not added or not any(c.case_id == added for c in cases):
        return None
    return f"Added {added} to the regression suite. " + service.inclusion_notice(session=session, case_id=added)


def suite_view(
    *, session: Session, spec: EvalSpec, run: Run | None, signals: SignalsView | None, added: str = ""
) -> SuitePageView:
    """Build the suite page for a run (None: no run yet), as `signals` lets the viewer see its results."""
    report = service.suite_report(session=session, run_id=run.id) if run is not None and run.id is not None else None
    hidden = hidden_cases(report, signals)
    cases = service.list_cases(session=session)
    return SuitePageView(
        cases=cases,
        report=report,
        results={r.case.case_id: r for r in report.results} if report else {},
        hidden=hidden,
        counts=service.suite_counts(report=report, hidden=hidden) if report else {},
        run=run,
        runs=service.runs_for_picker(session=session),
        target=spec.regression.target_cases,
        months=spec.regression.target_months,
        flash=added_notice(session=session, cases=cases, added=added),
    )


@dataclass(frozen=True)
class RunRegressionView:
    """/runs/{run}/regression: the suite's result for one run, case by case."""

    run: Run
    report: SuiteReport
    target: int


def run_regression_view(*, session: Session, spec: EvalSpec, run: Run, run_id: int) -> RunRegressionView:
    """Build the suite's result page of one run."""
    return RunRegressionView(run=run, report=service.suite_report(session=session, run_id=run_id), target=spec.regression.target_cases)


@dataclass(frozen=True)
class FromDraftView:
    """The form that adds a draft's case to the suite, with the draft's checks unless blind grading hides them."""

    d: DraftChecks
    hidden: bool
    note: str
    source: str
    error: str | None = None


PageSource = Literal["run", "grading", "review"]
SOURCES_FROM_PAGES: tuple[PageSource, ...] = ("run", "grading", "review")


def page_source(source: str) -> PageSource:
    """Return where the failure was found as a page says it (run, grading or review); anything else reads as run."""
    for known in SOURCES_FROM_PAGES:
        if known == source:
            return known
    return "run"


def from_draft_view(*, d: DraftChecks, hidden: bool, note: str | None, source: str, error: str | None = None) -> FromDraftView:
    """Build the add-to-suite form; without a note (None) it is prefilled with the draft's failures."""
    failures = [] if hidden else [f"{r.key}: {r.reason}" for r in d.results if r.failed]
    text = "; ".join(failures) if note is None else note
    return FromDraftView(d=d, hidden=hidden, note=text, source=page_source(source), error=error)


@dataclass(frozen=True)
class CompareView:
    """/runs/compare: two runs case by case, the filtered case rows, and any error naming the runs."""

    a_ref: str
    b_ref: str
    runs: list[tuple[Run, Dataset]]
    cmp: comparison.Comparison | None
    rows: list[comparison.CaseRow]
    filters: CaseFilters  # the form shows them again
    error: str | None
    drop: CompareDrop | None = None  # the plan's drop alert on B (against A, and against B's own baseline)
    outcomes: dict[str, str] = field(default_factory=lambda: dict(comparison.OUTCOME_LABELS))
    check_labels: dict[str, str] = field(default_factory=lambda: dict(CHECK_LABELS))


@dataclass(frozen=True)
class CompareCaseView:
    """/runs/compare/cases/{case_id}: one case's drafts in both runs side by side."""

    pair: CasePair
    ra: Run
    rb: Run
    check_labels: dict[str, str] = field(default_factory=lambda: dict(CHECK_LABELS))


@dataclass(frozen=True)
class AlertsView:
    """/regression/alerts: alerts (open first) with their runs, and the sampled pass-rate readings."""

    rows: list[tuple[RegressionAlert, Run]]
    can_ack: bool
    drop: float
    readings: list[PassRateDifference]
    kind_label: Callable[[RegressionAlert], str] = alerts.alert_kind_label
    verdict_labels: dict[str, str] = field(default_factory=lambda: dict(alerts.DROP_VERDICT_LABELS))


def alerts_view(*, session: Session, spec: EvalSpec, can_ack: bool, readings: list[PassRateDifference]) -> AlertsView:
    """Build the alerts page: open alerts first, then acknowledged ones, newest first within each."""
    rows = alerts.list_alerts(session=session)
    rows.sort(key=lambda ar: ar[0].acknowledged_at is not None)
    return AlertsView(rows=rows, can_ack=can_ack, drop=spec.regression.alert_pass_rate_drop, readings=readings)
