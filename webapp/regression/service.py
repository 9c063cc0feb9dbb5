"""The regression suite (append-only), baselines and regression alerts (comparison: regression.comparison)."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from webapp.checks import service as checks_service
from webapp.checks.rules import describe, golden_failures, named
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.datasets.models import Dataset, EvalCase
from webapp.grading.status import FinalGradeView, final_grades
from webapp.regression.models import RegressionAlert, RegressionCase
from webapp.runs.models import PRODUCTION_SOURCE, Draft, Run

Source = Literal["golden", "run", "grading", "review"]
SOURCES: tuple[str, ...] = ("golden", "run", "grading", "review")


class RegressionError(ValueError):
    """A regression-suite request that cannot be honoured; the message says why."""


class NotComparable(ValueError):
    """Two runs that are not over the same dataset."""


# --- the suite -------------------------------------------------------------------------------------------


def add_case(
    *,
    session: Session,
    created_by: int,
    source: Source,
    case_id: str,
    input: str,
    note: str,
    category: str | None = None,
    intent: str | None = None,
    expected_behavior: str | None = None,
    reference: str | None = None,
    kb_articles: list[str] | None = None,
    account: dict[str, Any] | None = None,
    conversation: list[Any] | None = None,
    source_ref: str | None = None,
) -> RegressionCase:
    """Append a case to the regression suite; refuse an unknown source, a blank note or a case id already in it."""
    if source not in SOURCES:
        raise RegressionError(f"source: {source!r} is not one of {', '.join(SOURCES)}")
    case_id = (case_id or "").strip()
    if not case_id:
        raise RegressionError("case_id: must be a non-empty string")
    if not (input or "").strip():
        raise RegressionError("input: must be a non-empty string")
    if not (note or "").strip():
        raise RegressionError("note: say what failed, so the case explains itself later")
    existing = session.exec(select(RegressionCase).where(RegressionCase.case_id == case_id)).first()
    if existing is not None:
        raise RegressionError(
            f"case_id: {case_id!r} is already in the regression suite (added {existing.created_at:%Y-%m-%d} from {existing.source})"
        )
    case = RegressionCase(
        case_id=case_id,
        input=input,
        note=note.strip(),
        source=source,
        source_ref=source_ref,
        category=category,
        intent=intent,
        expected_behavior=expected_behavior,
        reference=reference,
        kb_articles=kb_articles,
        account=account,
        conversation=conversation,
        created_by=created_by,
    )
    session.add(case)
    session.flush()
    return case


EXPORT_COMMAND = "draftdesk regression export regression-suite.jsonl"


def inclusion_notice(*, session: Session, case_id: str) -> str:
    """Say, as a case is added, that the next run must include it (the pilot gate waits for it) and how."""
    names = sorted(
        set(
            session.exec(
                select(Dataset.name).join(EvalCase, col(EvalCase.dataset_id) == col(Dataset.id)).where(EvalCase.case_id == case_id)
            ).all()
        )
    )
    export = (
        f'export the suite with "{EXPORT_COMMAND}" (or Export JSONL on /regression) '
        "and add its cases to the next run's dataset"
    )
    if names:
        return (
            f"The next run must include {case_id}: runs over {', '.join(names)} have it, but a run over any other "
            f"dataset lists it as not included on its pilot gate, which stays incomplete until it is. To add it elsewhere, {export}."
        )
    return (
        f"The next run must include {case_id}: no dataset holds it yet, so every run's pilot gate lists it as not "
        f"included and stays incomplete until a run includes it and passes. To include it, {export}."
    )


def _case_fields(case: EvalCase) -> dict[str, Any]:
    return {
        "case_id": case.case_id,
        "input": case.input,
        "category": case.category,
        "intent": case.intent,
        "expected_behavior": case.expected_behavior,
        "reference": case.reference,
        "kb_articles": case.kb_articles,
        "account": case.account,
        "conversation": case.conversation,
    }


def add_case_from_draft(
    *, session: Session, draft_id: int, created_by: int, note: str, source: Source = "run"
) -> RegressionCase:
    """Append the case of a draft to the suite, with a note of the failure; raise RegressionError."""
    draft = session.get(Draft, draft_id)
    if draft is None:
        raise RegressionError(f"draft: no draft with id {draft_id}")
    case = session.get(EvalCase, draft.case_pk)
    run = session.get(Run, draft.run_id)
    assert case is not None and run is not None
    return add_case(
        session=session,
        created_by=created_by,
        source=source,
        note=note,
        source_ref=f"run {run.name}, draft {draft_id}",
        **_case_fields(case),
    )


def seed_golden(*, session: Session, created_by: int, dataset_id: int | None = None) -> list[RegressionCase]:
    """Append the golden cases of a dataset (default: the newest with any) that are not in the suite yet."""
    if dataset_id is None:
        dataset_id = session.exec(
            select(EvalCase.dataset_id).where(EvalCase.golden == True).order_by(col(EvalCase.dataset_id).desc())  # noqa: E712
        ).first()
        if dataset_id is None:
            raise RegressionError("no dataset has golden cases (metadata field golden: true)")
    dataset = session.get(Dataset, dataset_id)
    if dataset is None:
        raise RegressionError(f"dataset: no dataset with id {dataset_id}")
    have = set(session.exec(select(RegressionCase.case_id)).all())
    added: list[RegressionCase] = []
    goldens = session.exec(
        select(EvalCase).where(EvalCase.dataset_id == dataset_id, EvalCase.golden == True).order_by(col(EvalCase.position))  # noqa: E712
    ).all()
    for case in goldens:
        if case.case_id in have:
            continue
        about = (case.description or case.category or "").removeprefix("Golden: ").strip()
        note = "Golden example of the eval spec" + (f": {about}" if about else "") + "."
        added.append(
            add_case(
                session=session,
                created_by=created_by,
                source="golden",
                note=note,
                source_ref=f"dataset {dataset.name} v{dataset.version}",
                **_case_fields(case),
            )
        )
    return added


def list_cases(*, session: Session) -> list[RegressionCase]:
    """Return every regression case, oldest first."""
    return list(session.exec(select(RegressionCase).order_by(col(RegressionCase.id))).all())


def count_cases(*, session: Session) -> int:
    """Return how many cases the suite holds."""
    return session.exec(select(func.count()).select_from(RegressionCase)).one()


def case_record(case: RegressionCase) -> dict[str, Any]:
    """Return a regression case as a record of the dataset format guide (id, input, reference, metadata)."""
    record: dict[str, Any] = {"id": case.case_id, "input": case.input, "description": case.note}
    if case.reference:
        record["reference"] = case.reference
    for name in ("category", "intent", "expected_behavior", "kb_articles", "account", "conversation"):
        value = getattr(case, name)
        if value is not None:
            record[name] = value
    record["golden"] = case.source == "golden"
    record["regression_source"] = case.source
    if case.source_ref:
        record["regression_source_ref"] = case.source_ref
    return record


def export_jsonl(*, session: Session) -> str:
    """Return the suite as JSONL in the dataset format guide's schema, one case per line."""
    return "".join(json.dumps(case_record(c), ensure_ascii=False) + "\n" for c in list_cases(session=session))


