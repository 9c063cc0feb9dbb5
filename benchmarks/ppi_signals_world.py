"""A simulated world with several judge signals per draft (issue 35), for the coverage benchmark and its smoke test.

A draft's quality is a latent q ~ Normal(3.6, 1); the human grade is q rounded to 1-5 (as in
benchmarks/ppi_world.py). Judge A is called `calls` times (5); its error on one call is a lasting
part L (the same on every call of that draft) plus a part that changes from call to call, each
half of the error's variance (`lasting_sd` for both). Judge B is called once; its error shares a
third of the variance of A's lasting error (L = S + U_A, var S = var L / 3; B's error S + U_B) and
is as large as one call of A's in total. Every call is rounded to the 1-5 scale. The signals the
estimator sees for the mean grade: A's mean over its calls, B's score, A's spread (sd over the
calls); for the pass (grade >= 3): the share of A's calls that pass, whether B passes, A's mean.
Cases carry an intent (4, uniform, no effect on the error) handed to the predictor as `groups`.
`noise=True` replaces every signal with independent Normal(0, 1) draws (signals that carry nothing).
`lasting_sd` is set so that one call of A has the quadratic-weighted kappa asked (0.62).
Two runs on the same cases share a case difficulty: each run's quality is its mean plus
sd * (sqrt(1/2) c + sqrt(1/2) e), c per case, e per draft.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from benchmarks.ppi_world import World, quadratic_kappa, to_scale, true_mean, true_pass_rate
from webapp.ppi.estimator import Sample, estimate_difference, estimate_mean, make_sample


@dataclass(frozen=True)
class SignalsWorld:
    """How drafts, human grades and the two judges behave."""

    lasting_sd: float
    calls: int = 5
    bias_a: float = 0.3
    bias_b: float = -0.2
    shared: float = 1.0 / 3.0
    mean: float = 3.6
    sd: float = 1.0
    pass_threshold: int = 3
    intents: int = 4
    noise: bool = False


@dataclass(frozen=True)
class SignalsRun:
    """One simulated run: every draft's grade and judge calls, the draw and the case's intent."""

    human: NDArray[np.float64]
    calls_a: NDArray[np.float64]  # (N, calls)
    judge_b: NDArray[np.float64]
    drawn: NDArray[np.bool_]
    pi: NDArray[np.float64]
    groups: NDArray[np.int64]
    noise: bool

    def _noise(self, seed_from: NDArray[np.float64]) -> NDArray[np.float64]:
        rng = np.random.default_rng(int(np.sum(seed_from * 1000)) % (2**32))
        return rng.normal(0.0, 1.0, (self.human.shape[0], 3))

    def mean_signals(self) -> NDArray[np.float64]:
        """Return the signals for the mean grade: A's mean, B, A's spread (or noise)."""
        if self.noise:
            return self._noise(self.calls_a[:, 0])
        return np.column_stack([self.calls_a.mean(axis=1), self.judge_b, self.calls_a.std(axis=1)])

    def pass_signals(self, threshold: int) -> NDArray[np.float64]:
        """Return the signals for the pass: A's passing share, B passes, A's mean (or noise)."""
        if self.noise:
            return self._noise(self.judge_b)
        share = (self.calls_a >= threshold).mean(axis=1)
        return np.column_stack([share, (self.judge_b >= threshold).astype(np.float64), self.calls_a.mean(axis=1)])


def judge_calls(
    rng: np.random.Generator, world: SignalsWorld, q: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return (A's calls (N, calls), B's score) for latent qualities q."""
    n = q.shape[0]
    s2 = world.lasting_sd**2
    shared = rng.normal(0.0, np.sqrt(world.shared * s2), n)
    lasting = shared + rng.normal(0.0, np.sqrt((1.0 - world.shared) * s2), n)
    changing = rng.normal(0.0, world.lasting_sd, (n, world.calls))
    calls_a = to_scale(q[:, None] + world.bias_a + lasting[:, None] + changing)
    own_b = rng.normal(0.0, np.sqrt(2.0 * s2 - world.shared * s2), n)
    return calls_a, to_scale(q + world.bias_b + shared + own_b)


def simulate_run(
    rng: np.random.Generator,
    world: SignalsWorld,
    *,
    drafts: int,
    budget: int,
    quality: NDArray[np.float64] | None = None,
    groups: NDArray[np.int64] | None = None,
) -> SignalsRun:
    """Draw one run of `drafts` drafts, each drawn with pi = budget/drafts (at least two drawn)."""
    q = rng.normal(world.mean, world.sd, drafts) if quality is None else quality
    calls_a, judge_b = judge_calls(rng, world, q)
    pi = np.full(drafts, budget / drafts)
    drawn = rng.random(drafts) < pi
    while drawn.sum() < 2:
        drawn = rng.random(drafts) < pi
    intents = rng.integers(0, world.intents, drafts) if groups is None else groups
    return SignalsRun(to_scale(q), calls_a, judge_b, drawn, pi, intents.astype(np.int64), world.noise)


def paired_runs(
    rng: np.random.Generator, world: SignalsWorld, *, drafts: int, budget: int, shift: float
) -> tuple[SignalsRun, SignalsRun]:
    """Return two runs on the same cases (shared difficulty); run B's quality is `shift` lower on average."""
    c = rng.normal(0.0, 1.0, drafts)
    intents = rng.integers(0, world.intents, drafts)
    half = np.sqrt(0.5) * world.sd
    qa = world.mean + half * (c + rng.normal(0.0, 1.0, drafts))
    qb = world.mean - shift + half * (c + rng.normal(0.0, 1.0, drafts))
    a = simulate_run(rng, world, drafts=drafts, budget=budget, quality=qa, groups=intents)
    b = simulate_run(rng, world, drafts=drafts, budget=budget, quality=qb, groups=intents)
    return a, b


