"""The influence values and variance of one prediction-powered estimate (webapp/ppi/estimator.py explains the formulas).

Held apart from estimator.py so that each module stays short: this one holds the per-draft parts
(judge part, rectifier part), the power-tuning lambda, the variance summed per ticket, the 0/1
guard, Kish's effective size and the degrees of freedom. The "judge" here is whatever stands in for
the human grade: the judge's one score, or the learned predictor's predictions (webapp/ppi/predictor.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from webapp.ppi.sample import EstimatorError, Sample

Lambda = float | Literal["crossfit"]
Estimand = Literal["run", "superpopulation"]

MIN_LABELS_FOR_TUNING = 60


@dataclass(frozen=True)
class Parts:
    """Per-item influence values of one estimate, before summing per cluster."""

    estimate: float
    judge_part: NDArray[np.float64]  # (lambda*f_i - mean)/N, all drafts
    rectifier_part: NDArray[np.float64]  # xi_i d_i (r_i - rbar), zero when not drawn
    cluster: NDArray[np.int64]
    drawn: NDArray[np.bool_]
    guard_unit: float = 0.0  # the variance one pseudo-draft of the 0/1 guard adds (see `guarded`)
    extra_variance: float = 0.0  # run estimand: the undrawn drafts' own spread, (N - n)/N^2 sum q u^2


def _weights(sample: Sample, mask: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Return normalised 1/pi weights of the drawn drafts within `mask` (zero elsewhere)."""
    w = np.where(sample.drawn & mask, 1.0 / sample.pi, 0.0)
    total = w.sum()
    if total == 0:
        raise EstimatorError("drawn: a fold has no drawn draft")
    return w / total


def pooled_lambda(sample: Sample, mask: NDArray[np.bool_] | None = None) -> float:
    """Return ppi_py's power-tuning lambda on the drafts in `mask`, weighted by 1/pi, clipped to [0, 1].

    lambda = cov_w(Y, f) / ((1 + n_eff/N) var(f)), var over the drawn drafts' f followed by all
    drafts' f (ddof 1), n_eff = Kish's effective size. With uniform pi it is ppi_py's formula.
    Production calls it per fold (the cross-fitted lambda of `item_lambdas`); on all drafts (no
    mask) it is ppi_py's one tuned lambda, which tests/ppi/ppi_conventions.py uses for the comparison.
    """
    m = np.ones(sample.n_drafts, dtype=bool) if mask is None else mask
    d = _weights(sample, m)
    lab = sample.drawn & m
    y, f = sample.human[lab], sample.judge[lab]
    dl = d[lab]
    cov = float(np.sum(dl * (y - np.sum(dl * y)) * (f - np.sum(dl * f))))
    n_eff = 1.0 / float(np.sum(dl**2))
    pool = np.concatenate([f, sample.judge[m]])
    var = float(np.var(pool, ddof=1)) if pool.shape[0] > 1 else 0.0
    if var == 0:
        return 1.0
    return float(np.clip(cov / ((1.0 + n_eff / int(m.sum())) * var), 0.0, 1.0))