@dataclass
class SuiteResult:
    """How one regression case fared in a run."""

    case: RegressionCase
    status: str  # pass | fail | not_run | not_checked
    reason: str
    draft_ids: list[int] = field(default_factory=list)

    @property
    def case_id(self) -> str:
        return self.case.case_id

    @property
    def note(self) -> str:
        """Why the case has its status (the gates show it as evidence)."""
        return self.reason

    def as_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case.case_id,
            "status": self.status,
            "reason": self.reason,
            "draft_ids": self.draft_ids,
            "source": self.case.source,
        }


@dataclass
class SuiteReport:
    """The suite's results for one run, case by case."""

    run: Run
    results: list[SuiteResult]

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def pass_rate(self) -> float | None:
        """Passing cases / cases the run has results for (not-run cases are reported, not counted)."""
        ran = self.count("pass") + self.count("fail")
        return self.count("pass") / ran if ran else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": {"id": self.run.id, "name": self.run.name},
            "passed": self.count("pass"),
            "failed": self.count("fail"),
            "not_run": self.count("not_run"),
            "not_checked": self.count("not_checked"),
            "pass_rate": self.pass_rate,
            "cases": [r.as_dict() for r in self.results],
        }


def suite_report(
    *,
    session: Session,
    run_id: int,
    summary: checks_service.RunSummary | None = None,
    grades: dict[int, FinalGradeView] | None = None,
) -> SuiteReport:
    """Report every regression case for a run: pass, fail, not run (no such case) or not checked yet."""
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"run: no run with id {run_id}")
    # Callers that already hold the run's check summary and final grades (the launch gates) pass them in.
    if summary is None:
        summary = checks_service.run_summary(session=session, run_id=run_id)
    outcomes_by_case: dict[str, list[checks_service.DraftOutcome]] = {}
    for o in summary.outcomes:
        outcomes_by_case.setdefault(o.case_id, []).append(o)
    drafts_by_case: dict[str, list[int]] = {}
    for draft_id, case_id in session.exec(
        select(Draft.id, EvalCase.case_id).join(EvalCase, col(EvalCase.id) == col(Draft.case_pk)).where(Draft.run_id == run_id)
    ).all():
        drafts_by_case.setdefault(case_id, []).append(draft_id)  # type: ignore[arg-type]
    if grades is None:
        grades = final_grades(session=session, run_id=run_id)
    results: list[SuiteResult] = []
    for case in list_cases(session=session):
        ids = drafts_by_case.get(case.case_id, [])
        if not ids:
            results.append(SuiteResult(case, "not_run", f"run {run.name} has no draft for {case.case_id}"))
            continue
        outcomes = outcomes_by_case.get(case.case_id, [])
        if len(outcomes) < len(ids):
            results.append(SuiteResult(case, "not_checked", f"run {run.name} has not been checked yet", ids))
            continue
        # The golden examples' rule (rules.golden_failures), for every draft of the case.
        failures = [
            (o.draft_id, r)
            for o in outcomes
            for r in golden_failures(results=o.results, factual_grade=grades[o.draft_id].factual_accuracy if o.draft_id in grades else None)
        ]
        if failures:
            many = len({d for d, _ in failures}) > 1
            why = "; ".join(describe([r]) + (f" (draft {d})" if many else "") for d, r in failures)
            results.append(SuiteResult(case, "fail", why, ids))
            continue
        graded = any(i in grades for i in ids)
        why = "passes every applicable check" + (" and its final factual grade is pass" if graded else "")
        results.append(SuiteResult(case, "pass", why, ids))
    return SuiteReport(run=run, results=results)


