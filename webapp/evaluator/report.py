"""A recorded evaluator run read back for its page and its JSON: statistics, judge scores, agreement.

`evaluator_report` is the run page's one view (`EvaluatorReport`), built by named reads: the
case statistics (`case_rows`), the judge's verdicts with the final human grades
(`judge_rows`), and the agreements computed from them; the JSON API answers
`EvaluatorReportPublic`, built from the same view (webapp/evaluator/schemas.py).
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from sqlmodel import Session, col, select

from webapp.auth.service import Principal
from webapp.core.db import stored_id
from webapp.core.spec import Criterion, EvalSpec
from webapp.core.timeutil import as_utc
from webapp.datasets.models import EvalCase
from webapp.evaluator.artifact_models import CaseStatus, JudgeSelfAgreement, Number, SampleStatus
from webapp.evaluator.json_types import JsonObject
from webapp.evaluator.models import EvaluatorCaseFlag, EvaluatorCaseMetric, EvaluatorJudgeScore, EvaluatorRun
from webapp.evaluator.rubric import Metric
from webapp.evaluator.service import get_evaluator_run
from webapp.grading.evidence import signals_view
from webapp.grading.status import FinalGradeView, final_grades
from webapp.runs.models import Draft, Run


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


def _judge_passes(score: float, metric: Metric) -> bool:
    # A pass/fail criterion is scored on a scale whose top means pass (support-draft: 0/1).
    return score >= metric.scale.max


def judge_human_agreement(
    pairs: Sequence[tuple[Mapping[str, Number], object]], criteria: list[Criterion], metrics: Sequence[JsonObject]
) -> list[CriterionAgreement]:
    """Compare judge scores with final human grades per criterion the rubric shares with the spec.

    `pairs` are (judge scores, final human grade) per draft, the grade read by criterion key;
    `metrics` are the rubric's metrics as the run recorded them (EvaluatorRun.metrics).
    """
    by_name = {m.name: m for m in (Metric.model_validate(x) for x in metrics)}
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
    spans = {m.name: m.scale.max - m.scale.min for m in (Metric.model_validate(x) for x in ev.metrics)}
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


# A case's status as the report shows it: the one stored with its metric rows, "" for a case with flags only.
CaseRowStatus = CaseStatus | Literal[""]


@dataclass
class CaseRow:
    case_id: str
    status: CaseRowStatus
    metrics: dict[str, EvaluatorCaseMetric]
    flags: dict[str, EvaluatorCaseFlag]
    visible: bool = True


@dataclass
class JudgeRow:
    draft_id: int
    case_id: str
    sample_index: int
    status: SampleStatus
    scores: dict[str, Number] | None
    flags: dict[str, bool] | None
    rationale: str | None
    error: str | None
    human_final: FinalGradeView | None = None
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


def case_rows(session: Session, ev: EvaluatorRun, case_ids: Mapping[int, str], positions: Mapping[int, int]) -> list[CaseRow]:
    """Return the run's per-case metric and flag statistics, in dataset order."""
    rows: dict[int, CaseRow] = {}
    for m in session.exec(select(EvaluatorCaseMetric).where(EvaluatorCaseMetric.evaluator_run_id == ev.id)).all():
        row = rows.setdefault(m.case_pk, CaseRow(case_ids.get(m.case_pk, "?"), m.case_status, {}, {}))
        row.metrics[m.metric] = m
    for f in session.exec(select(EvaluatorCaseFlag).where(EvaluatorCaseFlag.evaluator_run_id == ev.id)).all():
        row = rows.setdefault(f.case_pk, CaseRow(case_ids.get(f.case_pk, "?"), "", {}, {}))
        row.flags[f.flag] = f
    return [rows[k] for k in sorted(rows, key=lambda pk: positions.get(pk, 0))]


def judge_rows(
    session: Session, *, spec: EvalSpec, run: Run, ev: EvaluatorRun, case_ids: Mapping[int, str],
    positions: Mapping[int, int], principal: Principal | None,
) -> list[JudgeRow]:
    """Return the judge's verdict on each draft with its final human grade, in dataset then sample order.

    Blind grading, the rule of every page (webapp.core.blind): a blind viewer sees the judge's
    scores of the drafts they have graded only (`visible`).
    """
    finals = final_grades(session=session, run_id=stored_id(run.id))
    signals = signals_view(session=session, spec=spec, principal=principal, run_id=stored_id(run.id))
    stmt = (
        select(EvaluatorJudgeScore, Draft)
        .join(Draft, col(Draft.id) == EvaluatorJudgeScore.draft_id)
        .where(EvaluatorJudgeScore.evaluator_run_id == ev.id)
        .order_by(col(Draft.case_pk), col(Draft.sample_index))
    )
    rows = [
        JudgeRow(
            stored_id(draft.id),
            case_ids.get(draft.case_pk, "?"),
            draft.sample_index,
            js.sample_status,
            js.scores,
            js.flags,
            js.rationale,
            js.error,
            finals.get(stored_id(draft.id)),
            signals.shows(draft.id),
        )
        for js, draft in session.exec(stmt).all()
    ]
    position_of = {cid: positions.get(pk, 0) for pk, cid in case_ids.items()}
    rows.sort(key=lambda r: (position_of.get(r.case_id, 0), r.sample_index))
    return rows


def evaluator_report(
    *, session: Session, spec: EvalSpec, ref: str, principal: Principal | None = None
) -> EvaluatorReport:
    """Gather a recorded run's per-case statistics, variance warnings, judge scores and judge-human agreement.

    With a `principal`, judge scores the viewer may not see yet (blind grading) are hidden, and
    so are the statistics of any case (and of the run) that would reveal them.
    """
    run, ev = get_evaluator_run(session=session, ref=ref)
    cases_of_run = session.exec(
        select(EvalCase.id, EvalCase.case_id, EvalCase.position).where(EvalCase.dataset_id == run.dataset_id)
    ).all()
    case_ids = {stored_id(pk): case_id for pk, case_id, _ in cases_of_run}
    positions = {stored_id(pk): position for pk, _, position in cases_of_run}
    cases = case_rows(session, ev, case_ids, positions)
    metric_names = [str(m["name"]) for m in ev.metrics]
    judged = judge_rows(session, spec=spec, run=run, ev=ev, case_ids=case_ids, positions=positions, principal=principal)
    hidden_cases = {r.case_id for r in judged if not r.visible}
    for c in cases:
        c.visible = c.case_id not in hidden_cases
    warnings = [
        (c.case_id, c.metrics[m])
        for c in cases
        for m in metric_names
        if m in c.metrics and c.metrics[m].high_variance and c.case_id not in hidden_cases
    ]
    pairs = [(r.scores, r.human_final) for r in judged if r.scores is not None and r.human_final is not None]
    shares = any(m in {c.key for c in spec.rubric.criteria} for m in metric_names)
    return EvaluatorReport(
        run=run,
        ev=ev,
        metric_names=metric_names,
        flag_names=list(ev.flags),
        cases=cases,
        warnings=warnings,
        judge_rows=judged,
        agreement=judge_human_agreement(pairs, list(spec.rubric.criteria), ev.metrics) if pairs else [],
        graded=len(pairs),
        shares_criteria=shares,
        hidden_drafts=sum(1 for r in judged if not r.visible),
        self_agreement=self_agreement_rows(ev, list(spec.rubric.criteria)),
    )


def recorded_at(ev: EvaluatorRun) -> dt.datetime:
    """Return when the run was recorded, in UTC."""
    return as_utc(ev.recorded_at)
