"""Regression alerts: a golden example failing, or the pass rate dropping from the baseline's (checks' rates, and
the sampled judge + human difference); listing and acknowledging them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from sqlalchemy import func
from sqlmodel import Session, col, select

from webapp.checks import service as checks_service
from webapp.checks.rules import golden_failures, named
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.datasets.models import EvalCase
from webapp.grading.status import final_grades
from webapp.regression.drop import DropReading, drop_reading
from webapp.regression.models import RegressionAlert, RegressionAlertKind
from webapp.regression.service import baseline_for
from webapp.runs.models import Draft, Run

ALERT_KIND_LABELS: dict[str, str] = {
    "golden_check": "golden: check",
    "golden_factual": "golden: factual grade",
    "pass_rate_drop": "pass rate drop",
}


def alert_kind_label(alert: RegressionAlert) -> str:
    """Name an alert's kind as the alerts page shows it (alerts stored before golden_check named their check)."""
    kind = "golden_check" if alert.kind == "golden_factual" and alert.evidence.get("check") else alert.kind
    return ALERT_KIND_LABELS.get(kind, kind.replace("_", " "))

DropVerdict = Literal["drop", "no_drop", "undecided"]
DROP_VERDICT_LABELS: dict[str, str] = {"drop": "drop confirmed", "no_drop": "no drop", "undecided": "undecided"}


def points(share: float) -> str:
    """Format a pass-rate difference (a share) as signed points: -0.072 -> '-7.2'."""
    return f"{share * 100:+.1f}"


@dataclass(frozen=True)
class PassRateDifference:
    """A run's pass rate minus its baseline's on the cases both ran, with its 95% interval.

    From the two runs' judge + human samples (webapp.ppi.report.pass_rate_difference). The rule
    (docs/checks.md, "Baselines and regression alerts"): the drop is *confirmed* (the alert fires)
    when the upper bound is below -threshold, there is *no drop* when the lower bound is at or
    above -threshold (a drop of exactly the threshold is not "more than" it), and otherwise it is
    *undecided*: no alert, the interval is shown, and more human grades would decide. While a drawn
    draft of either run still waits for its final grade, the reading stays undecided (as the
    pilot gate's does): the sample is not complete.
    """

    run_id: int
    run_name: str
    baseline_id: int
    baseline_name: str
    estimate: float | None  # None while either run has fewer than two human grades on the shared cases
    low: float | None
    high: float | None
    threshold: float  # the alert's drop as a share (0.05 = 5 points)
    cases: int  # gradable cases both runs drafted
    graded: int  # the run's human grades on those cases
    baseline_graded: int
    pending: int  # drawn drafts of either run still waiting for a final grade

    @property
    def verdict(self) -> DropVerdict:
        """Read the interval against the threshold: drop (alert), no_drop, or undecided."""
        if self.estimate is None or self.low is None or self.high is None or self.pending:
            return "undecided"
        if self.high < -self.threshold:
            return "drop"
        if self.low >= -self.threshold:
            return "no_drop"
        return "undecided"

    @property
    def text(self) -> str:
        """Say the difference as the pages, the API and the alert show it: 'pass rate -7.2 points [-11.0, -3.4]'."""
        if self.estimate is None or self.low is None or self.high is None:
            return "pass rate difference: not enough human grades yet"
        return f"pass rate {points(self.estimate)} points [{points(self.low)}, {points(self.high)}]"

    @property
    def hint(self) -> str:
        """Say what the reading means, and for an undecided one what would decide it."""
        limit = f"{self.threshold * 100:.0f} points"
        if self.verdict == "drop":
            return f"the whole interval is below -{limit}: the drop is confirmed and the alert is raised"
        if self.verdict == "no_drop":
            return f"the whole interval is at or above -{limit}: no drop of more than {limit}"
        if self.pending:
            return f"{self.pending} drawn drafts still wait for their final grades; grade them to decide"
        return f"the interval straddles -{limit}: more human grades would decide (draw a further sample)"


class DifferenceLookup(Protocol):
    """Read a run's sampled pass-rate difference from its baseline (None: either run has no sample)."""

    def __call__(self, *, run_id: int, baseline_id: int) -> PassRateDifference | None: ...


