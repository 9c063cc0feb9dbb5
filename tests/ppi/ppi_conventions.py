"""ppi_py's conventions, built from the estimator's public parts, for the equality tests (issue 36 item 6).

The production estimator (webapp/ppi/estimator.py) has one convention: cross-fitted (or a fixed)
lambda, the Student-t quantile, the covariance of the judge and rectifier parts, the run estimand
by default. ppi_py differs on each, so its conventions live here, not in `webapp/`:

- `ppi_py_mean_ci` is ppi_py's `ppi_mean_ci`: the superpopulation estimand, one lambda tuned on all
  the data (`pooled_lambda` without a mask) or a fixed one, the normal quantile, the variance
  without the covariance term and without the 0/1 guard.
- `crossppi_interval` is ppi_py's Cross-PPI (`crossppi_mean_ci`): it reads the labelled drafts'
  out-of-fold predictions for the rectifier and, for every one of the N unlabelled drafts (here
  all drafts, drawn or not), the mean of the K fold models; normal quantile, lambda 1, no
  covariance term, no guard, the superpopulation. The estimator's own reading uses a drawn
  draft's out-of-fold prediction in both places.

Only the estimator's building blocks are used (`parts`, `pooled_lambda`, `part_terms`), so the
tests comparing these with ppi_py itself check that those blocks give ppi_py's numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from webapp.ppi.estimator import Sample, predicted
from webapp.ppi.influence import Parts, part_terms, parts, pooled_lambda

PpiLambda = float | Literal["pooled"]


@dataclass(frozen=True)
class PpiInterval:
    """An interval under ppi_py's conventions and the lambda it used."""

    estimate: float
    low: float
    high: float
    se: float
    lam: float


def normal_quantile(confidence: float) -> float:
    """Return ppi_py's two-sided normal critical value for `confidence`."""
    return float(stats.norm.ppf(0.5 + confidence / 2))


def ppi_py_se(p: Parts) -> float:
    """Return ppi_py's standard error: the judge and rectifier variances, no covariance term, no guard."""
    judge_var, rect_var, _covariance = part_terms(p)
    return math.sqrt(judge_var + rect_var)


def _interval(p: Parts, lam: float, confidence: float) -> PpiInterval:
    se = ppi_py_se(p)
    half = normal_quantile(confidence) * se
    return PpiInterval(p.estimate, p.estimate - half, p.estimate + half, se, lam)


def ppi_py_mean_ci(sample: Sample, *, lam: PpiLambda = "pooled", confidence: float = 0.95) -> PpiInterval:
    """Return ppi_py's `ppi_mean_ci` (labelled = the drawn drafts, unlabelled = all N drafts)."""
    value = pooled_lambda(sample) if lam == "pooled" else float(lam)
    return _interval(parts(sample, np.full(sample.n_drafts, value), "superpopulation"), value, confidence)


def crossppi_interval(
    sample: Sample, oof: NDArray[np.float64], fold_predictions: NDArray[np.float64], *, confidence: float = 0.95
) -> PpiInterval:
    """Return ppi_py's `crossppi_mean_ci` (lambda 1) for the given fold models' predictions."""
    h = predicted(sample, oof, fold_predictions)
    p = parts(h, np.ones(sample.n_drafts), "superpopulation", judge_all=fold_predictions.mean(axis=1))
    return _interval(p, 1.0, confidence)
