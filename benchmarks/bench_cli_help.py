"""`prompt-evaluator --help` and `draftdesk --help`, timed in fresh processes (issue 36 item 7).

Each help is run --runs times (default 5), each in a new Python process started the way the
console scripts start (`python -c "from ... import main; main()"`, so the figure does not depend
on where the script wrappers are installed); the median and best wall times are printed against
the 0.5 s target, with the heavy modules each help loaded (SQLModel, FastAPI, pandas, the openai
SDK... none should be). Timings are a benchmark, never a test: the machine may be shared.

Usage: `.venv/bin/python benchmarks/bench_cli_help.py [--runs 5]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.5
HEAVY = ("sqlmodel", "sqlalchemy", "fastapi", "pandas", "scipy", "plotly", "openai", "numpy")
COMMANDS = {
    "prompt-evaluator --help": "prompt_evaluator.cli",
    "draftdesk --help": "webapp.app.cli",
}
PROBE = (
    "import sys\n"
    "sys.argv = [{name!r}, '--help']\n"
    "from {module} import main\n"
    "try:\n    main()\n"
    "except SystemExit:\n    pass\n"
    "sys.stderr.write(' '.join(m for m in {heavy!r} if m in sys.modules))\n"
)


def run_once(name: str, module: str) -> tuple[float, str]:
    """Return the wall time of one fresh `NAME --help` and the heavy modules it loaded."""
    code = PROBE.format(name=name.split()[0], module=module, heavy=HEAVY)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    wall = time.perf_counter() - start
    if "Usage" not in done.stdout:
        raise SystemExit(f"{name} printed no help:\n{done.stdout}\n{done.stderr}")
    return wall, done.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command (median and best printed)")
    args = parser.parse_args()
    for name, module in COMMANDS.items():
        results = [run_once(name, module) for _ in range(args.runs)]
        walls = [w for w, _ in results]
        median = statistics.median(walls)
        verdict = "meets" if median <= TARGET_S else "MISSES"
        heavy = results[-1][1] or "none"
        print(
            f"{name:<26} median {median:.3f} s  best {min(walls):.3f} s  ({args.runs} runs; {verdict} the {TARGET_S} s target)"
            f"  heavy modules loaded: {heavy}"
        )


if __name__ == "__main__":
    main()
