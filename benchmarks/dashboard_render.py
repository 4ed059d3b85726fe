"""Benchmark: how long the dashboard takes to render its pages for a stored run.

    .venv/bin/python benchmarks/dashboard_render.py --run RUN_ID [--compare OTHER_RUN] [--db PATH] [-n 20]

Renders through Flask's test client (no network), after one warm-up request, and prints the
median and worst time per page. The issue's target: under 300 ms for a run with 100 clients and
1,000 pages (e.g. catnip-wan-baseline).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from catnip.controller.run_queue import RunQueue
from catnip.results.store import Store
from catnip.testbed import paths
from catnip.webui.app import create_app


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=paths.database())
    ap.add_argument("--run", required=True)
    ap.add_argument("--compare", default=None, help="a second run for the compare page")
    ap.add_argument("-n", type=int, default=20, help="renders per page")
    args = ap.parse_args()
    with Store(args.db) as store:
        run = store.find_run(args.run)
        if run is None:
            raise SystemExit(f"no run {args.run!r} in {args.db}")
        points = store.points(run["id"])
        pages = sum(len(store.pages(run["id"], p["point"])) for p in points)
    queue = RunQueue(args.db, Path("/tmp/catnip-bench-logs"), machine_busy=lambda: True)
    client = create_app(db=args.db, queue=queue).test_client()
    urls = {"scenarios": "/", "runs": "/runs", "run": f"/runs/{run['id']}", "csv": f"/runs/{run['id']}/report.csv"}
    if args.compare:
        urls["compare"] = f"/compare?run={args.compare}&run={run['id']}"
    print(f"run {run['id']}: {len(points)} point(s), {pages} pages recorded; {args.n} renders per page")
    for name, url in urls.items():
        assert client.get(url).status_code == 200, url
        times = []
        for _ in range(args.n):
            t = time.perf_counter()
            r = client.get(url)
            times.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200
        print(f"  {name:<10} median {statistics.median(times):7.1f} ms   max {max(times):7.1f} ms   {len(r.data):>8,} bytes")
    queue.shutdown(1)


if __name__ == "__main__":
    main()
