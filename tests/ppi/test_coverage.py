"""A reduced run of benchmarks/bench_ppi_coverage.py, and the simulation's own figures checked independently."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from benchmarks.ppi_world import (
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
        ("bias", "drafts", "budget", "forced"),
        [(1.0, 300, 30, 0), (0.3, 300, 150, 0), (1.0, 3000, 60, 0), (0.3, 3000, 100, 0), (1.0, 300, 10, 200)],
    )
    def test_intervals_cover_each_runs_own_mean(self, bias: float, drafts: int, budget: int, forced: int) -> None:
        # The forced setting varies most from run to run (about 10 drafts drawn): 1,500 runs of it (cheap at N = 300).
        runs = 1500 if forced else 400
        row = coverage_row(World(bias=bias), budget=budget, drafts=drafts, runs=runs, seed=7, forced=forced)
        # 400 runs: a true 95% coverage falls below 92.5% with probability about 1%.
        assert row.mean_coverage >= 0.925
        assert row.pass_coverage >= 0.925

    def test_forced_drafts_are_drawn_with_certainty_and_the_budget_spread_over_the_rest(self) -> None:
        sim = simulate(np.random.default_rng(5), World(bias=0.3), runs=300, drafts=300, budget=10, forced=200)
        assert np.all(sim.drawn[:, :200]) and np.all(sim.pi[:, :200] == 1.0) and np.all(sim.pi[:, 200:] == 0.1)
        assert abs(sim.drawn[:, 200:].sum(axis=1).mean() - 10) < 0.6 and np.all(sim.drawn[:, 200:].sum(axis=1) >= 2)

    def test_the_superpopulation_option_is_still_measured_against_its_own_truth(self) -> None:
        row = coverage_row(World(bias=0.3), budget=100, drafts=3000, runs=400, seed=8, estimand="superpopulation")
        assert row.mean_coverage >= 0.925 and row.pass_coverage >= 0.925

    def test_a_biased_judge_alone_would_not_cover(self) -> None:
        world = World(bias=1.0)
        sim = simulate(np.random.default_rng(4), world, runs=200, drafts=3000, budget=100)
        judge_alone = sim.judge.mean(axis=1)
        assert np.all(judge_alone - true_mean(world) > 0.5)
