"""Prediction-powered estimates of a run's rubric figures, with 95% intervals (numpy/scipy only).

The judge scores every draft (f, all N); people grade the drafts the sampler drew (xi = 1), each
drawn by an independent Bernoulli (Poisson) draw with its inclusion probability pi fixed before
any grade (forced drafts: pi = 1). g = lambda*f is the judge's part, r = Y - g the residual.

Estimand (decision, issue 34). By default (`estimand="run"`) the figure is the mean human grade of
the run's own N drafts, the finite population the plan asks about ("average above 3.5" of this
run). The drafts people graded are known exactly; only the undrawn ones are estimated:

    theta = ( sum over drawn of Y  +  sum over undrawn of (g + rt) ) / N
    rt    = sum over drawn of v r / sum over drawn of v,   v = (1 - pi)/pi

v is how many undrawn drafts a drawn one stands for (1/pi minus itself): a forced draft (pi = 1)
stands only for itself and does not enter rt. Every draft graded gives theta = the observed mean.
With uniform pi, rt is the plain mean residual of the drawn drafts, and theta equals the
superpopulation (Hajek) estimate below. (Degenerate case: drafts are unobserved but no drawn draft
has pi < 1, e.g. drafts drawn with certainty still waiting for grades; the graded drafts are then
read as a uniform sample of the run, pi = n/N, a provisional reading.)

Variance about the run's own mean. The judge's part over all N drafts is known exactly, so only
the residuals of the undrawn drafts are uncertain: theta - mean(Y) = (N - n)/N * (rt - the undrawn
drafts' mean residual). Given the draw (conditioning on the realised n, Hajek's reference for
Poisson sampling, so a draw that took few drafts gets a wide interval and one that took many a
narrow one), rt is the v-weighted mean of the drawn residuals and the undrawn drafts' mean is a
mean of N - n residuals like them:

    var = c * ( sum over tickets of (sum of e_i)^2  +  (N - n)/N^2 * sum over drawn of q_i u_i^2 )
    e_i = (N - n)/N * q_i * u_i,   q = v / sum v,   u = r - rt,   c = n_v/(n_v - 1)

n_v is Kish's effective size of v over the drafts drawn at pi < 1 (c: the ddof-1 correction of
s^2; 1 when n_v <= 1). With uniform pi this is the textbook (1 - n/N) s^2 / n of simple random
sampling given n. Drafts drawn with pi = 1 have v = 0 and add nothing; a census (n = N) gives 0,
width 0, whatever the pi. The first term is summed per ticket before squaring (drafts of one ticket
share their errors); the second, the undrawn drafts' own spread, is per draft. The cross-fitted
lambda is treated as fixed, as in the superpopulation form: each fold's lambda comes from the other
fold's grades, so it is not tuned on the residuals it weighs. Before issue 34 the interval (the
superpopulation reading, df = drawn tickets - 1) under-covered with many forced drafts and a few
drawn at small pi: the run's pass rate 91.6% at N = 1000, 600 forced, 15 drawn at pi = 0.0375, bias
+1.0 (2,000 simulated runs, seed 1); this one covers at least 93.8% of the runs' own means in every
setting of benchmarks/bench_ppi_coverage.py (docs/ppi.md).

Degrees of freedom: Kish's effective size of the drafts that carry the variance, capped by the
number of their tickets, minus one (at least one). For the run estimand those are the drafts drawn
at pi < 1, with the weights v the estimate puts on them (a forced draft carries no variance, and
300 forced drafts must not lend their count to 5 drafts drawn at pi = 0.05); for the
superpopulation every drawn draft, with the design weights 1/pi. With uniform pi and one draft per
ticket both are n - 1.

Superpopulation option (`estimand="superpopulation"`, the estimator before issue 34, as ppi_py):
the mean of drafts like these (a new draft from the same case mix). The estimate is

    theta = mean over all N of lambda*f  +  weighted mean over the drawn of (Y - lambda*f)

with weights 1/pi: the Horvitz-Thompson rectifier with N replaced by its own estimate
sum(xi/pi) (the Hajek form). Decision: the Hajek form, because with Bernoulli draws the number
drawn is random, and dividing by N adds that randomness to the interval; dividing by sum(xi/pi)
removes it. With uniform pi it equals ppi_py's `ppi_mean_pointestimate` with the drawn drafts as
the labelled set and all N drafts as the unlabelled set, for any lambda. Each draft's influence
value is its judge part (lambda*f_i - mean)/N, plus, when drawn, its rectifier part
d_i (r_i - rbar); summed per ticket and squared (CR0). The sum of squares has three terms: the
judge part's variance, the rectifier's variance, and twice their covariance. ppi_py keeps the
first two only, because there the unlabelled set is separate from the labelled one; here the
drawn drafts are also among the N, so the covariance is real (2 lambda (cov(Y, f) - lambda
var(f)) / N with uniform pi) and we keep it: without it the interval for the mean covered
92.9% of 2,000 simulated runs at N = 300, n = 150, bias +0.3, 94.6% with it. `joint=False`
drops it, giving ppi_py's figures exactly (one draft per ticket, uniform pi).

For 0/1 labels (pass rates) the rectifier's variance gets a small-sample guard (`guarded`), in
both estimands (for the run, two pseudo-drafts with the carriers' mean q, so a census stays width 0).

Conventions that differ from ppi_py, on purpose (docs/ppi.md):
- Estimand: the run's own drafts by default (ppi_py: the superpopulation).
- Variance: the covariance term above (ppi_py: none); the 0/1 guard (ppi_py: none).
- Quantile: Student-t with the degrees of freedom above, not the normal (ppi_py's default).
  `quantile_kind="normal"` gives ppi_py's.
- Lambda: cross-fitted over two folds of tickets (each fold's lambda comes from the other fold's
  drafts) and clipped to [0, 1]; lambda = 1 below 60 human grades. ppi_py tunes one lambda on all
  the data; `lam="pooled"` gives that, with ppi_py's formula, for the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

Lambda = float | Literal["crossfit", "pooled"]
Quantile = Literal["t", "normal"]
Estimand = Literal["run", "superpopulation"]

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
    guard_unit: float = 0.0  # the variance one pseudo-draft of the 0/1 guard adds (see `guarded`)
    extra_variance: float = 0.0  # run estimand: the undrawn drafts' own spread, (N - n)/N^2 sum q u^2


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
    estimand: Estimand = "run"

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


def parts(sample: Sample, lam_i: NDArray[np.float64], estimand: Estimand = "superpopulation") -> Parts:
    """Return the estimate and its per-item influence values for per-draft lambdas `lam_i`."""
    if estimand == "run":
        return run_parts(sample, lam_i)
    g = lam_i * sample.judge
    judge_mean = float(g.mean())
    d = _weights(sample, np.ones(sample.n_drafts, dtype=bool))
    r = sample.human - g
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


def _cluster_sums(values: NDArray[np.float64], cluster: NDArray[np.int64], groups: int) -> NDArray[np.float64]:
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


def combine(
    va: float, vb: float, cov: float, *, joint: bool, guard_n: float | None, guard_unit: float | None = None
) -> float:
    """Return the variance of the estimate from its terms (see the module docstring)."""
    if guard_n is not None and guard_n > 0:
        vb = guarded(vb, guard_n, guard_unit)
    return va + vb + (2.0 * cov if joint else 0.0)


def variance(p: Parts, *, joint: bool = True, guard_n: float | None = None) -> float:
    """Return the cluster-robust variance of one estimate."""
    groups = int(p.cluster.max()) + 1
    a = _cluster_sums(p.judge_part, p.cluster, groups)
    b = _cluster_sums(p.rectifier_part, p.cluster, groups)
    va, vb, cov = variance_terms(a, b)
    return combine(va, vb + p.extra_variance, cov, joint=joint, guard_n=guard_n, guard_unit=p.guard_unit)


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
    estimand: Estimand = "run",
) -> Estimate:
    """Return the prediction-powered mean of the human label with its interval.

    `estimand`: "run" (default) is about the run's own N drafts (width 0 when all are graded);
    "superpopulation" about drafts like these (ppi_py's). `joint=False` drops the covariance of
    the two parts (ppi_py's convention; the run estimand has no judge part to covary);
    `guard` (default: on for 0/1 labels) adds the small-sample guard of `guarded`.
    """
    lam_i, lambdas = item_lambdas(sample, lam, seed)
    use_guard = is_binary(sample) if guard is None else guard
    guard_n = effective_size(sample, estimand) if use_guard else None
    p = parts(sample, lam_i, estimand)
    se = float(np.sqrt(variance(p, joint=joint, guard_n=guard_n)))
    human_only = parts(sample, np.zeros(sample.n_drafts), estimand)
    human_only_se = float(np.sqrt(variance(human_only, joint=joint, guard_n=guard_n)))
    df = degrees_of_freedom(sample, estimand)
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
        estimand=estimand,
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
    estimand: Estimand = "superpopulation",
) -> Difference:
    """Return the estimate of mean(A) - mean(B) where both runs drafted replies to the same cases.

    Influence values of both runs are summed per shared ticket (the keys) and differenced before
    squaring, so what the two runs share (the same hard tickets) cancels out of the variance.
    Decision: the default estimand is the superpopulation (does the change make drafts worse),
    not the two runs' own drafts: see `webapp.ppi.report.pass_rate_difference`. With
    `estimand="run"` it is the difference of the two runs' own means (width 0 for two censuses).
    """
    ka, kb = np.asarray(a_cluster_keys), np.asarray(b_cluster_keys)
    if ka.shape[0] != a.n_drafts or kb.shape[0] != b.n_drafts:
        raise EstimatorError("cluster keys: one key per draft of each run")
    keys, codes = np.unique(np.concatenate([ka, kb]), return_inverse=True)
    ca, cb = codes[: ka.shape[0]], codes[ka.shape[0] :]
    groups = keys.shape[0]
    seed_b = seed if b_seed is None else b_seed
    options = dict(lam=lam, confidence=confidence, quantile_kind=quantile_kind, joint=joint, guard=guard, estimand=estimand)
    est_a = estimate_mean(a, seed=seed, **options)  # type: ignore[arg-type]
    est_b = estimate_mean(b, seed=seed_b, **options)  # type: ignore[arg-type]
    pa = parts(a, item_lambdas(a, lam, seed)[0], estimand)
    pb = parts(b, item_lambdas(b, lam, seed_b)[0], estimand)
    judge = _cluster_sums(pa.judge_part, ca, groups) - _cluster_sums(pb.judge_part, cb, groups)
    rect = _cluster_sums(pa.rectifier_part, ca, groups) - _cluster_sums(pb.rectifier_part, cb, groups)
    va, vb, cov = variance_terms(judge, rect)
    use_guard = (is_binary(a) and is_binary(b)) if guard is None else guard
    # The guard's pseudo-drafts count once for the pair, at the smaller run's effective size.
    sizes = ((effective_size(a, estimand), pa.guard_unit), (effective_size(b, estimand), pb.guard_unit))
    guard_n, unit = min(sizes) if use_guard else (None, None)
    vb += pa.extra_variance + pb.extra_variance  # the two runs' undrawn drafts are not paired
    se = float(np.sqrt(combine(va, vb, cov, joint=joint, guard_n=guard_n, guard_unit=unit)))
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
    df: NDArray[np.float64]


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
    estimand: Estimand = "run",
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
    use_guard = bool(np.all(np.isin(y[xi], (0.0, 1.0)))) if guard is None else guard
    p = np.asarray(pi, dtype=np.float64)
    if estimand == "run":
        est, se, n_eff = _batch_run(f, y, xi, p, lam_i, use_guard)
        _, human_only_se, _ = _batch_run(f, y, xi, p, np.zeros_like(f), use_guard)
    else:
        est, se, n_eff = _batch_superpopulation(f, y, xi, w, lam_i, use_guard, joint)
        _, human_only_se, _ = _batch_superpopulation(f, y, xi, w, np.zeros_like(f), use_guard, joint)
    df = np.maximum(n_eff - 1.0, 1.0)
    upper = 0.5 + confidence / 2
    q = np.full(rows, special.ndtri(upper)) if quantile_kind == "normal" else special.stdtrit(df, upper)
    return BatchEstimate(est, est - q * se, est + q * se, se, human_only_se, lambdas, n_labels, df)


Arrays = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]


def _row_kish(w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return Kish's effective size of each row's non-zero weights (as `kish`; 0 for a row without any)."""
    s2 = np.sum(w**2, axis=1)
    size = np.divide(w.sum(axis=1) ** 2, s2, out=np.zeros_like(s2), where=s2 > 0)
    top = w.max(axis=1, keepdims=True)
    equal = np.all((w == 0) | (w == top), axis=1)
    return np.where(equal, (w > 0).sum(axis=1).astype(np.float64), size)


def _batch_superpopulation(
    f: NDArray[np.float64],
    y: NDArray[np.float64],
    xi: NDArray[np.bool_],
    w: NDArray[np.float64],
    li: NDArray[np.float64],
    use_guard: bool,
    joint: bool,
) -> Arrays:
    """Return (estimate, se, Kish n_eff) of each row, superpopulation estimand (`parts`)."""
    d = w / w.sum(axis=1, keepdims=True)
    n_eff = _row_kish(w)
    g = li * f
    gbar = g.mean(axis=1, keepdims=True)
    r = y - g
    rbar = np.sum(d * r, axis=1, keepdims=True)
    rect = np.where(xi, d * (r - rbar), 0.0)
    judge_part = (g - gbar) / f.shape[1]
    vb = np.sum(rect**2, axis=1)
    if use_guard:
        vb = (vb + 2.0 / n_eff**2) * n_eff / (n_eff + 2.0)
    var = np.sum(judge_part**2, axis=1) + vb + (2.0 * np.sum(judge_part * rect, axis=1) if joint else 0.0)
    return gbar[:, 0] + rbar[:, 0], np.sqrt(var), n_eff


def _batch_run(
    f: NDArray[np.float64],
    y: NDArray[np.float64],
    xi: NDArray[np.bool_],
    pi: NDArray[np.float64],
    li: NDArray[np.float64],
    use_guard: bool,
) -> Arrays:
    """Return (estimate, se, Kish n_eff of the variance carriers) of each row, run estimand (`run_parts`)."""
    n_all = f.shape[1]
    n = xi.sum(axis=1)
    unobserved = (n_all - n).astype(np.float64)
    open_ = unobserved > 0
    degenerate = open_ & ~np.any(xi & (pi < 1.0), axis=1)
    p = np.where(degenerate[:, None], (n / n_all)[:, None], pi)
    g = li * f
    r = np.where(xi, y - g, 0.0)
    v = np.where(xi, (1.0 - p) / p, 0.0)
    sv = v.sum(axis=1, keepdims=True)
    q = np.divide(v, sv, out=np.zeros_like(v), where=open_[:, None])
    rt = np.sum(q * r, axis=1)
    est = (np.sum(np.where(xi, y, 0.0), axis=1) + np.sum(np.where(xi, 0.0, g), axis=1) + unobserved * rt) / n_all
    share = unobserved / n_all
    u = np.where(xi, r - rt[:, None], 0.0)
    carry = xi & (p < 1.0) & open_[:, None]
    n_eff = _row_kish(np.where(carry, v, 0.0))
    c = np.divide(n_eff, n_eff - 1.0, out=np.ones_like(n_eff), where=n_eff > 1.0)
    var = c * (share**2 * np.sum((q * u) ** 2, axis=1) + share / n_all * np.sum(q * u**2, axis=1))
    if use_guard:
        count = carry.sum(axis=1)
        mean_q2 = np.divide(np.sum(q**2, axis=1), count, out=np.zeros_like(share), where=count > 0)
        mean_q = np.divide(np.sum(q, axis=1), count, out=np.zeros_like(share), where=count > 0)
        unit = c * (share**2 * mean_q2 + share / n_all * mean_q)
        guarded_var = (var + 2.0 * unit) * np.divide(n_eff, n_eff + 2.0)
        var = np.where(n_eff > 0, guarded_var, var)
    return est, np.sqrt(var), n_eff
