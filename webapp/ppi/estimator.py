"""Prediction-powered estimates of a run's rubric figures, with 95% intervals (numpy/scipy only).

The judge scores every draft (f, all N); people grade the drafts the sampler drew (xi = 1), each
drawn with its inclusion probability pi fixed before any grade. The estimate is

    theta = mean over all N of lambda*f  +  weighted mean over the drawn of (Y - lambda*f)

where the weights are 1/pi. The second term is the issue's Horvitz-Thompson rectifier
sum(xi*(Y - lambda*f)/pi) / N with N replaced by its own estimate sum(xi/pi) (the Hajek form).
Decision: the Hajek form, because with Bernoulli draws the number drawn is random, and dividing
by N adds that randomness to the interval; dividing by sum(xi/pi) removes it. With uniform pi
both are equal whenever the number drawn equals the budget, and the Hajek form then equals
ppi_py's `ppi_mean_pointestimate` with the drawn drafts as the labelled set and all N drafts as
the unlabelled set, for any lambda.

Variance. Each draft has an influence value: its judge part (lambda*f_i - mean)/N, plus, when
drawn, its rectifier part d_i (r_i - rbar) (d = normalised 1/pi weights, r = Y - lambda*f). They
are summed per cluster (ticket) and squared (cluster-robust, CR0), which also lets two runs on
the same cases be differenced ticket by ticket. The sum of squares has three terms: the judge
part's variance, the rectifier's variance, and twice their covariance. ppi_py (PPI++) keeps the
first two only, because there the unlabelled set is separate from the labelled one; here the
drawn drafts are also among the N, so the covariance is real (2 lambda (cov(Y, f) - lambda
var(f)) / N with uniform pi) and we keep it: without it the interval for the mean covered
92.9% of 2,000 simulated runs at N = 300, n = 150, bias +0.3 (webapp/ppi/simulation.py, seed 1,
measured while writing this), 94.6% with it. `joint=False` drops it,
giving ppi_py's figures exactly (one draft per ticket, uniform pi). For 0/1 labels (pass rates)
the rectifier's variance gets a small-sample guard (`guarded`).

Conventions that differ from ppi_py, on purpose (docs/ppi.md):
- Variance: the covariance term above (ppi_py: none); the 0/1 guard (ppi_py: none).
- Quantile: Student-t with (drawn clusters - 1) degrees of freedom, not the normal (ppi_py's
  default). `quantile_kind="normal"` gives ppi_py's.
- Lambda: cross-fitted over two folds of tickets (each fold's lambda comes from the other fold's
  drafts) and clipped to [0, 1]; lambda = 1 below 60 human grades. ppi_py tunes one lambda on all
  the data; `lam="pooled"` gives that, with ppi_py's formula, for the comparison.
- The estimand is the superpopulation mean (the quality a new draft from the same case mix would
  get), as in ppi_py; the finite set of N drafts is a sample of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

Lambda = float | Literal["crossfit", "pooled"]
Quantile = Literal["t", "normal"]

MIN_LABELS_FOR_TUNING = 60
CONFIDENCE = 0.95
LOW_LAMBDA_WARNING = 0.3


class EstimatorError(ValueError):
    """Raised when a sample cannot give an estimate; the message names the field."""


@dataclass(frozen=True)
class Sample:
    """One run's drafts: judge score f for all, human label y where drawn, pi and the ticket."""

    judge: NDArray[np.float64]
    human: NDArray[np.float64]
    drawn: NDArray[np.bool_]
    pi: NDArray[np.float64]
    cluster: NDArray[np.int64]

    @property
    def n_drafts(self) -> int:
        """Return N, the number of judged drafts."""
        return int(self.judge.shape[0])

    @property
    def n_labels(self) -> int:
        """Return n, the number of drawn (human-graded) drafts."""
        return int(self.drawn.sum())


