"""A reduced run of benchmarks/bench_ppi_coverage.py, and the simulation's own figures checked independently."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from webapp.ppi.simulation import (
    World,
    coverage_row,
    grade_probabilities,
    quadratic_kappa,
    simulate,
    to_scale,
    true_mean,
    true_pass_rate,
)


class TestSimulation:
    def test_truth_matches_a_large_sample(self) -> None:
        world = World(bias=0.3)
        grades = to_scale(np.random.default_rng(1).normal(world.mean, world.sd, 2_000_000))
        assert abs(true_mean(world) - grades.mean()) < 0.003
        assert abs(true_pass_rate(world) - (grades >= 3).mean()) < 0.001
        assert abs(grade_probabilities(world).sum() - 1.0) < 1e-12

    def test_quadratic_kappa_equals_scikit_learn(self) -> None:
        rng = np.random.default_rng(2)
        a = rng.integers(1, 6, 500).astype(float)
        b = np.clip(a + rng.integers(-2, 3, 500), 1, 5).astype(float)
        expected = cohen_kappa_score(a.astype(int), b.astype(int), weights="quadratic")
        assert abs(quadratic_kappa(a, b) - expected) < 1e-12

    def test_draws_are_bernoulli_with_the_budget_as_expected_size(self) -> None:
        sim = simulate(np.random.default_rng(3), World(bias=0.3), runs=400, drafts=300, budget=60)
        counts = sim.drawn.sum(axis=1)
        assert abs(counts.mean() - 60) < 1.0
        assert counts.std() > 3  # random size, not a fixed-size sample
        assert np.all(sim.pi == 0.2)


class TestReducedCoverage:
    @pytest.mark.parametrize(
        ("bias", "drafts", "budget"),
        [(1.0, 300, 30), (0.3, 300, 150), (1.0, 3000, 60), (0.3, 3000, 100)],
    )
    def test_intervals_cover_the_truth(self, bias: float, drafts: int, budget: int) -> None:
        row = coverage_row(World(bias=bias), budget=budget, drafts=drafts, runs=400, seed=7)
        # 400 runs: a true 95% coverage falls below 92.5% with probability about 1%.
        assert row.mean_coverage >= 0.925
        assert row.pass_coverage >= 0.925

    def test_a_biased_judge_alone_would_not_cover(self) -> None:
        world = World(bias=1.0)
        sim = simulate(np.random.default_rng(4), world, runs=200, drafts=3000, budget=100)
        judge_alone = sim.judge.mean(axis=1)
        assert np.all(judge_alone - true_mean(world) > 0.5)
