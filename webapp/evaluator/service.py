"""Record an evaluation in the database, and read it back for the run page (with judge-human agreement)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session, col, select

from webapp.checks.service import check_run
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.datasets.loader import DatasetError, SupportFieldError, TestCase, support_fields
from webapp.datasets.models import Dataset, EvalCase
from webapp.datasets.service import import_dataset_file
from webapp.evaluator.artifact_models import (
    DatasetEvaluation,
    OutputKind,
    Sample,
    TestCaseResult,
)
from webapp.evaluator.draft_fields import draft_fields, run_fields
from webapp.evaluator.models import EvaluatorCaseFlag, EvaluatorCaseMetric, EvaluatorJudgeScore, EvaluatorRun
from webapp.runs.models import Draft, Run
from webapp.runs.service import RunNotFound, resolve_run


class RecordError(ValueError):
    """The run cannot be recorded (its dataset changed, or a case does not fit the database)."""


class EvaluatorRunNotFound(LookupError):
    """No recorded evaluator run has that reference."""


def check_recordable(cases: list[TestCase]) -> None:
    """Refuse, before any call, cases the dataset import would refuse (support fields, id length)."""
    for case in cases:
        try:
            support_fields(case.metadata)
        except SupportFieldError as exc:
            raise RecordError(f"--record: test case '{case.id}': {exc}") from exc
        if len(case.id) > 200:
            raise RecordError(f"--record: test case id longer than 200 characters: '{case.id[:40]}…'")


@dataclass
class RecordResult:
    run_pk: int
    run_name: str
    evaluator_run_id: int
    drafts: int
    checks_run: bool


def _ts(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def _draft(sample: Sample, output_kind: OutputKind, *, run_id: int, case_pk: int) -> Draft | None:
    """Return the Draft row of a sample (None when nothing was generated: no draft to grade)."""
    fields = draft_fields(sample, output_kind)
    return None if fields is None else Draft(run_id=run_id, case_pk=case_pk, **fields.model_dump())


def _import_dataset(session: Session, document: DatasetEvaluation) -> Dataset:
    """Import the run's dataset file (or find the version already imported); refuse it if it changed since the run."""
    path = Path(document.dataset_path)
    try:
        imported = import_dataset_file(session=session, path=path)
    except DatasetError as exc:
        raise RecordError(f"--record: {exc.location}") from exc
    dataset = imported.dataset
    if dataset.sha256 != document.dataset_hash:
        raise RecordError(f"--record: {path} changed since the run read it (hash {dataset.sha256[:19]}…); not recorded")
    return dataset


def _new_run(document: DatasetEvaluation, dataset_id: int) -> Run:
    """Return the ordinary Run (source "evaluator") the recorded drafts belong to."""
    return Run(dataset_id=dataset_id, source="evaluator", **run_fields(document).model_dump())


def _evaluator_run(document: DatasetEvaluation, run_id: int) -> EvaluatorRun:
    """Return the run's settings and overall statistics as an EvaluatorRun row."""
    gen, judge, rubric = document.generator_config, document.judge_config, document.rubric_metadata
    return EvaluatorRun(
        run_id=run_id,
        artifact_run_id=document.run_id,
        status=document.status,
        description=document.description,
        dataset_hash=document.dataset_hash,
        rubric_name=rubric.name,
        rubric_hash=rubric.hash,
        generator_model=gen.model,
        judge_model=judge.model,
        temperature=gen.temperature,
        seed=gen.seed,
        num_samples=document.num_samples_per_case,
        metrics=[m.model_dump(mode="json") for m in rubric.metrics],
        flags=[f.name for f in rubric.flags] + rubric.check_flags,
        overall_metric_stats={k: v.to_json_dict() for k, v in document.overall_metric_stats.items()},
        overall_flag_stats={k: v.to_json_dict() for k, v in document.overall_flag_stats.items()},
        judge_repeats=judge.repeats,
        judge_self_agreement=agreement.to_json_dict() if (agreement := document.judge_self_agreement) else None,
        timestamp_start=_ts(document.timestamp_start),
        timestamp_end=_ts(document.timestamp_end),
    )


