"""The regression suite (append-only), its results per run, and baselines (alerts: regression.alerts; comparison: regression.comparison)."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from pydantic import JsonValue
from sqlalchemy import func, update
from sqlmodel import Session, col, select

from webapp.checks import service as checks_service
from webapp.checks.rules import describe, golden_failures
from webapp.core.db import stored_id
from webapp.datasets.models import Dataset, EvalCase
from webapp.grading.status import FinalGradeView, final_grades
from webapp.regression.models import RegressionCase
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
    account: dict[str, JsonValue] | None = None,
    conversation: list[JsonValue] | None = None,
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


class CaseFields(TypedDict):
    """What a regression case copies from the eval case it is made of."""

    case_id: str
    input: str
    category: str | None
    intent: str | None
    expected_behavior: str | None
    reference: str | None
    kb_articles: list[str] | None
    account: dict[str, JsonValue] | None
    conversation: list[JsonValue] | None


def _case_fields(case: EvalCase) -> CaseFields:
    return CaseFields(
        case_id=case.case_id,
        input=case.input,
        category=case.category,
        intent=case.intent,
        expected_behavior=case.expected_behavior,
        reference=case.reference,
        kb_articles=case.kb_articles,
        account=case.account,
        conversation=case.conversation,
    )


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


def case_record(case: RegressionCase) -> dict[str, object]:
    """Return a regression case as a record of the dataset format guide (id, input, reference, metadata)."""
    record: dict[str, object] = {"id": case.case_id, "input": case.input, "description": case.note}
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
        drafts_by_case.setdefault(case_id, []).append(stored_id(draft_id))
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


def runs_of_dataset(*, session: Session, run: Run) -> list[int]:
    """Return the ids of every run over the run's dataset (by name: its other versions too), the run included."""
    return _runs_of_dataset_name(session, _dataset_name(session, run))


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


def runs_for_picker(*, session: Session) -> list[tuple[Run, Dataset]]:
    """Return every run with its dataset, newest first (for the comparison and suite pickers)."""
    rows = session.exec(
        select(Run, Dataset).join(Dataset, col(Dataset.id) == col(Run.dataset_id)).order_by(col(Run.created_at).desc(), col(Run.id).desc())
    ).all()
    return [(r, d) for r, d in rows]