def _raise(session: Session, run_id: int, kind: RegressionAlertKind, fingerprint: str, message: str, evidence: dict[str, object]) -> RegressionAlert | None:
    existing = session.exec(
        select(RegressionAlert).where(RegressionAlert.run_id == run_id, RegressionAlert.fingerprint == fingerprint)
    ).first()
    if existing is not None:
        return None
    alert = RegressionAlert(run_id=run_id, kind=kind, fingerprint=fingerprint, message=message, evidence=evidence)
    session.add(alert)
    session.flush()
    return alert


def raise_alerts_for_run(
    *, session: Session, spec: EvalSpec, run_id: int, difference: DifferenceLookup | None = None
) -> list[RegressionAlert]:
    """Raise the run's regression alerts (golden examples failing, pass-rate drop from baseline); return the new ones.

    The plan's drop alert reads the set's examples pass rates against the run's baseline (marked, else
    the previous checked run: webapp.regression.drop) and is evaluated on every checked run. `difference` reads the pass-rate difference from the two runs' judge + human samples (the
    PPI domain, above this one, supplies it: webapp/ppi/reactions.py); a confirmed drop there raises
    an additional alert (evidence method "sample"), whatever the checks say, and vice versa. Notifying is the alerts domain's
    (webapp/regression/reactions.py records "regression_alerts_raised"; alerts react).
    """
    summary = checks_service.run_summary(session=session, run_id=run_id)
    run = session.get(Run, run_id)
    assert run is not None
    new = _golden_check_alerts(session, run, summary) + _golden_factual_alerts(session, run)
    # The plan's alert: the set's examples pass rate more than N points below the baseline's (the
    # marked baseline, else the previous checked run of the dataset: webapp.regression.drop), on
    # every checked run. When the run and its marked baseline both have a judge + human sample, the
    # interval-confirmed drop in human grades is a second alert beside it (its own fingerprint),
    # never a replacement (issue 34).
    new.append(_raise_checks_drop(session, run, drop_reading(session=session, spec=spec, run_id=run_id, summary=summary)))
    marked = baseline_for(session=session, run_id=run_id)
    if marked is not None and marked.id != run_id and difference is not None:
        reading = difference(run_id=run_id, baseline_id=stored_id(marked.id))
        if reading is not None:
            new.append(raise_sampled_drop(session=session, reading=reading))
    return [a for a in new if a is not None]


def _golden_check_alerts(session: Session, run: Run, summary: checks_service.RunSummary) -> list[RegressionAlert | None]:
    """Raise `golden_check` for each golden draft failing an automated check (rules.golden_failures), named by check."""
    new: list[RegressionAlert | None] = []
    for o in summary.outcomes:
        failures = golden_failures(results=o.results, factual_grade=None) if o.golden else []
        if not failures:
            continue
        keys = [r.key for r in failures]
        new.append(_raise(
            session,
            stored_id(run.id),
            "golden_check",
            f"golden_check:{o.draft_id}:{','.join(sorted(keys))}",
            f"Golden example {o.case_id} fails {named(failures)} in run {run.name}: " + "; ".join(r.reason for r in failures) + ".",
            {"case_id": o.case_id, "draft_id": o.draft_id, "checks": keys, "reasons": [r.reason for r in failures]},
        ))
    return new


def _golden_factual_alerts(session: Session, run: Run) -> list[RegressionAlert | None]:
    """Raise `golden_factual` for each golden draft whose final human factual grade is fail."""
    run_id = stored_id(run.id)
    grades = final_grades(session=session, run_id=run_id)
    # Every golden draft of the run, checked or not: a human grade does not wait for the checks.
    golden_drafts = session.exec(
        select(Draft.id, EvalCase.case_id)
        .join(EvalCase, col(EvalCase.id) == col(Draft.case_pk))
        .where(Draft.run_id == run_id, col(EvalCase.golden).is_(True))
    ).all()
    new: list[RegressionAlert | None] = []
    for draft_id, case_id in dict(golden_drafts).items():
        view = grades.get(draft_id) if draft_id is not None else None
        if view is None or view.factual_accuracy != "fail":
            continue
        new.append(_raise(
            session,
            run_id,
            "golden_factual",
            f"golden_factual:grade:{case_id}:{draft_id}",
            f"Golden example {case_id} fails factual accuracy in run {run.name}: the final human grade is fail.",
            {"case_id": case_id, "draft_id": draft_id, "grade": "factual_accuracy fail"},
        ))
    return new