def _case_statistics(ev_id: int, case_pk: int, result: TestCaseResult) -> list[EvaluatorCaseMetric | EvaluatorCaseFlag]:
    """Return the per-case metric and flag rows of a test case result."""
    rows: list[EvaluatorCaseMetric | EvaluatorCaseFlag] = [
        EvaluatorCaseMetric(
            evaluator_run_id=ev_id,
            case_pk=case_pk,
            case_status=result.status,
            metric=metric,
            mean=s.mean,
            std=s.std,
            min=s.min,
            max=s.max,
            count=s.count,
            high_variance=s.high_variance,
        )
        for metric, s in result.per_metric_stats.items()
    ]
    rows += [
        EvaluatorCaseFlag(
            evaluator_run_id=ev_id,
            case_pk=case_pk,
            flag=flag,
            true_count=f.true_count,
            false_count=f.false_count,
            total_count=f.total_count,
            true_proportion=f.true_proportion,
        )
        for flag, f in result.per_flag_stats.items()
    ]
    return rows


def _record_samples(session: Session, ev_id: int, run_id: int, case_pk: int, result: TestCaseResult, kind: OutputKind) -> int:
    """Add one Draft and its judge score per generated sample of a case; return the drafts added."""
    drafts = 0
    for sample in result.samples:
        draft = _draft(sample, kind, run_id=run_id, case_pk=case_pk)
        if draft is None:
            continue  # nothing was generated: no draft to grade
        session.add(draft)
        session.flush()
        drafts += 1
        session.add(
            EvaluatorJudgeScore(
                evaluator_run_id=ev_id,
                draft_id=stored_id(draft.id),
                sample_status=sample.status,
                scores=sample.judge_scores,
                flags=sample.flags,
                rationale=sample.judge_rationale,
                error=sample.error,
            )
        )
    return drafts


def record_evaluation(
    *, session: Session, document: DatasetEvaluation, spec: EvalSpec, run_checks: bool = True
) -> RecordResult:
    """Store a finished evaluation: dataset (imported or reused), Run + Drafts, statistics, judge scores; run the checks."""
    if session.exec(select(EvaluatorRun).where(EvaluatorRun.artifact_run_id == document.run_id)).first() is not None:
        raise RecordError(f"--record: run {document.run_id} is already recorded")
    dataset = _import_dataset(session, document)
    cases = {c.case_id: c for c in session.exec(select(EvalCase).where(EvalCase.dataset_id == dataset.id)).all()}
    run = _new_run(document, stored_id(dataset.id))
    session.add(run)
    session.flush()
    ev = _evaluator_run(document, stored_id(run.id))
    session.add(ev)
    session.flush()
    drafts = 0
    for result in document.test_case_results:
        case = cases.get(result.test_case_id)
        if case is None:
            raise RecordError(f"--record: test case {result.test_case_id!r} is not in the imported dataset")
        session.add_all(_case_statistics(stored_id(ev.id), stored_id(case.id), result))
        drafts += _record_samples(session, stored_id(ev.id), stored_id(run.id), stored_id(case.id), result, document.generator_config.output)
    session.flush()
    if run_checks:
        check_run(session=session, spec=spec, run_id=stored_id(run.id))
    return RecordResult(stored_id(run.id), run.name, stored_id(ev.id), drafts, run_checks)


def list_evaluator_runs(*, session: Session) -> list[tuple[Run, EvaluatorRun]]:
    """List recorded evaluator runs, newest first."""
    rows = session.exec(
        select(Run, EvaluatorRun).join(EvaluatorRun, col(EvaluatorRun.run_id) == Run.id).order_by(col(EvaluatorRun.id).desc())
    ).all()
    return [(r, e) for r, e in rows]


def get_evaluator_run(*, session: Session, ref: str) -> tuple[Run, EvaluatorRun]:
    """Find a recorded run by Draft Desk run name or id, or by the artifact's run_id; raise EvaluatorRunNotFound."""
    ev = session.exec(select(EvaluatorRun).where(EvaluatorRun.artifact_run_id == ref)).first()
    if ev is None:
        try:
            run = resolve_run(session=session, ref=ref)
        except RunNotFound as exc:
            raise EvaluatorRunNotFound(f"no evaluator run {ref!r}") from exc
        ev = session.exec(select(EvaluatorRun).where(EvaluatorRun.run_id == run.id)).first()
        if ev is None:
            raise EvaluatorRunNotFound(f"run {ref!r} was not recorded by prompt-evaluator")
    run = session.get(Run, ev.run_id)
    assert run is not None
    return run, ev
