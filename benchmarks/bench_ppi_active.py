"""Uncertainty-first draws (issue 43 item 3) against uniform order: grades to a decision, false calls under peeking.

Usage: .venv/bin/python -m benchmarks.bench_ppi_active [--runs 2000] [--drafts 2400] [--share 0.3]

Two designs on the same simulated runs (N = 2,400 drafts, each run's own mean set exactly at the
threshold 3.5 or 0.1 to 0.3 away), looked at after every grade with the confidence sequence of
webapp/ppi/anytime.py:
- uniform: the product's design, drafts graded in a random order (benchmarks/anytime_batch.py:
  the run estimand's PPI estimate with the finite-population correction);
- active: benchmarks/active_design.py, draws with replacement from q = (1 - gamma) u / sum(u) + gamma / N,
  u the expected |residual| from the uncertainty signal, the IPW estimate; a draft drawn again is
  not graded again (grades = distinct drafts).
Worlds (the predictor and the error model u fitted once on an earlier fully graded run of 4,000):
- several signals (benchmarks/ppi_signals_world.py, kappa 0.62): the judge's error has the same
  spread on every draft, so A's spread over its 5 calls carries little (only rounding at the
  scale's ends): the world the other benchmarks use;
- heteroscedastic judge (built for this benchmark, labelled so): each draft has a difficulty
  d = exp(N(-0.36, 0.6^2)) (E d^2 = 1) scaling both parts of judge A's error, so A's spread over its
  calls says where A is unreliable. The error's overall size is the several-signal world's.
Fixed designs with 80% power (one side at 2.5%): uniform, from the residual's sd; active, from
the per-draw sd of the IPW values under the same q. Prints markdown tables; fixed seeds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from benchmarks.active_design import UNIFORM_SHARE, draw_probabilities
from benchmarks.anytime_batch import TOL, every_look, first_decision
from benchmarks.bench_ppi_anytime import THRESHOLD, at_mean, fixed_design
from benchmarks.ppi_signals_world import SignalsWorld, judge_calls, lasting_sd_for_kappa
from benchmarks.ppi_world import to_scale
from webapp.ppi.anytime import MIN_GRADES, UNBOUNDED, half_width
from webapp.ppi.predictor import fit_predictor

Arrays = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]
Maker = Callable[[np.random.Generator, int, int], Arrays]  # (human, prediction, uncertainty u), each (R, N)
CHUNK = 250


def _calls(rng: np.random.Generator, world: SignalsWorld, q: NDArray[np.float64], difficulty: NDArray[np.float64] | None) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    if difficulty is None:
        return judge_calls(rng, world, q)
    n, s = q.shape[0], world.lasting_sd
    lasting = rng.normal(0.0, s, n) * difficulty
    changing = rng.normal(0.0, s, (n, world.calls)) * difficulty[:, None]
    second = to_scale(q + world.bias_b + rng.normal(0.0, np.sqrt(2.0) * s, n))
    return to_scale(q[:, None] + world.bias_a + lasting[:, None] + changing), second


def maker(world: SignalsWorld, *, heteroscedastic: bool, seed: int) -> Maker:
    """Return a maker of (human, learned prediction, u) per run; predictor and error model fitted on an earlier run."""

    def draw(rng: np.random.Generator, n: int) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        q = rng.normal(world.mean, world.sd, n)
        difficulty = np.exp(rng.normal(-0.36, 0.6, n)) if heteroscedastic else None  # E[d^2] = 1
        calls, second = _calls(rng, world, q, difficulty)
        signals = np.column_stack([calls.mean(axis=1), second, calls.std(axis=1)])
        return to_scale(q), signals, calls.std(axis=1)

    rng = np.random.default_rng(seed)
    y0, x0, spread0 = draw(rng, 4000)
    model = fit_predictor(x0, y0)
    # the error model: |residual| on A's spread, a least-squares line fitted on the earlier run, kept above 0.05
    gap = np.abs(y0 - model.predict(x0))
    slope, intercept = np.polyfit(spread0, gap, 1)

    def make(rng: np.random.Generator, runs: int, drafts: int) -> Arrays:
        y, x, spread = draw(rng, runs * drafts)
        u = np.maximum(intercept + slope * spread, 0.05)
        return y.reshape(runs, drafts), model.predict(x).reshape(runs, drafts), u.reshape(runs, drafts)

    return make


@dataclass(frozen=True)
class Outcome:
    """Per run: grades at the stop, verdict (+1 pass, -1 fail, 0 none), the bounds held the run's mean."""

    grades: NDArray[np.int64]
    verdict: NDArray[np.int64]
    covered: NDArray[np.bool_]


