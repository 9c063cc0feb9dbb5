"""Grading under load: N graders sign in and open and save drafts in a closed loop for a fixed time
against `draftdesk serve --workers 2` on a copy of the demo database (SQLite, and PostgreSQL when
--pg-url names a scratch database this script may wipe). Prints requests per second and p50/p95
per request kind for 1, 10 and 50 graders, then counts lost and double grades in the database.

Before the load runs it measures, in process, the server time and the SQL statements of the
grading page and of save-and-next (the issue's "≤ 10 ms median, no query per row").

The demo's 77 gradable drafts would run out in seconds, so the copy gets a "bench-run": the demo
run's gradable drafts cloned --copies times (as further samples), and --graders extra labelers.

    .venv/bin/python benchmarks/bench_grading.py [--seconds 15] [--graders 1,10,50]
        [--pg-url postgresql+psycopg://postgres@127.0.0.1:5432/scratch]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import event, func, text
from sqlmodel import Session, col, select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from lean_http import LeanClient  # noqa: E402

from webapp.auth import service as auth_service  # noqa: E402
from webapp.auth.models import User  # noqa: E402
from webapp.core.config import Settings  # noqa: E402
from webapp.core.db import make_engine, session_scope  # noqa: E402
from webapp.core.migrations_runner import upgrade  # noqa: E402
from webapp.core.security import CSRF_COOKIE, SESSION_COOKIE, csrf_token_for  # noqa: E402
from webapp.demo import content as demo_content  # noqa: E402
from webapp.demo.seed import seed_demo  # noqa: E402
from webapp.grading.models import Grade  # noqa: E402
from webapp.runs.models import Draft, Run  # noqa: E402

SECRET = "bench-grading-secret-key-0123456789abcdef"
PASSWORD = "bench-password"
SCORES = {
    "factual_accuracy": "pass",
    "citation_relevance": "4",
    "tone": "4",
    "completeness": "4",
    "rationale": "bench",
}
DRAFT_ID = re.compile(r'id="grading-item" class="grading-item" data-draft="(\d+)"')


def grader_email(i: int) -> str:
    return f"bench-grader-{i:03d}@bench.draftdesk"


def prepare(url: str, *, graders: int, copies: int) -> tuple[int, int]:
    """Migrate, seed the demo, add graders and the bench run; return the demo run's and the bench run's ids."""
    upgrade(url)
    settings = Settings(database_url=url, mode="dev", secret_key=SECRET)
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            seed_demo(session=session, spec=settings.eval_spec)
        with session_scope(engine) as session:
            for i in range(graders):
                auth_service.create_user(
                    session=session,
                    email=grader_email(i),
                    password=PASSWORD,
                    roles=["labeler"],
                    name=f"Bench {i}",
                )
            demo = session.exec(select(Run).where(Run.name == demo_content.RUN_NAME)).one()
            bench = Run(name="bench-run", dataset_id=demo.dataset_id, model=demo.model, source="demo")
            session.add(bench)
            session.flush()
            originals = list(
                session.exec(
                    select(Draft).where(
                        Draft.run_id == demo.id,
                        col(Draft.draft_text).is_not(None),
                        col(Draft.escalated).is_(False),
                    )
                )
            )
            for k in range(copies):
                for d in originals:
                    session.add(
                        Draft(
                            run_id=bench.id,  # type: ignore[arg-type]
                            case_pk=d.case_pk,
                            sample_index=k,
                            draft_text=d.draft_text,
                            citations=d.citations,
                            confidence=d.confidence,
                            intent=d.intent,
                        )
                    )
            session.flush()
            return demo.id, bench.id  # type: ignore[return-value]
    finally:
        engine.dispose()


def reset_postgres(url: str) -> None:
    """Empty the scratch PostgreSQL database (drop and recreate the public schema)."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
    finally:
        engine.dispose()


