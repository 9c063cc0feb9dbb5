"""The confidence sequence at every look of many simulated runs at once (numpy), for benchmarks/bench_ppi_anytime.py.

Each row is one run of N drafts graded one by one in a random order (a uniform sample growing by
one grade per look). At look n the run's estimate and its standard error are the estimator's for
uniform pi (webapp/ppi/estimator.py, run estimand, lambda = 1: plain PPI over one column of
predictions), written with running sums so that all N looks of 2,000 runs take seconds:

    estimate_n = (sum of the n grades + sum of the N - n ungraded predictions + (N - n) rbar_n) / N
    se_n^2     = (1 - n/N) s_n^2 / n,   s_n^2 the graded residuals' variance (ddof 1)

and the bounds are webapp.ppi.anytime's: estimate +- se t_(n-1)^-1(Phi(c(n / (1 - n/N)))), no call below MIN_GRADES
grades, the exact mean at n = N. tests/ppi/test_anytime_batch.py checks rows against
`webapp.ppi.report.decide` look by look.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from webapp.ppi.anytime import MIN_GRADES, half_width

TOL = 1e-9


@dataclass(frozen=True)
class Looks:
    """Every look of R runs: (R, N) arrays, column n - 1 = the look after n grades."""

    estimate: NDArray[np.float64]
    se: NDArray[np.float64]
    low: NDArray[np.float64]  # the confidence sequence's bounds
    high: NDArray[np.float64]
    one_low: NDArray[np.float64]  # this look's 95% interval (Student t, n - 1 degrees of freedom)
    one_high: NDArray[np.float64]


def multipliers(drafts: int) -> NDArray[np.float64]:
    """Return the half-width in standard errors (webapp.ppi.anytime.half_width) for n = 1..N (inf below MIN_GRADES, 0 at N)."""
    out = np.full(drafts, np.inf)
    for n in range(MIN_GRADES, drafts):
        out[n - 1] = half_width(1.0, float(n), n, drafts)
    out[drafts - 1] = 0.0
    return out


def every_look(human: NDArray[np.float64], prediction: NDArray[np.float64], order: NDArray[np.int64]) -> Looks:
    """Return the estimate and both kinds of bounds at every look, grades taken in `order` (per row)."""
    runs, drafts = human.shape
    y = np.take_along_axis(human, order, axis=1)
    f = np.take_along_axis(prediction, order, axis=1)
    r = y - f
    n = np.arange(1, drafts + 1, dtype=np.float64)
    s1, s2 = np.cumsum(r, axis=1), np.cumsum(r * r, axis=1)
    sy, sf = np.cumsum(y, axis=1), np.cumsum(f, axis=1)
    rbar = s1 / n
    estimate = (sy + (sf[:, -1:] - sf) + (drafts - n) * rbar) / drafts
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(n > 1, (s2 - n * rbar**2) / (n - 1), np.inf)
    se = np.sqrt(np.maximum(var, 0.0) * (1.0 - n / drafts) / n)
    se[:, -1] = 0.0
    c = multipliers(drafts)
    with np.errstate(invalid="ignore"):
        half = np.where(np.isinf(c), np.inf, c * se)
    t = special.stdtrit(np.maximum(n - 1, 1), 0.975)
    one = t * se
    return Looks(estimate, se, estimate - half, estimate + half, estimate - one, estimate + one)


@dataclass(frozen=True)
class Stops:
    """Where each run stopped (first decided look among those taken, or N) and what was called."""

    grades: NDArray[np.int64]
    verdict: NDArray[np.int64]  # +1 pass, -1 fail, 0 undecided (only when the looks end before N)
    covered: NDArray[np.bool_]  # the sequence's bounds at the stop hold the run's own mean


def first_decision(
    low: NDArray[np.float64], high: NDArray[np.float64], threshold: float, truth: NDArray[np.float64], *, every: int = 1
) -> Stops:
    """Return each run's first look (after every `every` grades, and at N) that decides, and whether it covered the truth."""
    runs, drafts = low.shape
    looked = np.zeros(drafts, dtype=bool)
    looked[every - 1 :: every] = True
    looked[-1] = True
    # TOL: a run's mean set at the threshold by a shift of its grades sits there only to rounding; the census's
    # bounds equal that mean to rounding too, so both sides compare with the same small tolerance
    passes = (low > threshold + TOL) & looked
    fails = (high <= threshold + TOL) & looked
    decided = passes | fails
    any_decided = decided.any(axis=1)
    at = np.where(any_decided, decided.argmax(axis=1), drafts - 1)
    rows = np.arange(runs)
    verdict = np.where(passes[rows, at], 1, np.where(fails[rows, at], -1, 0))
    covered = (low[rows, at] <= truth + TOL) & (truth - TOL <= high[rows, at])
    return Stops(at + 1, verdict.astype(np.int64), covered)
