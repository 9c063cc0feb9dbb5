"""`estimate_mean` for many simulated runs at once (numpy, one row per run), for the coverage benchmark.

Moved out of webapp/ (issue 36 item 6): production code estimates one run at a time; only the
benchmark (benchmarks/bench_ppi_coverage.py) and its reduced test need thousands of runs in seconds.
tests/ppi/test_estimator.py::TestBatch checks it against `webapp.ppi.estimator.estimate_mean` row
by row. One column of judge scores, one draft per ticket; the estimator's one convention (cross-fitted
or fixed lambda, Student t, the covariance term), as the coverage benchmark needs nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from webapp.ppi.estimator import CONFIDENCE, MIN_LABELS_FOR_TUNING, Estimand, EstimatorError, Lambda
from webapp.ppi.influence import folds
from webapp.ppi.sample import Sample


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
    seed: int = 0,
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
    if isinstance(lam, str):  # "crossfit"
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
        est, se, n_eff = _batch_superpopulation(f, y, xi, w, lam_i, use_guard)
        _, human_only_se, _ = _batch_superpopulation(f, y, xi, w, np.zeros_like(f), use_guard)
    df = np.maximum(n_eff - 1.0, 1.0)
    q = special.stdtrit(df, 0.5 + confidence / 2)
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
    var = np.sum(judge_part**2, axis=1) + vb + 2.0 * np.sum(judge_part * rect, axis=1)
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
