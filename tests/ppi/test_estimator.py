"""The prediction-powered estimator against ppi_py (where conventions coincide) and hand-worked values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from scipy import stats

from benchmarks.ppi_batch import estimate_mean_batch
from tests.ppi.ppi_conventions import ppi_py_mean_ci
from webapp.ppi.estimator import (
    Estimand,
    EstimatorError,
    Lambda,
    all_pass,
    estimate_difference,
    estimate_mean,
    folds,
    make_sample,
    pooled_lambda,
)
from webapp.ppi.report import decide

TOL = 1e-10


def uniform_run(seed: int, *, n_drafts: int = 1000, n_labels: int = 120, bias: float = 0.4):
    """Return judge scores for all drafts, human labels, the drawn mask (exactly n_labels) and pi = n/N."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(3.8, 0.8, n_drafts)
    judge = truth + bias + rng.normal(0, 0.5, n_drafts)
    drawn = np.zeros(n_drafts, dtype=bool)
    drawn[rng.choice(n_drafts, n_labels, replace=False)] = True
    human = np.where(drawn, truth, np.nan)
    pi = np.full(n_drafts, n_labels / n_drafts)
    return judge, human, drawn, pi


def ppi_py_interval(judge, human, drawn, lam=None):
    """Return ppi_py's 95% interval with the drawn drafts labelled and all drafts unlabelled."""
    low, high = ppi_mean_ci(human[drawn], judge[drawn], judge, alpha=0.05, lam=lam)
    return float(np.ravel(low)[0]), float(np.ravel(high)[0])


def ppi_py_lambda(judge, human, drawn) -> float:
    """Recover ppi_py's tuned lambda from its public point estimate (it is linear in lambda)."""
    est = float(np.ravel(ppi_mean_pointestimate(human[drawn], judge[drawn], judge))[0])
    return (est - human[drawn].mean()) / (judge.mean() - judge[drawn].mean())


class TestAgainstPpiPy:
    """ppi_py's conventions (tests/ppi/ppi_conventions.py, from the estimator's parts) against ppi_py itself."""

    @pytest.mark.parametrize(("seed", "n_labels"), [(1, 120), (2, 120), (3, 120), (8, 40)])
    def test_lambda_one_equals_ppi_py_and_ours_adds_the_covariance_and_student_t(self, seed: int, n_labels: int) -> None:
        judge, human, drawn, pi = uniform_run(seed, n_labels=n_labels)
        sample = make_sample(judge=judge, human=human, drawn=drawn, pi=pi)
        ours_as_ppi_py = ppi_py_mean_ci(sample, lam=1.0)
        low, high = ppi_py_interval(judge, human, drawn, lam=1)
        assert abs(ours_as_ppi_py.low - low) < TOL and abs(ours_as_ppi_py.high - high) < TOL
        assert abs(ours_as_ppi_py.estimate - (low + high) / 2) < TOL
        # The production estimate: same point, ppi_py's variance plus the covariance term, Student t quantile.
        t = estimate_mean(sample, lam=1.0, estimand="superpopulation")
        n_all, n = judge.shape[0], n_labels
        r = human[drawn] - judge[drawn]
        cross = 2 * np.sum((judge[drawn] - judge.mean()) * (r - r.mean())) / (n_all * n)
        ppi_py_se = (high - low) / (2 * stats.norm.ppf(0.975))
        assert t.df == n_labels - 1
        assert abs(t.se - math.sqrt(ppi_py_se**2 + cross)) < TOL
        assert abs((t.high - t.low) / 2 - stats.t.ppf(0.975, n_labels - 1) * t.se) < TOL
        assert abs(t.estimate - (low + high) / 2) < TOL

    @pytest.mark.parametrize("seed", [4, 5, 6])
    def test_tuned_lambda_equals_ppi_py(self, seed: int) -> None:
        judge, human, drawn, pi = uniform_run(seed, bias=1.0)
        est = ppi_py_mean_ci(make_sample(judge=judge, human=human, drawn=drawn, pi=pi), lam="pooled")
        low, high = ppi_py_interval(judge, human, drawn)
        assert abs(est.low - low) < TOL and abs(est.high - high) < TOL
        assert abs(est.lam - ppi_py_lambda(judge, human, drawn)) < TOL
        assert 0 < est.lam < 1  # really tuned, not clipped

    def test_lambda_zero_is_the_human_only_interval(self) -> None:
        judge, human, drawn, pi = uniform_run(7)
        est = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=pi), lam=0.0, estimand="superpopulation")
        y = human[drawn]
        half = stats.t.ppf(0.975, y.shape[0] - 1) * y.std() / math.sqrt(y.shape[0])
        assert abs(est.low - (y.mean() - half)) < TOL and abs(est.high - (y.mean() + half)) < TOL