def _raise_checks_drop(session: Session, run: Run, reading: DropReading) -> RegressionAlert | None:
    """Raise `pass_rate_drop` when the set's examples pass rate is more than the threshold below the baseline's."""
    if not reading.fires or reading.baseline is None:
        return None
    assert reading.examples is not None and reading.baseline_examples is not None and reading.drop is not None
    ex, base = reading.examples, reading.baseline_examples
    return _raise(
        session,
        stored_id(run.id),
        "pass_rate_drop",
        f"pass_rate_drop:{reading.baseline.run.id}:{ex.passing}/{ex.total}",
        f"Pass rate of run {run.name} is {ex.rate or 0:.1%} of the eval set's examples ({ex.passing}/{ex.total}), "
        f"down {reading.drop * 100:.1f} points from {reading.baseline_text} at {base.rate or 0:.1%} "
        f"({base.passing}/{base.total}); the alert threshold is {reading.threshold * 100:.0f} points.",
        {
            "baseline_run": reading.baseline.name,
            "baseline_kind": reading.baseline.kind,
            "baseline_pass_rate": base.rate,
            "pass_rate": ex.rate,
            "unit": "examples of the eval set",
            "drop": reading.drop,
            "threshold": reading.threshold,
        },
    )


def raise_sampled_drop(*, session: Session, reading: PassRateDifference) -> RegressionAlert | None:
    """Raise `pass_rate_drop` when the sampled difference confirms a drop (its whole interval below -threshold).

    Raised once per run and baseline: later grades that move the interval do not raise it again.
    """
    if reading.verdict != "drop":
        return None
    assert reading.estimate is not None and reading.low is not None and reading.high is not None
    return _raise(
        session,
        reading.run_id,
        "pass_rate_drop",
        f"pass_rate_drop:{reading.baseline_id}:sample",
        f"Run {reading.run_name} against baseline {reading.baseline_name}: {reading.text} "
        f"(judge on every draft, corrected by the human sample; 95% interval, {reading.cases} shared cases). "
        f"The whole interval is below -{reading.threshold * 100:.0f} points, the alert threshold: the drop is confirmed.",
        {
            "baseline_run": reading.baseline_name,
            "method": "sample",
            "difference": reading.estimate,
            "low": reading.low,
            "high": reading.high,
            "interval_text": reading.text,
            "drop": -reading.estimate,
            "threshold": reading.threshold,
            "cases": reading.cases,
            "graded": reading.graded,
            "baseline_graded": reading.baseline_graded,
        },
    )


def list_alerts(*, session: Session, open_only: bool = False, limit: int = 200) -> list[tuple[RegressionAlert, Run]]:
    """Return alerts with their runs, newest first; optionally only the unacknowledged ones."""
    stmt = select(RegressionAlert, Run).join(Run, col(Run.id) == col(RegressionAlert.run_id))
    if open_only:
        stmt = stmt.where(col(RegressionAlert.acknowledged_at).is_(None))
    stmt = stmt.order_by(col(RegressionAlert.created_at).desc(), col(RegressionAlert.id).desc()).limit(limit)
    return [(a, r) for a, r in session.exec(stmt).all()]



def count_open_alerts(*, session: Session) -> int:
    """Return how many alerts nobody has acknowledged."""
    return session.exec(
        select(func.count()).select_from(RegressionAlert).where(col(RegressionAlert.acknowledged_at).is_(None))
    ).one()


def acknowledge_alert(*, session: Session, alert_id: int, user_id: int) -> RegressionAlert:
    """Mark an alert as seen by a user (acknowledging twice keeps the first acknowledgement)."""
    alert = session.get(RegressionAlert, alert_id)
    if alert is None:
        raise LookupError(f"alert: no regression alert with id {alert_id}")
    if alert.acknowledged_at is None:
        alert.acknowledged_by = user_id
        alert.acknowledged_at = utcnow()
        session.add(alert)
        session.flush()
    return alert


