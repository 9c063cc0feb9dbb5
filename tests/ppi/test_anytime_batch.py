"""benchmarks/anytime_batch.py against the product's call: every look of a few small runs equals `webapp.ppi.report.decide`.

The batch writes the estimator with running sums (uniform pi, lambda = 1) so a benchmark's 2,000
runs of 2,400 looks take seconds; here each look's sample is rebuilt as the product holds it (the
first n drafts of the grading order drawn, pi = n / N), estimated by `estimate_mean(lam=1)` and
called by `decide`: the estimate, its standard error, the sequence's bounds (none below 30
grades, the exact mean at N), this look's 95% interval, every look's verdict and each run's first
decided look must agree.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from benchmarks.anytime_batch import Looks, every_look, first_decision
from benchmarks.bench_ppi_anytime import single_score
from benchmarks.ppi_world import World
from webapp.ppi.anytime import MIN_GRADES
from webapp.ppi.estimator import Estimate, estimate_mean, make_sample
from webapp.ppi.report import GateCall, decide

RUNS, DRAFTS = 3, 200
THRESHOLDS = (3.3, 3.5, 3.9)  # the world's runs average about 3.6: passes, undecided looks and fails
EPS = 1e-9
Batch = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64], Looks]  # grades, predictions, order, every look


@pytest.fixture(scope="module")
def world() -> Batch:
    rng = np.random.default_rng(11)
    human, pred = single_score(World(bias=0.3))(rng, RUNS, DRAFTS)
    order = np.argsort(rng.random((RUNS, DRAFTS)), axis=1)
    return human, pred, order, every_look(human, pred, order)


def look(human: NDArray[np.float64], pred: NDArray[np.float64], order: NDArray[np.int64], n: int) -> Estimate:
    """The run's estimate after its first n grades in `order`, as the product computes it (lambda = 1, uniform pi)."""
    drawn = np.zeros(DRAFTS, dtype=bool)
    drawn[order[:n]] = True
    sample = make_sample(judge=pred, human=np.where(drawn, human, np.nan), drawn=drawn, pi=np.full(DRAFTS, n / DRAFTS))
    return estimate_mean(sample, lam=1.0)


def calls(world: Batch, threshold: float) -> list[list[GateCall]]:
    """decide's call at every look n = 2..N of every run (a look needs two grades for a spread)."""
    human, pred, order, _ = world
    return [[decide(look(human[r], pred[r], order[r], n), threshold) for n in range(2, DRAFTS + 1)] for r in range(RUNS)]


def test_estimate_se_and_both_bounds_equal_the_products_at_every_look(world: Batch) -> None:
    human, pred, order, looks = world
    for r in range(RUNS):
        for n in range(2, DRAFTS + 1):
            e = look(human[r], pred[r], order[r], n)
            call = decide(e, 3.5)
            assert e.estimate == pytest.approx(looks.estimate[r, n - 1], abs=EPS), (r, n)
            assert e.se == pytest.approx(looks.se[r, n - 1], abs=EPS), (r, n)
            assert call.low is not None and call.high is not None and call.grades == n
            if n < MIN_GRADES:  # no call below 30 grades: the batch's bounds are infinite, decide's too
                assert math.isinf(looks.low[r, n - 1]) and call.low == -math.inf and call.high == math.inf
                continue
            assert call.low == pytest.approx(looks.low[r, n - 1], abs=EPS), (r, n)
            assert call.high == pytest.approx(looks.high[r, n - 1], abs=EPS), (r, n)
            if n < DRAFTS:  # this look's 95% interval (Student t, n - 1 degrees of freedom)
                assert e.low == pytest.approx(looks.one_low[r, n - 1], abs=EPS), (r, n)
                assert e.high == pytest.approx(looks.one_high[r, n - 1], abs=EPS), (r, n)
        # the census: width 0 at the run's own mean
        assert looks.low[r, -1] == looks.high[r, -1] == pytest.approx(human[r].mean(), abs=EPS)


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_every_looks_verdict_and_the_first_decided_look_equal_decides(world: Batch, threshold: float) -> None:
    human, _, _, looks = world
    made = calls(world, threshold)
    for every in (1, 10):
        stops = first_decision(looks.low, looks.high, threshold, human.mean(axis=1), every=every)
        for r in range(RUNS):
            batch = ["pass" if lo > threshold else "fail" if hi <= threshold else "undecided"
                     for lo, hi in zip(looks.low[r, 1:], looks.high[r, 1:], strict=True)]
            assert batch == [c.verdict for c in made[r]], (threshold, r)
            taken = [n for n in range(2, DRAFTS + 1) if n % every == 0 or n == DRAFTS]
            first = next((n for n in taken if made[r][n - 2].verdict != "undecided"), DRAFTS)
            assert stops.grades[r] == first, (threshold, every, r)
            said = made[r][first - 2].verdict
            assert stops.verdict[r] == {"pass": 1, "fail": -1, "undecided": 0}[said], (threshold, every, r)


def test_the_small_world_reaches_each_kind_of_call_before_the_census(world: Batch) -> None:
    # the comparison above is not vacuous: some run passes, some fails before N, and some look is undecided
    human, _, _, looks = world
    seen: set[str] = set()
    for threshold in THRESHOLDS:
        stops = first_decision(looks.low, looks.high, threshold, human.mean(axis=1))
        seen |= {"pass" for v, g in zip(stops.verdict, stops.grades, strict=True) if v == 1 and g < DRAFTS}
        seen |= {"fail" for v, g in zip(stops.verdict, stops.grades, strict=True) if v == -1 and g < DRAFTS}
        seen |= {"undecided" for c in calls(world, threshold)[0] if c.verdict == "undecided"}
    assert seen == {"pass", "fail", "undecided"}