def in_process(url: str, run_id: int, rounds: int = 60) -> dict[str, tuple[float, float, float, float]]:
    """Return {kind: (median wall ms, SQL statements, round trips, CPU ms)} of the grading page and save-and-next.

    CPU time (this process, the test client included) is reported beside wall time because on a
    shared machine the wall time mostly measures waiting for a core.
    """
    from fastapi.testclient import TestClient

    from webapp.app.main import create_app

    app = create_app(Settings(database_url=url, mode="dev", secret_key=SECRET))
    statements = [0, 0]  # statements, round trips (one per statement, and one per COMMIT)

    @event.listens_for(app.state.engine, "before_cursor_execute")
    def sent(*_args: object) -> None:
        statements[0] += 1
        statements[1] += 1

    @event.listens_for(app.state.engine, "commit")
    def committed(*_args: object) -> None:
        statements[1] += 1
    out: dict[str, list[tuple[float, int, int, float]]] = defaultdict(list)
    with TestClient(app) as c:
        c.get("/login")
        c.post("/login", data={"email": grader_email(0), "password": PASSWORD, "csrf_token": _csrf(c)})
        r = c.post(f"/grading/runs/{run_id}/next", data={"csrf_token": _csrf(c)})
        draft_id = int(str(r.url).rsplit("/", 1)[-1].split("?")[0])
        for _ in range(rounds):
            for kind, call in (
                ("grading page", lambda d=draft_id: c.get(f"/grading/drafts/{d}")),
                (
                    "save and next (htmx)",
                    lambda d=draft_id: c.post(
                        f"/grading/drafts/{d}",
                        data={**SCORES, "next": "1"},
                        headers={"HX-Request": "true", "X-CSRF-Token": _csrf(c)},
                    ),
                ),
            ):
                statements[:] = [0, 0]
                t0, c0 = time.perf_counter(), time.process_time()
                resp = call()
                out[kind].append(
                    (
                        (time.perf_counter() - t0) * 1000,
                        statements[0],
                        statements[1],
                        (time.process_time() - c0) * 1000,
                    )
                )
                assert resp.status_code == 200, resp.text[:300]
                if kind.startswith("save"):
                    draft_id = int(DRAFT_ID.search(resp.text).group(1))  # type: ignore[union-attr]
    app.state.engine.dispose()
    return {
        k: tuple(statistics.median(v[i] for v in vals) for i in range(4))  # type: ignore[misc]
        for k, vals in out.items()
    }