def make_sample(
    *,
    judge: ArrayLike,
    human: ArrayLike,
    drawn: ArrayLike,
    pi: ArrayLike,
    cluster: ArrayLike | None = None,
) -> Sample:
    """Check and pack one run's arrays; human values of undrawn drafts are ignored (may be NaN)."""
    f = np.asarray(judge, dtype=np.float64)
    y = np.asarray(human, dtype=np.float64)
    xi = np.asarray(drawn, dtype=bool)
    p = np.asarray(pi, dtype=np.float64)
    c = np.arange(f.shape[0], dtype=np.int64) if cluster is None else np.asarray(cluster)
    if f.ndim != 1:
        raise EstimatorError("judge: expected a 1-d array of scores")
    for name, arr in (("human", y), ("drawn", xi), ("pi", p), ("cluster", c)):
        if arr.shape != f.shape:
            raise EstimatorError(f"{name}: expected {f.shape[0]} values, got {arr.shape[0] if arr.ndim else 0}")
    if not np.all(np.isfinite(f)):
        raise EstimatorError("judge: every draft needs a finite judge score")
    if np.any(~(p > 0)) or np.any(p > 1):
        raise EstimatorError("pi: every inclusion probability must lie in (0, 1]")
    if not np.all(np.isfinite(y[xi])):
        raise EstimatorError("human: every drawn draft needs a human label")
    if not xi.any():
        raise EstimatorError("drawn: no draft was drawn")
    _, codes = np.unique(c, return_inverse=True)
    return Sample(judge=f, human=np.where(xi, y, 0.0), drawn=xi, pi=p, cluster=codes.astype(np.int64))


@dataclass(frozen=True)
class Parts:
    """Per-item influence values of one estimate, before summing per cluster."""

    estimate: float
    judge_part: NDArray[np.float64]  # (lambda*f_i - mean)/N, all drafts
    rectifier_part: NDArray[np.float64]  # xi_i d_i (r_i - rbar), zero when not drawn
    cluster: NDArray[np.int64]
    drawn: NDArray[np.bool_]


@dataclass(frozen=True)
class Estimate:
    """An estimate with its interval and what went into it."""

    estimate: float
    low: float
    high: float
    se: float
    df: float
    confidence: float
    lambdas: tuple[float, ...]
    judge_alone: float
    human_only_se: float
    n_labels: int
    n_drafts: int

    @property
    def effective_labels(self) -> float:
        """Return how many human-only grades would give the same standard error."""
        if self.se == 0:
            return float("inf") if self.human_only_se > 0 else float(self.n_labels)
        return self.n_labels * (self.human_only_se / self.se) ** 2

    @property
    def bias(self) -> float:
        """Return the judge's bias: judge-alone mean minus the estimate."""
        return self.judge_alone - self.estimate


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
    if lam == "pooled":
        value = pooled_lambda(sample)
        return ones * value, (value,)
    if sample.n_labels < MIN_LABELS_FOR_TUNING:
        return ones, (1.0,)
    fold = folds(sample, seed)
    per_fold: list[float] = []
    for k in (0, 1):
        other = fold != k
        has_labels = bool((sample.drawn & other).any())
        per_fold.append(pooled_lambda(sample, other) if has_labels else 1.0)
    return np.asarray(per_fold)[fold], tuple(per_fold)


def parts(sample: Sample, lam_i: NDArray[np.float64]) -> Parts:
    """Return the estimate and its per-item influence values for per-draft lambdas `lam_i`."""
    g = lam_i * sample.judge
    judge_mean = float(g.mean())
    d = _weights(sample, np.ones(sample.n_drafts, dtype=bool))
    r = sample.human - g
    rbar = float(np.sum(d * r))
    judge_part = (g - judge_mean) / sample.n_drafts
    rect_part = np.where(sample.drawn, d * (r - rbar), 0.0)
    return Parts(judge_mean + rbar, judge_part, rect_part, sample.cluster, sample.drawn)


def _cluster_sums(values: NDArray[np.float64], cluster: NDArray[np.int64], groups: int) -> NDArray[np.float64]:
    return np.asarray(np.bincount(cluster, weights=values, minlength=groups), dtype=np.float64)


