"""Benchmark: GET /static/vendor/plotly-basic.min.js with gzip over loopback.

Usage:
  .venv/bin/python benchmarks/bench_static.py [--requests 20]

Starts `draftdesk serve` on a scratch SQLite database, then prints the median time of GET
/static/vendor/plotly-basic.min.js (plotly.js's basic bundle from node_modules, which the metrics
page loads) with Accept-Encoding: gzip, the whole body read (<= 20 ms), beside what compressing it
per request (gzip level 9) costs in this same run. The first request, which gzips the file once
for the process, is reported apart. The first visit of /metrics in Chromium is
benchmarks/bench_metrics_first_visit.py.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20)
    args = ap.parse_args()
    os.environ["DRAFTDESK_MODE"] = "dev"

    import httpx
    from bench_events import _fresh_database
    from bench_ingest_api import _free_port

    from webapp.web import static_assets

    tmp = Path(tempfile.mkdtemp(prefix="dd_bench_static_"))
    url = f"sqlite:///{tmp / 'bench.db'}"
    os.environ["DRAFTDESK_DATABASE_URL"] = url
    _fresh_database(url)

    port = _free_port(8150, 8169, [])
    base = f"http://127.0.0.1:{port}"
    draftdesk = str(Path(sys.executable).parent / "draftdesk")
    server = subprocess.Popen([draftdesk, "serve", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    name = "plotly-basic.min.js"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        raw = static_assets.VENDOR_FILES[name].read_bytes()
        with httpx.Client(base_url=base) as client:
            times, sizes = [], set()
            for _ in range(args.requests + 1):
                t = time.perf_counter()
                with client.stream("GET", f"/static/vendor/{name}", headers={"Accept-Encoding": "gzip"}) as r:
                    body = b"".join(r.iter_raw())
                times.append((time.perf_counter() - t) * 1000)
                sizes.add((r.headers.get("content-encoding"), r.headers.get("content-length"), len(body)))
            first, times = times[0], times[1:]
        t = time.perf_counter()
        gzip.compress(raw, compresslevel=9)
        per_request_gzip = (time.perf_counter() - t) * 1000
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(
            f"GET /static/vendor/{name} (gzip, {len(raw) / 1e6:.2f} MB -> {sizes}): median "
            f"{statistics.median(times):.1f} ms, max {max(times):.1f} ms (target <= 20 ms); the process's first "
            f"request (gzips it once) {first:.0f} ms; compressing it on each request instead would cost {per_request_gzip:.0f} ms"
        )
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