def active_multipliers(draws: int) -> NDArray[np.float64]:
    """Return the sequence's half-width in se for k = 1..draws draws with replacement (k effective grades, no correction)."""
    out = np.full(draws, np.inf)
    for k in range(MIN_GRADES, draws + 1):
        out[k - 1] = half_width(1.0, float(k), k, UNBOUNDED)
    return out


def active_run(human: NDArray[np.float64], pred: NDArray[np.float64], u: NDArray[np.float64], rng: np.random.Generator, *, share: float, draws: int, c: NDArray[np.float64]) -> Outcome:
    """Return where each run stops under active draws (looks after every draw; none decided by `draws`: verdict 0)."""
    runs, drafts = human.shape
    grades, verdict, covered = (np.zeros(runs, dtype=np.int64), np.zeros(runs, dtype=np.int64), np.zeros(runs, dtype=bool))
    k = np.arange(1, draws + 1, dtype=np.float64)
    for i in range(runs):
        q = draw_probabilities(u[i], uniform_share=share)
        idx = np.minimum(np.searchsorted(np.cumsum(q), rng.random(draws) * q.sum()), drafts - 1)
        r = human[i, idx] - pred[i, idx]
        centre = np.concatenate([[0.0], np.cumsum(r)[:-1] / k[:-1]])
        z = pred[i].mean() + centre + (r - centre) / (drafts * q[idx])
        s1, s2 = np.cumsum(z), np.cumsum(z * z)
        mean = s1 / k
        with np.errstate(invalid="ignore", divide="ignore"):
            var = np.where(k > 1, (s2 - k * mean**2) / (k - 1), np.inf)
            half = np.where(np.isinf(c), np.inf, c * np.sqrt(np.maximum(var, 0.0) / k))
        low, high = mean - half, mean + half
        passes, fails = low > THRESHOLD + TOL, high <= THRESHOLD + TOL
        decided = passes | fails
        at = int(decided.argmax()) if decided.any() else draws - 1
        first = np.zeros(drafts, dtype=bool)
        seen = np.zeros(draws, dtype=bool)
        for j, d in enumerate(idx[: at + 1]):  # distinct drafts up to the stop: the grades
            if not first[d]:
                first[d] = seen[j] = True
        grades[i] = int(seen.sum())
        verdict[i] = 1 if passes[at] else -1 if fails[at] else 0
        truth = human[i].mean()
        covered[i] = bool(low[at] <= truth + TOL and truth - TOL <= high[at])
    return Outcome(grades, verdict, covered)


def per_draw_sd(human: NDArray[np.float64], pred: NDArray[np.float64], u: NDArray[np.float64], share: float) -> float:
    """Return the per-draw sd of the IPW values under q (centred on the run's mean residual), averaged over runs as a variance."""
    drafts = human.shape[1]
    out = []
    for i in range(human.shape[0]):
        q = draw_probabilities(u[i], uniform_share=share)
        r = human[i] - pred[i]
        out.append(float(np.sum((r - r.mean()) ** 2 / (drafts**2 * q))))
    return float(np.sqrt(np.mean(out)))


def fixed_draws(sigma: float, distance: float) -> int:
    """Return the draws of the one-look design with 80% power at `distance` for per-draw sd sigma (with replacement)."""
    z = float(special.ndtri(0.975) + special.ndtri(0.80))
    return int(np.ceil((z * sigma / distance) ** 2))


