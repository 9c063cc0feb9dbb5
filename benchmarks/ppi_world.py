"""Simulated runs with a known truth, for the coverage benchmark and its reduced test.

A draft's quality is a latent q ~ Normal(mean, sd); the human grade is q rounded to the 1-5
scale, the judge's grade is q + bias + noise rounded to the same scale (so a +1.0 judge that
already says 5 cannot say more, as a real one). The pass rate is the share of drafts graded at
or above the pass threshold (3, the rubric's): one criterion stands for "all four pass", since
the estimator sees only a 0/1 label and a 0/1 judge call either way. Drafts are drawn with
Bernoulli(pi = n/N), as the sampler does, so the number graded varies from run to run; with
`forced` drafts, those are drawn with pi = 1 and the budget is spread over the others (the
sampler's rule: forced drafts come on top of the budget).
The truth (issue 34) is each simulated run's own figure, the mean over its N drafts of the human
grade (or pass), which every simulated draft has; `estimand="superpopulation"` measures against
the superpopulation figure instead, worked out exactly from the normal distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from benchmarks.ppi_batch import estimate_mean_batch
from webapp.ppi.estimator import Estimand

SCALE = np.arange(1, 6, dtype=np.float64)


@dataclass(frozen=True)
class World:
    """How drafts, human grades and the judge behave in one simulated setting."""

    bias: float
    judge_noise: float = 0.6
    mean: float = 3.6
    sd: float = 1.0
    pass_threshold: int = 3


def _cdf(x: NDArray[np.float64] | float) -> NDArray[np.float64]:
    return np.asarray(special.ndtr(x))


def grade_probabilities(world: World) -> NDArray[np.float64]:
    """Return P(human grade = 1..5) for a draft of this world."""
    cuts = np.concatenate([[-np.inf], SCALE[:-1] + 0.5, [np.inf]])
    cdf = _cdf((cuts - world.mean) / world.sd)
    return np.diff(cdf)


def true_mean(world: World) -> float:
    """Return the expected human grade."""
    return float(np.dot(grade_probabilities(world), SCALE))


def true_pass_rate(world: World) -> float:
    """Return the probability that the human grade reaches the pass threshold."""
    return float(grade_probabilities(world)[world.pass_threshold - 1 :].sum())


def to_scale(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Round to the nearest 1-5 grade."""
    return np.clip(np.rint(x), 1.0, 5.0)


@dataclass(frozen=True)
class SimulatedRuns:
    """R simulated runs of N drafts each (one row per run)."""

    human: NDArray[np.float64]
    judge: NDArray[np.float64]
    drawn: NDArray[np.bool_]
    pi: NDArray[np.float64]


def simulate(
    rng: np.random.Generator, world: World, *, runs: int, drafts: int, budget: int, forced: int = 0
) -> SimulatedRuns:
    """Draw `runs` independent runs; the first `forced` drafts get pi = 1, the others pi = budget/(drafts - forced)."""
    q = rng.normal(world.mean, world.sd, (runs, drafts))
    human = to_scale(q)
    judge = to_scale(q + world.bias + rng.normal(0.0, world.judge_noise, (runs, drafts)))
    pi = np.full((runs, drafts), budget / (drafts - forced))
    pi[:, :forced] = 1.0
    drawn = rng.random((runs, drafts)) < pi
    # A run in which fewer than two sampled (not forced) drafts were drawn has no interval for the
    # drafts it did not draw; draw it again (rare at n >= 10).
    while np.any(short := drawn[:, forced:].sum(axis=1) < 2):
        drawn[short] = rng.random((int(short.sum()), drafts)) < pi[short]
    return SimulatedRuns(human=human, judge=judge, drawn=drawn, pi=pi)


def passes(grades: NDArray[np.float64], world: World) -> NDArray[np.float64]:
    """Return 1.0 where a grade reaches the pass threshold."""
    return (grades >= world.pass_threshold).astype(np.float64)