def guarded(rect_var: float, n_eff: float) -> float:
    """Return the rectifier variance as if two more drafts had been graded, disagreeing by +1 and -1.

    The guard for 0/1 figures (pass rates): with few labels and a judge that mostly agrees, the
    residuals are nearly all 0 and their variance is underestimated (the Wald interval's known
    failure). Two pseudo-residuals of rbar +- 1 (Agresti-Coull's idea) keep it honest; they enter
    the variance only, never the estimate. With uniform pi: (sum (r - rbar)^2 + 2) / (n (n + 2)).
    """
    return (rect_var * n_eff**2 + 2.0) / (n_eff * (n_eff + 2.0))


def variance_terms(
    judge_sums: NDArray[np.float64], rect_sums: NDArray[np.float64]
) -> tuple[float, float, float]:
    """Return (judge variance, rectifier variance, their covariance) from per-cluster sums."""
    return float(np.sum(judge_sums**2)), float(np.sum(rect_sums**2)), float(np.sum(judge_sums * rect_sums))


def combine(va: float, vb: float, cov: float, *, joint: bool, guard_n: float | None) -> float:
    """Return the variance of the estimate from its terms (see the module docstring)."""
    if guard_n is not None:
        vb = guarded(vb, guard_n)
    return va + vb + (2.0 * cov if joint else 0.0)


def variance(p: Parts, *, joint: bool = True, guard_n: float | None = None) -> float:
    """Return the cluster-robust variance of one estimate."""
    groups = int(p.cluster.max()) + 1
    a = _cluster_sums(p.judge_part, p.cluster, groups)
    b = _cluster_sums(p.rectifier_part, p.cluster, groups)
    return combine(*variance_terms(a, b), joint=joint, guard_n=guard_n)


def effective_size(sample: Sample) -> float:
    """Return Kish's effective number of drawn drafts, (sum 1/pi)^2 / sum 1/pi^2 (n when pi is uniform)."""
    w = 1.0 / sample.pi[sample.drawn]
    return float(w.sum() ** 2 / np.sum(w**2))


def is_binary(sample: Sample) -> bool:
    """Tell whether the human labels are 0/1 (a pass rate), which turns the small-sample guard on."""
    return bool(np.all(np.isin(sample.human[sample.drawn], (0.0, 1.0))))


def degrees_of_freedom(sample: Sample) -> float:
    """Return the t degrees of freedom: drawn tickets minus one (at least one)."""
    return float(max(np.unique(sample.cluster[sample.drawn]).shape[0] - 1, 1))


def quantile(confidence: float, df: float, kind: Quantile) -> float:
    """Return the two-sided critical value for `confidence` (Student-t with df, or normal)."""
    upper = 0.5 + confidence / 2
    return float(special.ndtri(upper) if kind == "normal" else special.stdtrit(df, upper))


def estimate_mean(
    sample: Sample,
    *,
    lam: Lambda = "crossfit",
    confidence: float = CONFIDENCE,
    quantile_kind: Quantile = "t",
    seed: int = 0,
    joint: bool = True,
    guard: bool | None = None,
) -> Estimate:
    """Return the prediction-powered mean of the human label with its interval.

    `joint=False` drops the covariance of the two parts (ppi_py's convention); `guard` (default:
    on for 0/1 labels) adds the small-sample guard of `guarded`.
    """
    lam_i, lambdas = item_lambdas(sample, lam, seed)
    guard_n = effective_size(sample) if (is_binary(sample) if guard is None else guard) else None
    p = parts(sample, lam_i)
    se = float(np.sqrt(variance(p, joint=joint, guard_n=guard_n)))
    human_only = parts(sample, np.zeros(sample.n_drafts))
    human_only_se = float(np.sqrt(variance(human_only, joint=joint, guard_n=guard_n)))
    df = degrees_of_freedom(sample)
    half = quantile(confidence, df, quantile_kind) * se
    return Estimate(
        estimate=p.estimate,
        low=p.estimate - half,
        high=p.estimate + half,
        se=se,
        df=df,
        confidence=confidence,
        lambdas=lambdas,
        judge_alone=float(sample.judge.mean()),
        human_only_se=human_only_se,
        n_labels=sample.n_labels,
        n_drafts=sample.n_drafts,
    )


@dataclass(frozen=True)
class Difference:
    """Run A minus run B on the same cases, with its interval."""

    estimate: float
    low: float
    high: float
    se: float
    df: float
    confidence: float
    a: Estimate
    b: Estimate


