"""Benchmark: many browsers asking for one run page at once, against a real `catnip web`.

    .venv/bin/python benchmarks/concurrent_run_page.py [--requests 100] [--points 2] [--keep DIR]

Records a finished run into a fresh database in a temporary folder (per point: 100 clients x 10
pages, 5 objects each, 20,000 application samples, 600 bottleneck samples and progress rows),
starts `catnip web` on a free loopback port (waitress, 16 threads), waits for /healthz, sends the
requests to /runs/RUN all at once from as many threads, and prints each request's latency (median,
95th percentile, max) and the wall time. The server is stopped and the folder removed after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from catnip.results.store import Store
from catnip.testbed.paths import REPO

RUN = "20260101-000000-bench-cccc"


def record(db: Path, points: int) -> None:
    rnd = random.Random(1)
    with Store(db) as store:
        store.create_run(RUN, "bench", "scenarios/quick.yaml", {"name": "bench"}, {"topology.bottleneck.buffer":
                         ["64KB", "512KB"]}, 1, "abc", {"python": "3.11"}, {"root": True}, runner=None)
        for p in range(points):
            store.create_point(RUN, p, 0, {"topology.bottleneck.buffer": ["64KB", "512KB"][p % 2]},
                               {"topology": {"clients": 100}, "workload": {"pages": list(range(1, 11)), "rounds": 1}}, 1)
            objects, pages = [], []
            for c in range(100):
                for page in range(1, 11):
                    start = 1000.0 + c + page
                    d = rnd.uniform(0.5, 8.0)
                    pages.append({"client": f"c{c}", "server": "s1", "page": page, "round": 0, "start": start,
                                  "end": start + d, "duration": d, "objects": 5, "bytes": 20000})
                    objects += [{"client": f"c{c}", "server": "s1", "page": page, "round": 0, "url": f"/p{page}/{o}",
                                 "conn": o % 2, "start": start, "connect_done": start + 0.01, "first_byte": start + 0.1,
                                 "end": start + d, "body_bytes": 4000, "header_bytes": 200, "status": 200}
                                for o in range(5)]
            store.add_transfers(RUN, p, objects, pages)
            store.add_samples(RUN, p, [{"app": "telnet", "metric": "echo_delay", "host": f"c{i % 20}", "flow": f"f{i % 50}",
                                        "tag": f"rtt{i % 4}", "t": 1000.0 + i * 0.01, "value": rnd.expovariate(20),
                                        "unit": "s"} for i in range(20000)])
            store.add_queue_samples(RUN, p, [("ctpr1", "ctpr1>ctpr2", 1000.0 + i * 0.5, rnd.randint(0, 60),
                                              rnd.randint(0, 90000), i * 1000, i // 10, i // 30, i // 15)
                                             for i in range(600)])
            for i in range(600):
                store.add_progress(RUN, p, float(i), "running workload", i, 1000)
            store.update_point(RUN, p, status="done", finished=1600.0, realtime_ok=1)
        store.finish_run(RUN, "done")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--points", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="catnip-bench-") as tmp:
        db = Path(tmp) / "catnip.db"
        record(db, args.points)
        env = {**os.environ, "CATNIP_DATA": tmp, "CATNIP_DB": str(db)}
        proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "web", "--port", "0"], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline()).group(1))
            deadline = time.monotonic() + 60
            while True:  # ready when it answers its health check
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                        if json.loads(r.read())["ok"]:
                            break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            url = f"http://127.0.0.1:{port}/runs/{RUN}"
            with urllib.request.urlopen(url, timeout=300) as r:
                size = len(r.read())
            latencies: list[float] = []
            failures: list[str] = []
            go = threading.Event()

            def one() -> None:
                go.wait()
                t = time.perf_counter()
                try:
                    with urllib.request.urlopen(url, timeout=300) as r:
                        r.read()
                    latencies.append(time.perf_counter() - t)
                except OSError as exc:
                    failures.append(str(exc))

            threads = [threading.Thread(target=one) for _ in range(args.requests)]
            for t in threads:
                t.start()
            start = time.perf_counter()
            go.set()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            latencies.sort()
            print(f"run page {size:,} bytes; {args.requests} concurrent GETs: {len(latencies)} answered,"
                  f" {len(failures)} failed; latency median {statistics.median(latencies):.2f} s,"
                  f" p95 {latencies[int(0.95 * (len(latencies) - 1))]:.2f} s, max {latencies[-1]:.2f} s;"
                  f" wall {wall:.2f} s")
        finally:
            proc.terminate()
            proc.wait(60)


if __name__ == "__main__":
    main()
