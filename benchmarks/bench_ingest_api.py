"""Benchmark: POST /api/v1/events from 8 concurrent clients, 1000-event batches, for 60 s, on PostgreSQL.

Usage:
  .venv/bin/python benchmarks/bench_ingest_api.py --database-url postgresql+psycopg://postgres@127.0.0.1:5432/DB
      [--clients 8] [--batch 1000] [--seconds 60] [--servers 2] [--days 180] [--retry-every 10]

Starts `--servers` separate `draftdesk serve` processes on one database (as several hosts would),
and `--clients` threads that post batches to them in turn. A batch holds the events of one day
(a drafting tool reports what happened recently); client c's k-th batch is for day (c + clients*k)
mod `--days`, so concurrent batches are mostly for different days, and every `--retry-every`-th
batch re-sends another client's previous batch to another server (overlap: those events must
come back as duplicates). Prints events/s (events in answered batches / elapsed), the p50 and
p95 time per batch, the CPU the server processes used per batch (from /proc: a figure that does
not depend on how busy the machine is), and afterwards counts: every event sent is stored exactly once (0 lost,
0 duplicated), the created answers add up to the stored count, and after one rebuild pass the
stored aggregates and what readers see for every touched day (metrics_daily.daily_metrics) equal
a recomputation from the raw events.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

START = dt.date(2026, 6, 1)
INTENTS = ["billing_charge", "plan_change", "data_export", "account_security", "refund_request"]
ACTIONS = ["accept", "accept", "edit", "reject", "escalate"]


def _free_port(first: int, last: int, taken: list[int]) -> int:
    for port in range(first, last + 1):
        with socket.socket() as s:
            if port not in taken and s.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise SystemExit(f"no free port in {first}-{last}")


def make_batch(client: int, k: int, size: int, days: int, clients: int) -> tuple[bytes, list[str]]:
    """Return the JSON body of client's k-th batch (all events on one day) and its event ids."""
    day = START + dt.timedelta(days=(client + clients * k) % days)
    rng = random.Random(client * 1_000_003 + k)
    ids, events = [], []
    for i in range(size):
        eid = f"c{client}-b{k}-{i}"
        ids.append(eid)
        action = ACTIONS[rng.randrange(5)]
        events.append(
            {
                "event_id": eid,
                "ticket_id": f"T{client}-{k}-{i}",
                "occurred_at": f"{day.isoformat()}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00+00:00",
                "intent": INTENTS[rng.randrange(5)],
                "plan": ["free", "pro", "enterprise"][rng.randrange(3)],
                "agent_id": f"agent-{rng.randrange(40):02d}",
                "model_version": "m-2026-10",
                "prompt_version": "p7",
                "draft_shown": True,
                "action": action,
                "draft_text": "Thanks for reaching out, the charge is the monthly renewal of your plan.",
                "sent_text": "Thanks for writing in, the charge is the yearly renewal of your plan."
                if action == "edit"
                else "Thanks for reaching out, the charge is the monthly renewal of your plan.",
                "confidence": round(rng.random(), 3),
                "latency_ms": float(rng.randrange(300, 6000)),
                "handle_time_s": float(rng.randrange(30, 600)),
                "cost_usd": 0.01,
                "escalated": action == "escalate",
            }
        )
    return json.dumps(events).encode(), ids


def _compare(got: Any, fresh: dict[Any, dict[str, Any]]) -> str:
    """Compare daily figures (DayMetrics or stored rows) with a recomputation; return ok or the first bad days."""
    if isinstance(got, list):  # DayMetrics: compare the counts and the p95
        rows = {d.day: {"n_events": d.events, "n_shown": d.drafts_shown, "lat_p95_s": d.latency_p95_s} for d in got if d.events}
    else:
        rows = got
    bad = [
        day
        for day, want in fresh.items()
        if day not in rows
        or rows[day]["n_events"] != want["n_events"]
        or rows[day]["n_shown"] != want["n_shown"]
        or abs((rows[day]["lat_p95_s"] or 0) - (want["lat_p95_s"] or 0)) > 1e-9
    ] + [day for day in rows if day not in fresh]
    return "ok" if not bad else f"MISMATCH {bad[:5]}"


