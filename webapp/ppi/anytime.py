"""Anytime-valid pass / fail calls: a confidence sequence about the run's own mean (issue 43).

One 95% interval is right for one look; a lead who looks after every grade until the interval
clears the threshold is wrong far more often (simulated: 12.7% of runs sitting on the threshold
ended in "passes"). The call therefore reads a confidence sequence: bounds that hold at every look
at once, so the chance that a run is ever called "passes" while its mean is at or below the
threshold (or "fails" while above) stays at most 2.5% per side, however many looks and whenever.

Method (decisions; docs/ppi.md, "Anytime-valid calls"):
- An asymptotic confidence sequence over the estimator's influence values (Waudby-Smith, Arnold,
  Wu, Howard, Ramdas, Annals of Statistics 2024), written for a finite population. For grades
  taken in a random order from the run's N drafts, the mean of the drafts not graded yet is a
  martingale; t(mean_t - theta)/(N - t) is one, with variance process sigma^2 t / (N (N - t)).
  In the intrinsic time t_eff = t / (1 - t/N) (the effective grades: sigma^2 / se^2 under SRS) the
  standardised sum W = t_eff (estimate - theta) / sigma behaves as a Brownian motion, and
  each side's boundary g(t_eff) on it, turned back into bounds on theta, is

      theta in estimate +- se * c(t_eff),   c = g / sqrt(t_eff),   M(g, t_eff) = 1 / (alpha / 2)

  where M is a test martingale mixed over the drifts of one side (Ville's inequality: it ever
  reaches 1/(alpha/2) with probability at most alpha/2, 2.5% per side):

      M(g, t) = w exp(lam g - lam^2 t / 2)                                      (a linear boundary)
              + (1 - w) 2 / sqrt(1 + rho^2 t) exp(rho^2 g^2 / (2 (1 + rho^2 t))) Phi(rho g / sqrt(1 + rho^2 t))
                                                                               (a one-sided normal mixture)

  se is the estimator's own standard error about the run's mean (PPI, inverse-probability
  weights, tickets, the finite-population correction: webapp/ppi/estimator.py).
- Why two parts (issue 43: grades to a decision against the fixed design with 80% power). A
  normal mixture alone (the two-sided Robbins mixture used before, tightest at 50 effective
  grades) is at least 3.04 se wide where the fixed design reads 2.80 (1.96 + 0.84): its average
  grades to a decision were 1.12-1.17 x the fixed design's at 0.2 from the threshold. The linear
  part w exp(lam W - lam^2 t/2) alone is the boundary W = log(1/(w alpha/2))/lam + lam t/2, the SPRT's
  for a drift lam: for a run lam residual sds away its expected time is about 0.94 x the fixed
  design's (Wald). `LINEAR_DRIFT` = 0.35 residual sds: the runs 0.2 to 0.3 from the threshold are
  0.30 to 0.50 residual sds away when the residual sd is 0.6-0.67 (the benchmark's worlds). A
  linear boundary alone never decides a run nearer than lam/2 before the census; the mixture part
  (weight 0.1, tightest at `TUNED_AT` = 300 effective grades, where runs 0.1 away decide) keeps
  those decidable. Chosen by simulating the benchmark's worlds before the benchmark
  (docs/ppi.md lists what was tried).
- t: the effective number of grades carrying the variance (Kish's, as the degrees of freedom:
  df + 1), and the finite-population share from the graded count of the N drafts.
- No call before `MIN_GRADES` grades: the normal limit needs a spread estimated from enough grades
  (three equal residuals would read as se = 0). Looks before that are "undecided". Above it the
  boundary's c standard errors are read as Student's t with the same one-sided tail,
  t_df^-1(Phi(c)) (df = t - 1: 1.09 x c at 30 of 2,400 grades, c = 2.92; 1.02 x at 100), for a spread
  estimated from t grades. Measured on 2,000 simulated runs sitting on the threshold, peeking
  after every grade: with the widening t(t - 1)/z at 97.5% used with the earlier mixture (1.05 x at
  30 grades), this boundary called 2.35% and 2.45% of runs "passes" (single score, several
  signals: at the 2.5% asked); with the tail-matched widening, 2.05% and 2.15%. From 25 grades,
  2.15% and 2.2%, and 2-3% fewer grades at 0.3 from the threshold; 30 kept (the margin).
- The bounds are also cut to what the figure can be given the graded drafts (the ungraded ones at
  the bottom or the top of the scale): always true, so a census reads the mean itself (width 0).
- The confseq and expectation packages were looked at: the boundary is M = 1/(alpha/2) solved for g
  (one closed form, Brent's method), written here with numpy and scipy and checked in
  tests/ppi/test_anytime.py against a value worked by hand, an independent numpy solve and a
  simulation of peeking after every grade; no dependency is added.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize, special

from webapp.ppi.estimator import Estimate, EstimatorError, estimate_mean
from webapp.ppi.sample import Sample

ALPHA = 0.05  # both sides together: at most 2.5% per side
LINEAR_DRIFT = 0.35  # the linear part's drift lam, in residual sds (module docstring)
LINEAR_WEIGHT = 0.9  # the linear part's share of the martingale; the rest is the normal mixture
TUNED_AT = 300.0  # effective grades where the mixture part is tightest
UNBOUNDED = 10**15  # the population size that stands for "no finite population" (superpopulation estimates)
MIN_GRADES = 30  # no call on fewer grades (the spread is not estimated yet)

Verdict = Literal["pass", "fail", "undecided"]


def _kappa(alpha: float) -> float:
    return -2.0 * math.log(alpha) + math.log(1.0 - 2.0 * math.log(alpha))


def log_martingale(g: float, t: float, *, alpha: float = ALPHA, tuned_at: float = TUNED_AT) -> float:
    """Return log M(g, t): the one-side test martingale at W = g after t effective grades (module docstring)."""
    rho2 = _kappa(alpha) / tuned_at  # Howard et al.'s rho for the two-sided mixture at alpha, tightest at tuned_at
    v = 1.0 + rho2 * t
    linear = math.log(LINEAR_WEIGHT) + LINEAR_DRIFT * g - LINEAR_DRIFT**2 * t / 2.0
    mixture = (
        math.log(1.0 - LINEAR_WEIGHT) + math.log(2.0) - 0.5 * math.log(v) + rho2 * g * g / (2.0 * v)
        + float(special.log_ndtr(math.sqrt(rho2) * g / math.sqrt(v)))
    )
    return float(np.logaddexp(linear, mixture))


@functools.lru_cache(maxsize=65536)
def multiplier(t_eff: float, *, alpha: float = ALPHA, tuned_at: float = TUNED_AT) -> float:
    """Return c(t_eff), how many standard errors the sequence's half-width is at t_eff effective grades (module docstring)."""
    if t_eff <= 0:
        return math.inf
    if math.isinf(t_eff):
        return 0.0  # never used with se > 0: a census has se = 0
    target = math.log(2.0 / alpha)  # one side at alpha / 2

    def excess(g: float) -> float:
        return log_martingale(g, t_eff, alpha=alpha, tuned_at=tuned_at) - target

    high = 10.0 + 10.0 * math.sqrt(t_eff)  # M grows without bound in g: the crossing lies below
    found = optimize.root_scalar(excess, bracket=(0.0, high), method="brentq", xtol=1e-12, rtol=1e-13)
    return float(found.root) / math.sqrt(t_eff)


