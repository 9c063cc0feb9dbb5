"""Record an evaluation in the database, and read it back for the run page (with judge-human agreement)."""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, JsonValue
from sqlmodel import Session, col, select

from webapp.auth.service import Principal
from webapp.checks.service import check_run
from webapp.core.spec import Criterion, EvalSpec
from webapp.core.timeutil import as_utc
from webapp.datasets.loader import DatasetError, SupportFieldError, TestCase, support_fields
from webapp.datasets.models import Dataset, EvalCase
from webapp.datasets.service import import_dataset_file
from webapp.evaluator.artifact_models import (
    DatasetEvaluation,
    JudgeSelfAgreement,
    OutputKind,
    Sample,
    TestCaseResult,
)
from webapp.evaluator.models import EvaluatorCaseFlag, EvaluatorCaseMetric, EvaluatorJudgeScore, EvaluatorRun
from webapp.grading.evidence import signals_view
from webapp.grading.status import final_grades
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


def _pk(value: int | None) -> int:
    # Primary keys are None only before the row is flushed; every row used here was flushed or loaded.
    assert value is not None, "row not flushed"
    return value


def _ts(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


class _CitationOut(BaseModel):
    article_id: str
    revision: int | None = None


class _GeneratedDraft(BaseModel):
    """A structured support draft as the artifact holds it (it fitted DRAFT_SCHEMA when generated)."""

    draft: str | None = None
    citations: list[_CitationOut] = Field(default_factory=list)
    confidence: float | None = None
    intent: JsonValue = None
    escalate: JsonValue = None


def _draft(sample: Sample, output_kind: OutputKind, *, run_id: int, case_pk: int) -> Draft | None:
    """Return the Draft row of a sample (None when nothing was generated: no draft to grade)."""
    out = sample.generator_output
    if out is None:
        return None
    index, cost = sample.sample_index, sample.cost_usd
    if output_kind != "support_draft":
        return Draft(
            run_id=run_id, case_pk=case_pk, sample_index=index, cost_usd=cost, draft_text=str(out), raw_output={"text": out}
        )
    if not isinstance(out, dict):
        return None
    d = _GeneratedDraft.model_validate(out)
    return Draft(
        run_id=run_id,
        case_pk=case_pk,
        sample_index=index,
        cost_usd=cost,
        draft_text=d.draft,
        citations=[c.model_dump() for c in d.citations],
        confidence=d.confidence,
        intent=str(d.intent)[:60] if d.intent else None,
        escalated=bool(d.escalate),
        raw_output=out,
    )


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
    gen, rubric = document.generator_config, document.rubric_metadata
    return Run(
        name=f"evaluator-{document.run_id}",
        dataset_id=dataset_id,
        model=gen.model[:200],
        prompt_version=f"{Path(document.system_prompt_path).name} {document.system_prompt_hash[:19]}"[:200],
        notes=(document.description or f"prompt-evaluator run with rubric {rubric.name}"),
        source="evaluator",
    )


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
                draft_id=_pk(draft.id),
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
    run = _new_run(document, _pk(dataset.id))
    session.add(run)
    session.flush()
    ev = _evaluator_run(document, _pk(run.id))
    session.add(ev)
    session.flush()
    drafts = 0
    for result in document.test_case_results:
        case = cases.get(result.test_case_id)
        if case is None:
            raise RecordError(f"--record: test case {result.test_case_id!r} is not in the imported dataset")
        session.add_all(_case_statistics(_pk(ev.id), _pk(case.id), result))
        drafts += _record_samples(session, _pk(ev.id), _pk(run.id), _pk(case.id), result, document.generator_config.output)
    session.flush()
    if run_checks:
        check_run(session=session, spec=spec, run_id=_pk(run.id))
    return RecordResult(_pk(run.id), run.name, _pk(ev.id), drafts, run_checks)


# --- reading -----------------------------------------------------------------------------------------


@dataclass
class CriterionAgreement:
    """How the judge's scores compare with the humans' final grades on one criterion."""

    key: str
    name: str
    kind: str  # pass_fail | scale
    n: int
    agreement: float | None  # pass/fail: same verdict; scale: same side of the pass threshold
    within_one: float | None = None  # scale only: |judge - human| <= 1
    mean_abs_diff: float | None = None  # scale only
    judge_mean: float | None = None
    human_mean: float | None = None


def _judge_passes(score: float, metric: dict[str, Any]) -> bool:
    # A pass/fail criterion is scored on a scale whose top means pass (support-draft: 0/1).
    return score >= metric["scale"]["max"]


def judge_human_agreement(
    pairs: list[tuple[dict[str, Any], Any]], criteria: list[Criterion], metrics: list[dict[str, Any]]
) -> list[CriterionAgreement]:
    """Compare judge scores with final human grades per criterion the rubric shares with the spec."""
    by_name = {m["name"]: m for m in metrics}
    out: list[CriterionAgreement] = []
    for c in criteria:
        metric = by_name.get(c.key)
        if metric is None:
            continue
        rows = [(j[c.key], getattr(h, c.key)) for j, h in pairs if j.get(c.key) is not None]
        if c.kind == "pass_fail":
            same = [(_judge_passes(j, metric)) == (str(h) == "pass") for j, h in rows]
            out.append(
                CriterionAgreement(
                    c.key,
                    c.name,
                    c.kind,
                    len(rows),
                    (sum(same) / len(same)) if same else None,
                    judge_mean=statistics.fmean(1.0 if _judge_passes(j, metric) else 0.0 for j, _ in rows) if rows else None,
                    human_mean=statistics.fmean(1.0 if str(h) == "pass" else 0.0 for _, h in rows) if rows else None,
                )
            )
            continue
        threshold = c.pass_threshold if c.pass_threshold is not None else 0
        diffs = [abs(float(j) - float(h)) for j, h in rows]
        sides = [(float(j) >= threshold) == (float(h) >= threshold) for j, h in rows]
        out.append(
            CriterionAgreement(
                c.key,
                c.name,
                c.kind,
                len(rows),
                (sum(sides) / len(sides)) if sides else None,
                within_one=(sum(d <= 1 for d in diffs) / len(diffs)) if diffs else None,
                mean_abs_diff=statistics.fmean(diffs) if diffs else None,
                judge_mean=statistics.fmean(float(j) for j, _ in rows) if rows else None,
                human_mean=statistics.fmean(float(h) for _, h in rows) if rows else None,
            )
        )
    return out


@dataclass
class SelfAgreement:
    """How often the judge agreed with itself on one criterion (metric or flag) over repeated judgements."""

    key: str
    name: str
    kind: str  # metric | flag
    samples: int
    pairwise_agreement: float | None
    exact_agreement: float | None
    within_one: float | None = None
    mean_abs_diff: float | None = None


def self_agreement_rows(ev: EvaluatorRun, criteria: list[Criterion]) -> list[SelfAgreement]:
    """Return the recorded run's judge self-agreement per metric then flag (empty when judged once)."""
    if not ev.judge_self_agreement:
        return []
    data = JudgeSelfAgreement.model_validate(ev.judge_self_agreement)  # as the artifact wrote it
    names = {c.key: c.name for c in criteria}
    spans = {m["name"]: m["scale"]["max"] - m["scale"]["min"] for m in ev.metrics if "scale" in m}
    rows: list[SelfAgreement] = []
    for key, v in data.metrics.items():
        # On a 0/1 scale (factual accuracy) every pair is within one point: say nothing rather than 100%.
        within_one = v.within_one if spans.get(key, 2) > 1 else None
        rows.append(
            SelfAgreement(
                key, names.get(key, key), "metric", v.samples, v.pairwise_agreement, v.exact_agreement,
                within_one, v.mean_abs_diff,
            )
        )
    for key, f in data.flags.items():
        rows.append(SelfAgreement(key, names.get(key, key), "flag", f.samples, f.pairwise_agreement, f.exact_agreement))
    return rows


@dataclass
class CaseRow:
    case_id: str
    status: str
    metrics: dict[str, EvaluatorCaseMetric]
    flags: dict[str, EvaluatorCaseFlag]
    visible: bool = True


@dataclass
class JudgeRow:
    draft_id: int
    case_id: str
    sample_index: int
    status: str
    scores: dict[str, Any] | None
    flags: dict[str, Any] | None
    rationale: str | None
    error: str | None
    human_final: Any | None = None
    visible: bool = True


@dataclass
class EvaluatorReport:
    """Everything the run page shows."""

    run: Run
    ev: EvaluatorRun
    metric_names: list[str]
    flag_names: list[str]
    cases: list[CaseRow]
    warnings: list[tuple[str, EvaluatorCaseMetric]]
    judge_rows: list[JudgeRow]
    agreement: list[CriterionAgreement] = field(default_factory=list)
    graded: int = 0
    shares_criteria: bool = False
    hidden_drafts: int = 0
    self_agreement: list[SelfAgreement] = field(default_factory=list)

    @property
    def self_agreement_by_key(self) -> dict[str, SelfAgreement]:
        """Return the self-agreement rows of the metrics by key, to sit beside judge-human agreement."""
        return {a.key: a for a in self.self_agreement if a.kind == "metric"}

    @property
    def overall_visible(self) -> bool:
        """Tell whether the run-wide statistics may be shown (no judge score is hidden from this viewer)."""
        return self.hidden_drafts == 0


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


def evaluator_report(
    *, session: Session, spec: EvalSpec, ref: str, principal: Principal | None = None
) -> EvaluatorReport:
    """Gather a recorded run's per-case statistics, variance warnings, judge scores and judge-human agreement.

    With a `principal`, judge scores the viewer may not see yet (blind grading) are hidden, and
    so are the statistics of any case (and of the run) that would reveal them.
    """
    run, ev = get_evaluator_run(session=session, ref=ref)
    case_ids = dict(session.exec(select(EvalCase.id, EvalCase.case_id).where(EvalCase.dataset_id == run.dataset_id)).all())
    positions = dict(session.exec(select(EvalCase.id, EvalCase.position).where(EvalCase.dataset_id == run.dataset_id)).all())
    rows: dict[int, CaseRow] = {}
    for m in session.exec(select(EvaluatorCaseMetric).where(EvaluatorCaseMetric.evaluator_run_id == ev.id)).all():
        row = rows.setdefault(m.case_pk, CaseRow(case_ids.get(m.case_pk, "?"), m.case_status, {}, {}))
        row.metrics[m.metric] = m
    for f in session.exec(select(EvaluatorCaseFlag).where(EvaluatorCaseFlag.evaluator_run_id == ev.id)).all():
        row = rows.setdefault(f.case_pk, CaseRow(case_ids.get(f.case_pk, "?"), "", {}, {}))
        row.flags[f.flag] = f
    cases = [rows[k] for k in sorted(rows, key=lambda pk: positions.get(pk, 0))]
    metric_names = [m["name"] for m in ev.metrics]
    warnings = [(c.case_id, c.metrics[m]) for c in cases for m in metric_names if m in c.metrics and c.metrics[m].high_variance]
    finals = final_grades(session=session, run_id=_pk(run.id))
    # Blind grading, the rule of every page (webapp.core.blind): a blind viewer sees the judge's
    # scores of the drafts they have graded only.
    signals = signals_view(session=session, spec=spec, principal=principal, run_id=_pk(run.id))
    judge_rows: list[JudgeRow] = []
    stmt = (
        select(EvaluatorJudgeScore, Draft)
        .join(Draft, col(Draft.id) == EvaluatorJudgeScore.draft_id)
        .where(EvaluatorJudgeScore.evaluator_run_id == ev.id)
        .order_by(col(Draft.case_pk), col(Draft.sample_index))
    )
    for js, draft in session.exec(stmt).all():
        judge_rows.append(
            JudgeRow(
                _pk(draft.id),
                case_ids.get(draft.case_pk, "?"),
                draft.sample_index,
                js.sample_status,
                js.scores,
                js.flags,
                js.rationale,
                js.error,
                finals.get(_pk(draft.id)),
                signals.shows(draft.id),
            )
        )
    position_of = {cid: positions.get(pk, 0) for pk, cid in case_ids.items()}
    judge_rows.sort(key=lambda r: (position_of.get(r.case_id, 0), r.sample_index))
    hidden_cases = {r.case_id for r in judge_rows if not r.visible}
    for c in cases:
        c.visible = c.case_id not in hidden_cases
    warnings = [(cid, m) for cid, m in warnings if cid not in hidden_cases]
    pairs = [(r.scores, r.human_final) for r in judge_rows if r.scores is not None and r.human_final is not None]
    shares = any(m in {c.key for c in spec.rubric.criteria} for m in metric_names)
    return EvaluatorReport(
        run=run,
        ev=ev,
        metric_names=metric_names,
        flag_names=list(ev.flags),
        cases=cases,
        warnings=warnings,
        judge_rows=judge_rows,
        agreement=judge_human_agreement(pairs, list(spec.rubric.criteria), ev.metrics) if pairs else [],
        graded=len(pairs),
        shares_criteria=shares,
        hidden_drafts=sum(1 for r in judge_rows if not r.visible),
        self_agreement=self_agreement_rows(ev, list(spec.rubric.criteria)),
    )


def recorded_at(ev: EvaluatorRun) -> dt.datetime:
    """Return when the run was recorded, in UTC."""
    return as_utc(ev.recorded_at)