def _tree_cpu_s(roots: list[int]) -> float:
    """Return the CPU seconds (user + system) used so far by these processes and their descendants (Linux /proc)."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    total = 0.0
    for pid, seconds in cpu.items():
        p = pid
        while p > 1 and p not in roots:
            p = parent.get(p, 0)
        if p in roots:
            total += seconds
    return total


class BatchMaker:
    """Client c's batches from one pre-rendered body per client: only the batch number and day change.

    Rendering 1000 events as JSON costs the client ~20 ms of Python per batch, which on a
    two-core machine would take CPU from the servers being measured; two byte replacements do not.
    """

    def __init__(self, client: int, size: int, days: int, clients: int) -> None:
        body, _ = make_batch(client, 0, size, days, clients)
        first_day = (START + dt.timedelta(days=client % days)).isoformat()
        self.template = body.replace(b"-b0-", b"-b@K@-").replace(first_day.encode(), b"@DAY@")
        self.client, self.size, self.days, self.clients = client, size, days, clients

    def batch(self, k: int) -> tuple[bytes, list[str]]:
        """Return the body and event ids of batch k."""
        day = START + dt.timedelta(days=(self.client + self.clients * k) % self.days)
        body = self.template.replace(b"@K@", str(k).encode()).replace(b"@DAY@", day.isoformat().encode())
        return body, [f"c{self.client}-b{k}-{i}" for i in range(self.size)]


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--days", type=int, default=180)
    ap.add_argument("--retry-every", type=int, default=10)
    ap.add_argument("--ports", default="8150-8169", help="the range the servers may listen on")
    args = ap.parse_args()
    url = args.database_url
    os.environ["DRAFTDESK_DATABASE_URL"] = url
    os.environ["DRAFTDESK_MODE"] = "dev"

    import httpx
    from bench_events import _fresh_database
    from sqlalchemy import func, select
    from sqlmodel import Session

    from webapp.auth import service as auth_service
    from webapp.core.config import Settings
    from webapp.core.db import make_engine
    from webapp.metrics import aggregates, background, stale
    from webapp.metrics import daily as metrics_daily
    from webapp.metrics.models import DailyAggregate, Event

    _fresh_database(url)
    engine = make_engine(url)
    with Session(engine) as session:
        user = auth_service.create_user(
            session=session, email="tool@example.test", password="bench-password-1", roles=["labeler"]
        )
        _, token = auth_service.create_token(session=session, user=user, name="bench", scopes=["ingest"])
        session.commit()

    first, last = (int(p) for p in args.ports.split("-"))
    ports: list[int] = []
    for _ in range(args.servers):
        ports.append(_free_port(first, last, ports))
    env = {**os.environ, "DRAFTDESK_SECRET_KEY": "bench-secret-key-0123456789abcdef"}
    draftdesk = str(Path(sys.executable).parent / "draftdesk")
    servers = [
        subprocess.Popen([draftdesk, "serve", "--port", str(p)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for p in ports
    ]
    try:
        for p in ports:
            for _ in range(600):
                try:
                    if httpx.get(f"http://127.0.0.1:{p}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            else:
                raise SystemExit(f"server on port {p} did not start")

        sent_ids: set[str] = set()
        created_total = 0
        dup_total = 0
        latencies: list[float] = []
        events_answered = 0
        failures: list[str] = []
        last_batch: dict[int, bytes] = {}
        lock = threading.Lock()
        deadline = time.perf_counter() + args.seconds

        def client(c: int) -> None:
            nonlocal created_total, dup_total, events_answered
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            http = [httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=300, headers=headers) for p in ports]
            maker = BatchMaker(c, args.batch, args.days, args.clients)
            k = 0
            while time.perf_counter() < deadline:
                retry = k > 0 and k % args.retry_every == 0 and (c + 1) % args.clients in last_batch
                if retry:
                    body, ids = last_batch[(c + 1) % args.clients], []
                else:
                    body, ids = maker.batch(k)
                t = time.perf_counter()
                r = http[(c + k + (1 if retry else 0)) % len(http)].post("/api/v1/events", content=body)
                elapsed = time.perf_counter() - t
                with lock:
                    if r.status_code != 200:
                        failures.append(f"{r.status_code}: {r.text[:200]}")
                    else:
                        answer = r.json()
                        assert answer["invalid"] == 0, answer
                        created_total += answer["created"]
                        dup_total += answer["duplicate"]
                        events_answered += args.batch
                        latencies.append(elapsed)
                        sent_ids.update(ids)
                        if not retry:
                            last_batch[c] = body
                k += 1
            for h in http:
                h.close()

        cpu0 = _tree_cpu_s([s.pid for s in servers])
        t0 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t0
        server_cpu = _tree_cpu_s([s.pid for s in servers]) - cpu0
    finally:
        for s in servers:
            s.terminate()
        for s in servers:
            s.wait(30)

    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))] if latencies else float("nan")
    print(
        f"backend: {url.split(':')[0]}; {args.servers} server processes, {args.clients} clients, "
        f"{args.batch}-event batches, {wall:.1f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"batches answered: {len(latencies)} ({len(failures)} failed){': ' + failures[0] if failures else ''}")
    print(f"throughput: {events_answered / wall:,.0f} events/s (new or duplicate, all answered)")
    print(f"time per batch: p50 {statistics.median(latencies) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms")
    per_batch = server_cpu / max(1, len(latencies))
    print(
        f"server CPU (the serve processes and their workers, rebuilder included; PostgreSQL not counted): "
        f"{server_cpu:.1f} s = {per_batch * 1000:.0f} ms per batch = {args.batch / per_batch:,.0f} events per CPU-second"
    )

    spec = Settings(database_url=url, mode="dev").eval_spec
    with Session(engine) as session:
        stored = session.execute(select(func.count()).select_from(Event)).scalar_one()
        distinct = session.execute(select(func.count(func.distinct(Event.event_id)))).scalar_one()
        lost = len(sent_ids) - stored
        print(
            f"events sent (distinct): {len(sent_ids):,}; stored: {stored:,}; created answers: {created_total:,}; "
            f"duplicate answers: {dup_total:,}; lost: {lost}; duplicated: {stored - distinct + (created_total - stored)}"
        )
        days = sorted({r[0] for r in session.execute(select(Event.day).distinct())})
        fresh = {r["day"]: r for r in aggregates.aggregate_frame(aggregates.raw_frame(session, days=days), spec, ()).to_dict("records")}
        pending = len(stale.stale_days(session))
        print(f"days still updating when the load stops: {pending} of {len(days)}")
    rebuilt = background.rebuild_pass(engine=engine, spec=spec)
    with Session(engine) as session:
        t = DailyAggregate.__table__.c  # type: ignore[attr-defined]
        everything = (t.intent == "*") & (t.plan == "*") & (t.agent_id == "*")
        stored = {r.day: r._asdict() for r in session.execute(select(DailyAggregate.__table__).where(everything))}  # type: ignore[attr-defined]
        left = len(stale.stale_days(session))
        print(f"stored aggregates after the rebuild pass ({len(rebuilt)} days) == recomputation: {_compare(stored, fresh)} ({left} stale left)")
        seen = metrics_daily.daily_metrics(session=session, spec=spec, start=days[0], end=days[-1])
        print(f"what readers then see == recomputation from raw events: {_compare(seen, fresh)} ({len(days)} days)")
    engine.dispose()


if __name__ == "__main__":
    main()
