"""The predictor learned from the human grades: ridge on the judge signals, and its cross-fitting (issue 35).

With several judge signals per draft (the calls' mean and spread, a second judge, a log-prob
expectation) the estimate predicts the human grade from them and runs the prediction-powered
estimate on the predictions (webapp/ppi/estimator.py). Two ways:

- Cross-fitting (`cross_fit`, Cross-PPI: Zrnic & Candes 2024): the drawn drafts' tickets are split
  into K folds; fold k's model is fitted on the other folds' drawn drafts. A drawn draft's
  prediction comes from the model that did not see its fold (its out-of-fold prediction), an
  undrawn draft's is the mean of the K models. No drawn draft's prediction used its own label, so
  the rectifier stays unbiased whatever the model learned.
- Frozen (`fit_predictor`): fitted on earlier runs' adjudicated grades before this run's sample
  is drawn; its predictions then go in as one column, like a judge score.

The model (decisions):
- Ridge with an unpenalised intercept on standardized columns: numpy only (scikit-learn is a
  dev-only dependency). Columns: the signals; with `groups` (the case's intent) one indicator per
  intent and the intent x first-signal products, penalised like the rest, so an intent with few
  grades is shrunk towards the common line rather than fitted on its own.
- The penalty is chosen inside each training set by generalised cross-validation (closed form
  from one SVD) over a grid of penalty/rows from 1e-4 to 1e3: noise signals get a large penalty
  and predictions near the training mean.
- Weighted by 1/pi in the fit: the rectifier weighs each drawn draft's residual by the drafts it
  stands for (1/pi), so the fit minimises the error where the estimate pays for it; with uniform
  pi this is the plain fit. Drafts forced in at pi = 1 weigh least, as in the estimate.
- An intent unseen when fitting gets no intent terms (all its indicators 0).
- Predictions are clipped to the range of the grades the model was fitted on: a linear model
  extrapolates on a draft whose signals lie outside what it saw, and no grade lies outside that
  range in the fit (with noise signals and 16 training grades, one undrawn draft's extrapolation
  made an interval 29 x the human-only width before the clip; 1.47 x after it).
Isotonic-plus-linear (optional in the issue) is not built: ridge with GCV already shrinks to the
mean for signals that carry nothing, which is what keeps the interval from widening.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from webapp.ppi.sample import EstimatorError, Sample

PENALTY_GRID = np.logspace(-4.0, 3.0, 36)  # penalty per training row
MODEL_NAME = "ridge"


def _columns(signals: ArrayLike) -> NDArray[np.float64]:
    x = np.asarray(signals, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] == 0:
        raise EstimatorError("signals: expected (N,) or (N, p) judge signals")
    if not np.all(np.isfinite(x)):
        raise EstimatorError("signals: every draft needs finite judge signals")
    return x


def _design(x: NDArray[np.float64], codes: NDArray[np.int64] | None, n_groups: int) -> NDArray[np.float64]:
    """Return the raw columns: signals, then per group an indicator and indicator x first signal."""
    if codes is None or n_groups == 0:
        return x
    onehot = (codes[:, None] == np.arange(n_groups)[None, :]).astype(np.float64)
    return np.hstack([x, onehot, onehot * x[:, :1]])


@dataclass(frozen=True)
class Predictor:
    """A fitted ridge predictor of the human grade from judge signals (and the case's group)."""

    name: str
    group_labels: NDArray[np.generic] | None  # the groups seen when fitting, sorted; None: fitted without
    center: NDArray[np.float64]
    scale: NDArray[np.float64]  # inf for a column constant in the fit (it then adds nothing)
    coef: NDArray[np.float64]
    intercept: float
    penalty: float
    n_columns: int
    low: float = -np.inf  # the smallest and largest grade it was fitted on: predictions are clipped to them
    high: float = np.inf

    def _codes(self, groups: ArrayLike | None, rows: int) -> NDArray[np.int64] | None:
        if self.group_labels is None:
            return None
        if groups is None:
            raise EstimatorError("groups: this predictor was fitted with groups; give one per draft")
        g = np.asarray(groups)
        if g.shape != (rows,):
            raise EstimatorError(f"groups: expected {rows} values, got {g.shape[0] if g.ndim else 0}")
        labels = self.group_labels
        at = np.clip(np.searchsorted(labels, g), 0, labels.shape[0] - 1)
        return np.where(labels[at] == g, at, -1).astype(np.int64)

    def predict(self, signals: ArrayLike, groups: ArrayLike | None = None) -> NDArray[np.float64]:
        """Return the predicted human grade of each draft, (N,)."""
        x = _columns(signals)
        if x.shape[1] != self.n_columns:
            raise EstimatorError(f"signals: expected {self.n_columns} columns, got {x.shape[1]}")
        n_groups = 0 if self.group_labels is None else int(self.group_labels.shape[0])
        z = (_design(x, self._codes(groups, x.shape[0]), n_groups) - self.center) / self.scale
        return np.clip(self.intercept + z @ self.coef, self.low, self.high)


def _ridge(x: NDArray[np.float64], y: NDArray[np.float64], w: NDArray[np.float64]) -> tuple[
    NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], float, float
]:
    """Return (center, scale, coef, intercept, penalty) of the weighted ridge fit, penalty by GCV."""
    w = w / w.sum()
    center = w @ x
    scale = np.sqrt(w @ (x - center) ** 2)
    scale = np.where(scale > 1e-12 * np.maximum(1.0, np.abs(center)), scale, np.inf)
    ybar = float(w @ y)
    rows = y.shape[0]
    if rows < 3:
        return center, scale, np.zeros(x.shape[1]), ybar, float("inf")
    root = np.sqrt(w * rows)
    a = (x - center) / scale * root[:, None]
    b = (y - ybar) * root
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    ub = u.T @ b
    outside = max(float(b @ b - ub @ ub), 0.0)
    best, best_gcv = float(PENALTY_GRID[-1] * rows), float("inf")
    for penalty in PENALTY_GRID * rows:
        shrink = s**2 / (s**2 + penalty)
        rest = rows - float(shrink.sum()) - 1.0
        if rest <= 0:
            continue
        gcv = (outside + float(np.sum(((1.0 - shrink) * ub) ** 2))) / rest**2
        if gcv < best_gcv:
            best, best_gcv = float(penalty), gcv
    coef = vt.T @ (s / (s**2 + best) * ub)
    return center, scale, coef, ybar, best


