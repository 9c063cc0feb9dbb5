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
92.9% of 2,000 simulated runs at N = 300, n = 150, bias +0.3, 94.6% with it. Dropping it (and
taking the normal quantile) gives ppi_py's figures exactly (one draft per ticket, uniform pi).

For 0/1 labels (pass rates) the rectifier's variance gets a small-sample guard (`guarded`), in
both estimands (for the run, two pseudo-drafts with the carriers' mean q, so a census stays width 0).

Conventions that differ from ppi_py, on purpose (docs/ppi.md):
- Estimand: the run's own drafts by default (ppi_py: the superpopulation).
- Variance: the covariance term above (ppi_py: none); the 0/1 guard (ppi_py: none).
- Quantile: Student-t with the degrees of freedom above, not the normal (ppi_py's default).
- Lambda: cross-fitted over two folds of tickets (each fold's lambda comes from the other fold's
  drafts) and clipped to [0, 1]; lambda = 1 below 60 human grades; or a fixed lambda in [0, 1]
  (the judge-alone bias reads lambda = 1). ppi_py tunes one lambda on all the data.
The estimator has no switch to ppi_py's conventions (issue 36 item 6): they live in
tests/ppi/ppi_conventions.py, built from the public parts of webapp/ppi/influence.py (`parts`,
`pooled_lambda` on all drafts, `part_terms` summed without the covariance) and scipy's normal
quantile; the equality tests with ppi_py (tests/ppi/test_estimator.py, test_predictor.py) run on them.

Several judge signals (issue 35). When the sample carries an N x p matrix of signals (p > 1), the
judge score above is replaced by a prediction of the human grade learned from the signals by
cross-fitting over tickets (webapp/ppi/predictor.py): a drawn draft's prediction is its
out-of-fold one, an undrawn draft's the mean of the K fold models (Cross-PPI). Everything above
then runs on those predictions unchanged, power tuning included. Decision: lambda stays on top,
because a predictor fitted on noise signals still predicts something, and lambda (tuned on the
other fold of tickets, clipped to [0, 1]) shrinks it to the human-only interval instead of paying
its noise in width. The predictions are centred on their mean over all N drafts first (no label
enters it, and at lambda = 1 it changes nothing): with a lambda per fold of tickets, an uncentred
prediction's level (about 3.6 on the 1-5 scale) would be scaled differently in the two folds and
split the residuals into two clumps; with noise signals that made the interval up to 2.3 x the
human-only one (tests/ppi/test_predictor.py::TestNoiseSignals, before the centring). One column (or p = 1) is today's estimate exactly. `Estimate.r_squared` is the
predictor's out-of-fold R^2 with the human grades (1/pi-weighted), `Estimate.predictor` its name.
The fold models are treated as fixed, as lambda is: each drawn draft's prediction comes from a
model that did not see its label, so the rectifier is unbiased; the variance ignores the
dependence between fold models, as Cross-PPI's does. Below 60 human grades lambda is 1 as for one
column, so nothing shrinks a poor predictor there. Measured (noise signals, N = 600, 200-300
runs): at n = 20 the interval's width is a median 1.09 x the human-only one (max 1.47), at
n = 40 1.04 x (max 1.36), at n >= 60 at most 1.06 x; falling back to the first column alone
below 60 was worse (median 1.42 x at n = 20), and so was tuning lambda there (it narrowed noise
intervals but widened informative ones and lost coverage), so neither is done.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from webapp.ppi.influence import (
    MIN_LABELS_FOR_TUNING,
    Estimand,
    Lambda,
    Parts,
    cluster_sums,
    combine,
    degrees_of_freedom,
    effective_size,
    folds,
    is_binary,
    item_lambdas,
    parts,
    pooled_lambda,
    variance,
    variance_terms,
)
from webapp.ppi.predictor import CrossFit, cross_fit, out_of_fold_r_squared
from webapp.ppi.sample import EstimatorError, Sample, make_sample

__all__ = [
    "CONFIDENCE",
    "LOW_LAMBDA_WARNING",
    "MIN_LABELS_FOR_TUNING",
    "Difference",
    "Estimand",
    "Estimate",
    "EstimatorError",
    "Lambda",
    "Parts",
    "Sample",
    "all_pass",
    "estimate_difference",
    "estimate_from_predictions",
    "estimate_mean",
    "folds",
    "make_sample",
    "parts",
    "pooled_lambda",
    "predicted",
    "quantile",
]

CONFIDENCE = 0.95
LOW_LAMBDA_WARNING = 0.3
FOLDS = 5


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
    r_squared: float | None = None  # the learned predictor's out-of-fold R^2; None for one column
    predictor: str = "judge"  # "judge" for one column, else the learned model's name
    # the graded drafts' sum of the figure's values: what the confidence sequence's bounds are cut to
    # (webapp.ppi.anytime.sequence_bounds), so a call made from the estimate equals one made from its sample
    graded_sum: float | None = None

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


@dataclass(frozen=True)
class Options:
    """The estimate's settings shared by `estimate_mean` and `estimate_difference`."""

    lam: Lambda = "crossfit"
    confidence: float = CONFIDENCE
    guard: bool | None = None
    estimand: Estimand = "run"


def quantile(confidence: float, df: float) -> float:
    """Return the two-sided Student-t critical value for `confidence` with df degrees of freedom."""
    return float(special.stdtrit(df, 0.5 + confidence / 2))


def _one_column(sample: Sample, options: Options, seed: int) -> tuple[Estimate, Parts]:
    """Return the estimate of a one-column sample and its parts (module docstring)."""
    lam_i, lambdas = item_lambdas(sample, options.lam, seed)
    use_guard = is_binary(sample) if options.guard is None else options.guard
    guard_n = effective_size(sample, options.estimand) if use_guard else None
    p = parts(sample, lam_i, options.estimand)
    se = float(np.sqrt(variance(p, guard_n=guard_n)))
    human_only = parts(sample, np.zeros(sample.n_drafts), options.estimand)
    human_only_se = float(np.sqrt(variance(human_only, guard_n=guard_n)))
    df = degrees_of_freedom(sample, options.estimand)
    half = quantile(options.confidence, df) * se
    estimate = Estimate(
        estimate=p.estimate,
        low=p.estimate - half,
        high=p.estimate + half,
        se=se,
        df=df,
        confidence=options.confidence,
        lambdas=lambdas,
        judge_alone=float(sample.judge.mean()),
        human_only_se=human_only_se,
        n_labels=sample.n_labels,
        n_drafts=sample.n_drafts,
        estimand=options.estimand,
        graded_sum=float(sample.human[sample.drawn].sum()),
    )
    return estimate, p


def predicted(sample: Sample, oof: ArrayLike, fold_predictions: ArrayLike) -> Sample:
    """Return the one-column sample whose judge score is the prediction: out-of-fold where drawn, fold mean elsewhere."""
    per_fold = np.asarray(fold_predictions, dtype=np.float64)
    per_fold = per_fold[:, None] if per_fold.ndim == 1 else per_fold
    own = np.asarray(oof, dtype=np.float64)
    if per_fold.shape[0] != sample.n_drafts or own.shape != (sample.n_drafts,):
        raise EstimatorError(f"predictions: expected {sample.n_drafts} rows (one per draft)")
    if not (np.all(np.isfinite(own[sample.drawn])) and np.all(np.isfinite(per_fold))):
        raise EstimatorError("predictions: every prediction must be finite")
    h = np.where(sample.drawn, own, per_fold.mean(axis=1))
    return replace(sample, judge=h, signals=None)


def centred(sample: Sample) -> Sample:
    """Return the sample with its predictions centred on their mean over all N drafts (module docstring)."""
    return replace(sample, judge=sample.judge - float(sample.judge.mean()))


def _with_predictor(estimate: Estimate, sample: Sample, oof: ArrayLike, name: str) -> Estimate:
    return replace(
        estimate,
        judge_alone=float(sample.judge.mean()),
        r_squared=out_of_fold_r_squared(sample, np.asarray(oof, dtype=np.float64)),
        predictor=name,
    )


def _prepare(sample: Sample, folds: int, seed: int) -> tuple[Sample, CrossFit | None]:
    """Return the one-column sample the estimate runs on (the sample itself, or its cross-fitted predictions)."""
    if sample.signals is None:
        return sample, None
    fit = cross_fit(sample, folds=folds, seed=seed)
    return centred(predicted(sample, fit.oof, fit.fold_predictions)), fit


def _estimate(sample: Sample, options: Options, seed: int, folds: int) -> tuple[Estimate, Parts]:
    ready, fit = _prepare(sample, folds, seed)
    estimate, p = _one_column(ready, options, seed)
    if fit is not None:
        estimate = _with_predictor(estimate, sample, fit.oof, fit.name)
    return estimate, p


def estimate_mean(
    sample: Sample,
    *,
    lam: Lambda = "crossfit",
    confidence: float = CONFIDENCE,
    seed: int = 0,
    guard: bool | None = None,
    estimand: Estimand = "run",
    folds: int = FOLDS,
) -> Estimate:
    """Return the prediction-powered mean of the human label with its interval.

    `estimand`: "run" (default) is about the run's own N drafts (width 0 when all are graded);
    "superpopulation" about drafts like these (ppi_py's). `lam`: "crossfit" (default) or a fixed
    lambda in [0, 1]. `guard` (default: on for 0/1 labels) adds the small-sample guard of
    `guarded`. With several signals, `folds` is K of the predictor's cross-fitting (fewer when fewer tickets were drawn),
    `seed` shuffles its tickets as it does lambda's.
    """
    options = Options(lam, confidence, guard, estimand)
    return _estimate(sample, options, seed, folds)[0]


def estimate_from_predictions(
    sample: Sample,
    *,
    oof: ArrayLike,
    fold_predictions: ArrayLike,
    lam: Lambda = "crossfit",
    confidence: float = CONFIDENCE,
    seed: int = 0,
    guard: bool | None = None,
    estimand: Estimand = "run",
    name: str = "given",
) -> Estimate:
    """Return the estimate with the fold models' predictions given (Cross-PPI with any model).

    `oof` (N,): each drawn draft's prediction by the model that did not see its fold (values of
    undrawn drafts are ignored); `fold_predictions` (N, K): every draft's prediction by each of
    the K fold models (an undrawn draft reads their mean).
    """
    h = centred(predicted(sample, oof, fold_predictions))
    estimate, _ = _one_column(h, Options(lam, confidence, guard, estimand), seed)
    return _with_predictor(estimate, sample, oof, name)


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
    seed: int = 0,
    b_seed: int | None = None,
    guard: bool | None = None,
    estimand: Estimand = "superpopulation",
    folds: int = FOLDS,
) -> Difference:
    """Return the estimate of mean(A) - mean(B) where both runs drafted replies to the same cases.

    Influence values of both runs are summed per shared ticket (the keys) and differenced before
    squaring, so what the two runs share (the same hard tickets) cancels out of the variance.
    Decision: the default estimand is the superpopulation (does the change make drafts worse),
    not the two runs' own drafts: see `webapp.ppi.report.pass_rate_difference`. With
    `estimand="run"` it is the difference of the two runs' own means (width 0 for two censuses).
    Samples with several signals are read through their own cross-fitted predictors (each run's
    predictor is fitted on its own grades), then paired as one-column samples.
    """
    ka, kb = np.asarray(a_cluster_keys), np.asarray(b_cluster_keys)
    if ka.shape[0] != a.n_drafts or kb.shape[0] != b.n_drafts:
        raise EstimatorError("cluster keys: one key per draft of each run")
    keys, codes = np.unique(np.concatenate([ka, kb]), return_inverse=True)
    ca, cb = codes[: ka.shape[0]], codes[ka.shape[0] :]
    groups = keys.shape[0]
    seed_b = seed if b_seed is None else b_seed
    options = Options(lam, confidence, guard, estimand)
    est_a, pa = _estimate(a, options, seed, folds)
    est_b, pb = _estimate(b, options, seed_b, folds)
    judge = cluster_sums(pa.judge_part, ca, groups) - cluster_sums(pb.judge_part, cb, groups)
    rect = cluster_sums(pa.rectifier_part, ca, groups) - cluster_sums(pb.rectifier_part, cb, groups)
    va, vb, cov = variance_terms(judge, rect)
    use_guard = (is_binary(a) and is_binary(b)) if guard is None else guard
    # The guard's pseudo-drafts count once for the pair, at the smaller run's effective size.
    sizes = ((effective_size(a, estimand), pa.guard_unit), (effective_size(b, estimand), pb.guard_unit))
    guard_n, unit = min(sizes) if use_guard else (None, None)
    vb += pa.extra_variance + pb.extra_variance  # the two runs' undrawn drafts are not paired
    se = float(np.sqrt(combine(va, vb, cov, guard_n=guard_n, guard_unit=unit)))
    df = min(est_a.df, est_b.df)
    diff = pa.estimate - pb.estimate
    half = quantile(confidence, df) * se
    return Difference(diff, diff - half, diff + half, se, df, confidence, est_a, est_b)


def all_pass(factual: ArrayLike, scales: ArrayLike, thresholds: ArrayLike) -> NDArray[np.float64]:
    """Return 1.0 where a draft passes all four criteria: factual pass and every scale >= its threshold.

    `factual` is (N,) truthy for pass; `scales` is (N, k), `thresholds` (k,).
    """
    fa = np.asarray(factual, dtype=bool)
    sc = np.asarray(scales, dtype=np.float64)
    th = np.asarray(thresholds, dtype=np.float64)
    return (fa & np.all(sc >= th, axis=1)).astype(np.float64)