class TestCrossFit:
    def test_below_sixty_labels_lambda_is_one(self) -> None:
        judge, human, drawn, pi = uniform_run(9, n_labels=59, bias=1.0)
        est = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=pi))
        assert est.lambdas == (1.0,)

    def test_each_fold_uses_ppi_py_lambda_of_the_other_fold(self) -> None:
        judge, human, drawn, pi = uniform_run(10, n_labels=200, bias=0.8)
        sample = make_sample(judge=judge, human=human, drawn=drawn, pi=pi)
        fold = folds(sample, seed=5)
        est = estimate_mean(sample, seed=5, estimand="superpopulation")
        for k in (0, 1):
            other = fold != k
            assert abs(est.lambdas[k] - ppi_py_lambda(judge[other], human[other], drawn[other])) < TOL
        lam_i = np.asarray(est.lambdas)[fold]
        # Hand-worked estimate with the fold lambdas: mean of lambda*f plus mean over drawn of the residual.
        expected = np.mean(lam_i * judge) + np.mean(human[drawn] - lam_i[drawn] * judge[drawn])
        assert abs(est.estimate - expected) < TOL
        g, r = lam_i * judge, human[drawn] - lam_i[drawn] * judge[drawn]
        n_all, n = judge.shape[0], int(drawn.sum())
        cross = 2 * np.sum((g[drawn] - g.mean()) * (r - r.mean())) / (n_all * n)
        var = np.var(g) / n_all + np.var(r) / n + cross
        assert abs(est.se - math.sqrt(var)) < TOL

    def test_joint_variance_adds_the_covariance_of_the_drawn_drafts(self) -> None:
        judge, human, drawn, pi = uniform_run(18, n_drafts=300, n_labels=150, bias=0.8)
        sample = make_sample(judge=judge, human=human, drawn=drawn, pi=pi)
        est = estimate_mean(sample, lam=0.5, estimand="superpopulation")
        g, n_all, n = 0.5 * judge, 300, 150
        r = human[drawn] - g[drawn]
        # var(g)/N + var(r)/n + 2 cov_drawn(g - mean_all(g), r - rbar) / (N n)
        cross = 2 * np.sum((g[drawn] - g.mean()) * (r - r.mean())) / (n_all * n)
        expected = np.var(g) / n_all + np.var(r) / n + cross
        assert abs(est.se - math.sqrt(expected)) < TOL
        assert cross > 0  # lambda 0.5 is below cov(Y, f)/var(f): ignoring it would narrow the interval

    def test_folds_split_tickets_in_half_and_keep_a_ticket_together(self) -> None:
        cluster = np.repeat(np.arange(50), 3)
        sample = make_sample(judge=np.ones(150), human=np.ones(150), drawn=np.ones(150, bool), pi=np.ones(150), cluster=cluster)
        fold = folds(sample, seed=3)
        assert fold.sum() == 75
        assert all(len(set(fold[cluster == c])) == 1 for c in range(50))
        assert not np.array_equal(fold, folds(sample, seed=4))

    def test_lambda_is_clipped_to_zero_for_an_anti_correlated_judge(self) -> None:
        rng = np.random.default_rng(11)
        truth = rng.normal(3, 1, 400)
        judge = -truth + rng.normal(0, 0.1, 400)
        drawn = np.arange(400) < 100
        sample = make_sample(judge=judge, human=np.where(drawn, truth, np.nan), drawn=drawn, pi=np.full(400, 0.25))
        assert pooled_lambda(sample) == 0.0
        assert estimate_mean(sample).lambdas == (0.0, 0.0)