def fit_predictor(
    signals: ArrayLike, human: ArrayLike, groups: ArrayLike | None = None, *, weights: ArrayLike | None = None
) -> Predictor:
    """Fit the ridge predictor on graded drafts (e.g. earlier runs' adjudicated grades); freeze it.

    `weights`: each draft's weight in the fit (1/pi of its draw; default equal).
    """
    x = _columns(signals)
    y = np.asarray(human, dtype=np.float64)
    if y.shape != (x.shape[0],) or not np.all(np.isfinite(y)):
        raise EstimatorError("human: one finite grade per row of signals")
    w = np.ones(y.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != y.shape or not np.all(w > 0):
        raise EstimatorError("weights: one positive weight per graded draft")
    if y.shape[0] == 0:
        raise EstimatorError("human: no graded draft to fit the predictor on")
    labels: NDArray[np.generic] | None = None
    codes: NDArray[np.int64] | None = None
    if groups is not None:
        g = np.asarray(groups)
        if g.shape != y.shape:
            raise EstimatorError(f"groups: expected {y.shape[0]} values, got {g.shape[0] if g.ndim else 0}")
        labels, inverse = np.unique(g, return_inverse=True)
        codes = inverse.astype(np.int64)
    n_groups = 0 if labels is None else int(labels.shape[0])
    center, scale, coef, intercept, penalty = _ridge(_design(x, codes, n_groups), y, w)
    low, high = float(y.min()), float(y.max())
    return Predictor(MODEL_NAME, labels, center, scale, coef, intercept, penalty, x.shape[1], low, high)


@dataclass(frozen=True)
class CrossFit:
    """Cross-fitted predictions of one sample."""

    oof: NDArray[np.float64]  # (N,): a drawn draft's out-of-fold prediction; 0 for undrawn drafts
    fold_predictions: NDArray[np.float64]  # (N, K): every draft's prediction by each fold's model
    fold: NDArray[np.int64]  # (N,): the fold of each draft's ticket, -1 for tickets with no drawn draft
    name: str = MODEL_NAME


def ticket_folds(sample: Sample, k: int, seed: int) -> NDArray[np.int64]:
    """Return each draft's fold: tickets with a drawn draft shuffled with `seed`, dealt round-robin into k folds."""
    tickets = np.unique(sample.cluster[sample.drawn])
    order = np.random.default_rng(seed).permutation(tickets.shape[0])
    fold_of_ticket = np.full(int(sample.cluster.max()) + 1, -1, dtype=np.int64)
    fold_of_ticket[tickets[order]] = np.arange(tickets.shape[0]) % k
    return fold_of_ticket[sample.cluster]


def cross_fit(sample: Sample, *, folds: int = 5, seed: int = 0) -> CrossFit:
    """Return the cross-fitted predictions of the human grade from `sample.signals` (module docstring)."""
    signals = sample.signals if sample.signals is not None else sample.judge[:, None]
    tickets = np.unique(sample.cluster[sample.drawn]).shape[0]
    k = min(folds, tickets)
    if k < 2:
        raise EstimatorError("drawn: cross-fitting the predictor needs drawn drafts of at least two tickets")
    fold = ticket_folds(sample, k, seed)
    predictions = np.empty((sample.n_drafts, k))
    for j in range(k):
        train = sample.drawn & (fold != j)
        groups = None if sample.groups is None else sample.groups[train]
        model = fit_predictor(signals[train], sample.human[train], groups, weights=1.0 / sample.pi[train])
        predictions[:, j] = model.predict(signals, sample.groups)
    oof = np.where(sample.drawn, predictions[np.arange(sample.n_drafts), np.maximum(fold, 0)], 0.0)
    return CrossFit(oof=oof, fold_predictions=predictions, fold=fold)


def out_of_fold_r_squared(sample: Sample, oof: NDArray[np.float64]) -> float | None:
    """Return 1 - weighted SSE / weighted SST of the out-of-fold predictions on the drawn drafts (weights 1/pi).

    None when the human grades of the drawn drafts do not vary (R^2 is undefined).
    """
    xi = sample.drawn
    w = 1.0 / sample.pi[xi]
    y = sample.human[xi]
    total = float(w @ (y - (w @ y) / w.sum()) ** 2)
    if total <= 0:
        return None
    return 1.0 - float(w @ (y - oof[xi]) ** 2) / total