def run_report(
    *,
    session: Session,
    run_id: int,
    summary: checks_service.RunSummary | None = None,
    grades: dict[int, FinalGradeView] | None = None,
) -> list[SuiteResult]:
    """Return the suite's result for a run, case by case (status pass, fail, not_run or not_checked)."""
    return suite_report(session=session, run_id=run_id, summary=summary, grades=grades).results


def latest_run_id(*, session: Session) -> int | None:
    """Return the id of the newest run over an eval dataset (production-week runs are not), or None."""
    return session.exec(select(Run.id).where(Run.source != PRODUCTION_SOURCE).order_by(col(Run.created_at).desc(), col(Run.id).desc())).first()


# --- baselines -------------------------------------------------------------------------------------------


def _dataset_name(session: Session, run: Run) -> str:
    ds = session.get(Dataset, run.dataset_id)
    assert ds is not None
    return ds.name


def _runs_of_dataset_name(session: Session, name: str) -> list[int]:
    return [
        r
        for r in session.exec(
            select(Run.id).join(Dataset, col(Dataset.id) == col(Run.dataset_id)).where(Dataset.name == name)
        ).all()
        if r is not None
    ]


def mark_baseline(*, session: Session, run_id: int) -> Run:
    """Make a run the baseline of its dataset (by name); the previous baseline stops being one."""
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"run: no run with id {run_id}")
    ids = _runs_of_dataset_name(session, _dataset_name(session, run))
    session.exec(update(Run).where(col(Run.id).in_(ids), col(Run.id) != run_id).values(is_baseline=False))
    run.is_baseline = True
    session.add(run)
    session.flush()
    session.refresh(run)
    return run


def unmark_baseline(*, session: Session, run_id: int) -> Run:
    """Stop a run being the baseline."""
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"run: no run with id {run_id}")
    run.is_baseline = False
    session.add(run)
    session.flush()
    return run


def baseline_for(*, session: Session, run_id: int) -> Run | None:
    """Return the baseline run of a run's dataset (by name), or None."""
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"run: no run with id {run_id}")
    ids = _runs_of_dataset_name(session, _dataset_name(session, run))
    return session.exec(select(Run).where(col(Run.id).in_(ids), Run.is_baseline == True)).first()  # noqa: E712


# --- alerts ----------------------------------------------------------------------------------------------

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


# Pass rates are ratios of small integers; a drop of exactly the threshold (0.85 -> 0.80) must not
# alert because of floating-point noise.
_EPS = 1e-9


