"""Benchmark: GET /api/v1/metrics/daily for 180 days with 10,000,000 events in PostgreSQL.

Usage:
  .venv/bin/python benchmarks/bench_daily_10m.py --database-url postgresql+psycopg://postgres@127.0.0.1:5432/DB
      [--events 10000000] [--days 180] [--reuse]

Generates the events inside PostgreSQL (INSERT ... SELECT from generate_series: 11 intents,
3 plans, 40 agents, actions, latencies, confidences, short texts), builds the daily aggregates with
the app's own rebuild (a few days at a time), adds confirmed hallucination reports, then prints
the median time of 10 warm requests of GET /api/v1/metrics/daily over the 180 days (target
<= 50 ms), with and without a segment filter, through the ASGI app in process. `--reuse` skips
the generation when the database already holds that many events.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

START = dt.date(2026, 6, 1)

GENERATE = """
INSERT INTO metric_event (event_id, ticket_id, occurred_at, day, intent, plan, agent_id, model_version,
    prompt_version, draft_shown, action, draft_text, sent_text, confidence, latency_ms, handle_time_s,
    cost_usd, escalated, edit_distance, received_at)
SELECT 'g' || g, 'T' || g, ts, (ts AT TIME ZONE %(tz)s)::date,
    (ARRAY['billing_charge','plan_change','data_export','account_security','refund_request','login_access',
           'invoice_request','cancellation','integration_setup','usage_limits','other_topic'])[1 + (g * 7919) %% 11],
    (ARRAY['free','pro','enterprise'])[1 + (g * 104729) %% 3],
    'agent-' || lpad(((g * 15485863) %% 40)::text, 2, '0'),
    CASE WHEN ts < %(mid)s THEN 'm-2026-10' ELSE 'm-2027-01' END, 'p7',
    shown, CASE WHEN shown THEN (ARRAY['accept','accept','edit','edit','reject','escalate'])[1 + (g * 31) %% 6] END,
    CASE WHEN shown THEN 'Thanks for reaching out, the charge is the monthly renewal.' END,
    CASE WHEN shown AND (g * 31) %% 6 < 4 THEN 'Thanks for writing in, the charge is the monthly renewal.' END,
    CASE WHEN shown THEN ((g * 7) %% 1000) / 1000.0 END,
    CASE WHEN shown THEN 300 + (g * 13) %% 5000 END,
    30 + (g * 17) %% 600, 0.005 + ((g * 3) %% 35) / 1000.0, (g * 29) %% 100 < 8,
    CASE WHEN shown AND (g * 31) %% 6 < 4 THEN ((g * 37) %% 60) / 100.0 END,
    now()