def measure(make: Maker, *, runs: int, drafts: int, shift: float, seed: int, share: float) -> tuple[Outcome, Outcome]:
    """Return (uniform order, active) outcomes on the same runs."""
    rng = np.random.default_rng(seed)
    c = active_multipliers(drafts)
    uni: list[Outcome] = []
    act: list[Outcome] = []
    for start in range(0, runs, CHUNK):
        size = min(CHUNK, runs - start)
        human, pred, u = make(rng, size, drafts)
        human = at_mean(human, THRESHOLD + shift)
        order = np.argsort(rng.random((size, drafts)), axis=1)
        looks = every_look(human, pred, order)
        s = first_decision(looks.low, looks.high, THRESHOLD, human.mean(axis=1))
        uni.append(Outcome(s.grades, s.verdict, s.covered))
        act.append(active_run(human, pred, u, rng, share=share, draws=drafts, c=c))
    join = lambda parts: Outcome(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("grades", "verdict", "covered")))  # noqa: E731
    return join(uni), join(act)


def table(name: str, make: Maker, *, runs: int, drafts: int, share: float) -> None:
    """Print the false calls at the threshold and the grades to a decision at 0.1-0.3, uniform against active."""
    human, pred, u = make(np.random.default_rng(99), 20, drafts)
    sigma_u = float(np.sqrt(np.mean(np.var(human - pred, axis=1, ddof=1))))
    sigma_a = per_draw_sd(human, pred, u, share)
    # the best any uncertainty signal could do: q from each draft's own |residual| (known only after grading)
    oracle = per_draw_sd(human, pred, np.abs(human - pred - (human - pred).mean(axis=1, keepdims=True)), share)
    corr = float(np.corrcoef(u.ravel(), np.abs(human - pred).ravel())[0, 1])
    print(
        f"\n### {name} ({runs} runs per row, N = {drafts}, uniform share {share}; residual sd {sigma_u:.3f}, "
        f"active per-draw sd {sigma_a:.3f}, with each draft's own |residual| as u {oracle:.3f}; corr(u, |residual|) {corr:.2f})\n"
    )
    print("| run's mean | design | wrong 'passes' | wrong 'fails' | mean grades | median | right call | coverage at the stop | fixed design, uniform | fixed design, same draws |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shift in (0.0, 0.1, -0.1, 0.2, -0.2, 0.3, -0.3):
        uni, act = measure(make, runs=runs, drafts=drafts, shift=shift, seed=71 + int(round(shift * 100)) % 50, share=share)
        d = abs(shift)
        for label, o in (("uniform order", uni), ("active", act)):
            above = shift > 0
            wrong_pass = float(np.mean((o.verdict == 1) & (not above)))
            wrong_fail = float(np.mean((o.verdict == -1) & above))
            right = "" if shift == 0 else f"{np.mean(o.verdict == np.sign(shift)):.1%}"
            fixed_u = "" if shift == 0 else str(fixed_design(sigma_u, d, drafts))
            fixed_a = "" if shift == 0 else str(fixed_draws(sigma_a, d))
            print(
                f"| {THRESHOLD + shift:.2f} | {label} | {wrong_pass:.2%} | {wrong_fail:.2%} | {o.grades.mean():.0f} | {np.median(o.grades):.0f} | "
                f"{right} | {o.covered.mean():.1%} | {fixed_u} | {fixed_a} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="simulated runs per row (default 2000)")
    parser.add_argument("--drafts", type=int, default=2400, help="drafts per run (default 2400)")
    parser.add_argument("--share", type=float, default=UNIFORM_SHARE, help="the uniform share gamma (default benchmarks.active_design's)")
    parser.add_argument("--only", choices=("signals", "heteroscedastic", "both"), default="both", help="which world")
    args = parser.parse_args()
    started = time.perf_counter()
    world = SignalsWorld(lasting_sd=lasting_sd_for_kappa(0.62))
    if args.only in ("signals", "both"):
        table("several signals (kappa 0.62 per call)", maker(world, heteroscedastic=False, seed=7), runs=args.runs, drafts=args.drafts, share=args.share)
        print(f"\n({time.perf_counter() - started:.0f} s so far)", flush=True)
    if args.only in ("heteroscedastic", "both"):
        table("heteroscedastic judge (built for this benchmark: A's spread carries the draft's difficulty)", maker(world, heteroscedastic=True, seed=7), runs=args.runs, drafts=args.drafts, share=args.share)
        print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
