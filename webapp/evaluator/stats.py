"""Per-case and overall statistics of a dataset evaluation, as the format guide defines them.

std is the *sample* standard deviation (n - 1 in the denominator, `statistics.stdev`): the
samples of a case are a few draws from the generator, and the question is how much its
scores vary, which the population formula underestimates for 2-5 draws. With a single valid
sample the spread is unknown, so std is null (and the metric is not marked high-variance).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

HIGH_STD = 1.0
HIGH_STD_SHARE_OF_MEAN = 0.20


def is_high_variance(mean: float | None, std: float | None) -> bool:
    """Tell whether a metric varies too much: std above 1.0 or above 20% of the mean (the guide's rule)."""
    if mean is None or std is None:
        return False
    return std > HIGH_STD or std > HIGH_STD_SHARE_OF_MEAN * abs(mean)


def metric_stats(values: Sequence[float]) -> dict[str, Any]:
    """Return mean, std, min, max and count of one metric's valid sample scores, and the high-variance mark."""
    n = len(values)
    if n == 0:
        return {"mean": None, "std": None, "min": None, "max": None, "count": 0, "high_variance": False}
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n >= 2 else None
    return {
        "mean": mean,
        "std": std,
        "min": min(values),
        "max": max(values),
        "count": n,
        "high_variance": is_high_variance(mean, std),
    }


def flag_stats(values: Sequence[bool]) -> dict[str, Any]:
    """Return true_count, false_count, total_count and true_proportion of one flag over valid samples."""
    true_count = sum(1 for v in values if v)
    total = len(values)
    return {
        "true_count": true_count,
        "false_count": total - true_count,
        "total_count": total,
        "true_proportion": (true_count / total) if total else None,
    }


def case_stats(
    samples: Iterable[Mapping[str, Any]], metric_names: Sequence[str], flag_names: Sequence[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (per_metric_stats, per_flag_stats) of a case over its completed samples only."""
    valid = [s for s in samples if s.get("status") == "completed"]
    per_metric = {m: metric_stats([s["judge_scores"][m] for s in valid]) for m in metric_names}
    per_flag = {f: flag_stats([bool(s["flags"][f]) for s in valid]) for f in flag_names}
    return per_metric, per_flag


def overall_metric_stats(
    per_case: Iterable[Mapping[str, Mapping[str, Any]]], metric_names: Sequence[str]
) -> dict[str, Any]:
    """Return per metric the mean of the per-case means (cases without a valid sample are left out)."""
    cases = list(per_case)
    out: dict[str, Any] = {}
    for m in metric_names:
        means = [c[m]["mean"] for c in cases if m in c and c[m]["mean"] is not None]
        out[m] = {
            "mean_of_means": statistics.fmean(means) if means else None,
            "min_of_means": min(means) if means else None,
            "max_of_means": max(means) if means else None,
            "num_cases": len(means),
        }
    return out


def overall_flag_stats(per_case: Iterable[Mapping[str, Mapping[str, Any]]], flag_names: Sequence[str]) -> dict[str, Any]:
    """Return per flag the counts summed over cases and the overall true proportion."""
    cases = list(per_case)
    out: dict[str, Any] = {}
    for f in flag_names:
        true_count = sum(c[f]["true_count"] for c in cases if f in c)
        total = sum(c[f]["total_count"] for c in cases if f in c)
        out[f] = {
            "true_count": true_count,
            "false_count": total - true_count,
            "total_count": total,
            "true_proportion": (true_count / total) if total else None,
        }
    return out
