"""Anytime-valid calls (issue 43): false calls under peeking, coverage at the stop, grades to a decision, worth.

Usage: .venv/bin/python -m benchmarks.bench_ppi_anytime [--runs 2000] [--drafts 2400] [--only single|signals|worth|both] [--worth-runs 2000]

Simulated runs of N = 2,400 drafts graded one by one in a random order, each run's own mean grade
set exactly (the grades shifted by a constant) at the threshold 3.5, 0.05 below / above it, and 0.1,
0.2, 0.3 away. Two predictors: the single judge score (benchmarks/ppi_world.py: bias +0.3, noise
sd 0.6) and several signals (benchmarks/ppi_signals_world.py, kappa 0.62 per call) read through a
ridge predictor fitted once on an earlier fully graded run (webapp.ppi.predictor.fit_predictor).
The looks' estimate is plain PPI (lambda = 1) with the sequence of webapp/ppi/anytime.py
(benchmarks/anytime_batch.py). The worth table reads the estimate the gate reads
(webapp.ppi.signals.choose: learned, single score, or the human grades alone) at n = 150 of N = 2,400 (as bench_ppi_coverage.py's several-signal table).
Prints markdown tables; fixed seeds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import special

from benchmarks.anytime_batch import TOL, every_look, first_decision
from benchmarks.ppi_signals_world import SignalsWorld, judge_calls, lasting_sd_for_kappa, simulate_run
from benchmarks.ppi_world import World, to_scale
from webapp.ppi.estimator import estimate_mean, make_sample
from webapp.ppi.predictor import fit_predictor
from webapp.ppi.signals import choose

THRESHOLD = 3.5
Predictor = Callable[[np.random.Generator, int, int], tuple[NDArray[np.float64], NDArray[np.float64]]]


def single_score(world: World) -> Predictor:
    """Return a maker of (human grades, judge scores), (R, N), for the single-score world."""

    def make(rng: np.random.Generator, runs: int, drafts: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        q = rng.normal(world.mean, world.sd, (runs, drafts))
        return to_scale(q), to_scale(q + world.bias + rng.normal(0.0, world.judge_noise, (runs, drafts)))

    return make


def several_signals(world: SignalsWorld, seed: int) -> Predictor:
    """Return a maker of (human grades, learned predictions) for the several-signal world (the predictor fitted once, frozen)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(world.mean, world.sd, 4000)
    calls, second = judge_calls(rng, world, q)
    signals = np.column_stack([calls.mean(axis=1), second, calls.std(axis=1)])
    model = fit_predictor(signals, to_scale(q))

    def make(rng: np.random.Generator, runs: int, drafts: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        q = rng.normal(world.mean, world.sd, runs * drafts)
        calls, second = judge_calls(rng, world, q)
        pred = model.predict(np.column_stack([calls.mean(axis=1), second, calls.std(axis=1)]))
        return to_scale(q).reshape(runs, drafts), pred.reshape(runs, drafts)

    return make


def at_mean(human: NDArray[np.float64], target: float) -> NDArray[np.float64]:
    """Return the grades shifted so that each run's own mean is exactly `target`."""
    return human - human.mean(axis=1, keepdims=True) + target


CHUNK = 250  # runs per batch: (250, 2400) arrays keep the memory small


def stops_at(
    make: Predictor, *, runs: int, drafts: int, shift: float, seed: int, every: tuple[int, ...]
) -> dict[tuple[str, int], tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_]]]:
    """Return per (bounds, look spacing) each run's (grades at the stop, verdict, covered, mean above the threshold).

    bounds: "sequence" (webapp/ppi/anytime.py) or "one look" (this look's 95% interval).
    Runs' own means are threshold + shift, made in chunks of CHUNK runs.
    """
    rng = np.random.default_rng(seed)
    parts: dict[tuple[str, int], list[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_]]]] = {}
    for start in range(0, runs, CHUNK):
        size = min(CHUNK, runs - start)
        human, pred = make(rng, size, drafts)
        human = at_mean(human, THRESHOLD + shift)
        order = np.argsort(rng.random((size, drafts)), axis=1)
        looks = every_look(human, pred, order)
        truth = human.mean(axis=1)
        for kind, low, high in (("sequence", looks.low, looks.high), ("one look", looks.one_low, looks.one_high)):
            for k in every:
                s = first_decision(low, high, THRESHOLD, truth, every=k)
                parts.setdefault((kind, k), []).append((s.grades, s.verdict, s.covered, truth > THRESHOLD + TOL))
    return {key: tuple(np.concatenate([p[i] for p in chunks]) for i in range(4)) for key, chunks in parts.items()}  # type: ignore[misc]


def residual_sd(make: Predictor, drafts: int) -> float:
    """Return the spread per grade of the residual (grade - prediction) over many drafts: the fixed design's sigma."""
    human, pred = make(np.random.default_rng(99), 20, drafts)
    return float(np.sqrt(np.mean(np.var(human - pred, axis=1, ddof=1))))


def fixed_design(sigma: float, distance: float, drafts: int) -> int:
    """Return the grades of the one-look design with 80% power at `distance` (one side at 2.5%), finite population."""
    z = float(special.ndtri(0.975) + special.ndtri(0.80))
    return int(np.ceil(1.0 / (distance**2 / (z * sigma) ** 2 + 1.0 / drafts)))


