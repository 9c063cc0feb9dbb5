"""One run's arrays for the prediction-powered estimate: judge signals for all drafts, human grades where drawn.

`make_sample` checks and packs them (webapp/ppi/estimator.py explains the estimate). The judge
part is one score per draft (N,) or a matrix of signals (N, p): the calls' mean and spread, a
second judge's score, a log-probability expectation (issue 35). With p > 1 the estimator learns
a predictor of the human grade from the signals (webapp/ppi/predictor.py); `groups` (the case's
intent, one int or str code per draft) lets that predictor use intent and intent x score terms.
A (N, 1) matrix is the same sample as its (N,) column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


class EstimatorError(ValueError):
    """Raised when a sample cannot give an estimate; the message names the field."""


@dataclass(frozen=True)
class Sample:
    """One run's drafts: judge score f for all, human label y where drawn, pi and the ticket.

    `judge` is the one judge score per draft (with several signals: the first column, the score
    the judge-alone figure reads); `signals` the (N, p) matrix when p > 1, else None; `groups`
    the group code of each draft (0..G-1) when given.
    """

    judge: NDArray[np.float64]
    human: NDArray[np.float64]
    drawn: NDArray[np.bool_]
    pi: NDArray[np.float64]
    cluster: NDArray[np.int64]
    signals: NDArray[np.float64] | None = None
    groups: NDArray[np.int64] | None = None

    @property
    def n_drafts(self) -> int:
        """Return N, the number of judged drafts."""
        return int(self.judge.shape[0])

    @property
    def n_labels(self) -> int:
        """Return n, the number of drawn (human-graded) drafts."""
        return int(self.drawn.sum())


def _judge_columns(judge: ArrayLike) -> NDArray[np.float64]:
    """Return the judge part as (N, p); a 1-d array is one column."""
    f = np.asarray(judge, dtype=np.float64)
    if f.ndim == 1:
        return f[:, None]
    if f.ndim != 2 or f.shape[1] == 0:
        raise EstimatorError("judge: expected one score per draft (N,) or a matrix of signals (N, p)")
    return f


def make_sample(
    *,
    judge: ArrayLike,
    human: ArrayLike,
    drawn: ArrayLike,
    pi: ArrayLike,
    cluster: ArrayLike | None = None,
    groups: ArrayLike | None = None,
) -> Sample:
    """Check and pack one run's arrays; human values of undrawn drafts are ignored (may be NaN)."""
    columns = _judge_columns(judge)
    f = np.ascontiguousarray(columns[:, 0])
    y = np.asarray(human, dtype=np.float64)
    xi = np.asarray(drawn, dtype=bool)
    p = np.asarray(pi, dtype=np.float64)
    c = np.arange(f.shape[0], dtype=np.int64) if cluster is None else np.asarray(cluster)
    g = None if groups is None else np.asarray(groups)
    named = [("human", y), ("drawn", xi), ("pi", p), ("cluster", c)] + ([] if g is None else [("groups", g)])
    for name, arr in named:
        if arr.shape != f.shape:
            raise EstimatorError(f"{name}: expected {f.shape[0]} values, got {arr.shape[0] if arr.ndim else 0}")
    if not np.all(np.isfinite(columns)):
        raise EstimatorError("judge: every draft needs a finite judge score")
    if np.any(~(p > 0)) or np.any(p > 1):
        raise EstimatorError("pi: every inclusion probability must lie in (0, 1]")
    if not np.all(np.isfinite(y[xi])):
        raise EstimatorError("human: every drawn draft needs a human label")
    if not xi.any():
        raise EstimatorError("drawn: no draft was drawn")
    _, codes = np.unique(c, return_inverse=True)
    group_codes = None if g is None else np.unique(g, return_inverse=True)[1].astype(np.int64)
    return Sample(
        judge=f,
        human=np.where(xi, y, 0.0),
        drawn=xi,
        pi=p,
        cluster=codes.astype(np.int64),
        signals=columns if columns.shape[1] > 1 else None,
        groups=group_codes,
    )