def estimate_difference(
    a: Sample,
    b: Sample,
    *,
    a_cluster_keys: ArrayLike,
    b_cluster_keys: ArrayLike,
    lam: Lambda = "crossfit",
    confidence: float = CONFIDENCE,
    quantile_kind: Quantile = "t",
    seed: int = 0,
    b_seed: int | None = None,
    joint: bool = True,
    guard: bool | None = None,
) -> Difference:
    """Return the estimate of mean(A) - mean(B) where both runs drafted replies to the same cases.

    Influence values of both runs are summed per shared ticket (the keys) and differenced before
    squaring, so what the two runs share (the same hard tickets) cancels out of the variance.
    """
    ka, kb = np.asarray(a_cluster_keys), np.asarray(b_cluster_keys)
    if ka.shape[0] != a.n_drafts or kb.shape[0] != b.n_drafts:
        raise EstimatorError("cluster keys: one key per draft of each run")
    keys, codes = np.unique(np.concatenate([ka, kb]), return_inverse=True)
    ca, cb = codes[: ka.shape[0]], codes[ka.shape[0] :]
    groups = keys.shape[0]
    seed_b = seed if b_seed is None else b_seed
    options = dict(lam=lam, confidence=confidence, quantile_kind=quantile_kind, joint=joint, guard=guard)
    est_a = estimate_mean(a, seed=seed, **options)  # type: ignore[arg-type]
    est_b = estimate_mean(b, seed=seed_b, **options)  # type: ignore[arg-type]
    pa = parts(a, item_lambdas(a, lam, seed)[0])
    pb = parts(b, item_lambdas(b, lam, seed_b)[0])
    judge = _cluster_sums(pa.judge_part, ca, groups) - _cluster_sums(pb.judge_part, cb, groups)
    rect = _cluster_sums(pa.rectifier_part, ca, groups) - _cluster_sums(pb.rectifier_part, cb, groups)
    use_guard = (is_binary(a) and is_binary(b)) if guard is None else guard
    # The guard's pseudo-drafts count once for the pair, at the smaller run's effective size.
    guard_n = min(effective_size(a), effective_size(b)) if use_guard else None
    se = float(np.sqrt(combine(*variance_terms(judge, rect), joint=joint, guard_n=guard_n)))
    df = min(est_a.df, est_b.df)
    diff = pa.estimate - pb.estimate
    half = quantile(confidence, df, quantile_kind) * se
    return Difference(diff, diff - half, diff + half, se, df, confidence, est_a, est_b)


def all_pass(factual: ArrayLike, scales: ArrayLike, thresholds: ArrayLike) -> NDArray[np.float64]:
    """Return 1.0 where a draft passes all four criteria: factual pass and every scale >= its threshold.

    `factual` is (N,) truthy for pass; `scales` is (N, k), `thresholds` (k,).
    """
    fa = np.asarray(factual, dtype=bool)
    sc = np.asarray(scales, dtype=np.float64)
    th = np.asarray(thresholds, dtype=np.float64)
    return (fa & np.all(sc >= th, axis=1)).astype(np.float64)


@dataclass(frozen=True)
class BatchEstimate:
    """Estimates of many independent runs at once (one row each), for simulations."""

    estimate: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    se: NDArray[np.float64]
    human_only_se: NDArray[np.float64]
    lambdas: NDArray[np.float64]  # (R, 2): the fold lambdas (equal columns when not cross-fitted)
    n_labels: NDArray[np.int64]


