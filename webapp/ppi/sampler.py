"""Which drafts people grade: inclusion probabilities and seeded Bernoulli draws, decided before any grade.

Rules (issue 27), and the decisions where it was silent:
- pi = 1 for forced drafts: the safety and adversarial strata, golden and regression examples
  (what a zero-tolerance gate covers is 100% checked, as before).
- Every other draft gets pi >= a floor of 0.5 x budget / N (N = all drafts of the run), so no pi
  is 0 and every draft can be drawn: the estimate stays unbiased whatever the error model says.
- Above the floor, probability goes where the error model expects the judge to be wrong:
  weight = sqrt(expected squared judge-human gap), Neyman's rule for the smallest variance.
  The model is learned from earlier runs' human grades and frozen (stored) before sampling;
  the judge's own spread is never the weight on its own, and nothing is a deterministic top-k
  (the floor keeps every draft a real chance; the draw is random).
- Decision: the budget is the expected number of *sampled* drafts; forced drafts come on top
  of it. So the non-forced pi sum to the budget exactly (capped at the number of non-forced
  drafts), and sum(pi) = budget + forced.
- Draws: draft k (in draft id order) is drawn when u_k < pi_k, u from numpy's default_rng(seed);
  the seed is stored, so anyone can redraw the same sample from the stored rows.
- A second sample (to settle an undecided gate) draws again, independently, with its own pi2;
  a draft is then graded when either draw took it, with combined pi = 1 - (1 - pi1)(1 - pi2).
- Later rounds keep round one's design (issue 34): each draft's stratum and forced flag are read
  from round one's stored rows (`frozen_design`), never recomputed from the regression suite or
  the case categories, which people change after reading round one's grades. A draft that became
  a regression case after round one stays unforced (its pi is not suddenly 1, which would mix two
  designs in one estimate); one that left the suite stays forced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

FORCED_STRATA: frozenset[str] = frozenset({"safety", "adversarial"})
FLOOR_SHARE = 0.5
PRIOR_STRENGTH = 5.0  # grades' worth of the overall mean each cell of the error model starts from


class SamplerError(ValueError):
    """Raised for a sample that cannot be drawn; the message names the field."""


@dataclass(frozen=True)
class FrozenDesign:
    """One draft's part of round one's design: its stratum and whether it was forced (pi = 1)."""

    stratum: str
    forced: bool


def frozen_design(stored: Mapping[int, FrozenDesign], draft_ids: Iterable[int]) -> list[FrozenDesign]:
    """Return round one's stored design for each draft, in the given order; KeyError names a draft round one lacks."""
    return [stored[d] for d in draft_ids]


def inclusion_probabilities(
    *, forced: ArrayLike, weight: ArrayLike | None, budget: float, floor_share: float = FLOOR_SHARE
) -> NDArray[np.float64]:
    """Return each draft's pi: 1 when forced; otherwise a floor plus a share of the budget by weight."""
    must = np.asarray(forced, dtype=bool)
    n_all = must.shape[0]
    if budget <= 0:
        raise SamplerError("budget: must be a positive number of drafts")
    if n_all == 0:
        raise SamplerError("drafts: the run has no draft")
    pi = np.ones(n_all)
    free = ~must
    m = int(free.sum())
    if m == 0:
        return pi
    b = min(float(budget), float(m))
    floor = min(floor_share * float(budget) / n_all, b / m)
    w = np.ones(m) if weight is None else np.asarray(weight, dtype=np.float64)[free]
    if np.any(~np.isfinite(w)) or np.any(w < 0):
        raise SamplerError("weight: error-model weights must be finite and non-negative")
    if w.sum() == 0:
        w = np.ones(m)
    p = np.empty(m)
    capped = np.zeros(m, dtype=bool)
    # Share what is left above the floor by weight; a pi that would pass 1 is set to 1 and the
    # rest is shared again among the others (at most m rounds).
    for _ in range(m + 1):
        open_ = ~capped
        left = b - capped.sum() - floor * open_.sum()
        wo = w[open_]
        share = wo / wo.sum() if wo.sum() > 0 else np.full(wo.shape[0], 1.0 / wo.shape[0])
        p[open_] = floor + max(left, 0.0) * share
        p[capped] = 1.0
        over = open_ & (p > 1.0)
        if not over.any():
            break
        capped |= over
    pi[free] = p
    return pi


def draw(pi: ArrayLike, seed: int) -> NDArray[np.bool_]:
    """Return the Bernoulli draws: item k is drawn when the k-th uniform of default_rng(seed) is below pi_k."""
    p = np.asarray(pi, dtype=np.float64)
    return np.random.default_rng(seed).random(p.shape[0]) < p


def combined_pi(first: ArrayLike, second: ArrayLike) -> NDArray[np.float64]:
    """Return the probability that either of two independent draws takes a draft: 1 - (1 - pi1)(1 - pi2)."""
    return 1.0 - (1.0 - np.asarray(first, dtype=np.float64)) * (1.0 - np.asarray(second, dtype=np.float64))


@dataclass(frozen=True)
class GradedExample:
    """One earlier draft: its stratum, the judge's overall score and the final human overall score."""

    stratum: str
    judge_score: float
    human_score: float


@dataclass(frozen=True)
class ErrorModel:
    """Expected squared judge-human gap per (stratum, rounded judge score), shrunk towards the overall mean."""

    overall: float
    cells: dict[str, float] = field(default_factory=dict)
    grades: int = 0

    @staticmethod
    def key(stratum: str, judge_score: float) -> str:
        """Return the cell of a draft: its stratum and its judge score rounded to a whole grade."""
        return f"{stratum}|{int(np.rint(judge_score))}"

    def expected_gap2(self, stratum: str, judge_score: float) -> float:
        """Return the expected squared gap for a draft (the overall mean for a cell never seen)."""
        return self.cells.get(self.key(stratum, judge_score), self.overall)

    def weights(self, strata: Iterable[str], judge_scores: Iterable[float]) -> NDArray[np.float64]:
        """Return sqrt(expected squared gap) per draft: the sampler's weights."""
        return np.sqrt([self.expected_gap2(s, f) for s, f in zip(strata, judge_scores, strict=True)])

    def as_json(self) -> dict[str, object]:
        """Return the model as stored with a sample (frozen)."""
        return {"overall": self.overall, "cells": dict(self.cells), "grades": self.grades}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ErrorModel:
        """Return a stored model."""
        cells = data.get("cells", {})
        assert isinstance(cells, dict)
        return cls(overall=float(data["overall"]), cells={str(k): float(v) for k, v in cells.items()}, grades=int(data["grades"]))  # type: ignore[arg-type]


def fit_error_model(examples: Iterable[GradedExample], *, prior: float = PRIOR_STRENGTH) -> ErrorModel | None:
    """Return the error model learned from earlier grades, or None when there are none (uniform sampling)."""
    rows = list(examples)
    if not rows:
        return None
    gap2 = np.array([(r.human_score - r.judge_score) ** 2 for r in rows])
    overall = float(gap2.mean())
    sums: dict[str, list[float]] = {}
    for r, g in zip(rows, gap2, strict=True):
        sums.setdefault(ErrorModel.key(r.stratum, r.judge_score), []).append(float(g))
    cells = {k: (sum(v) + prior * overall) / (len(v) + prior) for k, v in sums.items()}
    return ErrorModel(overall=overall, cells=cells, grades=len(rows))
