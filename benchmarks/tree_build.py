"""Benchmark (not a test): how long a tree with three applications takes to build and tear down.

    .venv/bin/python benchmarks/tree_build.py [--users 5] [--l1 2] [--l2 2] [--repeat 3] [--out bench.json]

Builds scenarios/tree-small.yaml's tree resized to USERS x L1 x L2 users per side (the defaults
give 20 sources + 20 destinations = 40 hosts), starts its link backend (one queue engine per
router) and the servers of its three applications (Telnet echo, Apache, FTP) until they are ready,
then tears everything down; each phase is timed. The experiment-model issue's target: under 20 s
for build + teardown of the 40-host tree with its three applications. Run on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catnip.controller.skeleton import TeardownStack, kernel_resources  # noqa: E402
from catnip.spec import scenario as scenario_mod  # noqa: E402
from catnip.testbed import capabilities, network, paths  # noqa: E402
from catnip.testbed.links import EngineBackend  # noqa: E402
from catnip.workloads import docroot as docroot_mod  # noqa: E402
from catnip.workloads.apps.base import AppContext, lookup  # noqa: E402
from catnip.workloads.pages import catnip_pages  # noqa: E402


def once(sc, caps, work: Path) -> dict[str, float]:
    t: dict[str, float] = {}
    t0 = time.monotonic()
    with TeardownStack() as stack:
        net = network.build(sc, caps.choose_switch(sc.topology.access_switch, sc.topology.ovs_datapath))
        stack.callback(network.stop, net)
        t["build_network"] = time.monotonic() - t0
        t1 = time.monotonic()
        backend = EngineBackend(work, sc.seed, sc.run.late_threshold, sc.run.engine_spin)
        stack.callback(backend.stop)
        backend.start(list(net.routers.values()), net.directions)
        t["start_engines"] = time.monotonic() - t1
        t2 = time.monotonic()
        apps = []
        for i, spec in enumerate(sc.applications):
            ctx = AppContext(workdir=work / spec.instance, seed=i, time_limit=60, python=paths.python(), repo=paths.REPO,
                             start_at=0.0, docroot=paths.docroot())
            app = lookup(spec.kind)(spec, ctx, net.hosts_of(spec.clients), net.hosts_of(spec.servers))
            stack.callback(app.stop)
            app.start_servers()
            apps.append(app)
        for app in apps:
            app.wait_ready(timeout=30)
        t["servers_ready"] = time.monotonic() - t2
        t["hosts"] = len(net.hosts)
        t["routers"] = len(net.routers)
        t3 = time.monotonic()
    t["teardown"] = time.monotonic() - t3
    t["total"] = time.monotonic() - t0
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=5)
    ap.add_argument("--l1", type=int, default=2)
    ap.add_argument("--l2", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    sc = scenario_mod.load(paths.REPO / "scenarios" / "tree-small.yaml", [
        f"topology.users_per_l1={args.users}", f"topology.l1_per_l2={args.l1}", f"topology.l2_per_core={args.l2}"],
    ).points[0][1]
    caps = capabilities.probe()
    results = []
    from mininet.net import Mininet
    Mininet.init()
    with kernel_resources(sc.tcp.all_cc()):
        docroot_mod.write_docroot(catnip_pages(), paths.docroot())
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="catnip-bench-") as work:
                Path(work).chmod(0o755)
                r = once(sc, caps, Path(work))
            results.append(r)
            print(json.dumps({"repeat": i, **{k: round(v, 2) for k, v in r.items()}}))
    keys = ("build_network", "start_engines", "servers_ready", "teardown", "total")
    summary = {k: round(statistics.median(r[k] for r in results), 2) for k in keys}
    summary.update(hosts=results[0]["hosts"], routers=results[0]["routers"], repeat=args.repeat)
    print("median:", json.dumps(summary))
    if args.out:
        args.out.write_text(json.dumps({"runs": results, "median": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