def folds(sample: Sample, seed: int) -> NDArray[np.int64]:
    """Return each draft's fold (0 or 1): tickets shuffled with `seed`, first half fold 0."""
    groups = int(sample.cluster.max()) + 1
    order = np.random.default_rng(seed).permutation(groups)
    fold_of_group = np.empty(groups, dtype=np.int64)
    fold_of_group[order] = (np.arange(groups) >= (groups + 1) // 2).astype(np.int64)
    return fold_of_group[sample.cluster]


def item_lambdas(sample: Sample, lam: Lambda, seed: int) -> tuple[NDArray[np.float64], tuple[float, ...]]:
    """Return lambda per draft and the distinct lambdas used (one, or one per fold)."""
    ones = np.ones(sample.n_drafts)
    if not isinstance(lam, str):
        if not 0 <= lam <= 1:
            raise EstimatorError("lambda: must lie in [0, 1]")
        return ones * float(lam), (float(lam),)
    if sample.n_labels < MIN_LABELS_FOR_TUNING:
        return ones, (1.0,)
    fold = folds(sample, seed)
    per_fold: list[float] = []
    for k in (0, 1):
        other = fold != k
        has_labels = bool((sample.drawn & other).any())
        per_fold.append(pooled_lambda(sample, other) if has_labels else 1.0)
    return np.asarray(per_fold)[fold], tuple(per_fold)


def parts(
    sample: Sample,
    lam_i: NDArray[np.float64],
    estimand: Estimand = "superpopulation",
    judge_all: NDArray[np.float64] | None = None,
) -> Parts:
    """Return the estimate and its per-item influence values for per-draft lambdas `lam_i`.

    `judge_all` (superpopulation only): the values whose mean over all N drafts is the judge part,
    when they differ from those the drawn drafts' residuals use (ppi_py's Cross-PPI averages the K
    fold models for every draft, drawn or not: tests/ppi/ppi_conventions.py). Default: `sample.judge`.
    """
    if estimand == "run":
        return run_parts(sample, lam_i)
    g = lam_i * (sample.judge if judge_all is None else judge_all)
    judge_mean = float(g.mean())
    d = _weights(sample, np.ones(sample.n_drafts, dtype=bool))
    r = sample.human - lam_i * sample.judge
    rbar = float(np.sum(d * r))
    judge_part = (g - judge_mean) / sample.n_drafts
    rect_part = np.where(sample.drawn, d * (r - rbar), 0.0)
    unit = 1.0 / effective_size(sample) ** 2
    return Parts(judge_mean + rbar, judge_part, rect_part, sample.cluster, sample.drawn, unit)


def run_pi(sample: Sample) -> NDArray[np.float64]:
    """Return the pi the run estimand reads: the stored pi, or n/N in the degenerate case (module docstring).

    Degenerate: some drafts are unobserved but every drawn one has pi = 1, so none stands for them.
    """
    unobserved = sample.n_drafts - sample.n_labels
    if unobserved > 0 and not bool(np.any(sample.pi[sample.drawn] < 1.0)):
        return np.full(sample.n_drafts, sample.n_labels / sample.n_drafts)
    return sample.pi


def run_parts(sample: Sample, lam_i: NDArray[np.float64]) -> Parts:
    """Return the run estimand's estimate and influence values (module docstring: theta, rt, e_i)."""
    pi, xi, n_all = run_pi(sample), sample.drawn, sample.n_drafts
    g = lam_i * sample.judge
    r = np.where(xi, sample.human - g, 0.0)
    unobserved = n_all - sample.n_labels
    estimate = float(np.sum(sample.human[xi])) / n_all
    zeros = np.zeros(n_all)
    if unobserved == 0:
        return Parts(estimate, zeros, zeros, sample.cluster, xi)
    v = np.where(xi, (1.0 - pi) / pi, 0.0)
    q = v / v.sum()
    rt = float(np.sum(q * r))
    estimate += (float(np.sum(g[~xi])) + unobserved * rt) / n_all
    share = unobserved / n_all
    u = np.where(xi, r - rt, 0.0)
    carry = xi & (pi < 1.0)
    c = ddof_factor(kish(v[carry]))
    unit = c * (share**2 * float(np.mean(q[carry] ** 2)) + share / n_all * float(np.mean(q[carry])))
    extra = c * share / n_all * float(np.sum(q * u**2))
    return Parts(estimate, zeros, np.sqrt(c) * share * q * u, sample.cluster, xi, unit, extra)


def ddof_factor(n_eff: float) -> float:
    """Return n_eff/(n_eff - 1), the run estimand's small-sample factor (s^2 with ddof 1); 1 at n_eff <= 1."""
    return n_eff / (n_eff - 1.0) if n_eff > 1.0 else 1.0


def cluster_sums(values: NDArray[np.float64], cluster: NDArray[np.int64], groups: int) -> NDArray[np.float64]:
    return np.asarray(np.bincount(cluster, weights=values, minlength=groups), dtype=np.float64)


def guarded(rect_var: float, n_eff: float, unit: float | None = None) -> float:
    """Return the rectifier variance as if two more drafts had been graded, disagreeing by +1 and -1.

    The guard for 0/1 figures (pass rates): with few labels and a judge that mostly agrees, the
    residuals are nearly all 0 and their variance is underestimated (the Wald interval's known
    failure). Two pseudo-residuals of rbar +- 1 (Agresti-Coull's idea) keep it honest; they enter
    the variance only, never the estimate. With uniform pi: (sum (r - rbar)^2 + 2) / (n (n + 2)).
    In general: rect_var n/(n + 2) + 2 unit n/(n + 2), where `unit` is the variance one draft with
    residual 1 adds: 1/n^2 for the superpopulation (the default), and for the run estimand c times
    the mean of ((N - n)/N)^2 q^2 + (N - n)/N^2 q over the drafts drawn at pi < 1 (0 for a census).
    """
    one = 1.0 / n_eff**2 if unit is None else unit
    return (rect_var + 2.0 * one) * n_eff / (n_eff + 2.0)


def variance_terms(
    judge_sums: NDArray[np.float64], rect_sums: NDArray[np.float64]
) -> tuple[float, float, float]:
    """Return (judge variance, rectifier variance, their covariance) from per-cluster sums."""
    return float(np.sum(judge_sums**2)), float(np.sum(rect_sums**2)), float(np.sum(judge_sums * rect_sums))


def combine(va: float, vb: float, cov: float, *, guard_n: float | None, guard_unit: float | None = None) -> float:
    """Return the variance of the estimate from its terms, the covariance term included (module docstring)."""
    if guard_n is not None and guard_n > 0:
        vb = guarded(vb, guard_n, guard_unit)
    return va + vb + 2.0 * cov


def part_terms(p: Parts) -> tuple[float, float, float]:
    """Return `variance_terms` of one estimate's parts, summed per ticket (the undrawn drafts' spread not added)."""
    groups = int(p.cluster.max()) + 1
    return variance_terms(cluster_sums(p.judge_part, p.cluster, groups), cluster_sums(p.rectifier_part, p.cluster, groups))


def variance(p: Parts, *, guard_n: float | None = None) -> float:
    """Return the cluster-robust variance of one estimate."""
    va, vb, cov = part_terms(p)
    return combine(va, vb + p.extra_variance, cov, guard_n=guard_n, guard_unit=p.guard_unit)


def kish(weights: NDArray[np.float64]) -> float:
    """Return Kish's effective size (sum w)^2 / sum w^2: the count itself for equal weights, 0 for none."""
    if weights.shape[0] == 0:
        return 0.0
    if np.all(weights == weights[0]):
        return float(weights.shape[0])
    return float(weights.sum() ** 2 / np.sum(weights**2))


def carriers(sample: Sample, estimand: Estimand) -> NDArray[np.bool_]:
    """Return the drafts that carry the variance: drawn with pi < 1 (run), or every drawn one (superpopulation)."""
    if estimand == "superpopulation":
        return sample.drawn
    return sample.drawn & (run_pi(sample) < 1.0)


def effective_size(sample: Sample, estimand: Estimand = "superpopulation") -> float:
    """Return Kish's effective number of the drafts carrying the variance (n when pi is uniform).

    Weights: 1/pi for the superpopulation; for the run, v = 1/pi - 1, the undrawn drafts each
    drawn one stands for (the weights rt puts on them; 0 when no draft is undrawn).
    """
    if estimand == "superpopulation":
        return kish(1.0 / sample.pi[sample.drawn])
    if sample.n_labels == sample.n_drafts:
        return 0.0
    pi = run_pi(sample)
    carry = carriers(sample, estimand)
    return kish((1.0 - pi[carry]) / pi[carry])


def is_binary(sample: Sample) -> bool:
    """Tell whether the human labels are 0/1 (a pass rate), which turns the small-sample guard on."""
    return bool(np.all(np.isin(sample.human[sample.drawn], (0.0, 1.0))))


def degrees_of_freedom(sample: Sample, estimand: Estimand = "run") -> float:
    """Return the t degrees of freedom: Kish's n_eff of the variance-carrying drafts, capped by their tickets, minus one.

    At least one. With uniform pi and one draft per ticket: drawn drafts minus one (module docstring).
    """
    carry = carriers(sample, estimand)
    tickets = np.unique(sample.cluster[carry]).shape[0]
    return float(max(min(effective_size(sample, estimand), tickets) - 1.0, 1.0))


