"""The anytime-valid call (issue 43): the confidence sequence against hand-worked values, and its error under peeking."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from webapp.ppi.anytime import MIN_GRADES, grades_to_decide, multiplier
from webapp.ppi.estimator import Estimate, estimate_mean, make_sample
from webapp.ppi.report import GateCall, decide

THRESHOLD = 3.5


def boundary(t_eff: float) -> float:
    """The multiplier solved independently: bisection with numpy on M(g) = 40, M written out term by term.

    M(g) = 0.9 exp(0.35 g - 0.35^2 t/2) + 0.1 x 2/sqrt(v) exp(rho^2 g^2/(2v)) Phi(rho g/sqrt(v)), v = 1 + rho^2 t,
    rho^2 = (2 ln 20 + ln(1 + 2 ln 20)) / 300; c = g / sqrt(t).
    """
    rho2 = (2 * np.log(20.0) + np.log(1 + 2 * np.log(20.0))) / 300
    v = 1 + rho2 * t_eff

    def m(g: float) -> float:
        with np.errstate(over="ignore"):
            linear = 0.9 * np.exp(0.35 * g - 0.35**2 * t_eff / 2)
            mixture = 0.1 * 2 / np.sqrt(v) * np.exp(rho2 * g * g / (2 * v)) * stats.norm.cdf(np.sqrt(rho2) * g / np.sqrt(v))
        return float(linear + mixture)

    low, high = 0.0, 1000.0
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if m(mid) < 40 else (low, mid)
    return (low + high) / 2 / float(np.sqrt(t_eff))


class TestMultiplier:
    def test_worked_by_hand_at_fifty_effective_grades(self) -> None:
        # c(50) = 2.75901: g = 2.75901 x sqrt(50) = 19.50918; linear part 0.9 exp(0.35 x 19.50918 - 0.06125 x 50)
        # = 0.9 exp(3.76571) = 38.8750; mixture part (kappa 7.93615, rho^2 = 0.0264538, v = 2.32269):
        # 0.1 x 2/sqrt(2.32269) x exp(0.0264538 x 380.608/4.64538) x Phi(0.162646 x 19.50918/1.52404)
        # = 0.131229 x exp(2.16743) x Phi(2.08203) = 0.131229 x 8.73673 x 0.981328 = 1.12510; together 40.000 = 1/(0.05/2)
        assert multiplier(50.0) == pytest.approx(2.75901, abs=1e-5)
        # the linear part alone brackets it: ln(40)/0.35 + 0.35 x 25 = 19.2897 (weight 1) and ln(40/0.9)/0.35 + 8.75 = 19.5906
        assert 19.2897 / math.sqrt(50) < multiplier(50.0) < 19.5906 / math.sqrt(50)
        # narrower than the 2.80 of the fixed design's 1.96 + 0.84 where runs 0.2-0.3 from the threshold decide
        assert multiplier(50.0) < 2.80 and multiplier(80.0) < 2.80
        for t in (5.0, 30.0, 250.0, 5000.0):
            assert multiplier(t) == pytest.approx(boundary(t), rel=1e-9)
            assert multiplier(t) > 1.96
        # the mixture part keeps the far looks decidable: the linear part alone would be 0.175 sqrt(t) wide at most
        assert multiplier(5000.0) < 4.5 < 0.175 * math.sqrt(5000.0)


def fixed_run() -> tuple[np.ndarray, np.ndarray, int]:
    """50 drafts, judge f and human y fixed; the first 35 graded."""
    i = np.arange(50)
    y = 1.0 + (i * 7 % 5)
    f = np.clip(y + np.where(i % 3 == 0, 1.0, 0.0) - np.where(i % 7 == 0, 1.0, 0.0), 1, 5)
    return f, y, 35


class TestSequenceOnFixedArrays:
    def test_bounds_equal_the_formula_worked_with_numpy(self) -> None:
        f, y, n = fixed_run()
        big_n = f.shape[0]
        drawn = np.arange(big_n) < n
        sample = make_sample(judge=f, human=np.where(drawn, y, np.nan), drawn=drawn, pi=np.full(big_n, n / big_n))
        # by hand: lambda = 1 below 60 grades; the run's estimate and its SRS standard error about the run's mean
        r = y[:n] - f[:n]
        est = (y[:n].sum() + f[n:].sum() + (big_n - n) * r.mean()) / big_n
        se = math.sqrt((1 - n / big_n) * r.var(ddof=1) / n)
        c = stats.t.isf(stats.norm.sf(boundary(n / (1 - n / big_n))), n - 1)  # read as Student's t with the same tail
        low, high = est - c * se, est + c * se
        # always-true bounds: the 15 ungraded drafts all at 1, or all at 5
        low, high = max(low, (y[:n].sum() + (big_n - n) * 1) / big_n), min(high, (y[:n].sum() + (big_n - n) * 5) / big_n)
        call = decide(sample, THRESHOLD, value_range=(1.0, 5.0))
        e = estimate_mean(sample)
        assert e.estimate == pytest.approx(est, abs=1e-12) and e.se == pytest.approx(se, abs=1e-12)
        assert (call.low, call.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
        assert call.grades == n
        # wider than this look's 95% interval
        assert call.low < e.low and call.high > e.high

    def test_a_call_from_the_estimate_equals_the_call_from_its_sample(self) -> None:
        """The gate and the page decide from the report's estimate, the run page's path from the sample: one figure."""
        # a pass share graded 1 on 33 of 38 drafts of 77: the always-true upper bound (the 39 ungraded all
        # passing, (33 + 39) / 77 = 93.5%) is below the sequence's own, so the cut binds (the demo's case)
        y = np.r_[np.ones(33), np.zeros(5), np.ones(39)]
        f = np.clip(y + np.where(np.arange(77) % 4 == 0, -0.5, 0.2), 0, 1)
        drawn = np.arange(77) < 38
        sample = make_sample(judge=f, human=np.where(drawn, y, np.nan), drawn=drawn, pi=np.full(77, 38 / 77))
        e = estimate_mean(sample)
        assert e.graded_sum == 33.0
        from_sample = decide(sample, 0.625, value_range=(0.0, 1.0))
        from_estimate = decide(e, 0.625, value_range=(0.0, 1.0))
        assert from_sample == from_estimate
        assert from_estimate.high == pytest.approx((33 + 39) / 77)

    def test_a_census_reads_the_mean_exactly(self) -> None:
        f, y, _ = fixed_run()
        everyone = np.ones(50, dtype=bool)
        call = decide(make_sample(judge=f, human=y, drawn=everyone, pi=np.full(50, 0.5)), y.mean() - 0.01, value_range=(1.0, 5.0))
        assert call.low == call.high == pytest.approx(y.mean())
        assert call.verdict == "pass" and call.grades == 50
        assert decide(make_sample(judge=f, human=y, drawn=everyone, pi=np.ones(50)), y.mean()).verdict == "fail"  # at the mean: not above

    def test_no_call_below_the_minimum_grades(self) -> None:
        f, y, _ = fixed_run()
        drawn = np.arange(50) < MIN_GRADES - 1
        y_high = np.full(50, 5.0)  # every graded draft a 5: one look's interval would say "passes"
        call = decide(make_sample(judge=f, human=y_high, drawn=drawn, pi=np.full(50, 0.4)), THRESHOLD, value_range=(1.0, 5.0))
        assert call.verdict == "undecided"
        # only the always-true bounds: (29 x 5 + 21 x 1)/50 = 3.32 to 5
        assert (call.low, call.high) == (pytest.approx(3.32), pytest.approx(5.0))

    def test_grades_to_decide_is_where_the_half_width_meets_the_distance(self) -> None:
        # se 0.1 from 100 of 1,000 graded: S^2 = 0.01 / (1/100 - 1/1000) = 1.1111; distance 0.2
        m = grades_to_decide(estimate=3.7, se=0.1, carriers=100, graded=100, drafts=1000, threshold=3.5)
        assert m is not None and m > 100

        def half(k: int) -> float:
            c = stats.t.isf(stats.norm.sf(boundary(k / (1 - k / 1000))), k - 1)
            return math.sqrt(0.01 / (1 / 100 - 1 / 1000)) * math.sqrt(1 / k - 1 / 1000) * c

        assert half(m) < 0.2 <= half(m - 1)
        # at 0.3 the 100 grades already decide: 0.1 x 2.9261 = 0.293 (tests/ppi/test_report.py works the multiplier)
        assert grades_to_decide(estimate=3.8, se=0.1, carriers=100, graded=100, drafts=1000, threshold=3.5) == 100
        est = Estimate(3.6, 3.4, 3.8, 0.1, 99, 0.95, (1.0,), 3.6, 1.0, 100, 1000)
        call = decide(est, THRESHOLD, pending=5)
        expected = grades_to_decide(estimate=3.6, se=0.1, carriers=100, graded=100, drafts=1000, threshold=THRESHOLD)
        assert expected is not None
        assert call == GateCall("undecided", expected - 100 - 5, provisional=True, low=call.low, high=call.high, grades=100)
        assert call.low == pytest.approx(est.estimate - 0.1 * stats.t.isf(stats.norm.sf(boundary(100 / 0.9)), 99))


def peeking_error(runs: int, *, drafts: int, upto: int, shift: float, seed: int, naive: bool) -> tuple[float, float]:
    """Share of runs ever called pass and ever called fail, grading in a random order and looking after every grade."""
    rng = np.random.default_rng(seed)
    passes = fails = 0
    for _ in range(runs):
        q = rng.normal(3.6, 1.0, drafts)
        y = np.clip(np.rint(q), 1, 5)
        y = y - y.mean() + THRESHOLD + shift  # the run's own mean sits at the threshold (+ shift)
        f = np.clip(np.rint(q + 0.5 + rng.normal(0, 0.8, drafts)), 1, 5)
        order = rng.permutation(drafts)
        ever_pass = ever_fail = False
        for n in range(MIN_GRADES, upto + 1):
            drawn = np.zeros(drafts, dtype=bool)
            drawn[order[:n]] = True
            sample = make_sample(judge=f, human=np.where(drawn, y, np.nan), drawn=drawn, pi=np.full(drafts, n / drafts))
            if naive:
                e = estimate_mean(sample)
                verdict = "pass" if e.low > THRESHOLD else "fail" if e.high <= THRESHOLD else "undecided"
            else:
                verdict = decide(sample, THRESHOLD).verdict
            ever_pass |= verdict == "pass"
            ever_fail |= verdict == "fail"
            if ever_pass or ever_fail:
                break
        passes += ever_pass
        fails += ever_fail
    return passes / runs, fails / runs


class TestErrorUnderPeeking:
    """200 simulated runs whose own mean is the threshold, looked at after every grade from 30 to 100 of 240 drafts."""

    def test_the_sequence_keeps_each_side_near_its_2_5_percent(self) -> None:
        wrong_pass, wrong_fail = peeking_error(200, drafts=240, upto=100, shift=0.0, seed=4, naive=False)
        # 2.5% of 200 is 5 runs; 12 would be 2.4 binomial sds above it
        assert wrong_pass <= 0.06 and wrong_fail <= 0.06

    def test_the_one_look_interval_does_not(self) -> None:
        # what the test guards against: the same looks read from one look's 95% interval
        wrong_pass, wrong_fail = peeking_error(200, drafts=240, upto=100, shift=0.0, seed=4, naive=True)
        assert wrong_pass + wrong_fail > 0.12

    def test_runs_clearly_above_are_called_pass(self) -> None:
        wrong_pass, wrong_fail = peeking_error(40, drafts=240, upto=240, shift=0.5, seed=5, naive=False)
        assert wrong_pass > 0.9 and wrong_fail == 0.0


class TestWorthFallback:
    """Issue 41 item 3: an estimate worth fewer grades than people gave is not what the gate reads."""

    def test_a_judge_that_hurts_gives_way_to_the_human_grades(self) -> None:
        from webapp.ppi.signals import choose

        rng = np.random.default_rng(3)
        y = np.clip(np.rint(rng.normal(3.6, 1.0, 300)), 1, 5)
        drawn = np.arange(300) < 40
        noise = rng.normal(0, 3.0, 300)  # a judge that carries nothing: lambda = 1 below 60 grades pays its noise
        sample = make_sample(judge=noise, human=np.where(drawn, y, np.nan), drawn=drawn, pi=np.full(300, 40 / 300))
        single = estimate_mean(sample)
        human = estimate_mean(sample, lam=0.0)
        assert single.effective_labels < 40  # worse than the 40 grades alone
        choice = choose(single, None, human)
        assert choice.source == "human" and choice.estimate is human and human.effective_labels == pytest.approx(40)
        # by hand: with lambda 0 the estimate is the graded mean and its se the SRS one
        assert human.estimate == pytest.approx(y[:40].mean()) and human.se == pytest.approx(np.sqrt((1 - 40 / 300) * y[:40].var(ddof=1) / 40))
        assert choice.note is not None and "fewer than the 40 people gave" in choice.note
        good = make_sample(judge=y + rng.normal(0, 0.3, 300), human=np.where(drawn, y, np.nan), drawn=drawn, pi=np.full(300, 40 / 300))
        assert choose(estimate_mean(good), None, estimate_mean(good, lam=0.0)).source == "single"  # a judge that helps stays
