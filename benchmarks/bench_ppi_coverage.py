"""Coverage and width of the prediction-powered 95% intervals (webapp/ppi/estimator.py), fixed seeds.

1. Coverage of the RUN'S OWN figure (issue 34: the finite-population mean of each simulated run's
   N drafts, the default estimand): 2,000 simulated runs per setting, n (human budget) in
   {30, 60, 100, 150}, N (judged drafts) in {300, 3000}, judge bias +0.3 and +1.0; plus settings
   with many forced drafts (pi = 1) and a few drawn at small pi (N = 300 with 200 forced and 10
   drawn at pi = 0.1; N = 1000 with 600 forced and 15 drawn at pi = 0.0375); for the mean grade
   and the pass rate. Target: every coverage >= 93.5%.
2. Width: a judge whose quadratic-weighted kappa with the humans is 0.63, reached with different
   mixes of bias and noise; PPI with 150 human grades against human-only grading of 300, at
   N = 3000 and N = 300, mean and pass rate; and the human-only grades PPI's interval is worth.
   Target (issue 27): at N >= 3000 the PPI interval for the mean is no wider than human-only at 300.
3. Several signals (issue 35, benchmarks/ppi_signals_world.py): judge A called 5 times, half of its
   error changing from call to call, judge B sharing a third of A's lasting error, one call of A at
   quadratic kappa 0.62 (measured with scikit-learn and printed); n = 150 drawn from N = 2,400; the
   learned predictor (cross-fitted ridge) against the single-call estimate. Targets: median worth
   of the mean >= 300 human-only grades; coverage of the mean, the pass rate and a two-run
   difference >= 93.5% over 2,000 runs each; with noise signals worth >= 0.8 x n, coverage >= 93.5%.

The world (benchmarks/ppi_world.py): latent quality ~ Normal(3.6, 1), human grade its rounding to
1-5, judge grade the rounding of quality + bias + noise; pass = grade >= 3; drafts drawn with
Bernoulli(n/N). The estimator is the batch form (benchmarks/ppi_batch.py), checked equal to the one used by the pages
(tests/ppi/test_estimator.py::TestBatch).
Usage: `nice .venv/bin/python benchmarks/bench_ppi_coverage.py [--runs 2000] [--width-runs 1000]
[--signals-runs 2000] [--only signals]`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ppi_signals_world import (  # noqa: E402
    SignalsWorld,
    Tally,
    lasting_sd_for_kappa,
    measure_difference,
    measure_one_run,
    single_call_kappa,
)
from benchmarks.ppi_world import World, coverage_row, judge_noise_for_kappa, width_row  # noqa: E402

TARGET_COVERAGE = 0.935
BUDGETS = (30, 60, 100, 150)
DRAFTS = (300, 3000)
BIASES = (0.3, 1.0)
FORCED = ((300, 200, 10), (1000, 600, 15))  # (N, forced drafts, budget of sampled drafts)
KAPPA = 0.63
KAPPA_BIASES = (0.3, 0.6, 0.8, 0.9, 1.0)
SIGNALS_KAPPA = 0.62
SIGNALS_DRAFTS, SIGNALS_BUDGET = 2400, 150
TARGET_WORTH = 300
TARGET_NOISE_WORTH = 0.8 * SIGNALS_BUDGET


def coverage_table(runs: int) -> bool:
    """Print the coverage table; return whether every coverage met the target."""
    print(
        f"Coverage of each run's own mean by the 95% intervals over {runs} simulated runs each"
        f" (target >= {TARGET_COVERAGE:.1%})"
    )
    print(
        f"{'bias':>5} {'N':>5} {'forced':>6} {'n':>4} | {'mean cov':>8} {'width':>6} |"
        f" {'pass cov':>8} {'width':>6} | {'lambda':>6}"
    )
    settings = [(bias, drafts, 0, budget) for bias in BIASES for drafts in DRAFTS for budget in BUDGETS]
    settings += [(bias, drafts, forced, budget) for bias in BIASES for drafts, forced, budget in FORCED]
    ok = True
    for seed, (bias, drafts, forced, budget) in enumerate(settings, start=1):
        row = coverage_row(World(bias=bias), budget=budget, drafts=drafts, runs=runs, seed=seed, forced=forced)
        good = row.mean_coverage >= TARGET_COVERAGE and row.pass_coverage >= TARGET_COVERAGE
        ok &= good
        print(
            f"{bias:>+5.1f} {drafts:>5} {forced:>6} {budget:>4} | {row.mean_coverage:>8.1%} {row.mean_width:>6.3f} |"
            f" {row.pass_coverage:>8.1%} {row.pass_width:>6.3f} | {row.mean_lambda:>6.2f}"
            f"{'' if good else '  BELOW TARGET'}",
            flush=True,
        )
    return ok


def width_table(runs: int) -> None:
    """Print the width comparison (the verdict per judge is printed, not turned into an exit code)."""
    print(f"\nWidth (superpopulation estimand, as issue 27 asked): PPI with 150 human grades vs human-only with 300; judge kappa {KAPPA} ({runs} runs each)")
    print(
        f"{'bias':>5} {'noise':>5} {'N':>5} | {'PPI mean':>8} {'human':>6} {'worth':>5} |"
        f" {'PPI pass':>8} {'human':>6} {'worth':>5}"
    )
    for k, bias in enumerate(KAPPA_BIASES):
        noise = judge_noise_for_kappa(KAPPA, bias=bias, seed=k)
        for drafts in (3000, 300):
            row = width_row(World(bias=bias, judge_noise=noise), drafts=drafts, budget=150, human_only=300, runs=runs, seed=100 + k)
            verdict = ""
            if drafts >= 3000:
                verdict = "  mean: no wider" if row.ppi_mean_width <= row.human_mean_width else "  mean: WIDER"
            print(
                f"{bias:>+5.1f} {noise:>5.2f} {drafts:>5} | {row.ppi_mean_width:>8.3f} {row.human_mean_width:>6.3f}"
                f" {row.effective_mean:>5.0f} | {row.ppi_pass_width:>8.3f} {row.human_pass_width:>6.3f}"
                f" {row.effective_pass:>5.0f}{verdict}"
            )
    print("worth = median number of human-only grades giving the same standard error as PPI's interval")


def _signals_line(name: str, tally: Tally, worth_target: float | None) -> bool:
    good = tally.coverage >= TARGET_COVERAGE and (worth_target is None or tally.median_worth >= worth_target)
    worth = f"{tally.median_worth:>6.0f}" if tally.worth else f"{'':>6}"
    r2 = f"{tally.median_r_squared:>6.2f}" if tally.r_squared else f"{'':>6}"
    target = f">= {worth_target:.0f}" if worth_target is not None else ""
    print(f"{name:<32} | {tally.coverage:>8.1%} | {worth} {target:>7} | {r2}{'' if good else '  BELOW TARGET'}", flush=True)
    return good


def signals_table(runs: int) -> bool:
    """Print the several-signals table; return whether every target was met."""
    from sklearn.metrics import cohen_kappa_score

    lasting = lasting_sd_for_kappa(SIGNALS_KAPPA)
    world = SignalsWorld(lasting_sd=lasting)
    human, call = single_call_kappa(world, seed=99)
    kappa = cohen_kappa_score(human.astype(int), call.astype(int), weights="quadratic")
    print(
        f"\nSeveral signals: n = {SIGNALS_BUDGET} of N = {SIGNALS_DRAFTS}, {runs} runs each; one call of A:"
        f" quadratic kappa {kappa:.3f} (scikit-learn), lasting error sd {lasting:.3f} (= the changing part's)"
    )
    print(f"{'figure':<32} | {'coverage':>8} | {'worth':>6} {'target':>7} | {'R^2':>6}")
    tallies = measure_one_run(world, runs=runs, drafts=SIGNALS_DRAFTS, budget=SIGNALS_BUDGET, seed=351)
    ok = _signals_line("mean, learned predictor", tallies["mean"], TARGET_WORTH)
    ok &= _signals_line("mean, one call of A", tallies["mean 1 call"], None)
    ok &= _signals_line("mean, A's 5-call mean alone", tallies["mean 5 calls"], None)
    ok &= _signals_line("pass rate, learned predictor", tallies["pass"], None)
    ok &= _signals_line("pass rate, one call of A", tallies["pass 1 call"], None)
    diff = measure_difference(world, runs=runs, drafts=SIGNALS_DRAFTS, budget=SIGNALS_BUDGET, seed=352)
    ok &= _signals_line("two-run difference, mean", diff["difference mean"], None)
    ok &= _signals_line("two-run difference, pass rate", diff["difference pass"], None)
    noise = SignalsWorld(lasting_sd=lasting, noise=True)
    noisy = measure_one_run(noise, runs=runs, drafts=SIGNALS_DRAFTS, budget=SIGNALS_BUDGET, seed=353)
    ok &= _signals_line("noise signals, mean", noisy["mean"], TARGET_NOISE_WORTH)
    ok &= _signals_line("noise signals, pass rate", noisy["pass"], TARGET_NOISE_WORTH)
    print("worth = median number of human-only grades giving the same standard error; coverage of each run's own figure")
    print("(the difference: of the superpopulation difference, estimate_difference's default)")
    return ok


def main() -> None:
    """Run both tables and exit non-zero when the coverage target is missed."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--width-runs", type=int, default=1000)
    parser.add_argument("--signals-runs", type=int, default=2000)
    parser.add_argument("--only", choices=("signals",), default=None, help="run only the several-signals table")
    args = parser.parse_args()
    start = time.perf_counter()
    covered = True
    if args.only is None:
        covered = coverage_table(args.runs)
        width_table(args.width_runs)
    covered &= signals_table(args.signals_runs)
    print(f"\n{time.perf_counter() - start:.0f} s")
    sys.exit(0 if covered else 1)


if __name__ == "__main__":
    main()