def quadratic_kappa(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """Return Cohen's quadratic-weighted kappa of two 1-5 gradings of the same drafts."""
    ia, ib = a.astype(int).ravel() - 1, b.astype(int).ravel() - 1
    observed = np.zeros((5, 5))
    np.add.at(observed, (ia, ib), 1.0)
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    weights = (np.arange(5)[:, None] - np.arange(5)[None, :]) ** 2 / 16.0
    return float(1.0 - np.sum(weights * observed) / np.sum(weights * expected))


@dataclass(frozen=True)
class CoverageRow:
    """Coverage and width of the 95% intervals over many simulated runs of one setting."""

    world: World
    budget: int
    drafts: int
    runs: int
    forced: int
    mean_coverage: float
    pass_coverage: float
    mean_width: float
    pass_width: float
    mean_lambda: float


def coverage_row(
    world: World,
    *,
    budget: int,
    drafts: int,
    runs: int,
    seed: int,
    chunk: int = 500,
    forced: int = 0,
    estimand: Estimand = "run",
) -> CoverageRow:
    """Simulate `runs` runs and return how often the mean's and the pass rate's intervals hold the truth.

    The truth is each run's own mean (estimand "run") or the superpopulation figure.
    """


    rng = np.random.default_rng(seed)
    hits_mean = hits_pass = 0
    widths_mean: list[float] = []
    widths_pass: list[float] = []
    lambdas: list[float] = []
    done = 0
    while done < runs:
        size = min(chunk, runs - done)
        sim = simulate(rng, world, runs=size, drafts=drafts, budget=budget, forced=forced)
        if estimand == "run":
            truth_mean, truth_pass = sim.human.mean(axis=1), passes(sim.human, world).mean(axis=1)
        else:
            truth_mean, truth_pass = np.full(size, true_mean(world)), np.full(size, true_pass_rate(world))
        m = estimate_mean_batch(sim.judge, sim.human, sim.drawn, sim.pi, seed=seed, estimand=estimand)
        p = estimate_mean_batch(
            passes(sim.judge, world), passes(sim.human, world), sim.drawn, sim.pi, seed=seed, estimand=estimand
        )
        hits_mean += int(np.sum((m.low <= truth_mean) & (truth_mean <= m.high)))
        hits_pass += int(np.sum((p.low <= truth_pass) & (truth_pass <= p.high)))
        widths_mean.append(float(np.sum(m.high - m.low)))
        widths_pass.append(float(np.sum(p.high - p.low)))
        lambdas.append(float(np.sum(m.lambdas.mean(axis=1))))
        done += size
    return CoverageRow(
        world=world,
        budget=budget,
        drafts=drafts,
        runs=runs,
        forced=forced,
        mean_coverage=hits_mean / runs,
        pass_coverage=hits_pass / runs,
        mean_width=sum(widths_mean) / runs,
        pass_width=sum(widths_pass) / runs,
        mean_lambda=sum(lambdas) / runs,
    )


def judge_noise_for_kappa(target: float, *, bias: float, seed: int = 0, drafts: int = 400_000) -> float:
    """Return the judge noise that gives a quadratic-weighted kappa of `target` with the human grades (bisection)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(World(bias=bias).mean, World(bias=bias).sd, drafts)
    e = rng.normal(0.0, 1.0, drafts)
    human = to_scale(q)
    low, high = 0.0, 4.0
    for _ in range(40):
        mid = (low + high) / 2
        if quadratic_kappa(human, to_scale(q + bias + mid * e)) > target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


@dataclass(frozen=True)
class WidthRow:
    """Average 95% interval widths: PPI at `budget` human grades vs human-only at `human_only`."""

    drafts: int
    budget: int
    human_only: int
    ppi_mean_width: float
    human_mean_width: float
    ppi_pass_width: float
    human_pass_width: float
    effective_mean: float  # median human-only grades the PPI interval is worth (mean)
    effective_pass: float


def width_row(world: World, *, drafts: int, budget: int, human_only: int, runs: int, seed: int) -> WidthRow:
    """Simulate runs and compare PPI's interval widths with human-only grading of `human_only` drafts."""


    rng = np.random.default_rng(seed)
    sim = simulate(rng, world, runs=runs, drafts=drafts, budget=budget)
    sp: Estimand = "superpopulation"  # the width comparison of issue 27 is about the superpopulation figure
    m = estimate_mean_batch(sim.judge, sim.human, sim.drawn, sim.pi, seed=seed, estimand=sp)
    p = estimate_mean_batch(passes(sim.judge, world), passes(sim.human, world), sim.drawn, sim.pi, seed=seed, estimand=sp)
    # Human-only grading: lambda = 0 on its own sample of `human_only` drafts (the judge is ignored).
    alone = simulate(rng, world, runs=runs, drafts=max(drafts, human_only), budget=human_only)
    hm = estimate_mean_batch(alone.judge, alone.human, alone.drawn, alone.pi, lam=0.0, estimand=sp)
    hp = estimate_mean_batch(
        passes(alone.judge, world), passes(alone.human, world), alone.drawn, alone.pi, lam=0.0, estimand=sp
    )
    return WidthRow(
        drafts=drafts,
        budget=budget,
        human_only=human_only,
        ppi_mean_width=float(np.mean(m.high - m.low)),
        human_mean_width=float(np.mean(hm.high - hm.low)),
        ppi_pass_width=float(np.mean(p.high - p.low)),
        human_pass_width=float(np.mean(hp.high - hp.low)),
        effective_mean=float(np.median(m.n_labels * (m.human_only_se / m.se) ** 2)),
        effective_pass=float(np.median(p.n_labels * (p.human_only_se / p.se) ** 2)),
    )
