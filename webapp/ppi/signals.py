"""The judge's extra signals (issue 35): the learned predictor's matrix, what the signals bought, and which estimate the gate uses.

A judge pass stores, per draft, every parsed call of the primary judge, the second judge's answer
and the log-prob expectation of the first call (`PpiJudgeScore.signals`, webapp/ppi/models.py).
This module turns them into the N x p matrix the estimator's learned predictor reads, and into the
page's per-criterion diagnostics.

Decisions (docs/ppi.md, "What the signals bought"):
- Columns, per figure: the calls' mean; the calls' spread (sd, ddof 1) when every draft has at
  least 2 parsed calls; the second judge's score when every draft has one; the log-prob
  expectation when every draft has one. A column is used only when every draft has it (a column
  with holes would need an imputation rule the grades cannot check). Each call's figure value is
  computed from that call's four criteria exactly as the single score's is (`figure_values`).
- No learned predictor when any draft of the run has no stored signals (rows judged before
  issue 35) or when the signals add nothing to the single score (one call per draft, no second
  judge, no expectation): the figure is then the single-score estimate alone.
- The estimate the gate uses (`choose`): the learned one only when it pays, that is its worth
  (human-only grades giving the same standard error) is at least `PAYS_FACTOR` x the human grades
  AND at least the single-score worth; otherwise the single-score one. Extra signals that do not
  buy at least a fifth more than people alone are not worth a model the team has to trust.
- Share of the judge's error that changes from call to call (`call_to_call_share`), on the graded
  drafts with at least 2 parsed calls: mean over those drafts of the calls' variance (ddof 1)
  divided by the variance (ddof 1, over the same drafts) of the first call's error against the
  human grade. Unweighted (a description of the judge, not an estimate of the run): 1 means every
  error is call-to-call noise that averaging calls removes; near 0 means the judge errs the same
  way every call. By chance it can exceed 1 on a few drafts; it is shown as computed.
- Error correlation between the two judges (`error_correlation`): Pearson correlation of
  (first call - human) and (second judge - human) on the graded drafts with a second judge's
  score, None below 3 such drafts or when either error does not vary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ValidationError

from webapp.core.spec import EvalSpec
from webapp.ppi.estimator import Estimate

SCALES: tuple[str, ...] = ("citation_relevance", "tone", "completeness")
OVERALL = "overall"  # the mean of the four criteria per draft (factual pass/fail as the gate's 5/1): the weekly chart's figure
PAYS_FACTOR = 1.2  # the learned predictor must be worth at least this many times the human grades

# One draft's four criteria: factual as "pass"/"fail" (a call) or as P(pass) (the log-prob expectation).
Row = tuple[str | float, float, float, float]
Column = Literal["calls_mean", "calls_sd", "second", "expected"]

# What a figure can be: a share (factual accuracy, pass rate) lies in [0, 1], a rubric score in [1, 5].
FIGURE_RANGE: dict[str, tuple[float, float]] = {
    "factual_accuracy": (0.0, 1.0), "citation_relevance": (1.0, 5.0), "tone": (1.0, 5.0),
    "completeness": (1.0, 5.0), "pass_rate": (0.0, 1.0), "overall": (1.0, 5.0),
}


def within_range(estimate: Estimate, lowest: float, highest: float) -> Estimate:
    """Return the estimate with its interval cut to what the figure can be (97% [79%, 116%] -> [79%, 100%]).

    Cutting an interval to the values the quantity can take keeps every true value it covered, so
    the coverage is unchanged; the estimate itself is left as computed.
    """
    return replace(estimate, low=max(estimate.low, lowest), high=min(estimate.high, highest))


def figure_values(spec: EvalSpec, key: str, rows: Sequence[Row]) -> NDArray[np.float64]:
    """Return the per-draft value of a figure from (factual, citation, tone, completeness) rows.

    Factual is "pass"/"fail" (1/0) or a probability of pass (the log-prob expectation): the pass
    rate is then P(pass) where the three scales clear their thresholds, the overall score the
    expected factual points; with 0/1 factual both are the plain rules.
    """
    factual = np.array([(1.0 if r[0] == "pass" else 0.0) if isinstance(r[0], str) else float(r[0]) for r in rows], dtype=np.float64)
    if key == "factual_accuracy":
        return factual
    scales = np.array([[r[1], r[2], r[3]] for r in rows], dtype=np.float64).reshape(len(rows), 3)
    if key == "pass_rate":
        by_key = {c.key: c for c in spec.rubric.criteria}
        thresholds = np.array([float(by_key[k].pass_threshold or 0) for k in SCALES], dtype=np.float64)
        return np.where(np.all(scales >= thresholds, axis=1), factual, 0.0)
    if key == OVERALL:
        pilot = spec.gates.pilot
        points = float(pilot.factual_fail_score) + (float(pilot.factual_pass_score) - float(pilot.factual_fail_score)) * factual
        return (points + scales.sum(axis=1)) / 4.0
    return scales[:, SCALES.index(key)].copy()


# --- the stored signals -----------------------------------------------------------------------------------


class _Scores(BaseModel):
    factual_accuracy: str
    citation_relevance: float
    tone: float
    completeness: float

    def row(self) -> Row:
        return (self.factual_accuracy, self.citation_relevance, self.tone, self.completeness)


class _Expected(BaseModel):
    factual_accuracy: float  # P(pass)
    citation_relevance: float
    tone: float
    completeness: float

    def row(self) -> Row:
        return (self.factual_accuracy, self.citation_relevance, self.tone, self.completeness)


class _StoredSignals(BaseModel):
    calls: list[_Scores]
    second: _Scores | None = None
    expected: _Expected | None = None


@dataclass(frozen=True)
class DraftSignals:
    """One draft's stored signals: the primary judge's parsed calls, the second judge's answer, the log-prob expectation."""

    calls: tuple[Row, ...]
    second: Row | None
    expected: Row | None