def small_sample(c: float, df: float) -> float:
    """Return the boundary c in standard errors read as Student's t with df degrees of freedom: the t quantile of c's normal tail.

    The widening for a spread estimated from few grades: the half-width is t_df^-1(Phi(c)) standard errors, the
    quantile with the same one-sided tail as the normal boundary (c itself as df grows).
    """
    if math.isinf(c) or c <= 0:
        return c
    return float(-special.stdtrit(max(df, 1.0), special.ndtr(-c)))


def half_width(se: float, carriers: float, graded: int, drafts: int) -> float:
    """Return the sequence's half-width: se x t_df^-1(Phi(c(t_eff))), df = carriers - 1 (module docstring)."""
    return se * small_sample(multiplier(effective_grades(carriers, graded, drafts)), carriers - 1.0)


def effective_grades(carriers: float, graded: int, drafts: int) -> float:
    """Return t_eff = t / (1 - graded/N): the sequence's intrinsic time (inf for a census)."""
    if graded >= drafts:
        return math.inf
    return carriers / (1.0 - graded / drafts)


@dataclass(frozen=True)
class Sequence:
    """The confidence sequence at one look: its bounds and what they rest on."""

    low: float
    high: float
    grades: int  # human grades the look rests on
    multiplier: float  # the half-width in standard errors


def sequence_bounds(
    *, estimate: float, se: float, carriers: float, graded: int, drafts: int,
    value_range: tuple[float, float] | None = None, graded_sum: float | None = None,
) -> Sequence:
    """Return the sequence's bounds at this look: estimate +- se c(t_eff), cut to what the graded drafts allow.

    `graded_sum` (the graded drafts' sum of grades) and `value_range` give the bounds that always
    hold: (sum + (N - n) lo)/N to (sum + (N - n) hi)/N.
    """
    if graded >= drafts:
        mean = estimate if graded_sum is None else graded_sum / drafts
        return Sequence(mean, mean, graded, 0.0)
    if graded < MIN_GRADES:
        low, high, c = -math.inf, math.inf, math.inf
    else:
        c = half_width(1.0, carriers, graded, drafts)
        low, high = estimate - c * se, estimate + c * se
    if value_range is not None and graded_sum is not None:
        lo, hi = value_range
        left = drafts - graded
        low, high = max(low, (graded_sum + left * lo) / drafts), min(high, (graded_sum + left * hi) / drafts)
    elif value_range is not None:
        low, high = max(low, value_range[0]), min(high, value_range[1])
    return Sequence(low, high, graded, c)