def _csrf(c: httpx.Client) -> str:
    return csrf_token_for(SECRET, c.cookies[CSRF_COOKIE], c.cookies.get(SESSION_COOKIE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(url: str, port: int, workers: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DRAFTDESK_DATABASE_URL": url,
        "DRAFTDESK_SECRET_KEY": SECRET,
        "DRAFTDESK_MODE": "dev",
    }
    cmd = [
        str(ROOT / ".venv/bin/draftdesk"),
        "serve",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--no-access-log",
    ]
    log = Path(tempfile.gettempdir()) / f"bench_grading_serve_{port}.log"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    deadline = time.monotonic() + 240  # two workers start slowly on a busy machine
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"server did not start; see {log}")


@dataclass
class Grader:
    email: str
    client: LeanClient
    csrf: str
    draft_id: int | None = None
    acknowledged: list[int] = field(default_factory=list)


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    done: int = 0

    def error(self, kind: str) -> None:
        """Count an error by kind (status code, error message, or exception)."""
        self.errors += 1
        self.error_kinds[kind] += 1


def sign_in(host: str, port: int, email: str) -> Grader:
    """Sign in with httpx (once), then hand the session and CSRF cookies to a lean keep-alive client."""
    with httpx.Client(base_url=f"http://{host}:{port}", timeout=60, follow_redirects=False) as client:
        client.get("/login")
        client.post("/login", data={"email": email, "password": PASSWORD, "csrf_token": _csrf(client)})
        cookies = {name: value for name, value in client.cookies.items()}
        csrf = _csrf(client)
    return Grader(email=email, client=LeanClient(host, port, cookies), csrf=csrf)


async def grader_loop(g: Grader, run_id: int, until: float, tally: Tally) -> None:
    """Open the grading page, then save and next (htmx), in a closed loop until the time is up."""
    save_headers = {"HX-Request": "true", "X-CSRF-Token": g.csrf}
    while time.monotonic() < until:
        try:
            if g.draft_id is None:
                t0 = time.perf_counter()
                r = await g.client.request(
                    "POST", f"/grading/runs/{run_id}/next", form={"csrf_token": g.csrf}
                )
                tally.latencies["take next"].append((time.perf_counter() - t0) * 1000)
                location = r.headers.get("location", "")
                if r.status != 303 or "/grading/drafts/" not in location:
                    tally.done += 1
                    return
                g.draft_id = int(location.split("/")[-1].split("?")[0])
            t0 = time.perf_counter()
            r = await g.client.request("GET", f"/grading/drafts/{g.draft_id}")
            tally.latencies["grading page"].append((time.perf_counter() - t0) * 1000)
            if r.status != 200:
                tally.error(f"grading page {r.status}")
                continue
            t0 = time.perf_counter()
            r = await g.client.request(
                "POST", f"/grading/drafts/{g.draft_id}", form={**SCORES, "next": "1"}, headers=save_headers
            )
            tally.latencies["save and next"].append((time.perf_counter() - t0) * 1000)
            if r.status == 204:  # nothing left: HX-Location to the batch
                g.acknowledged.append(g.draft_id)
                tally.done += 1
                return
            text = r.text if r.status == 200 else ""
            m = DRAFT_ID.search(text)
            if m is None or 'id="grading-error"' in text:
                said = re.search(r'id="grading-error">([^<]{0,80})', text)
                tally.error(f"save {r.status}: {said.group(1) if said else 'no next item'}")
                g.draft_id = None
                continue
            g.acknowledged.append(g.draft_id)
            g.draft_id = int(m.group(1))
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            tally.error(type(exc).__name__)
            await g.client.close()
            g.client.reader = g.client.writer = None


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


async def load(
    host: str, port: int, run_id: int, graders: list[Grader], seconds: float
) -> tuple[Tally, float]:
    for g in graders:
        await g.client.connect()
    tally = Tally()
    t0 = time.monotonic()
    await asyncio.gather(*(grader_loop(g, run_id, t0 + seconds, tally) for g in graders))
    elapsed = time.monotonic() - t0
    for g in graders:
        await g.client.close()
    return tally, elapsed


def check_grades(url: str, graders: list[Grader]) -> tuple[int, int, int]:
    """Return (acknowledged saves, lost: acknowledged without a grade row, double: extra grades of a draft)."""
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            users = {u.email: u.id for u in session.exec(select(User))}
            acked = 0
            lost = 0
            for g in graders:
                have = set(session.exec(select(Grade.draft_id).where(Grade.grader_id == users[g.email])))
                acked += len(g.acknowledged)
                lost += sum(1 for d in set(g.acknowledged) if d not in have)
            per_draft = session.exec(select(Grade.draft_id, func.count()).group_by(col(Grade.draft_id)))
            double = sum(max(0, n - 2) for _, n in per_draft)
            return acked, lost, double
    finally:
        engine.dispose()


def run_database(label: str, url: str, args: argparse.Namespace) -> None:
    sizes = [int(x) for x in args.graders.split(",")]
    demo_run, run_id = prepare(url, graders=sum(sizes) + 1, copies=args.copies)
    print(
        f"\n== {label}: demo copy + bench-run ({args.copies} x the demo's gradable drafts), {sum(sizes) + 1} graders"
    )
    # On the demo's own run (77 gradable drafts, 37 with a place left for a new grader).
    for kind, (ms, queries, trips, cpu) in in_process(url, demo_run, rounds=30).items():
        print(
            f"   in process, {kind}: median {ms:.1f} ms wall, {cpu:.1f} ms CPU, "
            f"{queries:.0f} SQL statements in {trips:.0f} round trips"
        )
    port = args.port or free_port()
    proc = start_server(url, port, workers=2)
    try:
        offset = 1
        for n in sizes:
            graders = [sign_in("127.0.0.1", port, grader_email(offset + i)) for i in range(n)]
            cpu0 = time.process_time()
            tally, elapsed = asyncio.run(load("127.0.0.1", port, run_id, graders, args.seconds))
            client_cpu = time.process_time() - cpu0
            offset += n
            total = sum(len(v) for v in tally.latencies.values())
            acked, lost, double = check_grades(url, graders)
            print(
                f"-- {n} grader{'s' if n != 1 else ''}, {elapsed:.1f} s: {total / elapsed:.1f} requests/s, "
                f"{acked} grades saved, errors {tally.errors}, lost {lost}, double {double}; "
                f"client CPU {client_cpu:.1f} s ({client_cpu / elapsed * 100:.0f}% of one core)"
            )
            for kind, count in sorted(tally.error_kinds.items()):
                print(f"   error: {kind} x{count}")
            for kind, values in sorted(tally.latencies.items()):
                if values:
                    print(
                        f"   {kind:<14} n={len(values):<6} p50 {pct(values, 50):7.1f} ms   p95 {pct(values, 95):7.1f} ms"
                    )
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    """Run the grading benchmark on SQLite and, with --pg-url, on PostgreSQL."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="closed-loop time per grader count")
    parser.add_argument("--graders", default="1,10,50")
    parser.add_argument(
        "--copies", type=int, default=120, help="copies of the demo's gradable drafts in bench-run"
    )
    parser.add_argument("--pg-url", default="", help="a scratch PostgreSQL database this script may wipe")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--port", type=int, default=0, help="port for the server (default: any free port)")
    args = parser.parse_args()
    print(f"bench_grading: serve --workers 2, {os.cpu_count()} CPU cores, {args.seconds:.0f} s per run")
    if not args.skip_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            run_database("SQLite", f"sqlite:///{tmp}/bench.db", args)
    if args.pg_url:
        reset_postgres(args.pg_url)
        run_database("PostgreSQL", args.pg_url, args)


if __name__ == "__main__":
    main()
