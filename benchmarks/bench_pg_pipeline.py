"""Benchmark: one batch of statements through psycopg's cursor pipeline against `webapp.pg_pipeline`.

Usage:
  .venv/bin/python benchmarks/bench_pg_pipeline.py --pg-url postgresql://postgres@127.0.0.1:5432/test
      [--statements 8] [--batches 3000]

Each batch is `--statements` reads of the same shape (a parameterised SELECT of three rows with
an integer, a text and a timestamp column) and a COMMIT, the shape of a grading request's reads.
Prints, per batch, the client's CPU time (this process, user + system), the server process's CPU
time (its /proc stat: the server must run on this machine) and the wall time, for:
- cursors: `Connection.pipeline()` with a cursor per statement (what `sql_batch` used first),
  then `commit()`;
- pg_pipeline: `webapp.pg_pipeline.run` with the COMMIT in the batch (what `sql_batch` sends).
The two alternate (`--rounds` times) so a busy machine slows both alike. Needs no table: the
rows come from `generate_series`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webapp import pg_pipeline  # noqa: E402

READ = (
    "SELECT g AS id, 'grader ' || g AS name, timestamptz '2026-11-24 09:00+00' - make_interval(mins => g) AS at "
    "FROM generate_series(%(start)s::int, %(start)s::int + 2) AS g"
)


def server_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(batch: Callable[[], Any], pid: int, batches: int) -> tuple[float, float, float]:
    batch()  # warm: caches, prepared statements
    cpu, wall, server = time.process_time(), time.perf_counter(), server_cpu(pid)
    for _ in range(batches):
        batch()
    return (
        (time.process_time() - cpu) / batches * 1e6,
        (server_cpu(pid) - server) / batches * 1e6,
        (time.perf_counter() - wall) / batches * 1e6,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pg-url", required=True, help="a PostgreSQL database on this machine (nothing is written)"
    )
    parser.add_argument("--statements", type=int, default=8)
    parser.add_argument("--batches", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    conn = psycopg.connect(args.pg_url.replace("postgresql+psycopg://", "postgresql://"))
    pid = conn.info.backend_pid
    n = args.statements

    def cursors() -> list[Any]:
        with conn.pipeline():
            opened = [conn.cursor() for _ in range(n)]
            for i, cursor in enumerate(opened):
                cursor.execute(READ, {"start": i})
        rows = [cursor.fetchall() for cursor in opened]
        conn.commit()
        return rows

    def ours() -> list[Any]:
        answers = pg_pipeline.run(conn, [*((READ, {"start": i}) for i in range(n)), ("COMMIT", {})])
        return [answer.rows for answer in answers[:n]]

    assert cursors() == ours(), "the two give different rows"
    figures: dict[str, list[tuple[float, float, float]]] = {"cursors": [], "pg_pipeline": []}
    for _ in range(args.rounds):
        figures["cursors"].append(measure(cursors, pid, args.batches))
        figures["pg_pipeline"].append(measure(ours, pid, args.batches))
    conn.close()
    print(f"bench_pg_pipeline: {n} reads + COMMIT per batch, {args.batches} batches x {args.rounds} rounds")
    for name, rounds in figures.items():
        client, server, wall = (statistics.median(r[i] for r in rounds) for i in range(3))
        print(
            f"  {name:12} client CPU {client:6.0f} us   server CPU {server:6.0f} us   wall {wall:6.0f} us per batch"
        )


if __name__ == "__main__":
    main()