def parse_signals(raw: object) -> DraftSignals | None:
    """Return a draft's signals from the stored JSON, or None (no signals, none parsed, or a shape this code does not know).

    A shape that does not parse is read as "no signals": the figure falls back to the single
    score (the plain columns), which the page can always show.
    """
    if raw is None:
        return None
    try:
        stored = _StoredSignals.model_validate(raw)
    except ValidationError:
        return None
    if not stored.calls:
        return None
    return DraftSignals(
        calls=tuple(c.row() for c in stored.calls),
        second=None if stored.second is None else stored.second.row(),
        expected=None if stored.expected is None else stored.expected.row(),
    )


def call_values(spec: EvalSpec, key: str, signals: Sequence[DraftSignals]) -> list[NDArray[np.float64]]:
    """Return, per draft, the figure's value of each parsed call (one array per draft)."""
    counts = [len(s.calls) for s in signals]
    flat = figure_values(spec, key, [row for s in signals for row in s.calls])
    return list(np.split(flat, np.cumsum(counts)[:-1])) if signals else []


@dataclass(frozen=True)
class SignalMatrix:
    """The learned predictor's input of one figure: N x p values and the name of each column."""

    values: NDArray[np.float64]
    columns: tuple[Column, ...]


def signal_matrix(spec: EvalSpec, key: str, signals: Sequence[DraftSignals | None]) -> SignalMatrix | None:
    """Return the figure's N x p signal matrix, or None when there is no learned predictor (see the module's decisions)."""
    present = [s for s in signals if s is not None]
    if not present or len(present) != len(signals):
        return None
    per_call = call_values(spec, key, present)
    cols: dict[Column, NDArray[np.float64]] = {"calls_mean": np.array([v.mean() for v in per_call])}
    if all(v.shape[0] >= 2 for v in per_call):
        cols["calls_sd"] = np.array([v.std(ddof=1) for v in per_call])
    seconds = [s.second for s in present]
    if all(r is not None for r in seconds):
        cols["second"] = figure_values(spec, key, [r for r in seconds if r is not None])
    expected = [s.expected for s in present]
    if all(r is not None for r in expected):
        cols["expected"] = figure_values(spec, key, [r for r in expected if r is not None])
    if len(cols) == 1 and all(v.shape[0] == 1 for v in per_call):
        return None  # one call per draft and nothing else: the single score itself
    names = tuple(cols)
    return SignalMatrix(values=np.column_stack([cols[c] for c in names]), columns=names)


# --- what the signals bought --------------------------------------------------------------------------------


def call_to_call_share(calls: Sequence[NDArray[np.float64]], human: NDArray[np.float64]) -> float | None:
    """Return the share of the judge's error that changes from call to call (module docstring), on drafts given as graded.

    `calls[i]` are the values of draft i's parsed calls (first call first), `human[i]` its human
    grade; drafts with fewer than 2 calls are left out. None below 2 such drafts or when the first
    call's error does not vary.
    """
    keep = [i for i, v in enumerate(calls) if v.shape[0] >= 2]
    if len(keep) < 2:
        return None
    within = float(np.mean([np.var(calls[i], ddof=1) for i in keep]))
    error = np.array([calls[i][0] - human[i] for i in keep])
    total = float(np.var(error, ddof=1))
    if total <= 0:
        return None
    return within / total


def error_correlation(first: NDArray[np.float64], second: NDArray[np.float64], human: NDArray[np.float64]) -> float | None:
    """Return the correlation of the two judges' errors against the human grade (None below 3 drafts or without spread)."""
    if first.shape[0] < 3:
        return None
    a, b = first - human, second - human
    if float(np.std(a)) == 0 or float(np.std(b)) == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


Source = Literal["learned", "single", "human"]


@dataclass(frozen=True)
class Choice:
    """Which estimate a figure (and the gate) uses, and why."""

    estimate: Estimate | None
    uses_learned: bool
    note: str | None  # what the page says when the learned predictor exists but does not pay, or when the human grades alone are read
    source: Source = "single"  # learned predictor, single judge score, or the human grades alone (the fallback)


def pays(single: Estimate, learned: Estimate) -> bool:
    """Tell whether the learned predictor pays: worth >= PAYS_FACTOR x the human grades and >= the single-score worth."""
    worth = learned.effective_labels
    return worth >= PAYS_FACTOR * learned.n_labels and worth >= single.effective_labels


def choose(single: Estimate | None, learned: Estimate | None, human: Estimate | None = None) -> Choice:
    """Return the estimate the figure and the gate use: the learned one only when it pays, never one worth fewer grades than people gave.

    Issue 41 item 3: an estimate worth fewer human-only grades than the grades it rests on is
    worse than the grades alone, so `human` (the human-only estimate, lambda = 0) is read instead
    and the note says so.
    """
    if learned is None or single is None:
        choice = Choice(single, uses_learned=False, note=None)
    elif pays(single, learned):
        choice = Choice(learned, uses_learned=True, note=None, source="learned")
    else:
        note = (
            f"the extra signals do not pay here (worth {learned.effective_labels:.0f} vs {single.effective_labels:.0f}): "
            "the gate uses the single-score estimate"
        )
        choice = Choice(single, uses_learned=False, note=note)
    e = choice.estimate
    if human is not None and e is not None and e.effective_labels < e.n_labels:
        note = (
            f"the judge's estimate is worth {e.effective_labels:.0f} human-only grades, fewer than the {e.n_labels} people gave: "
            "the gate uses the human grades alone"
        )
        return Choice(human, uses_learned=False, note=note, source="human")
    return choice