def single_call_kappa(world: SignalsWorld, *, seed: int = 0, drafts: int = 200_000) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return (human grades, one call of A) on many drafts, for the kappa."""
    rng = np.random.default_rng(seed)
    q = rng.normal(world.mean, world.sd, drafts)
    calls_a, _ = judge_calls(rng, world, q)
    return to_scale(q), calls_a[:, 0]


def lasting_sd_for_kappa(target: float, *, seed: int = 0) -> float:
    """Return the lasting_sd giving one call of A the quadratic-weighted kappa `target` (bisection)."""
    low, high = 0.0, 3.0
    for _ in range(30):
        mid = (low + high) / 2
        human, call = single_call_kappa(SignalsWorld(lasting_sd=mid), seed=seed)
        if quadratic_kappa(human, call) > target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def superpopulation_mean(world: SignalsWorld, mean: float) -> float:
    """Return the expected human grade of drafts whose quality is Normal(mean, sd)."""
    return true_mean(World(bias=0.0, mean=mean, sd=world.sd))


def superpopulation_pass(world: SignalsWorld, mean: float) -> float:
    """Return the expected pass rate of drafts whose quality is Normal(mean, sd)."""
    return true_pass_rate(World(bias=0.0, mean=mean, sd=world.sd, pass_threshold=world.pass_threshold))


@dataclass
class Tally:
    """Coverage hits and worths of one figure over the simulated runs."""

    hits: int = 0
    runs: int = 0
    worth: list[float] | None = None
    r_squared: list[float] | None = None

    def add(self, low: float, high: float, truth: float, worth: float | None = None, r2: float | None = None) -> None:
        """Count one run's interval against its truth; keep its worth and R^2."""
        self.hits += int(low <= truth <= high)
        self.runs += 1
        if worth is not None:
            self.worth = [*(self.worth or []), worth]
        if r2 is not None:
            self.r_squared = [*(self.r_squared or []), r2]

    @property
    def coverage(self) -> float:
        """Return the share of runs whose interval held the truth."""
        return self.hits / self.runs

    @property
    def median_worth(self) -> float:
        """Return the median human-only grades the interval is worth."""
        return float(np.median(self.worth or [np.nan]))

    @property
    def median_r_squared(self) -> float:
        """Return the median out-of-fold R^2 of the learned predictor."""
        return float(np.median(self.r_squared or [np.nan]))


def _sample(run: SignalsRun, judge: NDArray[np.float64], human: NDArray[np.float64], groups: bool = True) -> Sample:
    return make_sample(judge=judge, human=human, drawn=run.drawn, pi=run.pi, groups=run.groups if groups else None)


def measure_one_run(world: SignalsWorld, *, runs: int, drafts: int, budget: int, seed: int) -> dict[str, Tally]:
    """Return tallies of the run's own mean and pass rate.

    Keys: the learned predictor ("mean", "pass"), one call of A as the one score ("mean 1 call",
    "pass 1 call") and the mean of A's calls as the one score ("mean 5 calls").
    """
    rng = np.random.default_rng(seed)
    tallies = {key: Tally() for key in ("mean", "pass", "mean 1 call", "pass 1 call", "mean 5 calls")}
    for i in range(runs):
        run = simulate_run(rng, world, drafts=drafts, budget=budget)
        passed = (run.human >= world.pass_threshold).astype(np.float64)
        one_call = run.calls_a[:, 0]
        readings = (
            ("mean", run.mean_signals(), run.human),
            ("pass", run.pass_signals(world.pass_threshold), passed),
            ("mean 1 call", one_call, run.human),
            ("pass 1 call", (one_call >= world.pass_threshold).astype(np.float64), passed),
            ("mean 5 calls", run.calls_a.mean(axis=1), run.human),
        )
        for key, judge, human in readings:
            est = estimate_mean(_sample(run, judge, human), seed=i)
            tallies[key].add(est.low, est.high, float(human.mean()), est.effective_labels, est.r_squared)
    return tallies


def measure_difference(world: SignalsWorld, *, runs: int, drafts: int, budget: int, seed: int, shift: float = 0.2) -> dict[str, Tally]:
    """Return tallies of the two-run difference (superpopulation, the default) of the mean grade and the pass rate."""
    rng = np.random.default_rng(seed)
    truth = {
        "difference mean": superpopulation_mean(world, world.mean) - superpopulation_mean(world, world.mean - shift),
        "difference pass": superpopulation_pass(world, world.mean) - superpopulation_pass(world, world.mean - shift),
    }
    tallies = {key: Tally() for key in truth}
    keys = np.arange(drafts)
    for i in range(runs):
        a, b = paired_runs(rng, world, drafts=drafts, budget=budget, shift=shift)
        pa, pb = ((r.human >= world.pass_threshold).astype(np.float64) for r in (a, b))
        pairs = (
            ("difference mean", (a.mean_signals(), a.human), (b.mean_signals(), b.human)),
            ("difference pass", (a.pass_signals(world.pass_threshold), pa), (b.pass_signals(world.pass_threshold), pb)),
        )
        for key, (ja, ya), (jb, yb) in pairs:
            d = estimate_difference(_sample(a, ja, ya), _sample(b, jb, yb), a_cluster_keys=keys, b_cluster_keys=keys, seed=i)
            tallies[key].add(d.low, d.high, truth[key])
    return tallies
