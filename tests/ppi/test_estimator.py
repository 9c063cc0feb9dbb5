"""The prediction-powered estimator against ppi_py (where conventions coincide) and hand-worked values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from scipy import stats

from webapp.ppi.estimator import (
    EstimatorError,
    Lambda,
    all_pass,
    estimate_difference,
    estimate_mean,
    estimate_mean_batch,
    folds,
    make_sample,
    pooled_lambda,
)

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
    @pytest.mark.parametrize(("seed", "n_labels"), [(1, 120), (2, 120), (3, 120), (8, 40)])
    def test_lambda_one_equals_ppi_py_and_student_t_widens_it(self, seed: int, n_labels: int) -> None:
        judge, human, drawn, pi = uniform_run(seed, n_labels=n_labels)
        sample = make_sample(judge=judge, human=human, drawn=drawn, pi=pi)
        est = estimate_mean(sample, lam=1.0, quantile_kind="normal", joint=False, estimand="superpopulation")
        low, high = ppi_py_interval(judge, human, drawn, lam=1)
        assert abs(est.low - low) < TOL and abs(est.high - high) < TOL
        assert abs(est.estimate - (low + high) / 2) < TOL
        t = estimate_mean(sample, lam=1.0, joint=False, estimand="superpopulation")  # the default Student t quantile
        ratio = stats.t.ppf(0.975, n_labels - 1) / stats.norm.ppf(0.975)
        assert t.df == n_labels - 1
        assert abs((t.high - t.low) - ratio * (high - low)) < TOL
        assert abs(t.estimate - (low + high) / 2) < TOL

    @pytest.mark.parametrize("seed", [4, 5, 6])
    def test_tuned_lambda_equals_ppi_py(self, seed: int) -> None:
        judge, human, drawn, pi = uniform_run(seed, bias=1.0)
        sample = make_sample(judge=judge, human=human, drawn=drawn, pi=pi)
        est = estimate_mean(sample, lam="pooled", quantile_kind="normal", joint=False, estimand="superpopulation")
        low, high = ppi_py_interval(judge, human, drawn)
        assert abs(est.low - low) < TOL and abs(est.high - high) < TOL
        assert abs(est.lambdas[0] - ppi_py_lambda(judge, human, drawn)) < TOL
        assert 0 < est.lambdas[0] < 1  # really tuned, not clipped

    def test_lambda_zero_is_the_human_only_interval(self) -> None:
        judge, human, drawn, pi = uniform_run(7)
        est = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=pi), lam=0.0, quantile_kind="normal", estimand="superpopulation")
        y = human[drawn]
        half = stats.norm.ppf(0.975) * y.std() / math.sqrt(y.shape[0])
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
        est = estimate_mean(sample, seed=5, quantile_kind="normal", joint=False, estimand="superpopulation")
        for k in (0, 1):
            other = fold != k
            assert abs(est.lambdas[k] - ppi_py_lambda(judge[other], human[other], drawn[other])) < TOL
        lam_i = np.asarray(est.lambdas)[fold]
        # Hand-worked estimate with the fold lambdas: mean of lambda*f plus mean over drawn of the residual.
        expected = np.mean(lam_i * judge) + np.mean(human[drawn] - lam_i[drawn] * judge[drawn])
        assert abs(est.estimate - expected) < TOL
        var = np.var(lam_i * judge) / judge.shape[0] + np.var(human[drawn] - lam_i[drawn] * judge[drawn]) / drawn.sum()
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
    @pytest.mark.parametrize("lam", ["crossfit", "pooled", 1.0])
    def test_batch_equals_one_by_one(self, lam: Lambda) -> None:
        rng = np.random.default_rng(17)
        rows, n = 6, 400
        truth = rng.normal(3.5, 1, (rows, n))
        judge = truth + 0.7 + rng.normal(0, 0.6, (rows, n))
        pi = rng.uniform(0.1, 0.4, (rows, n))
        drawn = rng.random((rows, n)) < pi
        drawn[0, :] = rng.random(n) < 0.1  # one row below 60 labels: lambda = 1
        human = np.where(drawn, truth, np.nan)
        batch = estimate_mean_batch(judge, human, drawn, pi, lam=lam, seed=3)
        for i in range(rows):
            one = estimate_mean(make_sample(judge=judge[i], human=human[i], drawn=drawn[i], pi=pi[i]), lam=lam, seed=3)
            assert abs(batch.estimate[i] - one.estimate) < 1e-9
            assert abs(batch.low[i] - one.low) < 1e-9 and abs(batch.high[i] - one.high) < 1e-9
            assert abs(batch.human_only_se[i] - one.human_only_se) < 1e-9
            assert np.allclose(batch.lambdas[i], np.resize(np.asarray(one.lambdas), 2), atol=1e-12, rtol=0)
        if lam == "crossfit":
            assert batch.lambdas[0].tolist() == [1.0, 1.0]
            assert np.all(batch.lambdas[1:] < 1.0)