def _batch_pooled_lambda(
    f: NDArray[np.float64], y: NDArray[np.float64], w: NDArray[np.float64], mask: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """Return `pooled_lambda` of each row on the drafts in `mask` (one mask for all rows)."""
    wm = w * mask
    total = wm.sum(axis=1, keepdims=True)
    has = total[:, 0] > 0
    d = np.divide(wm, total, out=np.zeros_like(wm), where=total > 0)
    ybar = np.sum(d * y, axis=1, keepdims=True)
    fbar = np.sum(d * f, axis=1, keepdims=True)
    cov = np.sum(d * (y - ybar) * (f - fbar), axis=1)
    sum_d2 = np.sum(d**2, axis=1)
    n_eff = np.divide(1.0, sum_d2, out=np.zeros_like(sum_d2), where=sum_d2 > 0)
    lab = (wm > 0).astype(np.float64)
    fm = f * mask
    count = lab.sum(axis=1) + mask.sum()
    s1 = np.sum(f * lab, axis=1) + fm.sum(axis=1)
    s2 = np.sum(f**2 * lab, axis=1) + np.sum(fm**2, axis=1)
    var = (s2 - s1**2 / count) / (count - 1)
    ok = has & (var > 1e-300)
    lam = np.divide(cov, (1.0 + n_eff / mask.sum()) * var, out=np.ones_like(cov), where=ok)
    return np.where(ok, np.clip(lam, 0.0, 1.0), 1.0)


def estimate_mean_batch(
    judge: NDArray[np.float64],
    human: NDArray[np.float64],
    drawn: NDArray[np.bool_],
    pi: NDArray[np.float64],
    *,
    lam: Lambda = "crossfit",
    confidence: float = CONFIDENCE,
    quantile_kind: Quantile = "t",
    seed: int = 0,
    joint: bool = True,
    guard: bool | None = None,
) -> BatchEstimate:
    """Return `estimate_mean` for each row of (R, N) arrays, one draft per ticket; same formulas, vectorised.

    tests/ppi/test_estimator.py checks it against `estimate_mean` row by row; the coverage
    benchmark runs it over thousands of simulated runs.
    """
    f = np.asarray(judge, dtype=np.float64)
    xi = np.asarray(drawn, dtype=bool)
    y = np.where(xi, np.asarray(human, dtype=np.float64), 0.0)
    w = np.where(xi, 1.0 / np.asarray(pi, dtype=np.float64), 0.0)
    rows, n_drafts = f.shape
    n_labels = xi.sum(axis=1)
    if np.any(n_labels == 0):
        raise EstimatorError("drawn: a row has no drawn draft")
    if isinstance(lam, str):
        if lam == "pooled":
            value = _batch_pooled_lambda(f, y, w, np.ones(n_drafts, dtype=bool))
            lambdas = np.stack([value, value], axis=1)
            lam_i = np.repeat(value[:, None], n_drafts, axis=1)
        else:
            singles = Sample(f[0], y[0], xi[0], np.ones(n_drafts), np.arange(n_drafts, dtype=np.int64))
            fold = folds(singles, seed)
            lambdas = np.stack([_batch_pooled_lambda(f, y, w, fold != k) for k in (0, 1)], axis=1)
            lambdas[n_labels < MIN_LABELS_FOR_TUNING] = 1.0
            lam_i = lambdas[:, fold]
    else:
        lambdas = np.full((rows, 2), float(lam))
        lam_i = np.full((rows, n_drafts), float(lam))
    d = w / w.sum(axis=1, keepdims=True)
    use_guard = bool(np.all(np.isin(y[xi], (0.0, 1.0)))) if guard is None else guard
    n_eff = 1.0 / np.sum(d**2, axis=1)

    def se_of(li: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        g = li * f
        gbar = g.mean(axis=1, keepdims=True)
        r = y - g
        rbar = np.sum(d * r, axis=1, keepdims=True)
        rect = np.where(xi, d * (r - rbar), 0.0)
        judge_part = (g - gbar) / n_drafts
        vb = np.sum(rect**2, axis=1)
        if use_guard:
            vb = (vb * n_eff**2 + 2.0) / (n_eff * (n_eff + 2.0))
        var = np.sum(judge_part**2, axis=1) + vb + (2.0 * np.sum(judge_part * rect, axis=1) if joint else 0.0)
        return gbar[:, 0] + rbar[:, 0], np.sqrt(var)

    est, se = se_of(lam_i)
    _, human_only_se = se_of(np.zeros_like(f))
    df = np.maximum(n_labels - 1, 1).astype(np.float64)
    upper = 0.5 + confidence / 2
    q = np.full(rows, special.ndtri(upper)) if quantile_kind == "normal" else special.stdtrit(df, upper)
    return BatchEstimate(est, est - q * se, est + q * se, se, human_only_se, lambdas, n_labels)
