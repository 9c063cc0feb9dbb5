"""Hostile input, timed: the alias bomb and the 400 kB deep files, refused by the reader and by the whole command.

Prints how long the dataset reader takes to refuse a ~300-byte YAML alias bomb and 400 kB of
nested brackets (JSONL and YAML), then how long the whole `draftdesk import dataset FILE` command
takes from process start to exit (wall and CPU; target: under a second each, exit 2 with
FILE:LINE; the best of --repeat runs, as the machine may be shared). The long fuzz run of the
whole /api/v1 document is benchmarks/fuzz_api.py.

Usage: `.venv/bin/python benchmarks/bench_hostile.py [--repeat 5]`.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_safe_input import DEPTH_400K, alias_bomb  # noqa: E402
from webapp.datasets.records import RecordError, read_records  # noqa: E402


def hostile_files() -> dict[str, bytes]:
    """Return the alias bomb and the two 400 kB deep files by name."""
    nested = "[" * DEPTH_400K + "]" * DEPTH_400K
    return {
        "bomb.yaml": alias_bomb().encode(),
        "deep.jsonl": ('{"id": "deep", "x": ' + nested + "}\n").encode(),
        "deep.yaml": ("- id: deep\n  x: " + nested + "\n").encode(),
    }


def time_refusals() -> None:
    """Time the reader on the bomb and on 400 kB of nesting; print the message and seconds."""
    for name, data in hostile_files().items():
        t0 = time.perf_counter()
        try:
            read_records(data, path=name)
            outcome = "ACCEPTED (bug)"
        except RecordError as exc:
            outcome = exc.location
        print(f"{name:11} {len(data):>7} bytes  {time.perf_counter() - t0:6.3f} s  {outcome}")


def time_commands(repeat: int) -> None:
    """Run `draftdesk import dataset FILE` on each hostile file as a new process; print exit code, first line and times."""
    draftdesk = ROOT / ".venv" / "bin" / "draftdesk"
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "DRAFTDESK_MODE": "dev", "DRAFTDESK_DATABASE_URL": f"sqlite:///{tmp}/bench.db"}
        for name, data in hostile_files().items():
            path = Path(tmp) / name
            path.write_bytes(data)
            walls, cpus, done = [], [], None
            for _ in range(repeat):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                done = subprocess.run([str(draftdesk), "import", "dataset", str(path)], capture_output=True, text=True, env=env)
                walls.append(time.perf_counter() - t0)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            assert done is not None
            first = ((done.stderr or "").strip().splitlines() or [""])[0].replace(tmp + "/", "")
            print(
                f"draftdesk import dataset {name:11} exit {done.returncode}  wall {min(walls):5.2f} s (median "
                f"{sorted(walls)[len(walls) // 2]:5.2f})  CPU {min(cpus):5.2f} s  {first}"
            )
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main() -> None:
    """Run the timings."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each whole command (the best and median are printed)")
    args = parser.parse_args()
    time_refusals()
    time_commands(args.repeat)


if __name__ == "__main__":
    main()
