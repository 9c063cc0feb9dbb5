"""Agreement statistics: Cohen's kappa (unweighted and quadratic-weighted) with numpy."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np


def cohen_kappa(
    a: Sequence[Hashable], b: Sequence[Hashable], *, labels: Sequence[Hashable], weights: str | None = None
) -> float | None:
    """Return Cohen's kappa of two raters over `labels` (weights None or "quadratic"); None when undefined."""
    if len(a) != len(b):
        raise ValueError("both raters must rate the same items")
    if not a:
        return None
    index = {label: i for i, label in enumerate(labels)}
    k = len(labels)
    observed = np.zeros((k, k), dtype=float)
    for x, y in zip(a, b, strict=True):
        observed[index[x], index[y]] += 1
    n = observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / n
    grid = np.arange(k)
    if weights is None:
        w = 1.0 - np.eye(k)
    elif weights == "quadratic":
        # Distances on the label scale (the full 1..5 range), not on the labels that happen to occur.
        w = (grid[:, None] - grid[None, :]).astype(float) ** 2
    else:
        raise ValueError(f"unknown weights {weights!r}")
    denominator = float((w * expected).sum())
    if denominator == 0.0:
        return None  # both raters used one and the same category throughout: kappa is undefined
    return 1.0 - float((w * observed).sum()) / denominator


def exact_agreement(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Return the share of items both raters scored the same; None for no items."""
    if not a:
        return None
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