def verdict_of(seq: Sequence, threshold: float) -> Verdict:
    """Return pass when the lower bound is above the threshold, fail when the upper bound is at or below it."""
    # The plan says "above 3.5": a lower bound equal to the threshold does not clear it, and an
    # upper bound at the threshold already rules "above" out.
    if seq.low > threshold:
        return "pass"
    if seq.high <= threshold:
        return "fail"
    return "undecided"


def grades_to_decide(*, estimate: float, se: float, carriers: float, graded: int, drafts: int, threshold: float) -> int | None:
    """Return about how many graded drafts in all the sequence needs to decide if the estimate stays where it is.

    The spread per grade S comes from the standard error (S^2 = se^2 / (1/t - 1/N), t the carriers);
    at m graded drafts the half-width is S sqrt(1/m - 1/N) c(m / (1 - m/N)); the answer is the
    smallest m (at least MIN_GRADES) where it is below the distance to the threshold; N (every
    draft graded: the exact mean) when none below N is. None without a spread or graded drafts.
    """
    if se <= 0 or carriers <= 0 or graded <= 0 or graded >= drafts:
        return None
    t = min(carriers, graded)
    spread = se / math.sqrt(max(1.0 / t - 1.0 / drafts, 1e-300))
    distance = abs(estimate - threshold)
    ratio = carriers / graded  # effective grades per grade, kept as more are graded

    def decides(m: int) -> bool:
        tm = ratio * m
        return half_width(spread * math.sqrt(max(1.0 / tm - 1.0 / drafts, 0.0)), tm, m, drafts) < distance

    lo, hi = max(MIN_GRADES, graded), drafts - 1
    if lo > hi or not decides(hi):
        return drafts
    if decides(lo):
        return lo
    while hi - lo > 1:  # the half-width falls with m: bisect for the first m that decides
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decides(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class GateCall:
    """The call on one figure against its threshold, read from the confidence sequence (webapp/ppi/anytime.py)."""

    verdict: Verdict
    # undecided only: about how many further grades (beyond the drafts already drawn) the sequence needs to decide;
    # 0: grading the drafts already drawn should decide; None: no estimate to work from
    more_grades: int | None
    provisional: bool = False  # drawn drafts still wait for their final grades: the figure may move
    low: float | None = None  # the sequence's bounds at this look (hold at every look at once)
    high: float | None = None
    grades: int = 0  # the human grades this look rests on


def decide(
    sample: Sample | Estimate | None,
    threshold: float,
    *,
    pending: int = 0,
    undrawn: int | None = None,
    value_range: tuple[float, float] | None = None,
    seed: int = 0,
    in_draw_order: bool = False,
) -> GateCall:
    """Return the anytime-valid call on a figure: pass / fail / undecided from the confidence sequence at this look.

    `sample` is the run's sample as it stands (its estimate is computed here, run estimand), or the
    estimate already computed from it (the report's figures: the gate, the page and the weeks pass
    theirs, so the learned predictor is not fitted twice); None: no estimate yet (undecided). The
    call is pass when the sequence's lower bound is above the threshold, fail when its upper bound
    is at or below it; the chance of ever calling a run wrongly is at most 2.5% per side, whatever
    the looks (webapp/ppi/anytime.py). While drawn drafts wait for grades (`pending`) the call is
    provisional, unless the run is graded in its random draw order (`in_draw_order`: graded until
    decided), where the grades so far are themselves a uniform sample and the call holds. An undecided call carries K, the further grades the sequence needs if the estimate
    stays where it is, beyond the drafts already drawn, capped by `undrawn`.
    """
    if isinstance(sample, Sample):
        try:
            sample = estimate_mean(sample, seed=seed)
        except EstimatorError:
            sample = None
    provisional = pending > 0 and not in_draw_order
    if sample is None:
        return GateCall("undecided", None, provisional=provisional)
    e = sample
    # the superpopulation (drafts like these) has no finite population to exhaust: no correction, no census
    drafts = e.n_drafts if e.estimand == "run" else UNBOUNDED
    seq = sequence_bounds(
        estimate=e.estimate, se=e.se, carriers=e.df + 1.0, graded=e.n_labels, drafts=drafts,
        value_range=value_range, graded_sum=e.graded_sum if e.estimand == "run" else None,
    )
    verdict = verdict_of(seq, threshold)
    more = None
    if verdict == "undecided":
        needed = grades_to_decide(
            estimate=e.estimate, se=e.se, carriers=e.df + 1.0, graded=e.n_labels, drafts=min(drafts, e.n_drafts), threshold=threshold
        )
        if needed is not None:
            left = undrawn if undrawn is not None else e.n_drafts - e.n_labels - pending
            more = min(max(0, needed - e.n_labels - pending), max(left, 0))
    return GateCall(verdict, more, provisional=provisional, low=seq.low, high=seq.high, grades=e.n_labels)