class TestUnequalProbabilities:
    def test_hand_worked_weighted_estimate(self) -> None:
        # Five drafts; drafts 0, 2, 3 drawn with pi 0.5, 1.0, 0.25 (weights 2, 1, 4; normalised 2/7, 1/7, 4/7).
        judge = np.array([4.0, 3.0, 5.0, 2.0, 4.0])
        human = np.array([3.0, np.nan, 5.0, 1.0, np.nan])
        drawn = np.array([True, False, True, True, False])
        pi = np.array([0.5, 0.4, 1.0, 0.25, 0.6])
        est = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=pi), lam=1.0, estimand="superpopulation")
        # residuals Y - f: -1, 0, -1 -> weighted mean (2*-1 + 1*0 + 4*-1)/7 = -6/7; judge mean 18/5.
        assert abs(est.estimate - (18 / 5 - 6 / 7)) < TOL
        judge_var = np.sum((judge - 3.6) ** 2) / 25
        d = np.array([2, 1, 4]) / 7
        centred = np.array([-1.0, 0.0, -1.0]) + 6 / 7
        rect_var = np.sum(d**2 * centred**2)
        cross = 2 * np.sum(np.array([0.4, 1.4, -1.6]) / 5 * d * centred)  # drawn f 4, 5, 2 less 3.6, over N
        assert abs(est.se - math.sqrt(judge_var + rect_var + cross)) < TOL
        # Kish: (2 + 1 + 4)^2 / (4 + 1 + 16) = 49/21 effective drafts; df = 49/21 - 1 = 4/3.
        assert abs(est.df - 4 / 3) < TOL
        assert abs(est.high - est.estimate - stats.t.ppf(0.975, 4 / 3) * est.se) < TOL

    def test_the_drawn_count_does_not_enter_the_estimate_under_uniform_pi(self) -> None:
        judge, human, drawn, _ = uniform_run(12, n_labels=90)
        a = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=np.full(1000, 0.1)), lam=1.0)
        b = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=np.full(1000, 0.09)), lam=1.0)
        assert abs(a.estimate - b.estimate) < TOL and abs(a.se - b.se) < TOL


class TestClusters:
    def test_cluster_robust_variance_sums_within_a_ticket(self) -> None:
        # Four drafts on two tickets, all drawn, pi = 1, lambda = 0: the human-only mean of 1, 3, 2, 6.
        human = np.array([1.0, 3.0, 2.0, 6.0])
        sample = make_sample(judge=np.zeros(4), human=human, drawn=np.ones(4, bool), pi=np.ones(4), cluster=["a", "a", "b", "b"])
        est = estimate_mean(sample, lam=0.0, estimand="superpopulation")
        # influence (y - 3)/4 summed per ticket: a -> (-2 + 0)/4, b -> (-1 + 3)/4.
        assert abs(est.se - math.sqrt((0.5) ** 2 + (0.5) ** 2)) < TOL
        assert est.df == 1

    def test_correlated_drafts_of_a_ticket_widen_the_interval(self) -> None:
        rng = np.random.default_rng(13)
        ticket = np.repeat(np.arange(100), 4)
        truth = np.repeat(rng.normal(3.5, 1.0, 100), 4) + rng.normal(0, 0.2, 400)
        judge = truth + 0.5 + rng.normal(0, 0.3, 400)
        drawn = np.isin(ticket, rng.choice(100, 30, replace=False))
        kwargs = dict(judge=judge, human=np.where(drawn, truth, np.nan), drawn=drawn, pi=np.full(400, 0.3))
        clustered = estimate_mean(make_sample(**kwargs, cluster=ticket), lam=1.0, estimand="superpopulation")
        naive = estimate_mean(make_sample(**kwargs), lam=1.0, estimand="superpopulation")
        assert clustered.se > 1.5 * naive.se
        assert clustered.df == 29