FROM (
    SELECT g, %(start)s::timestamptz + ((g * 2654435761) %% (%(days)s * 86400)) * interval '1 second' AS ts,
           (g * 53) %% 100 >= 8 AS shown
    FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g
) AS s
"""


def _median_ms(fn, repeat: int = 10) -> str:  # type: ignore[no-untyped-def]
    fn()
    walls, cpus = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append((time.perf_counter() - t) * 1000)
        cpus.append((time.process_time() - c) * 1000)
    return f"{statistics.median(walls):.1f} ms wall ({statistics.median(cpus):.1f} ms CPU)"


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--days", type=int, default=180)
    ap.add_argument("--reuse", action="store_true")
    args = ap.parse_args()
    url = args.database_url
    os.environ["DRAFTDESK_DATABASE_URL"] = url
    os.environ["DRAFTDESK_MODE"] = "dev"

    from bench_events import _fresh_database
    from fastapi.testclient import TestClient
    from sqlalchemy import func, select, text
    from sqlmodel import Session

    from webapp.app.main import create_app
    from webapp.auth import service as auth_service
    from webapp.core.config import Settings
    from webapp.core.db import make_engine
    from webapp.metrics import aggregates
    from webapp.metrics import daily as metrics_daily
    from webapp.metrics import reports as metrics_reports
    from webapp.metrics.models import Event

    settings = Settings(database_url=url, mode="dev", secret_key="bench-secret-key-0123456789abcdef")
    spec = settings.eval_spec
    engine = make_engine(url)
    end = START + dt.timedelta(days=args.days - 1)
    with Session(engine) as s:
        try:
            have = s.execute(select(func.count()).select_from(Event)).scalar_one()
        except Exception:  # no schema yet
            have = -1
    if not (args.reuse and have == args.events):
        _fresh_database(url)
        t0 = time.perf_counter()
        step = 1_000_000
        params = {"tz": str(spec.tz), "start": START.isoformat(), "days": args.days,
                  "mid": (START + dt.timedelta(days=args.days // 2)).isoformat()}  # fmt: skip
        for lo in range(1, args.events + 1, step):
            with engine.begin() as conn:
                conn.exec_driver_sql(GENERATE, {**params, "lo": lo, "hi": min(lo + step - 1, args.events)})
            print(f"  generated {min(lo + step - 1, args.events):,} events ({time.perf_counter() - t0:.0f} s)", flush=True)
        with engine.begin() as conn:
            conn.execute(text("ANALYZE metric_event"))
        t1 = time.perf_counter()
        days = [START + dt.timedelta(days=i) for i in range(args.days)]
        for i in range(0, len(days), 5):
            with Session(engine) as s:
                aggregates.rebuild_days(session=s, spec=spec, days=days[i : i + 5])
                s.commit()
        with Session(engine) as s:
            user = auth_service.create_user(session=s, email="lead@example.test", password="bench-password-1", roles=["lead"])
            for k in range(0, 200, 10):
                report = metrics_reports.report_hallucination(session=s, event_id=f"g{k * 997 + 1}", note="bench", reported_by=user.id)
                metrics_reports.decide_report(session=s, report_id=report.id, decision="confirmed", decided_by=user.id, note="bench")  # type: ignore[arg-type]
            s.commit()
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))
        print(f"generated {args.events:,} events in {t1 - t0:.0f} s; aggregates in {time.perf_counter() - t1:.0f} s")

    with Session(engine) as s:
        n = s.execute(select(func.count()).select_from(Event)).scalar_one()
        user = auth_service.get_user_by_email(session=s, email="lead@example.test")
        _, token = auth_service.create_token(session=s, user=user, name="bench")  # type: ignore[arg-type]
        s.commit()
        # aggregates equal a recomputation from the raw events (two days)
        check = [START + dt.timedelta(days=3), end]
        fresh = aggregates.aggregate_frame(aggregates.raw_frame(s, days=check), spec, ())
        stored = {d.day: d for d in metrics_daily.daily_metrics(session=s, spec=spec, start=START, end=end) if d.day in check}
        for row in fresh.to_dict("records"):
            assert stored[row["day"]].events == row["n_events"]
            assert abs(stored[row["day"]].latency_p95_s - row["lat_p95_s"]) < 1e-9  # type: ignore[operator]
    print(f"events in the database: {n:,}; aggregates == recomputation: ok (2 days)")
    app = create_app(settings)
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        q = f"start={START}&end={end}"
        r = client.get(f"/api/v1/metrics/daily?{q}")
        assert r.status_code == 200 and len(r.json()) == args.days, r.text[:200]
        print(f"GET /api/v1/metrics/daily ({args.days} days): {_median_ms(lambda: client.get(f'/api/v1/metrics/daily?{q}'))} (target <= 50 ms)")
        t = _median_ms(lambda: client.get(f"/api/v1/metrics/daily?{q}&intent=billing_charge&plan=pro"))
        print(f"GET /api/v1/metrics/daily?intent=&plan= ({args.days} days): {t}")
    app.state.engine.dispose()
    engine.dispose()


if __name__ == "__main__":
    main()
