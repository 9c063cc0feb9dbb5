"""From samples to statistics and statuses: a case's, the run's, and the run's runs/index.json entry."""

from __future__ import annotations

from webapp.evaluator import stats as st
from webapp.evaluator.artifact_models import (
    CaseStatus,
    DatasetEvaluation,
    Execution,
    IndexEntry,
    Number,
    OverallMean,
    OverallProportion,
    TestCaseResult,
    Usage,
)
from webapp.evaluator.rubric import Rubric


def case_status(result: TestCaseResult) -> CaseStatus:
    """Return a case's status: pending until every sample finished, then completed, partial or failed."""
    statuses = [s.status for s in result.samples]
    if "pending" in statuses:
        return "pending"
    if all(s == "completed" for s in statuses):
        return "completed"
    if any(s == "completed" for s in statuses):
        return "partial"
    return "failed"


def finish_case(result: TestCaseResult, rubric: Rubric) -> None:
    """Fill a case's statistics and status from its samples (completed only count, as the guide says)."""
    per_metric, per_flag = st.case_stats(result.samples, rubric.metric_names, rubric.flag_names)
    result.per_metric_stats = per_metric
    result.per_flag_stats = per_flag
    result.high_variance_metrics = [m for m, s in per_metric.items() if s.high_variance]
    result.status = case_status(result)


def usage(doc: DatasetEvaluation) -> Usage:
    """Sum every sample's tokens and cost (the cost is unknown when any finished sample's model has no price)."""
    pt = ct = 0
    costs: list[float | None] = []
    for r in doc.test_case_results:
        for s in r.samples:
            if s.tokens is None:
                continue
            for part in (s.tokens.generator, s.tokens.judge):
                if part:
                    pt += part.prompt
                    ct += part.completion
            if s.status != "pending":
                costs.append(s.cost_usd)
    known = all(c is not None for c in costs)
    # An int 0 when nothing is priced yet: the value json.dumps has always written.
    cost: Number | None = round(sum(c for c in costs if c is not None), 6) if known else None
    return Usage(prompt_tokens=pt, completion_tokens=ct, cost_usd=cost)


def finish_document(doc: DatasetEvaluation, rubric: Rubric, *, aborted: bool = False) -> None:
    """Fill the overall statistics and the run status (aborted, or from the cases' statuses)."""
    results = doc.test_case_results
    finished = [r for r in results if r.status != "pending"]
    doc.overall_metric_stats = st.overall_metric_stats([r.per_metric_stats for r in finished], rubric.metric_names)
    doc.overall_flag_stats = st.overall_flag_stats([r.per_flag_stats for r in finished], rubric.flag_names)
    doc.high_variance_count = sum(len(r.high_variance_metrics) for r in finished)
    repeats = doc.judge_config.repeats
    if repeats > 1:
        samples = [s for r in finished for s in r.samples]
        doc.judge_self_agreement = st.judge_self_agreement(
            samples, rubric.metric_names, rubric.judge_flag_names, repeats=repeats
        )
    doc.usage = usage(doc)
    statuses = [r.status for r in results]
    if aborted or "pending" in statuses:
        doc.status = "aborted" if aborted else "running"
    elif all(s == "completed" for s in statuses):
        doc.status = "completed"
    elif all(s == "failed" for s in statuses):
        doc.status = "failed"
    else:
        doc.status = "partial"


def index_entry(doc: DatasetEvaluation, *, execution: Execution | None = None) -> IndexEntry:
    """Return this run's runs/index.json entry: ids, description, hashes, status and overall metrics."""
    entry = IndexEntry(
        run_id=doc.run_id,
        description=doc.description,
        status=doc.status,
        timestamp_start=doc.timestamp_start,
        timestamp_end=doc.timestamp_end,
        dataset_path=doc.dataset_path,
        dataset_hash=doc.dataset_hash,
        rubric=doc.rubric_metadata.name,
        rubric_hash=doc.rubric_metadata.hash,
        generator_model=doc.generator_config.model,
        judge_model=doc.judge_config.model,
        num_cases=len(doc.test_case_results),
        num_samples_per_case=doc.num_samples_per_case,
        overall_metrics={m: OverallMean(mean_of_means=v.mean_of_means) for m, v in doc.overall_metric_stats.items()},
        overall_flags={f: OverallProportion(true_proportion=v.true_proportion) for f, v in doc.overall_flag_stats.items()},
    )
    if execution is not None:
        entry.execution = execution
    return entry
