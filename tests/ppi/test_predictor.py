"""The learned predictor (issue 35): Cross-PPI against ppi_py, one column unchanged, honest cross-fitting, noise signals."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray
from ppi_py import crossppi_mean_ci
from sklearn.linear_model import Ridge

from tests.ppi.ppi_conventions import crossppi_interval
from webapp.ppi.estimator import (
    EstimatorError,
    Sample,
    estimate_difference,
    estimate_from_predictions,
    estimate_mean,
    make_sample,
)
from webapp.ppi.predictor import PENALTY_GRID, cross_fit, fit_predictor, out_of_fold_r_squared

TOL = 1e-9


def signal_run(seed: int, *, n_drafts: int = 1200, n_labels: int = 150, noise: bool = False):
    """Return (signals (N, 3), human, drawn, pi, groups, truth): judge A (mean of calls), judge B, A's spread."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(3.6, 1.0, n_drafts)
    groups = rng.integers(0, 4, n_drafts)
    lasting = rng.normal(0, 0.6, n_drafts) + 0.2 * groups
    a = truth + 0.4 + lasting + rng.normal(0, 0.3, n_drafts)
    b = truth + 0.3 * lasting + rng.normal(0, 0.7, n_drafts)
    spread = np.abs(rng.normal(0, 0.3, n_drafts))
    signals = np.column_stack([a, b, spread])
    if noise:
        signals = rng.normal(0, 1, (n_drafts, 3))
    drawn = np.zeros(n_drafts, dtype=bool)
    drawn[rng.choice(n_drafts, n_labels, replace=False)] = True
    pi = np.full(n_drafts, n_labels / n_drafts)
    return signals, np.where(drawn, truth, np.nan), drawn, pi, groups, truth


