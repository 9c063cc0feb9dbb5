"""ppi_py's conventions, built from the estimator's own parts, for the equality tests (issue 36 item 6).

ppi_py's Cross-PPI (`crossppi_mean_ci`) reads the labelled drafts' out-of-fold predictions for the
rectifier and, for every one of the N unlabelled drafts (here all drafts, drawn or not), the mean
of the K fold models; normal quantile, lambda 1, no covariance term, no guard, the superpopulation.
The estimator's own reading uses a drawn draft's out-of-fold prediction in both places
(webapp/ppi/estimator.py), so this convention lives here, not in production code.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from webapp.ppi.estimator import Sample, predicted, quantile
from webapp.ppi.influence import parts, variance


def crossppi_interval(
    sample: Sample, oof: NDArray[np.float64], fold_predictions: NDArray[np.float64], *, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Return (estimate, low, high) under ppi_py's Cross-PPI conventions."""
    h = predicted(sample, oof, fold_predictions)
    p = parts(h, np.ones(sample.n_drafts), "superpopulation", judge_all=fold_predictions.mean(axis=1))
    half = quantile(confidence, 1.0, "normal") * float(np.sqrt(variance(p, joint=False, guard_n=None)))
    return p.estimate, p.estimate - half, p.estimate + half
