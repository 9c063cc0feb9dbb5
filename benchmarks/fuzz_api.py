"""The long fuzz run: the checks of tests/test_fuzz_api.py over the whole /api/v1 document, with many more examples.

Seeds the demo into a fresh database (SQLite in a temporary folder, or --database-url: a scratch
PostgreSQL database this script wipes), then sends schemathesis-generated requests to every
operation (tests/fuzz_support.py: valid ones as every kind of caller, invalid ones as an all-roles
and an invalid-token caller; checks: no server error, only documented statuses, every answer
matches its response model). Not derandomized, so each run tries new examples. Prints each
operation's time and failures, then the totals; exits 1 on any failure.

    .venv/bin/python benchmarks/fuzz_api.py [--examples 200] [--only SUBSTRING] [--database-url URL]

The suite runs the same checks with 4 examples (DRAFTDESK_FUZZ_EXAMPLES raises that).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import SPEC_PATH, TEST_SECRET  # noqa: E402
from tests.fuzz_support import CALLERS, api_operations, demo_target, fuzz_operation  # noqa: E402
from webapp.core.db import make_engine  # noqa: E402
from webapp.core.models import metadata  # noqa: E402
from webapp.core.spec import load_spec  # noqa: E402


def fresh_schema(url: str) -> None:
    """Create the tables in an empty database (a PostgreSQL scratch database is emptied first)."""
    from sqlalchemy import text

    engine = make_engine(url)
    try:
        if url.startswith("postgresql"):
            with engine.begin() as conn:
                conn.execute(text("DROP SCHEMA public CASCADE"))
                conn.execute(text("CREATE SCHEMA public"))
        metadata.create_all(engine)
    finally:
        engine.dispose()


def fuzz(url: str, examples: int, only: str = "") -> int:
    """Fuzz every operation (whose label contains `only`) on a freshly seeded demo; print figures; return the failures."""
    fresh_schema(url)
    target = demo_target(url, TEST_SECRET, SPEC_PATH, load_spec(SPEC_PATH))
    failures = 0
    operations = [op for op in api_operations(target.app) if only in op.label]
    print(f"fuzz_api: {len(operations)} operations, up to {examples} examples per operation and mode, "
          f"{len(CALLERS)} callers for valid requests, 2 for invalid ones")
    t0 = time.perf_counter()
    try:
        for op in operations:
            t1 = time.perf_counter()
            found = fuzz_operation(op, target, max_examples=examples, derandomize=False)
            failures += len(found)
            print(f"{op.label:60} {time.perf_counter() - t1:6.1f} s  {'ok' if not found else 'FAILED'}")
            for f in found:
                print("   ", f.replace("\n", "\n    "))
    finally:
        target.app.state.engine.dispose()
    print(f"fuzzed {len(operations)} operations in {time.perf_counter() - t0:.0f} s: {failures} failure(s)")
    return failures


def main() -> None:
    """Parse the options and run the fuzz."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="examples per operation and mode")
    parser.add_argument("--only", default="", help="fuzz only the operations whose label contains this (e.g. 'POST /api/v1/events')")
    parser.add_argument("--database-url", default="", help="a scratch database this script wipes (default: SQLite in a temporary folder)")
    args = parser.parse_args()
    if args.database_url:
        sys.exit(1 if fuzz(args.database_url, args.examples, args.only) else 0)
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(1 if fuzz(f"sqlite:///{tmp}/demo.db", args.examples, args.only) else 0)


if __name__ == "__main__":
    main()