def _raise(session: Session, run_id: int, kind: str, fingerprint: str, message: str, evidence: dict[str, Any]) -> RegressionAlert | None:
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

    The plan's drop alert reads the automated checks' pass rates and is evaluated on every checked
    run. `difference` reads the pass-rate difference from the two runs' judge + human samples (the
    PPI domain, above this one, supplies it through webapp.app.flows); a confirmed drop there raises
    an additional alert (evidence method "sample"), whatever the checks say, and vice versa. Notifying is webapp.app.flows' job
    (flows.raise_regression_alerts), which calls this.
    """
    summary = checks_service.run_summary(session=session, run_id=run_id)
    run = session.get(Run, run_id)
    assert run is not None
    new: list[RegressionAlert] = []
    # Golden examples that fail an automated check (the golden rule, rules.golden_failures), named by check ...
    for o in summary.outcomes:
        if not o.golden:
            continue
        failures = golden_failures(results=o.results, factual_grade=None)
        if failures:
            keys = [r.key for r in failures]
            alert = _raise(
                session,
                run_id,
                "golden_check",
                f"golden_check:{o.draft_id}:{','.join(sorted(keys))}",
                f"Golden example {o.case_id} fails {named(failures)} in run {run.name}: "
                + "; ".join(r.reason for r in failures)
                + ".",
                {"case_id": o.case_id, "draft_id": o.draft_id, "checks": keys, "reasons": [r.reason for r in failures]},
            )
            if alert:
                new.append(alert)
    # ... and, once graded, the final human grade.
    grades = final_grades(session=session, run_id=run_id)
    # Every golden draft of the run, checked or not: a human grade does not wait for the checks.
    golden_drafts = dict(
        session.exec(
            select(Draft.id, EvalCase.case_id)
            .join(EvalCase, col(EvalCase.id) == col(Draft.case_pk))
            .where(Draft.run_id == run_id, col(EvalCase.golden).is_(True))
        ).all()
    )
    for draft_id, case_id in golden_drafts.items():
        view = grades.get(draft_id) if draft_id is not None else None
        if view is not None and view.factual_accuracy == "fail":
            alert = _raise(
                session,
                run_id,
                "golden_factual",
                f"golden_factual:grade:{case_id}:{draft_id}",
                f"Golden example {case_id} fails factual accuracy in run {run.name}: the final human grade is fail.",
                {"case_id": case_id, "draft_id": draft_id, "grade": "factual_accuracy fail"},
            )
            if alert:
                new.append(alert)
    # Overall pass rate against the baseline of the same dataset. The plan's alert (the automated
    # checks' pass rate more than N points below the baseline's) is always evaluated; when both runs
    # have a judge + human sample, the interval-confirmed drop in human grades is a second alert
    # beside it (its own fingerprint), never a replacement (issue 34).
    baseline = baseline_for(session=session, run_id=run_id)
    if baseline is not None and baseline.id != run_id:
        if summary.overall.rate is not None:
            alert = _raise_checks_drop(session, spec, run, baseline, summary)
            if alert:
                new.append(alert)
        reading = difference(run_id=run_id, baseline_id=stored_id(baseline.id)) if difference is not None else None
        if reading is not None:
            alert = raise_sampled_drop(session=session, reading=reading)
            if alert:
                new.append(alert)
    return new


def _raise_checks_drop(
    session: Session, spec: EvalSpec, run: Run, baseline: Run, summary: checks_service.RunSummary
) -> RegressionAlert | None:
    """Raise `pass_rate_drop` when the checks' pass rate is more than the threshold below the baseline's."""
    assert summary.overall.rate is not None
    base = checks_service.run_summary(session=session, run_id=stored_id(baseline.id))
    if base.overall.rate is None:
        return None
    drop = base.overall.rate - summary.overall.rate
    limit = spec.regression.alert_pass_rate_drop
    if drop <= limit + _EPS:
        return None
    return _raise(
        session,
        stored_id(run.id),
        "pass_rate_drop",
        f"pass_rate_drop:{baseline.id}:{summary.overall.passed}/{summary.overall.total}",
        f"Pass rate of run {run.name} is {summary.overall.rate:.1%}, down {drop * 100:.1f} points from "
        f"baseline {baseline.name} ({base.overall.rate:.1%}); the alert threshold is {limit * 100:.0f} points.",
        {
            "baseline_run": baseline.name,
            "baseline_pass_rate": base.overall.rate,
            "pass_rate": summary.overall.rate,
            "drop": drop,
            "threshold": limit,
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


def suite_counts(*, report: SuiteReport, hidden: Collection[str] = ()) -> dict[str, int]:
    """Return the suite's result counts a viewer may see: pass, fail, not_run, not_checked, and `hidden`.

    Blind grading: a case whose pass or fail comes from drafts the viewer has not graded (`hidden`,
    from the page's signals view) is counted as hidden, not as a pass or a fail, so the counts
    never tell a labeler how an ungraded draft fared.
    """
    counts = {status: 0 for status in ("pass", "fail", "not_run", "not_checked", "hidden")}
    for r in report.results:
        counts["hidden" if r.case.case_id in hidden and r.status in ("pass", "fail") else r.status] += 1
    return counts


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


def runs_for_picker(*, session: Session) -> list[tuple[Run, Dataset]]:
    """Return every run with its dataset, newest first (for the comparison and suite pickers)."""
    rows = session.exec(
        select(Run, Dataset).join(Dataset, col(Dataset.id) == col(Run.dataset_id)).order_by(col(Run.created_at).desc(), col(Run.id).desc())
    ).all()
    return [(r, d) for r, d in rows]
