"""A day's latency p95 per stored segment, with PostgreSQL doing the sorting (the rebuild pass's one non-additive figure).

`aggregates.latency_p95` read every merged latency of a day into pandas on every rebuild pass:
at a 50,000-event day about a second of the server's Python time (and of its GIL) every 30 s,
which the busy hour's pages and saves waited behind (bench_realistic, py-spy --gil, 3 December).
On PostgreSQL one query per day groups the shown drafts' latencies by the stored segments
(GROUPING SETS of ROLLUPS) and returns, per segment, its count and the two order statistics
that the linear interpolation needs; the interpolation is done here exactly as pandas' groupby
quantile does it (`a + f * (b - a)` with `h = (n - 1) * 0.95`, on the latencies in seconds), so a
merged day's p95 equals a full recompute's to the last bit (tests/metrics/test_p95_in_database.py).
SQLite has no ordered-set aggregate: it keeps the pandas read (~50 ms at 50,000 events).
"""

from __future__ import annotations

import datetime as dt
import math

from sqlalchemy import text
from sqlmodel import Session

from webapp.metrics.models import ALL, Event

Q = 0.95

# The segments are aggregates.ROLLUPS: everything, each dimension alone, intent x plan. A missing
# value is NONE (''), as the pandas path's fillna(NONE) reads it; GROUPING() tells a rolled-up
# dimension (ALL) from a real ''. The index of the lower order statistic is computed in float8,
# the same IEEE product as Python's `(n - 1) * Q` in interpolate.
_SQL = text(f"""
SELECT GROUPING(i) AS gi, GROUPING(p) AS gp, GROUPING(a) AS ga, i, p, a, count(*) AS n,
       (array_agg(latency_ms ORDER BY latency_ms))[floor((count(*) - 1)::float8 * {Q}::float8)::int + 1] AS lo,
       (array_agg(latency_ms ORDER BY latency_ms))[least(floor((count(*) - 1)::float8 * {Q}::float8)::int + 2, count(*)::int)] AS hi
FROM (
    SELECT coalesce(intent, '') AS i, coalesce(plan, '') AS p, coalesce(agent_id, '') AS a, latency_ms
    FROM {Event.__tablename__}
    WHERE day = :day AND draft_shown AND latency_ms IS NOT NULL AND NOT pending
) AS shown
GROUP BY GROUPING SETS ((), (i), (p), (a), (i, p))
""")


def interpolate(n: int, lo: float, hi: float) -> float:
    """Return the linear-interpolation 95th percentile of n sorted values whose order statistics at floor(h), floor(h)+1 are lo, hi."""
    h = (n - 1) * Q
    f = h - math.floor(h)
    return lo + f * (hi - lo)


def latency_p95_by_segment(session: Session, day: dt.date) -> dict[tuple[object, ...], float]:
    """Return the day's latency p95 in seconds per stored segment (intent, plan, agent id; ALL where rolled up)."""
    out: dict[tuple[object, ...], float] = {}
    for gi, gp, ga, i, p, a, n, lo, hi in session.execute(_SQL, {"day": day}).all():
        if not n:  # the empty grouping set answers one row even for a day without a latency
            continue
        key = (day, ALL if gi else str(i), ALL if gp else str(p), ALL if ga else str(a))
        # seconds first, as the pandas path divides every latency before its quantile
        out[key] = interpolate(int(n), float(lo) / 1000.0, float(hi) / 1000.0)
    return out
