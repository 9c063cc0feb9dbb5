"""A reduced run of benchmarks/bench_ppi_coverage.py, and the simulation's own figures checked independently."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from benchmarks.ppi_signals_world import (
    SignalsWorld,
    judge_calls,
    measure_difference,
    measure_one_run,
    single_call_kappa,
)
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


LASTING_SD = 0.708  # what lasting_sd_for_kappa(0.62) finds (the benchmark prints it)


class TestSeveralSignalsWorld:
    """The issue-35 world (benchmarks/ppi_signals_world.py) as the issue describes it, and a reduced benchmark run."""

    def test_one_call_of_a_has_quadratic_kappa_about_0_62(self) -> None:
        human, call = single_call_kappa(SignalsWorld(lasting_sd=LASTING_SD), seed=3)
        kappa = cohen_kappa_score(human.astype(int), call.astype(int), weights="quadratic")
        assert 0.60 <= kappa <= 0.65

    def test_half_of_a_error_changes_from_call_to_call_and_b_shares_a_third_of_the_lasting_part(self) -> None:
        world = SignalsWorld(lasting_sd=LASTING_SD, mean=0.0, bias_a=0.0, bias_b=0.0)
        rng = np.random.default_rng(4)
        q = np.full(200_000, 3.0)  # mid-scale, away from the clipping at 1 and 5
        calls, b = judge_calls(rng, world, q)
        changing = float(np.mean(calls.var(axis=1, ddof=1)))
        total = float(np.var(calls[:, 0] - q))
        lasting_a = float(np.cov(calls[:, 0] - q, calls[:, 1] - q)[0, 1])  # two calls share only the lasting part
        shared = float(np.cov(calls[:, 0] - q, b - q)[0, 1])
        # Rounding to the 1-5 scale adds about 1/12 to each call's variance, so the shares are approximate.
        assert changing / total == pytest.approx(0.5, abs=0.06)
        assert shared / lasting_a == pytest.approx(1 / 3, abs=0.06)
        assert float(np.var(b - q)) == pytest.approx(total, rel=0.1)

    def test_reduced_benchmark_the_learned_predictor_is_worth_about_twice_the_grades(self) -> None:
        world = SignalsWorld(lasting_sd=LASTING_SD)
        tallies = measure_one_run(world, runs=40, drafts=2400, budget=150, seed=7)
        assert tallies["mean"].median_worth >= 270  # the full benchmark: >= 300 at 2,000 runs
        assert tallies["mean"].median_worth > 1.3 * tallies["mean 1 call"].median_worth
        assert tallies["mean"].coverage >= 0.85 and tallies["pass"].coverage >= 0.85
        diff = measure_difference(world, runs=20, drafts=2400, budget=150, seed=8)
        assert diff["difference mean"].coverage >= 0.8

    def test_reduced_benchmark_noise_signals_cost_at_most_a_fifth_of_the_grades(self) -> None:
        tallies = measure_one_run(SignalsWorld(lasting_sd=LASTING_SD, noise=True), runs=40, drafts=2400, budget=150, seed=9)
        assert tallies["mean"].median_worth >= 0.8 * 150 and tallies["pass"].median_worth >= 0.8 * 150
        assert tallies["mean"].coverage >= 0.85
