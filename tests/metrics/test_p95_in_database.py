"""A day's latency p95 per stored segment (the rebuild's one non-additive figure), read by the database on PostgreSQL.

Checked against pandas' own groupby quantile over the same events, computed here independently of
the product's code, to the last bit, on both databases (SQLite reads the pandas path).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from sqlmodel import Session

from tests.metrics.conftest import ev, load
from webapp.core.spec import EvalSpec
from webapp.metrics import aggregates
from webapp.metrics.models import ALL
from webapp.metrics.p95_in_database import interpolate

DAY = dt.date(2026, 11, 2)


def _expected(events: list[dict[str, object]]) -> dict[tuple[object, ...], float]:
    df = pd.DataFrame([e for e in events if e["draft_shown"] and e.get("latency_ms") is not None])
    for dim in ("intent", "plan", "agent_id"):
        df[dim] = df[dim].fillna("").astype(str)
    df["lat"] = df["latency_ms"].astype(float) / 1000.0
    out: dict[tuple[object, ...], float] = {}
    for dims in ((), ("intent",), ("plan",), ("agent_id",), ("intent", "plan")):
        groups = [((), df)] if not dims else list(df.groupby(list(dims)))
        for key, g in groups:
            values = dict(zip(dims, key if isinstance(key, tuple) else (key,), strict=True))
            q = g.assign(k=0).groupby("k")["lat"].quantile(0.95, interpolation="linear").iloc[0]
            out[(DAY, *(values.get(d, ALL) for d in ("intent", "plan", "agent_id")))] = float(q)
    return out


def test_the_day_p95_per_segment_equals_pandas_to_the_last_bit(session: Session, spec: EvalSpec) -> None:
    rng = np.random.default_rng(7)
    events = []
    for k in range(700):
        events.append(ev(
            DAY,
            intent=["billing_charge", "plan_change", None][k % 3],
            plan=[None, "pro", "basic", ""][int(rng.integers(4))],
            agent_id=[None, "a1", "a2"][int(rng.integers(3))],
            draft_shown=bool(rng.random() > 0.1),
            latency_ms=None if rng.random() < 0.1 else float(np.round(rng.lognormal(7.5, 0.8), 3)),
        ))
        if not events[-1]["draft_shown"]:
            events[-1].update(action=None, sent_text=None)
    load(session, spec, events)
    got = aggregates.latency_p95(session, [DAY])
    want = _expected(events)
    assert set(got) == set(want)
    assert got == want  # exact: the same quantile as the full recompute's pandas
    # a segment worked by hand: the whole day's is the 95th percentile of every shown latency
    shown = sorted(float(e["latency_ms"]) / 1000.0 for e in events if e["draft_shown"] and e["latency_ms"] is not None)
    assert got[(DAY, ALL, ALL, ALL)] == pytest.approx(float(np.percentile(shown, 95)), rel=1e-12)


def test_interpolate_is_pandas_linear_quantile() -> None:
    # n = 4: h = 2.85, between the 3rd and 4th values: 3 + 0.85 * (5 - 3) = 4.7
    assert interpolate(4, 3.0, 5.0) == pytest.approx(4.7)
    assert interpolate(1, 2.0, 2.0) == 2.0  # one value: itself
    rng = np.random.default_rng(3)
    for n in (2, 3, 20, 21, 101, 999):
        x = np.sort(rng.lognormal(0, 1, n))
        i = int(np.floor((n - 1) * 0.95))
        got = interpolate(n, float(x[i]), float(x[min(i + 1, n - 1)]))
        assert got == pd.Series(x).quantile(0.95, interpolation="linear")