def given_fold_models(sample: Sample, k: int, seed: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return (oof, N x K predictions) of k arbitrary fixed linear models, folds dealt at random."""
    rng = np.random.default_rng(seed)
    assert sample.signals is not None
    coefs = rng.normal(0.5, 0.3, (k, sample.signals.shape[1]))
    preds = 1.0 + sample.signals @ coefs.T
    fold = rng.integers(0, k, sample.n_drafts)
    return preds[np.arange(sample.n_drafts), fold], preds


class TestAgainstPpiPyCrossPpi:
    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_fold_models_given_equal_crossppi_mean_ci(self, seed: int) -> None:
        signals, human, drawn, pi, _, _ = signal_run(seed)
        sample = make_sample(judge=signals, human=human, drawn=drawn, pi=pi)
        oof, preds = given_fold_models(sample, 5, seed)
        ours = crossppi_interval(sample, oof, preds)
        estimate, low, high = ours.estimate, ours.low, ours.high
        ppi_low, ppi_high = crossppi_mean_ci(human[drawn], oof[drawn], preds, alpha=0.05)
        assert abs(low - float(np.ravel(ppi_low)[0])) < TOL and abs(high - float(np.ravel(ppi_high)[0])) < TOL
        assert abs(estimate - (low + high) / 2) < TOL

    def test_the_estimators_own_cross_fit_equals_crossppi_mean_ci(self) -> None:
        signals, human, drawn, pi, groups, _ = signal_run(4)
        sample = make_sample(judge=signals, human=human, drawn=drawn, pi=pi, groups=groups)
        fit = cross_fit(sample, folds=5, seed=4)
        ours = crossppi_interval(sample, fit.oof, fit.fold_predictions)
        low, high = ours.low, ours.high
        ppi_low, ppi_high = crossppi_mean_ci(human[drawn], fit.oof[drawn], fit.fold_predictions, alpha=0.05)
        assert abs(low - float(np.ravel(ppi_low)[0])) < TOL and abs(high - float(np.ravel(ppi_high)[0])) < TOL

    def test_given_predictions_with_lambda_one_read_the_out_of_fold_prediction_for_drawn_drafts(self) -> None:
        signals, human, drawn, pi, _, _ = signal_run(5, n_drafts=400, n_labels=100)
        sample = make_sample(judge=signals, human=human, drawn=drawn, pi=pi)
        oof, preds = given_fold_models(sample, 4, 5)
        est = estimate_from_predictions(sample, oof=oof, fold_predictions=preds, lam=1.0, estimand="superpopulation")
        h = np.where(drawn, oof, preds.mean(axis=1))
        r = human[drawn] - oof[drawn]
        expected = h.mean() + np.mean(r)
        cross = 2 * np.sum((h[drawn] - h.mean()) * (r - r.mean())) / (400 * 100)  # the covariance term
        se = np.sqrt(np.var(h) / 400 + np.var(r) / 100 + cross)
        assert abs(est.estimate - expected) < 1e-12 and abs(est.se - se) < 1e-12
        assert est.predictor == "given"


class TestOneColumn:
    @pytest.mark.parametrize("seed", [6, 7, 8])
    @pytest.mark.parametrize("estimand", ["run", "superpopulation"])
    def test_one_column_is_todays_estimate(self, seed: int, estimand) -> None:
        signals, human, drawn, pi, groups, _ = signal_run(seed, n_labels=40 + 30 * (seed - 6))
        today = estimate_mean(make_sample(judge=signals[:, 0], human=human, drawn=drawn, pi=pi), estimand=estimand)
        for judge in (signals[:, :1], signals[:, 0]):
            one = estimate_mean(make_sample(judge=judge, human=human, drawn=drawn, pi=pi, groups=groups), estimand=estimand)
            assert one == today
            assert one.r_squared is None and one.predictor == "judge"


class TestCrossFitting:
    def test_no_drawn_draft_prediction_used_its_own_label(self) -> None:
        signals, human, drawn, pi, groups, _ = signal_run(9, n_drafts=600, n_labels=120)
        sample = make_sample(judge=signals, human=human, drawn=drawn, pi=pi, groups=groups)
        before = cross_fit(sample, folds=5, seed=2)
        i = int(np.flatnonzero(drawn)[7])
        moved = human.copy()
        moved[i] += 3.0
        after = cross_fit(make_sample(judge=signals, human=moved, drawn=drawn, pi=pi, groups=groups), folds=5, seed=2)
        own = before.fold[i]
        same_fold = drawn & (before.fold == own)
        assert np.array_equal(after.fold, before.fold)
        assert np.array_equal(after.oof[same_fold], before.oof[same_fold])  # i's own prediction included
        assert np.array_equal(after.fold_predictions[:, own], before.fold_predictions[:, own])
        others = drawn & (before.fold != own)
        assert np.all(after.oof[others] != before.oof[others])
        assert not np.any(np.isclose(after.fold_predictions[:, np.arange(5) != own], before.fold_predictions[:, np.arange(5) != own], rtol=0, atol=1e-15).all(axis=0))

    def test_folds_keep_a_ticket_together_and_balance_tickets(self) -> None:
        signals, human, drawn, pi, _, _ = signal_run(10, n_drafts=600, n_labels=120)
        cluster = np.arange(600) // 3
        fit = cross_fit(make_sample(judge=signals, human=human, drawn=drawn, pi=pi, cluster=cluster), folds=5, seed=1)
        assert all(len(set(fit.fold[cluster == c])) == 1 for c in range(200))
        tickets = np.unique(cluster[drawn])
        per_fold = np.bincount(fit.fold[tickets * 3], minlength=5)
        assert per_fold.max() - per_fold.min() <= 1
        assert np.all(fit.fold[~np.isin(cluster, tickets)] == -1)

    def test_r_squared_is_the_weighted_out_of_fold_one(self) -> None:
        signals, human, drawn, pi, groups, _ = signal_run(11)
        pi = np.where(np.arange(1200) % 2 == 0, 0.05, 0.2)
        drawn = np.random.default_rng(3).random(1200) < pi
        sample = make_sample(judge=signals, human=np.where(drawn, signal_run(11)[5], np.nan), drawn=drawn, pi=pi, groups=groups)
        est = estimate_mean(sample)
        fit = cross_fit(sample, folds=5, seed=0)
        w, y, f = 1 / pi[drawn], sample.human[drawn], fit.oof[drawn]
        ybar = np.sum(w * y) / np.sum(w)
        assert est.r_squared == pytest.approx(1 - np.sum(w * (y - f) ** 2) / np.sum(w * (y - ybar) ** 2), abs=1e-12)
        assert est.predictor == "ridge" and est.r_squared is not None and 0.3 < est.r_squared < 0.9
        assert est.judge_alone == pytest.approx(signals[:, 0].mean(), abs=1e-12)

    def test_informative_signals_are_worth_more_than_the_first_one_alone(self) -> None:
        signals, human, drawn, pi, groups, _ = signal_run(12, n_labels=200)
        several = estimate_mean(make_sample(judge=signals, human=human, drawn=drawn, pi=pi, groups=groups))
        one = estimate_mean(make_sample(judge=signals[:, 0], human=human, drawn=drawn, pi=pi))
        assert several.effective_labels > 1.2 * one.effective_labels


class TestNoiseSignals:
    @pytest.mark.parametrize("n_labels", [60, 100])
    def test_interval_no_wider_than_one_and_a_quarter_human_only_and_coverage_holds(self, n_labels: int) -> None:
        runs, hits, ratios = 150, 0, []
        for seed in range(runs):
            signals, human, drawn, pi, groups, truth = signal_run(1000 + seed, n_drafts=600, n_labels=n_labels, noise=True)
            est = estimate_mean(make_sample(judge=signals, human=human, drawn=drawn, pi=pi, groups=groups), seed=seed)
            human_only = estimate_mean(make_sample(judge=signals[:, 0], human=human, drawn=drawn, pi=pi), lam=0.0)
            ratios.append((est.high - est.low) / (human_only.high - human_only.low))
            hits += est.low <= truth.mean() <= est.high
        assert max(ratios) <= 1.25
        assert hits / runs >= 0.91  # 95% nominal; 150 runs: binomial sd 1.8 points


class TestFrozenPredictor:
    def test_fit_equals_scikit_learn_ridge_at_the_chosen_penalty_and_penalty_minimises_gcv(self) -> None:
        signals, _, _, _, groups, truth = signal_run(13, n_drafts=300)
        labels = np.array(["billing", "refund", "login", "other"])[groups]
        w = np.random.default_rng(1).uniform(1, 5, 300)
        model = fit_predictor(signals, truth, labels, weights=w)
        assert model.group_labels is not None
        onehot = (labels[:, None] == model.group_labels[None, :]).astype(float)
        raw = np.hstack([signals, onehot, onehot * signals[:, :1]])
        z = (raw - model.center) / model.scale
        ref = Ridge(alpha=model.penalty).fit(z, truth, sample_weight=w / w.sum() * 300)
        assert np.allclose(model.coef, ref.coef_, atol=1e-8) and abs(model.intercept - ref.intercept_) < 1e-8
        assert np.allclose(model.predict(signals, labels), np.clip(ref.predict(z), truth.min(), truth.max()), atol=1e-8)
        far = signals[:3] + np.array([[50.0, 50.0, 0.0]])  # far outside the fit: clipped to the grades it saw
        assert np.allclose(model.predict(far, labels[:3]), truth.max(), atol=0)
        gcv = []
        sw = np.sqrt(w / w.sum() * 300)
        zc = (z - np.average(z, axis=0, weights=w)) * sw[:, None]
        yc = (truth - np.average(truth, weights=w)) * sw
        for penalty in PENALTY_GRID * 300:
            hat = zc @ np.linalg.solve(zc.T @ zc + penalty * np.eye(zc.shape[1]), zc.T)
            gcv.append(np.sum((yc - hat @ yc) ** 2) / (300 - np.trace(hat) - 1) ** 2)
        assert model.penalty == pytest.approx(PENALTY_GRID[int(np.argmin(gcv))] * 300)

    def test_unseen_group_gets_no_group_terms_and_frozen_predictions_go_in_as_one_column(self) -> None:
        signals, human, drawn, pi, groups, truth = signal_run(14)
        earlier = fit_predictor(signals[:500], truth[:500], groups[:500])
        new_groups = groups.copy()
        new_groups[:10] = 9
        h = earlier.predict(signals, new_groups)
        assert earlier.group_labels is not None
        zero_groups = (np.zeros((10, 8)) - earlier.center[3:]) / earlier.scale[3:]
        by_hand = earlier.intercept + ((signals[:10] - earlier.center[:3]) / earlier.scale[:3]) @ earlier.coef[:3]
        assert np.allclose(h[:10], by_hand + zero_groups @ earlier.coef[3:], atol=1e-12)
        est = estimate_mean(make_sample(judge=h, human=human, drawn=drawn, pi=pi))
        assert est.predictor == "judge" and est.effective_labels > drawn.sum()
        with pytest.raises(EstimatorError, match="^groups:"):
            earlier.predict(signals)

    def test_weighted_r_squared_helper_is_none_without_spread(self) -> None:
        sample = make_sample(judge=np.ones((4, 2)), human=[2.0, 2.0, 2.0, 2.0], drawn=[True] * 4, pi=[0.5] * 4)
        assert out_of_fold_r_squared(sample, np.zeros(4)) is None


class TestDifferenceAndInput:
    def test_difference_of_two_runs_with_signals(self) -> None:
        a = signal_run(15)
        b = signal_run(16)
        sa = make_sample(judge=a[0], human=a[1], drawn=a[2], pi=a[3], groups=a[4])
        sb = make_sample(judge=b[0], human=b[1], drawn=b[2], pi=b[3], groups=b[4])
        keys = np.arange(1200)
        diff = estimate_difference(sa, sb, a_cluster_keys=keys, b_cluster_keys=keys, estimand="run")
        ea, eb = estimate_mean(sa, estimand="run"), estimate_mean(sb, estimand="run")
        assert diff.a == ea and diff.b == eb
        assert abs(diff.estimate - (ea.estimate - eb.estimate)) < 1e-12
        # Different tickets' drafts are paired by key here but independent: variances add.
        assert diff.se == pytest.approx(np.hypot(ea.se, eb.se), rel=0.2)

    @pytest.mark.parametrize(
        ("field", "kwargs"),
        [("judge", {"judge": np.ones((3, 2, 2))}), ("groups", {"groups": [1, 2]}), ("judge", {"judge": [[1.0, np.nan]] * 3})],
    )
    def test_bad_input_names_the_field(self, field: str, kwargs: dict) -> None:
        base = {"judge": np.ones((3, 2)), "human": [1.0, 2.0, 3.0], "drawn": [True, True, False], "pi": [0.5] * 3}
        with pytest.raises(EstimatorError, match=f"^{field}:"):
            make_sample(**{**base, **kwargs})

    def test_cross_fitting_needs_two_drawn_tickets(self) -> None:
        sample = make_sample(judge=np.ones((3, 2)), human=[1.0, 2.0, 3.0], drawn=[True, True, False], pi=[0.5] * 3, cluster=[1, 1, 2])
        with pytest.raises(EstimatorError, match="^drawn:"):
            estimate_mean(sample)
