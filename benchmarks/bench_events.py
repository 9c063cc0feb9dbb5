"""Benchmark: import 1,000,000 events over 180 days against a plain loader, then time the metrics page and the daily API.

Usage:
  .venv/bin/python benchmarks/bench_events.py [--events 1000000] [--days 180]
      [--database-url sqlite:////tmp/dd_bench_metrics.db | postgresql+psycopg://.../dd_bench_metrics]

In one run: a plain reference loader written here (json.loads, the same Levenshtein ratio and
day, no validation library; SQLite: one transaction of executemany; PostgreSQL: one COPY
straight into metric_event) loads the file into a fresh database, then `draftdesk import events`
(run as its own process, so its peak memory is its own) loads it into another fresh one. It
prints both times, their ratio (target <= 1.5) and the import's peak memory (target <= 1 GiB),
the server time of GET /api/v1/metrics/daily and GET /metrics over the whole range (median of
10 warm requests), and checks that the aggregates equal a recomputation from the raw events.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

INTENTS = [
    "billing_charge", "plan_change", "data_export", "account_security", "refund_request",
    "login_access", "invoice_request", "cancellation", "integration_setup", "usage_limits", "other_topic",
]
PLANS = ["free", "pro", "enterprise"]
WORDS = (  # noqa: SIM905
    "thanks for reaching out we have checked your account and the charge you saw is the monthly renewal "
    "of your plan you can change the billing date in settings under billing if you need anything else "
    "just reply to this message and we will help right away the export is ready in your dashboard"
).split()


def generate(path: Path, n: int, days: int, start: dt.date, seed: int = 7) -> None:
    """Write n synthetic events spread over `days` days as JSONL."""
    rng = np.random.default_rng(seed)
    pool = [" ".join(rng.choice(WORDS, size=int(rng.integers(25, 50)))) for _ in range(400)]
    edited = []
    for text in pool:
        words = text.split()
        for _ in range(int(rng.integers(1, 8))):
            words[int(rng.integers(0, len(words)))] = str(rng.choice(WORDS))
        edited.append(" ".join(words))
    day_idx = rng.integers(0, days, size=n)
    secs = rng.integers(0, 86400, size=n)
    shown = rng.random(n) > 0.08
    act = rng.choice(["accept", "edit", "reject", "escalate"], p=[0.55, 0.33, 0.05, 0.07], size=n)
    tpl = rng.integers(0, len(pool), size=n)
    conf = rng.random(n).round(3)
    lat = rng.gamma(4.0, 600.0, size=n).round(0)
    ht = rng.gamma(3.0, 70.0, size=n).round(1)
    cost = rng.uniform(0.005, 0.04, size=n).round(5)
    esc = rng.random(n) < 0.08
    intent = rng.integers(0, len(INTENTS), size=n)
    plan = rng.integers(0, len(PLANS), size=n)
    agent = rng.integers(0, 40, size=n)
    base = dt.datetime.combine(start, dt.time(), tzinfo=dt.UTC)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            occurred = base + dt.timedelta(days=int(day_idx[i]), seconds=int(secs[i]))
            is_shown = bool(shown[i])
            action = str(act[i]) if is_shown else None
            draft = pool[tpl[i]] if is_shown else None
            sent = None
            if action == "accept":
                sent = draft
            elif action == "edit":
                sent = edited[tpl[i]]
            rec = {
                "event_id": f"ev-{i:08d}",
                "ticket_id": f"T{i:08d}",
                "occurred_at": occurred.isoformat(),
                "intent": INTENTS[intent[i]],
                "plan": PLANS[plan[i]],
                "agent_id": f"agent-{agent[i]:02d}",
                "model_version": "m-2026-10" if day_idx[i] < days // 2 else "m-2027-01",
                "prompt_version": "p7",
                "draft_shown": is_shown,
                "action": action,
                "draft_text": draft,
                "sent_text": sent,
                "confidence": float(conf[i]) if is_shown else None,
                "latency_ms": float(lat[i]) if is_shown else None,
                "handle_time_s": float(ht[i]),
                "cost_usd": float(cost[i]),
                "escalated": bool(esc[i]),
            }
            fh.write(json.dumps(rec) + "\n")


def _fresh_database(url: str) -> None:
    """Drop and recreate the schema (migrated, plus tables not yet in a migration)."""
    from sqlalchemy import text

    from webapp.core.db import make_engine
    from webapp.core.migrations_runner import upgrade
    from webapp.core.models import metadata

    if url.startswith("sqlite:///"):
        db = Path(url[len("sqlite:///") :])
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
    engine = make_engine(url)
    if not url.startswith("sqlite"):
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
    upgrade(url)
    metadata.create_all(engine)
    engine.dispose()


def plain_load(path: Path, url: str) -> int:
    """Load the file the plain way (reference): json.loads, Levenshtein ratio, day; executemany or COPY."""
    import Levenshtein

    from webapp.core.config import Settings
    from webapp.metrics.event_input import EVENT_COLUMNS

    tz = Settings(database_url=url).eval_spec.tz
    received = dt.datetime.now(dt.UTC)
    fields = [c for c in EVENT_COLUMNS if c not in ("edit_distance", "occurred_at", "day", "received_at")]
    sqlite = url.startswith("sqlite")

    def rows():  # type: ignore[no-untyped-def]
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                d = json.loads(line)
                draft, sent = d.get("draft_text"), d.get("sent_text")
                ed = None
                if draft is not None and sent is not None:
                    longest = max(len(draft), len(sent))
                    ed = Levenshtein.distance(draft, sent) / longest if longest else 0.0
                occurred = dt.datetime.fromisoformat(d["occurred_at"]).astimezone(dt.UTC)
                day = occurred.astimezone(tz).date()
                values = [d.get(f) for f in fields]
                if sqlite:
                    yield (*values, ed, occurred.strftime("%Y-%m-%d %H:%M:%S.%f"), day.isoformat(), received_s)
                else:
                    yield (*values, ed, occurred, day, received)

    received_s = received.strftime("%Y-%m-%d %H:%M:%S.%f")
    cols = ", ".join([*fields, "edit_distance", "occurred_at", "day", "received_at"])
    if sqlite:
        import sqlite3

        conn = sqlite3.connect(url[len("sqlite:///") :])
        conn.execute("PRAGMA synchronous=NORMAL")
        n_cols = len(fields) + 4
        with conn:  # one transaction
            cur = conn.executemany(f"INSERT INTO metric_event ({cols}) VALUES ({', '.join(['?'] * n_cols)})", rows())
            n = cur.rowcount
        conn.close()
        return n
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        n = 0
        with conn.cursor() as cur, cur.copy(f"COPY metric_event ({cols}) FROM STDIN") as copy:
            for row in rows():
                copy.write_row(row)
                n += 1
    return n


def run_import(path: Path, url: str) -> tuple[float, float, str]:
    """Run `draftdesk import events FILE --quiet` as its own process; return wall s, peak RSS MiB and its output."""
    import resource
    import subprocess

    draftdesk = str(Path(sys.executable).parent / "draftdesk")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    done = subprocess.run(
        [draftdesk, "import", "events", str(path), "--quiet"],
        env={**os.environ, "DRAFTDESK_DATABASE_URL": url},
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak <= before:
        raise SystemExit("peak memory of the import could not be told apart from earlier child processes")
    return wall, peak / 1024, done.stdout.strip()


def _median_ms(fn, repeat: int = 10) -> str:  # type: ignore[no-untyped-def]
    """Return 'wall ms (CPU ms)' medians: the machine may be shared, CPU time shows the work itself."""
    fn()  # warm
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
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--days", type=int, default=180)
    ap.add_argument("--database-url", default="sqlite:////tmp/dd_bench_metrics.db")
    ap.add_argument("--file", default=None, help="events file (default /tmp/dd_bench_events_<N>x<DAYS>.jsonl)")
    args = ap.parse_args()
    url = args.database_url
    os.environ["DRAFTDESK_DATABASE_URL"] = url
    os.environ.setdefault("DRAFTDESK_MODE", "dev")

    from fastapi.testclient import TestClient
    from sqlmodel import Session

    from webapp.app.main import create_app
    from webapp.auth import service as auth_service
    from webapp.core.config import Settings
    from webapp.core.db import make_engine
    from webapp.metrics import aggregates
    from webapp.metrics import daily as metrics_daily

    start = dt.date(2026, 6, 1)
    path = Path(args.file or f"/tmp/dd_bench_events_{args.events}x{args.days}.jsonl")
    marker = path.with_suffix(f".{args.events}x{args.days}")
    if not (path.exists() and marker.exists()):
        t = time.perf_counter()
        generate(path, args.events, args.days, start)
        marker.touch()
        print(f"generated {args.events:,} events in {time.perf_counter() - t:.1f} s -> {path}")

    print(f"backend: {url.split(':')[0]}; load average before the loads: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    _fresh_database(url)
    t = time.perf_counter()
    n_plain = plain_load(path, url)
    plain_s = time.perf_counter() - t
    print(f"plain reference loader ({'executemany' if url.startswith('sqlite') else 'COPY'}): {n_plain:,} rows in {plain_s:.1f} s")

    _fresh_database(url)
    import_s, peak_mib, output = run_import(path, url)
    print(
        f"draftdesk import events (its own process, start-up and migration check included): {output}; "
        f"{import_s:.1f} s; peak memory {peak_mib:.0f} MiB (target <= 1024)"
    )
    print(f"ratio import / plain: {import_s / plain_s:.2f} (target <= 1.5)")
    engine = make_engine(url)

    settings = Settings(database_url=url, mode="dev", secret_key="bench-secret-key-0123456789abcdef")
    spec = settings.eval_spec
    end = start + dt.timedelta(days=args.days - 1)
    with Session(engine) as session:
        t = _median_ms(lambda: metrics_daily.daily_metrics(session=session, spec=spec, start=start, end=end))
        print(f"service daily_metrics, {args.days} days: {t}")
        # aggregates equal a recomputation from raw events (sample of days, one segment too)
        df = aggregates.raw_frame(session, start=start, end=start + dt.timedelta(days=4))
        fresh = aggregates.aggregate_frame(df, spec, ())
        stored = metrics_daily.daily_metrics(session=session, spec=spec, start=start, end=start + dt.timedelta(days=4))
        for row, dm in zip(fresh.to_dict("records"), stored, strict=True):
            assert row["n_events"] == dm.events
            assert abs(row["lat_p95_s"] - dm.latency_p95_s) < 1e-12  # type: ignore[operator]
            assert abs(row["ed_sum"] / row["ed_n"] - dm.edit_distance) < 1e-12  # type: ignore[operator]
        print("aggregates == recomputation from raw events: ok (5 days)")
        user = auth_service.create_user(
            session=session, email="bench@example.test", password="bench-password-1", roles=["support_lead"]
        )
        _, token = auth_service.create_token(session=session, user=user, name="bench")
        session.commit()

    app = create_app(settings)
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        q = f"start={start}&end={end}"
        r = client.get(f"/api/v1/metrics/daily?{q}")
        assert r.status_code == 200, r.text
        assert len(r.json()) == args.days
        t = _median_ms(lambda: client.get(f"/api/v1/metrics/daily?{q}"))
        print(f"GET /api/v1/metrics/daily ({args.days} days): {t}")
        t = _median_ms(lambda: client.get(f"/api/v1/metrics/daily?{q}&intent=billing_charge"))
        print(f"GET /api/v1/metrics/daily?intent=... ({args.days} days): {t}")
        r = client.get(f"/metrics?{q}")
        assert r.status_code == 200, r.status_code
        t = _median_ms(lambda: client.get(f"/metrics?{q}"))
        print(f"GET /metrics ({args.days} days, 9 charts, table, alerts): {t}")
        t = _median_ms(lambda: client.get(f"/metrics?{q}&intent=billing_charge", headers={"HX-Request": "true"}))
        print(f"GET /metrics htmx fragment, intent filter: {t}")
    app.state.engine.dispose()
    engine.dispose()


if __name__ == "__main__":
    main()
