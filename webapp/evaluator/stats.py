"""Per-case and overall statistics of a dataset evaluation, as the format guide defines them.

std is the *sample* standard deviation (n - 1 in the denominator, `statistics.stdev`): the
samples of a case are a few draws from the generator, and the question is how much its
scores vary, which the population formula underestimates for 2-5 draws. With a single valid
sample the spread is unknown, so std is null (and the metric is not marked high-variance).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from webapp.evaluator.artifact_models import (
    FlagAgreement,
    FlagStats,
    JudgeSelfAgreement,
    MetricAgreement,
    MetricStats,
    Number,
    OverallMetricStats,
    Sample,
)

HIGH_STD = 1.0
HIGH_STD_SHARE_OF_MEAN = 0.20


V = TypeVar("V", int, float, bool)  # a metric's score or a flag's value

def is_high_variance(mean: float | None, std: float | None) -> bool:
    """Tell whether a metric varies too much: std above 1.0 or above 20% of the mean (the guide's rule)."""
    if mean is None or std is None:
        return False
    return std > HIGH_STD or std > HIGH_STD_SHARE_OF_MEAN * abs(mean)


def metric_stats(values: Sequence[Number]) -> MetricStats:
    """Return mean, std, min, max and count of one metric's valid sample scores, and the high-variance mark."""
    n = len(values)
    if n == 0:
        return MetricStats(mean=None, std=None, min=None, max=None, count=0, high_variance=False)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n >= 2 else None
    return MetricStats(
        mean=mean, std=std, min=min(values), max=max(values), count=n, high_variance=is_high_variance(mean, std)
    )


def flag_stats(values: Sequence[bool]) -> FlagStats:
    """Return true_count, false_count, total_count and true_proportion of one flag over valid samples."""
    true_count = sum(1 for v in values if v)
    return _flag_counts(true_count, len(values))


def _flag_counts(true_count: int, total: int) -> FlagStats:
    return FlagStats(
        true_count=true_count,
        false_count=total - true_count,
        total_count=total,
        true_proportion=(true_count / total) if total else None,
    )


def case_stats(
    samples: Iterable[Sample], metric_names: Sequence[str], flag_names: Sequence[str]
) -> tuple[dict[str, MetricStats], dict[str, FlagStats]]:
    """Return (per_metric_stats, per_flag_stats) of a case over its completed samples only."""
    valid = [s for s in samples if s.status == "completed"]
    scores = [s.judge_scores or {} for s in valid]
    flags = [s.flags or {} for s in valid]
    per_metric = {m: metric_stats([sc[m] for sc in scores]) for m in metric_names}
    per_flag = {f: flag_stats([bool(fl[f]) for fl in flags]) for f in flag_names}
    return per_metric, per_flag


def overall_metric_stats(
    per_case: Iterable[Mapping[str, MetricStats]], metric_names: Sequence[str]
) -> dict[str, OverallMetricStats]:
    """Return per metric the mean of the per-case means (cases without a valid sample are left out)."""
    cases = list(per_case)
    out: dict[str, OverallMetricStats] = {}
    for m in metric_names:
        means = [mean for c in cases if m in c and (mean := c[m].mean) is not None]
        out[m] = OverallMetricStats(
            mean_of_means=statistics.fmean(means) if means else None,
            min_of_means=min(means) if means else None,
            max_of_means=max(means) if means else None,
            num_cases=len(means),
        )
    return out


def overall_flag_stats(per_case: Iterable[Mapping[str, FlagStats]], flag_names: Sequence[str]) -> dict[str, FlagStats]:
    """Return per flag the counts summed over cases and the overall true proportion."""
    cases = list(per_case)
    return {
        f: _flag_counts(
            sum(c[f].true_count for c in cases if f in c), sum(c[f].total_count for c in cases if f in c)
        )
        for f in flag_names
    }


def _agreement_figures(groups: list[list[V]]) -> tuple[list[tuple[V, V]], float | None, float | None]:
    pairs = [(a, b) for g in groups for i, a in enumerate(g) for b in g[i + 1 :]]
    exact = (sum(len(set(g)) == 1 for g in groups) / len(groups)) if groups else None
    pairwise = (sum(a == b for a, b in pairs) / len(pairs)) if pairs else None
    return pairs, exact, pairwise


def metric_agreement(groups: list[list[Number]]) -> MetricAgreement:
    """Return how often the judgements of each sample (one group per sample) agree on a metric, and how far apart."""
    pairs, exact, pairwise = _agreement_figures(groups)
    diffs = [abs(float(a) - float(b)) for a, b in pairs]
    return MetricAgreement(
        samples=len(groups),
        exact_agreement=exact,
        pairwise_agreement=pairwise,
        within_one=(sum(d <= 1 for d in diffs) / len(diffs)) if diffs else None,
        mean_abs_diff=statistics.fmean(diffs) if diffs else None,
    )


def flag_agreement(groups: list[list[bool]]) -> FlagAgreement:
    """Return how often the judgements of each sample (one group per sample) agree on a flag."""
    _, exact, pairwise = _agreement_figures(groups)
    return FlagAgreement(samples=len(groups), exact_agreement=exact, pairwise_agreement=pairwise)


def judge_self_agreement(
    samples: Iterable[Sample], metric_names: Sequence[str], flag_names: Sequence[str], *, repeats: int
) -> JudgeSelfAgreement:
    """Return, per metric and per judge flag, how often repeated judgements of the same sample agree.

    Over the samples with at least two valid judgements (`judge_repeats`): `exact_agreement` is
    the share of samples whose judgements are all equal, `pairwise_agreement` the share of
    judgement pairs (pooled over samples) that are equal; for metrics also `within_one`, the
    share of pairs at most one point apart, and `mean_abs_diff` over the pairs.
    """
    valid = [[v for v in s.judge_repeats or [] if v.status == "completed"] for s in samples]
    valid = [v for v in valid if len(v) >= 2]
    metrics = {m: metric_agreement([[(v.judge_scores or {})[m] for v in g] for g in valid]) for m in metric_names}
    flags = {f: flag_agreement([[bool((v.flags or {})[f]) for v in g] for g in valid]) for f in flag_names}
    return JudgeSelfAgreement(repeats=repeats, metrics=metrics, flags=flags)