class TestDifference:
    def test_difference_of_two_runs_on_the_same_tickets(self) -> None:
        human_a = np.array([4.0, 5.0, 3.0])
        human_b = np.array([3.0, 5.0, 1.0])
        ones = np.ones(3, bool)
        a = make_sample(judge=np.zeros(3), human=human_a, drawn=ones, pi=np.ones(3))
        b = make_sample(judge=np.zeros(3), human=human_b, drawn=ones, pi=np.ones(3))
        diff = estimate_difference(a, b, a_cluster_keys=["t1", "t2", "t3"], b_cluster_keys=["t1", "t2", "t3"], lam=0.0, estimand="superpopulation")
        assert abs(diff.estimate - 1.0) < TOL
        # paired: per-ticket differences 1, 0, 2 -> influence (d - 1)/3 -> se = sqrt(2)/3.
        assert abs(diff.se - math.sqrt(2) / 3) < TOL
        assert abs(diff.high - 1.0 - stats.t.ppf(0.975, 2) * math.sqrt(2) / 3) < TOL

    def test_unrelated_tickets_add_the_variances(self) -> None:
        judge, human, drawn, pi = uniform_run(14)
        judge2, human2, drawn2, pi2 = uniform_run(15)
        a = make_sample(judge=judge, human=human, drawn=drawn, pi=pi)
        b = make_sample(judge=judge2, human=human2, drawn=drawn2, pi=pi2)
        diff = estimate_difference(a, b, a_cluster_keys=np.arange(1000), b_cluster_keys=np.arange(1000, 2000), lam=1.0)
        assert abs(diff.se - math.hypot(diff.a.se, diff.b.se)) < TOL


class TestPassRateAndInput:
    def test_zero_one_labels_get_the_two_pseudo_residual_guard(self) -> None:
        # Ten drafts, all drawn (pi = 1), judge 1 everywhere, humans fail two: residuals 0 x8, -1 x2.
        human = np.array([1.0] * 8 + [0.0] * 2)
        sample = make_sample(judge=np.ones(10), human=human, drawn=np.ones(10, bool), pi=np.ones(10))
        est = estimate_mean(sample, lam=1.0, estimand="superpopulation")
        assert abs(est.estimate - 0.8) < TOL
        # sum (r - rbar)^2 = 8 * 0.2^2 + 2 * 0.8^2 = 1.6; guarded: (1.6 + 2) / (10 * 12); judge part 0.
        assert abs(est.se - math.sqrt(3.6 / 120)) < TOL
        unguarded = estimate_mean(sample, lam=1.0, guard=False, estimand="superpopulation")
        assert abs(unguarded.se - math.sqrt(1.6 / 100)) < TOL

    def test_all_pass_needs_every_criterion(self) -> None:
        got = all_pass([1, 1, 0, 1], [[3, 3, 3], [5, 2, 5], [5, 5, 5], [4, 4, 3]], [3, 3, 3])
        assert got.tolist() == [1.0, 0.0, 0.0, 1.0]

    def test_effective_labels_grow_with_a_good_judge(self) -> None:
        judge, human, drawn, pi = uniform_run(16, n_labels=150, bias=0.3)
        est = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=pi))
        assert est.effective_labels > 150
        assert abs(est.bias - (est.judge_alone - est.estimate)) < TOL

    @pytest.mark.parametrize(
        ("field", "kwargs"),
        [
            ("pi", {"pi": [0.5, 0.0, 0.5]}),
            ("pi", {"pi": [0.5, 1.5, 0.5]}),
            ("human", {"human": [np.nan, 1.0, 1.0]}),
            ("drawn", {"drawn": [False, False, False]}),
            ("cluster", {"cluster": [1, 2]}),
            ("judge", {"judge": [1.0, np.nan, 2.0]}),
        ],
    )
    def test_bad_input_names_the_field(self, field: str, kwargs: dict) -> None:
        base = {"judge": [1.0, 2.0, 3.0], "human": [1.0, 2.0, 3.0], "drawn": [True, True, False], "pi": [0.5, 0.5, 0.5]}
        with pytest.raises(EstimatorError, match=f"^{field}:"):
            make_sample(**{**base, **kwargs})


