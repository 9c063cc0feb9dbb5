"""Inclusion probabilities and draws: forced drafts, the floor, the budget, no pi = 0, no top-k, reproducible."""

from __future__ import annotations

import numpy as np
import pytest

from webapp.ppi.estimator import estimate_mean, make_sample
from webapp.ppi.sampler import (
    GradedExample,
    SamplerError,
    combined_pi,
    draw,
    fit_error_model,
    inclusion_probabilities,
)


class TestInclusionProbabilities:
    def test_uniform_without_an_error_model(self) -> None:
        forced = np.array([True] * 20 + [False] * 180)
        pi = inclusion_probabilities(forced=forced, weight=None, budget=60)
        assert np.all(pi[:20] == 1.0)
        assert np.allclose(pi[20:], 60 / 180)
        assert abs(pi[20:].sum() - 60) < 1e-9 and abs(pi.sum() - 80) < 1e-9
        # a budget above the free drafts takes them all
        all_of_them = inclusion_probabilities(forced=np.array([True, False, False]), weight=None, budget=5)
        assert all_of_them.tolist() == [1.0, 1.0, 1.0]

    def test_weighted_pi_keep_the_floor_and_sum_to_the_budget(self) -> None:
        rng = np.random.default_rng(1)
        forced = rng.random(1000) < 0.1
        weight = rng.gamma(0.5, 1.0, 1000)
        weight[:50] = 0.0  # the model expects no error here: still a real chance
        pi = inclusion_probabilities(forced=forced, weight=weight, budget=100)
        free = ~forced
        assert np.all(pi[forced] == 1.0)
        assert abs(pi[free].sum() - 100) < 1e-9
        assert pi[free].min() >= 0.5 * 100 / 1000 - 1e-12
        assert np.all(pi > 0) and np.all(pi <= 1)
        # By weight: a heavier draft never has a smaller pi.
        order = np.argsort(weight[free])
        assert np.all(np.diff(pi[free][order]) >= -1e-12)

    def test_heavy_weights_are_capped_at_one_and_the_rest_shared_again(self) -> None:
        weight = np.array([1000.0, 1000.0] + [1.0] * 98)
        pi = inclusion_probabilities(forced=np.zeros(100, bool), weight=weight, budget=20)
        assert pi[0] == 1.0 and pi[1] == 1.0
        assert abs(pi.sum() - 20) < 1e-9
        assert np.all(pi[2:] < 1) and pi[2:].min() >= 0.1 - 1e-12

    def test_never_a_deterministic_top_k(self) -> None:
        # Even a very sharp error model leaves every other draft well above zero: the top k is not all there is.
        weight = np.array([1e6] * 10 + [1e-6] * 90)
        pi = inclusion_probabilities(forced=np.zeros(100, bool), weight=weight, budget=10)
        assert pi[10:].min() >= 0.05 - 1e-12
        assert pi[:10].max() < 1.0

    @pytest.mark.parametrize(("field", "kwargs"), [("budget", {"budget": 0}), ("weight", {"weight": [1.0, -1.0]})])
    def test_bad_input_names_the_field(self, field: str, kwargs: dict) -> None:
        args = {"forced": [False, False], "weight": None, "budget": 1} | kwargs
        with pytest.raises(SamplerError, match=f"^{field}:"):
            inclusion_probabilities(**args)


class TestDraws:
    def test_the_stored_seed_redraws_the_same_sample(self) -> None:
        pi = np.full(500, 0.2)
        assert np.array_equal(draw(pi, 42), draw(pi, 42))
        assert not np.array_equal(draw(pi, 42), draw(pi, 43))
        assert draw(np.ones(5), 1).all()

    def test_draw_frequencies_follow_pi(self) -> None:
        pi = np.linspace(0.05, 0.95, 10)
        hits = np.mean([draw(pi, s) for s in range(4000)], axis=0)
        assert np.all(np.abs(hits - pi) < 0.03)

    def test_combined_pi_of_two_samples(self) -> None:
        assert np.allclose(combined_pi([0.2, 1.0, 0.5], [0.5, 0.3, 0.0]), [0.6, 1.0, 0.5])
        # Empirically: a draft is in either of two independent draws with that probability.
        p1, p2 = np.full(20000, 0.3), np.full(20000, 0.4)
        either = draw(p1, 1) | draw(p2, 2)
        assert abs(either.mean() - 0.58) < 0.015

    def test_weighted_sampling_keeps_the_estimate_unbiased(self) -> None:
        # Drafts the model thinks risky are drawn more often; 1/pi weights undo it on average.
        rng = np.random.default_rng(5)
        truth = rng.normal(3.5, 1, 2000)
        judge = truth + 0.5 + np.where(truth < 3, 1.0, 0.0)  # the judge is worse on weak drafts
        weight = np.where(judge < 4.5, 3.0, 1.0)
        pi = inclusion_probabilities(forced=np.zeros(2000, bool), weight=weight, budget=150)
        estimates = []
        for s in range(300):
            xi = draw(pi, s)
            sample = make_sample(judge=judge, human=np.where(xi, truth, np.nan), drawn=xi, pi=pi)
            estimates.append(estimate_mean(sample, lam=1.0).estimate)
        assert abs(np.mean(estimates) - truth.mean()) < 0.01


class TestErrorModel:
    def test_cells_are_shrunk_towards_the_overall_mean(self) -> None:
        examples = [GradedExample("routine", 4.0, 4.0)] * 5 + [GradedExample("edge", 4.0, 2.0)] * 5
        model = fit_error_model(examples, prior=5)
        assert model is not None
        assert model.overall == 2.0  # squared gaps: five 0s and five 4s
        assert model.expected_gap2("routine", 4.2) == pytest.approx((0 + 5 * 2.0) / 10)
        assert model.expected_gap2("edge", 3.6) == pytest.approx((20 + 5 * 2.0) / 10)
        assert model.expected_gap2("routine", 2.0) == 2.0  # never seen: the overall mean
        assert np.allclose(model.weights(["routine", "edge"], [4.0, 4.0]), np.sqrt([1.0, 3.0]))

    def test_stored_model_round_trips_and_no_earlier_grades_means_uniform(self) -> None:
        assert fit_error_model([]) is None
        model = fit_error_model([GradedExample("edge", 3.0, 1.0), GradedExample("routine", 5.0, 5.0)])
        assert model is not None
        assert type(model).from_json(model.as_json()) == model