def false_calls(name: str, make: Predictor, *, runs: int, drafts: int) -> None:
    """Print the false-call rows: peeking after every grade and every 10, at and 0.05 around the threshold."""
    print(f"\n### False calls, {name} ({runs} runs per row, N = {drafts})\n")
    print("| run's mean | looks | wrong 'passes' | wrong 'fails' | one-look 95% interval, same looks: wrong calls | coverage at the stop |")
    print("|---|---|---|---|---|---|")
    for shift in (0.0, -0.05, 0.05):
        found = stops_at(make, runs=runs, drafts=drafts, shift=shift, seed=11 + int(round(shift * 100)) % 50, every=(1, 10))
        for every in (1, 10):
            _, verdict, covered, above = found[("sequence", every)]
            wrong_pass = float(np.mean((verdict == 1) & ~above))
            wrong_fail = float(np.mean((verdict == -1) & above))
            _, one_verdict, _, _ = found[("one look", every)]
            one_wrong = float(np.mean(((one_verdict == 1) & ~above) | ((one_verdict == -1) & above)))
            print(
                f"| {THRESHOLD + shift:.2f} | every {'grade' if every == 1 else '10 grades'} | {wrong_pass:.1%} | {wrong_fail:.1%} | "
                f"{one_wrong:.1%} | {covered.mean():.1%} |"
            )


def grades_needed(name: str, make: Predictor, *, runs: int, drafts: int) -> None:
    """Print the grades to a decision at 0.1, 0.2, 0.3 from the threshold against the fixed design with 80% power."""
    sigma = residual_sd(make, drafts)
    print(f"\n### Grades to a decision, {name} ({runs} runs per row, N = {drafts}, residual sd {sigma:.2f}, looks after every grade)\n")
    print("| distance | side | mean grades | median | 90th percentile | right call | coverage at the stop | fixed design (80% power) |")
    print("|---|---|---|---|---|---|---|---|")
    for distance in (0.1, 0.2, 0.3):
        for side in (1, -1):
            seed = 31 + int(round(distance * 100)) + side
            g, verdict, covered, _ = stops_at(make, runs=runs, drafts=drafts, shift=side * distance, seed=seed, every=(1,))[("sequence", 1)]
            right = float(np.mean(verdict == side))
            print(
                f"| {distance:.1f} | {'above' if side > 0 else 'below'} | {g.mean():.0f} | {np.median(g):.0f} | {np.percentile(g, 90):.0f} | "
                f"{right:.1%} | {covered.mean():.1%} | {fixed_design(sigma, distance, drafts)} |"
            )


def worth_table(*, runs: int, drafts: int = 2400, budget: int = 150) -> None:
    """Print the worth of the estimate the gate reads (webapp.ppi.signals.choose, with the human-only fallback) on the several-signal world."""
    world = SignalsWorld(lasting_sd=lasting_sd_for_kappa(0.62))
    rng = np.random.default_rng(451)
    picked: list[tuple[float, int, str]] = []
    for i in range(runs):
        run = simulate_run(rng, world, drafts=drafts, budget=budget)
        common = {"human": np.where(run.drawn, run.human, np.nan), "drawn": run.drawn, "pi": run.pi}
        learned = estimate_mean(make_sample(judge=run.mean_signals(), groups=run.groups, **common), seed=i)
        one = make_sample(judge=run.calls_a[:, 0], **common)
        choice = choose(estimate_mean(one, seed=i), learned, estimate_mean(one, seed=i, lam=0.0))
        assert choice.estimate is not None
        picked.append((choice.estimate.effective_labels, choice.estimate.n_labels, choice.source))
    worth = np.array([w for w, _, _ in picked])
    labels = np.array([n for _, n, _ in picked])
    ratio = worth / labels
    sources = {k: sum(s == k for _, _, s in picked) for k in ("learned", "single", "human")}
    print(f"\n### Worth of the estimate the gate reads, several signals (n = {budget} of N = {drafts}, {runs} runs)\n")
    print("| median worth | median worth / grades | lowest worth / grades | read: learned / single / human grades alone |")
    print("|---|---|---|---|")
    print(f"| {np.median(worth):.0f} | {np.median(ratio):.2f} | {ratio.min():.3f} | {sources['learned']} / {sources['single']} / {sources['human']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="simulated runs per row (default 2000)")
    parser.add_argument("--drafts", type=int, default=2400, help="drafts per run (default 2400)")
    parser.add_argument("--only", choices=("single", "signals", "both", "worth"), default="both", help="which predictor's tables")
    parser.add_argument("--worth-runs", type=int, default=2000, help="simulated runs of the worth table (default 2000)")
    args = parser.parse_args()
    started = time.perf_counter()
    makers: list[tuple[str, Predictor]] = []
    if args.only in ("single", "both"):
        makers.append(("single score (bias +0.3, noise 0.6)", single_score(World(bias=0.3))))
    if args.only in ("signals", "both"):
        makers.append(("several signals (kappa 0.62 per call, ridge fitted on an earlier run)", several_signals(SignalsWorld(lasting_sd=lasting_sd_for_kappa(0.62)), 7)))
    for name, make in makers:
        for table in (false_calls, grades_needed):
            table(name, make, runs=args.runs, drafts=args.drafts)
            print(f"\n({time.perf_counter() - started:.0f} s so far)", flush=True)
    if args.only in ("worth", "both"):
        worth_table(runs=args.worth_runs)
        print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