class TestBatch:
    @pytest.mark.parametrize("estimand", ["run", "superpopulation"])
    @pytest.mark.parametrize("lam", ["crossfit", 1.0, 0.0])
    def test_batch_equals_one_by_one(self, lam: Lambda, estimand: Estimand) -> None:
        rng = np.random.default_rng(17)
        rows, n = 6, 400
        truth = rng.normal(3.5, 1, (rows, n))
        judge = truth + 0.7 + rng.normal(0, 0.6, (rows, n))
        pi = rng.uniform(0.1, 0.4, (rows, n))
        drawn = rng.random((rows, n)) < pi
        drawn[0, :] = rng.random(n) < 0.1  # one row below 60 labels: lambda = 1
        pi[1, :150] = 1.0  # one row with 150 forced drafts
        drawn[1, :150] = True
        drawn[2, :] = True  # a census (width 0 about the run)
        pi[3, :] = 1.0  # every draft forced, some still ungraded: the degenerate case
        drawn[3, :] = rng.random(n) < 0.7
        human = np.where(drawn, truth, np.nan)
        batch = estimate_mean_batch(judge, human, drawn, pi, lam=lam, seed=3, estimand=estimand)
        for i in range(rows):
            sample = make_sample(judge=judge[i], human=human[i], drawn=drawn[i], pi=pi[i])
            one = estimate_mean(sample, lam=lam, seed=3, estimand=estimand)
            assert batch.df[i] == pytest.approx(one.df, abs=1e-9)
            assert abs(batch.se[i] - one.se) < 1e-9
            assert abs(batch.estimate[i] - one.estimate) < 1e-9
            assert abs(batch.low[i] - one.low) < 1e-9 and abs(batch.high[i] - one.high) < 1e-9
            assert abs(batch.human_only_se[i] - one.human_only_se) < 1e-9
            assert np.allclose(batch.lambdas[i], np.resize(np.asarray(one.lambdas), 2), atol=1e-12, rtol=0)
        if lam == "crossfit":
            assert batch.lambdas[0].tolist() == [1.0, 1.0]
            assert np.all(batch.lambdas[1:] < 1.0)
        if estimand == "run":
            assert batch.low[2] == batch.high[2] == pytest.approx(truth[2].mean(), abs=1e-12)

    @pytest.mark.parametrize("values", ["grades", "passes"])
    def test_batch_equals_one_by_one_with_the_pass_rate_guard(self, values: str) -> None:
        rng = np.random.default_rng(19)
        rows, n = 4, 300
        truth = rng.normal(3.5, 1, (rows, n))
        judge = truth + 0.5 + rng.normal(0, 0.6, (rows, n))
        if values == "passes":
            truth, judge = (truth >= 3).astype(float), (judge >= 3).astype(float)
        pi = np.where(np.arange(n) < 100, 1.0, 0.08)
        pi = np.broadcast_to(pi, (rows, n)).copy()
        drawn = rng.random((rows, n)) < pi
        human = np.where(drawn, truth, np.nan)
        batch = estimate_mean_batch(judge, human, drawn, pi, seed=2)
        for i in range(rows):
            one = estimate_mean(make_sample(judge=judge[i], human=human[i], drawn=drawn[i], pi=pi[i]), seed=2)
            assert abs(batch.low[i] - one.low) < 1e-9 and abs(batch.high[i] - one.high) < 1e-9


