"""Benchmark: a grade saved while `draftdesk metrics rebuild` runs on a large events table (SQLite) answers in under a second.

Issue 41: the rebuild was one transaction over every event, holding SQLite's write lock throughout,
so a grade saved meanwhile waited for the whole rebuild (or failed after the 30 s busy timeout).
The rebuild now works a day per short transaction (webapp/metrics/rebuild.py). This script:

1. migrates a scratch SQLite file, seeds the demo, a labeler and a run of drafts to grade
   (benchmarks/bench_grading.py's `prepare`), and inserts --days days of --per-day events
   (the default, 50,000 a day, is a year of 18M events' daily size);
2. starts `draftdesk serve` and has one grader save and take the next draft in a closed loop
   (the grading page's own requests), first for --idle seconds with nothing else running, then
   for as long as `draftdesk metrics rebuild` runs (from scratch, in its own process);
3. prints the save latencies (p50, p95, max) in each case, the rebuild's time, and with --compare
   the same while the one-transaction rebuild of before (aggregates.rebuild_all) runs.

    .venv/bin/python benchmarks/bench_rebuild_grade.py [--days 30] [--per-day 50000] [--port 18500] [--compare]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_grading import Tally, grader_email, grader_loop, pct, prepare, sign_in, start_server  # noqa: E402

START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
INTENTS = ["billing_charge", "plan_change", "data_export", "account_security", "refund_request", "login_access"]
ACTIONS = ["accept", "accept", "edit", "edit", "reject"]
ONE_TRANSACTION = (
    "from webapp.core.config import Settings; from webapp.core.db import make_engine, session_scope;"
    "from webapp.metrics.aggregates import rebuild_all; s = Settings(); e = make_engine(s.database_url)\n"
    "with session_scope(e) as session: rebuild_all(session=session, spec=s.eval_spec)"
)


def insert_events(path: Path, days: int, per_day: int) -> float:
    """Insert days x per_day events straight into metric_event (one transaction); return the seconds it took."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    sql = (
        "INSERT INTO metric_event (event_id, ticket_id, occurred_at, day, intent, plan, agent_id, model_version, "
        "prompt_version, draft_shown, action, draft_text, sent_text, confidence, latency_ms, handle_time_s, cost_usd, "
        "escalated, edit_distance, received_at, pending) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,1)"
    )
    with conn:
        for d in range(days):
            day = (START + dt.timedelta(days=d)).date().isoformat()
            rows = []
            for i in range(per_day):
                g = d * per_day + i
                at = START + dt.timedelta(days=d, seconds=(g * 7919) % 86400)
                shown = g % 13 != 0
                action = ACTIONS[g % 5] if shown else None
                rows.append((
                    f"b{g}", f"T{g}", at.strftime("%Y-%m-%d %H:%M:%S.000000"), day, INTENTS[g % 6],
                    ("free", "pro", "enterprise")[g % 3], f"agent-{g % 40:02d}", "m1", "p1", shown, action,
                    "Thanks for reaching out." if shown else None, "Thanks for writing in." if action in ("accept", "edit") else None,
                    (g % 1000) / 1000 if shown else None, 300 + g % 4000 if shown else None, 30 + g % 600,
                    0.01, g % 100 < 8, (g % 60) / 100 if action in ("accept", "edit") else None,
                    at.strftime("%Y-%m-%d %H:%M:%S.000000"),
                ))
            conn.executemany(sql, rows)
    conn.close()
    return time.perf_counter() - t0


async def _grade_while(proc: subprocess.Popen[bytes] | None, seconds: float, run_id: int, port: int) -> tuple[Tally, float]:
    """Save grades in a closed loop while `proc` runs (or for `seconds`); return the tally and the time it ran."""
    grader = sign_in("127.0.0.1", port, grader_email(0))
    tally = Tally()
    t0 = time.monotonic()
    if proc is None:
        await grader_loop(grader, run_id, time.monotonic() + seconds, tally)
    else:
        while proc.poll() is None:
            await grader_loop(grader, run_id, time.monotonic() + 1.0, tally)
    await grader.client.close()
    return tally, time.monotonic() - t0


def _report(label: str, tally: Tally, took: float) -> None:
    saves = tally.latencies["save and next"]
    if not saves:
        print(f"{label}: no save answered in {took:.1f} s ({tally.errors} errors: {dict(tally.error_kinds)})")
        return
    print(
        f"{label}: {len(saves)} saves in {took:.1f} s; save-and-next p50 {pct(saves, 50):.0f} ms, "
        f"p95 {pct(saves, 95):.0f} ms, max {max(saves):.0f} ms; errors {tally.errors} {dict(tally.error_kinds) or ''}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--per-day", type=int, default=50_000)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--port", type=int, default=18500)
    parser.add_argument("--compare", action="store_true", help="also measure during the one-transaction rebuild of before")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench_rebuild_"))
    path = folder / "bench.db"
    url = f"sqlite:///{path}"
    _, run_id = prepare(url, graders=1, copies=400)
    took = insert_events(path, args.days, args.per_day)
    print(f"{args.days * args.per_day:,} events over {args.days} days inserted in {took:.0f} s ({path})")
    env = {**os.environ, "DRAFTDESK_DATABASE_URL": url, "DRAFTDESK_MODE": "dev"}
    server = start_server(url, args.port, workers=1)
    try:
        _report("idle", *asyncio.run(_grade_while(None, args.idle, run_id, args.port)))
        cmd = [str(ROOT / ".venv/bin/draftdesk"), "metrics", "rebuild", "--restart", "--quiet"]
        t0 = time.monotonic()
        rebuild = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        tally, ran = asyncio.run(_grade_while(rebuild, 0, run_id, args.port))
        out = rebuild.communicate()[0].decode().strip()
        print(f"day-by-day rebuild: {time.monotonic() - t0:.1f} s, exit {rebuild.returncode}: {out}")
        _report("during the day-by-day rebuild", tally, ran)
        if args.compare:
            t0 = time.monotonic()
            old = subprocess.Popen([sys.executable, "-c", ONE_TRANSACTION], env=env, cwd=ROOT)
            tally, ran = asyncio.run(_grade_while(old, 0, run_id, args.port))
            print(f"one-transaction rebuild (before issue 41): {time.monotonic() - t0:.1f} s, exit {old.returncode}")
            _report("during the one-transaction rebuild", tally, ran)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
