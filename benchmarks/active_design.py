"""Uncertainty-first draws (issue 43 item 3): draw probabilities fixed before each draw, and their IPW estimate.

Active inference (Zrnic and Candes, "Active Statistical Inference", ICML 2024), written for grading
a run's N drafts one draw at a time:

- Before draw k the probabilities q_k(i) over all N drafts are fixed (and stored with the draw):
  q(i) = (1 - gamma) u_i / sum(u) + gamma / N, u_i the expected |residual| of the predictor on draft
  i from its uncertainty signals (an error model frozen before the run), gamma the uniform share.
  Every q(i) >= gamma / N, so 1 / (N q(i)) <= 1 / gamma: a signal that carries nothing costs at
  most a factor 1/gamma in variance, and gamma = 1 is uniform sampling.
- Draws are with replacement: draft I_k ~ q_k. A draft drawn again is not graded again (its grade
  is reused), so the human grades are the distinct drafts drawn.
- The estimate of the run's own mean theta: Z_k = mean(f) + c_k + (y_I - f_I - c_k) / (N q_k(I)),
  f the predictions, c_k a centre fixed before draw k (the mean residual of the draws so far: the
  inverse weights then scale only what the predictor and its bias miss). E[Z_k | the past] = theta
  exactly, whatever q_k and c_k were (so a poor error model biases nothing). theta_hat = mean(Z),
  se = sd(Z) / sqrt(k): the Z_k are martingale differences about theta, and the confidence
  sequence (webapp/ppi/anytime.py) reads them with k effective grades and no finite-population
  correction (draws with replacement).

Measured against uniform order in benchmarks/bench_ppi_active.py (docs/ppi.md, "Fewest grades"):
it does not pay in either world measured (3 December 2026), so the product keeps the uniform
random draw order and this design lives here, beside its benchmark, not in webapp/ppi.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

UNIFORM_SHARE = 0.3  # gamma: the share of each draw's probability spread evenly over the drafts


class ActiveError(ValueError):
    """Raised for draw probabilities or draws that cannot be used; the message names the field."""


def draw_probabilities(uncertainty: ArrayLike, *, uniform_share: float = UNIFORM_SHARE) -> NDArray[np.float64]:
    """Return q over the N drafts: (1 - gamma) u / sum(u) + gamma / N (sums to 1, each at least gamma / N)."""
    u = np.asarray(uncertainty, dtype=np.float64)
    if u.ndim != 1 or u.shape[0] == 0:
        raise ActiveError("uncertainty: expected one value per draft")
    if not np.all(np.isfinite(u)) or np.any(u < 0):
        raise ActiveError("uncertainty: every value must be finite and non-negative")
    if not 0.0 < uniform_share <= 1.0:
        raise ActiveError("uniform_share: must lie in (0, 1]")
    n = u.shape[0]
    total = float(u.sum())
    shaped = u / total if total > 0 else np.full(n, 1.0 / n)
    return (1.0 - uniform_share) * shaped + uniform_share / n


@dataclass(frozen=True)
class ActiveEstimate:
    """The IPW estimate of the run's own mean from k draws."""

    estimate: float
    se: float
    draws: int
    grades: int  # distinct drafts drawn: the human grades it rests on


def draw_values(
    prediction: ArrayLike, drawn: ArrayLike, grades: ArrayLike, probability: ArrayLike
) -> NDArray[np.float64]:
    """Return Z_1..Z_k (module docstring): `drawn` the drafts in draw order, `grades` their human grades, `probability` q_k(I_k).

    The centre c_k is the mean residual of draws 1..k-1 (0 for the first draw).
    """
    f = np.asarray(prediction, dtype=np.float64)
    idx = np.asarray(drawn, dtype=np.int64)
    y = np.asarray(grades, dtype=np.float64)
    q = np.asarray(probability, dtype=np.float64)
    if idx.ndim != 1 or y.shape != idx.shape or q.shape != idx.shape:
        raise ActiveError("drawn: grades and probabilities need one value per draw")
    if idx.shape[0] == 0:
        raise ActiveError("drawn: no draw yet")
    if np.any(idx < 0) or np.any(idx >= f.shape[0]):
        raise ActiveError("drawn: a draw names a draft outside the run")
    if np.any(~(q > 0)) or np.any(q > 1):
        raise ActiveError("probability: every draw's probability must lie in (0, 1]")
    n = f.shape[0]
    r = y - f[idx]
    k = np.arange(idx.shape[0])
    centre = np.concatenate([[0.0], np.cumsum(r)[:-1] / np.maximum(k[1:], 1)])
    return f.mean() + centre + (r - centre) / (n * q)


def estimate(prediction: ArrayLike, drawn: ArrayLike, grades: ArrayLike, probability: ArrayLike) -> ActiveEstimate:
    """Return the IPW estimate of the run's own mean: mean(Z), sd(Z)/sqrt(k) (module docstring)."""
    z = draw_values(prediction, drawn, grades, probability)
    k = z.shape[0]
    se = float(np.std(z, ddof=1) / np.sqrt(k)) if k > 1 else float("inf")
    return ActiveEstimate(float(z.mean()), se, k, int(np.unique(np.asarray(drawn)).shape[0]))