class TestRunEstimand:
    """Issue 34: by default the interval is about the run's own N drafts (the finite population)."""

    def test_a_census_of_100_grades_is_the_observed_mean_with_width_zero_and_decides(self) -> None:
        # Tone of a run whose 100 drafts are all graded (forced, pi = 1), mean 3.70 (the example).
        human = np.array([4.0] * 50 + [5.0] * 10 + [3.0] * 30 + [2.0] * 10)  # (200 + 50 + 90 + 20) / 100 = 3.60
        human[:10] = 5.0  # ten of the fours become fives: 3.60 + 10/100 = 3.70
        judge = np.clip(human + 1.0, 1, 5)  # a generous judge: its +bias must not move a census
        sample = make_sample(judge=judge, human=human, drawn=np.ones(100, bool), pi=np.ones(100))
        est = estimate_mean(sample)
        assert est.estimate == pytest.approx(3.70, abs=1e-12)
        assert est.low == est.high == est.estimate and est.se == 0.0
        assert f"{est.estimate:.2f} [{est.low:.2f}, {est.high:.2f}]" == "3.70 [3.70, 3.70]"
        assert decide(est, 3.5).verdict == "pass"  # before issue 34: "undecided" forever
        # The superpopulation option still reads the 100 drafts as a sample of drafts like these.
        sp = estimate_mean(sample, estimand="superpopulation")
        assert sp.estimand == "superpopulation" and sp.high - sp.low > 0.1 and est.estimand == "run"

    def test_a_census_drawn_by_chance_at_pi_below_one_is_exact_too(self) -> None:
        human = np.array([3.0, 4.0, 2.0, 5.0, 4.0, 3.0])
        sample = make_sample(judge=human + 0.5, human=human, drawn=np.ones(6, bool), pi=[0.5, 0.2, 1.0, 0.7, 0.9, 0.3])
        est = estimate_mean(sample)
        assert est.estimate == pytest.approx(21 / 6, abs=1e-12) and est.low == est.high == est.estimate

    def test_hand_worked_six_drafts_three_drawn(self) -> None:
        # N = 6, lambda = 1. Drawn: drafts 0, 2, 3 with pi 0.5, 1.0, 0.25; undrawn 1, 4, 5 (pi 0.4, 0.6, 0.5).
        judge = np.array([4.0, 3.0, 5.0, 2.0, 4.0, 3.0])
        human = np.array([3.0, np.nan, 5.0, 2.0, np.nan, np.nan])
        drawn = np.array([True, False, True, True, False, False])
        pi = np.array([0.5, 0.4, 1.0, 0.25, 0.6, 0.5])
        est = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=pi), lam=1.0)
        # residuals r = Y - f: -1, 0, 0. v = (1 - pi)/pi: 1, 0, 3 (the forced draft 2 stands only for itself),
        # so q = v / 4 = 1/4, 0, 3/4 and rt = (1 * -1 + 3 * 0) / 4 = -0.25.
        # theta = (graded 3 + 5 + 2  +  undrawn judge 3 + 4 + 3  +  3 undrawn x rt) / 6 = (10 + 10 - 0.75) / 6.
        assert est.estimate == pytest.approx(19.25 / 6, abs=TOL)
        # u = r - rt: -0.75, (0.25), 0.25; share unobserved 3/6 = 0.5.
        # clustered term: 0.5^2 * ((1/4 * -0.75)^2 + (3/4 * 0.25)^2) = 0.25 * 0.0703125 = 0.017578125
        # undrawn spread: 0.5 / 6 * (1/4 * 0.5625 + 3/4 * 0.0625) = 0.1875 / 12 = 0.015625
        # Kish on v of the drafts drawn at pi < 1: (1 + 3)^2 / (1 + 9) = 1.6; small-sample factor 1.6 / 0.6 = 8/3.
        variance = 8 / 3 * (0.017578125 + 0.015625)
        assert est.se == pytest.approx(math.sqrt(variance), abs=TOL)
        assert est.df == 1.0  # Kish 1.6 - 1 = 0.6, raised to the floor of 1
        assert est.high - est.estimate == pytest.approx(stats.t.ppf(0.975, 1) * math.sqrt(variance), abs=TOL)

    def test_uniform_pi_gives_the_simple_random_sampling_variance(self) -> None:
        judge, human, drawn, pi = uniform_run(21, n_drafts=400, n_labels=100)
        est = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=pi), lam=1.0)
        r = human[drawn] - judge[drawn]
        # the textbook (1 - n/N) s^2 / n, s^2 with ddof 1; the estimate is the superpopulation's (Hajek) one
        assert est.se == pytest.approx(math.sqrt((1 - 100 / 400) * r.var(ddof=1) / 100), abs=TOL)
        sp = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=pi), lam=1.0, estimand="superpopulation")
        assert est.estimate == pytest.approx(sp.estimate, abs=TOL) and est.df == sp.df == 99

    def test_width_shrinks_as_more_of_the_run_is_drawn(self) -> None:
        rng = np.random.default_rng(22)
        n_all = 300
        truth = rng.normal(3.6, 0.9, n_all)
        judge = truth + 0.4 + rng.normal(0, 0.5, n_all)
        uniform = rng.random(n_all)  # nested draws: a draft drawn at pi is drawn at every larger pi
        widths = []
        for share in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
            drawn = uniform < share
            sample = make_sample(judge=judge, human=np.where(drawn, truth, np.nan), drawn=drawn, pi=np.full(n_all, share))
            widths.append(estimate_mean(sample).high - estimate_mean(sample).low)
        assert all(a > b for a, b in zip(widths, widths[1:], strict=False)), widths
        assert widths[-1] == 0.0

    def test_df_is_kish_effective_size_minus_one_on_unequal_pi(self) -> None:
        rng = np.random.default_rng(23)
        n_all = 600
        truth = rng.normal(3.5, 1.0, n_all)
        judge = truth + 0.5 + rng.normal(0, 0.6, n_all)
        pi = np.where(np.arange(n_all) < 200, 1.0, np.where(np.arange(n_all) % 2 == 0, 0.05, 0.2))  # 200 forced
        drawn = rng.random(n_all) < pi
        sample = make_sample(judge=judge, human=np.where(drawn, truth, np.nan), drawn=drawn, pi=pi)
        est = estimate_mean(sample)
        # run: the drafts drawn at pi < 1, weighted by the undrawn drafts each stands for, v = 1/pi - 1 (19 or 4)
        v = ((1 - pi) / pi)[drawn & (pi < 1)]
        assert est.df == pytest.approx(v.sum() ** 2 / np.sum(v**2) - 1, abs=TOL)
        assert est.df < drawn[200:].sum() - 1  # fewer than the sampled drafts; the 200 forced ones add none
        assert est.high - est.estimate == pytest.approx(stats.t.ppf(0.975, est.df) * est.se, abs=TOL)
        sp = estimate_mean(sample, estimand="superpopulation")
        w = 1 / pi[drawn]
        assert sp.df == pytest.approx(w.sum() ** 2 / np.sum(w**2) - 1, abs=TOL)

    def test_drawn_drafts_at_pi_one_add_no_variance(self) -> None:
        judge, human, drawn, pi = uniform_run(24, n_drafts=300, n_labels=60)
        forced = np.zeros(300, bool)
        forced[:40] = True  # 40 more drafts, forced: graded, pi = 1
        human = np.where(forced, judge - 0.4, human)
        base = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn & ~forced, pi=np.where(forced, 1.0, pi)), lam=1.0)
        more = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn | forced, pi=np.where(forced, 1.0, pi)), lam=1.0)
        assert more.se < base.se  # they are known exactly, so the unknown share of the run is smaller

    def test_the_degenerate_case_reads_the_graded_drafts_as_a_uniform_sample(self) -> None:
        # Every draft forced (pi = 1), two still waiting for grades: the eight graded stand for the run (pi = 8/10).
        human = np.array([4.0, 3.0, 5.0, 4.0, 2.0, 4.0, 3.0, 5.0, np.nan, np.nan])
        judge = np.full(10, 4.0)
        drawn = ~np.isnan(human)
        est = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=np.ones(10)), lam=1.0)
        same = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=np.full(10, 0.8)), lam=1.0)
        assert est.estimate == pytest.approx(same.estimate, abs=TOL) and est.se == pytest.approx(same.se, abs=TOL)
        assert est.se > 0

    def test_difference_defaults_to_the_superpopulation_and_can_read_the_runs(self) -> None:
        ones = np.ones(3, bool)
        a = make_sample(judge=np.zeros(3), human=np.array([4.0, 5.0, 3.0]), drawn=ones, pi=np.ones(3))
        b = make_sample(judge=np.zeros(3), human=np.array([3.0, 5.0, 1.0]), drawn=ones, pi=np.ones(3))
        keys = dict(a_cluster_keys=["t1", "t2", "t3"], b_cluster_keys=["t1", "t2", "t3"], lam=0.0)
        assert estimate_difference(a, b, **keys).se == pytest.approx(math.sqrt(2) / 3, abs=TOL)  # type: ignore[arg-type]
        runs = estimate_difference(a, b, **keys, estimand="run")  # type: ignore[arg-type]
        assert runs.estimate == pytest.approx(1.0, abs=TOL) and runs.low == runs.high == runs.estimate
