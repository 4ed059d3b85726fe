"""Benchmark (not a test): does the default run keep real time, run after run, and which run
settings help? Issue 45's "10 runs in a row" measurement.

    .venv/bin/python benchmarks/realtime_runs.py [--runs 10] [--scenario scenarios/quick.yaml]
        [--variant NAME=KEY=VALUE[,KEY=VALUE...]]... [--out realtime.json]

Runs the scenario `--runs` times per variant, the variants taking turns (run 1 of each, then run
2 of each, ...) so that whatever else the machine does falls on all of them alike. A variant is a
name and the `--set` overrides it adds (`--variant awake=run.keep_awake=true`); without any, the
default settings alone run. Each run goes through `catnip run` into a database of its own in a
temporary folder, so the machine's results database is left alone, and every point's fidelity
record (controller/fidelity.py) is read back: whether it kept real time, late verdicts against
all, the lateness quantiles, the CPU it found busy. A run that fails is counted and reported, not
retried. Run on a quiet machine: the point is what the machine gives a run, not what another job
takes from it (`uptime` is printed at the start and end).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from catnip.results.store import Store  # noqa: E402
from catnip.testbed import cleanup  # noqa: E402

FIELDS = ("late_events", "engine_events", "late_at_issue_events", "late_p99_us", "max_late_us", "cpu_busy_fraction",
          "cpu_steal_fraction", "slow_verdict_calls")


def parse_variant(text: str) -> tuple[str, list[str]]:
    """`NAME=KEY=VALUE[,KEY=VALUE...]` or `NAME=` (no overrides) -> (name, ["KEY=VALUE", ...])."""
    name, sep, sets = text.partition("=")
    if not sep or not name or not name.replace("-", "").replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=KEY=VALUE[,KEY=VALUE...] or NAME= (NAME: letters,"
                                         " digits, - and _)")
    overrides = [s for s in sets.split(",") if s]
    for s in overrides:
        if "=" not in s:
            raise argparse.ArgumentTypeError(f"{text!r}: override {s!r} is not KEY=VALUE")
    return name, overrides


def wait_for_machine() -> None:
    """Until no run or netns test holds the machine lock (another's run would share the CPU)."""
    said = False
    while holder := cleanup.run_in_progress():
        if not said:
            print(f"waiting for the machine: {holder}", flush=True)
            said = True
        time.sleep(1)


def one_run(scenario: str, overrides: list[str], db: Path) -> dict:
    """Run the scenario once; its points' fidelity, or the failure."""
    wait_for_machine()
    argv = [str(REPO / ".venv" / "bin" / "catnip"), "run", scenario, "--db", str(db), "--json", "--no-report"]
    for s in overrides:
        argv += ["--set", s]
    t0 = time.monotonic()
    res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    out: dict = {"wall_s": round(time.monotonic() - t0, 1), "exit": res.returncode}
    if res.returncode != 0:
        out["error"] = (res.stderr.strip().splitlines() or ["(no message)"])[-1][:300]
        return out
    with Store(db) as store:
        run = store.runs()[0]
        points = store.points(run["id"])
    out["run_id"] = run["id"]
    out["points"] = []
    for p in points:
        fid = json.loads(p["fidelity"] or "{}")
        # What ran, from the point's own record, not from the variant's name: the checkout is live,
        # so a default changed while the benchmark runs shows here (it did, 2026-11-28).
        out["points"].append({"status": p["status"], "realtime_ok": bool(p["realtime_ok"]),
                              "keep_awake_cpus": (fid.get("placement") or {}).get("keep_awake_cpus"),
                              **{k: fid.get(k) for k in FIELDS}})
    return out


def summary(name: str, runs: list[dict]) -> str:
    ok_runs = [r for r in runs if r["exit"] == 0]
    kept = sum(all(p["realtime_ok"] for p in r["points"]) for r in ok_runs)
    late = sum(p["late_events"] or 0 for r in ok_runs for p in r["points"])
    events = sum(p["engine_events"] or 0 for r in ok_runs for p in r["points"])
    frac = f"{100 * late / events:.2f}%" if events else "n/a"
    return (f"{name}: real time kept in {kept} of {len(runs)} runs ({len(runs) - len(ok_runs)} failed);"
            f" late verdicts {late} of {events} ({frac})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per variant (default 10)")
    ap.add_argument("--scenario", default="scenarios/quick.yaml", help="the scenario (default: make run's)")
    ap.add_argument("--variant", type=parse_variant, action="append", default=[],
                    help="NAME=KEY=VALUE[,KEY=VALUE...]: settings to compare (repeatable)")
    ap.add_argument("--out", type=Path, help="write every run's figures here as JSON")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs: at least 1")
    variants = args.variant or [("default", [])]
    if len({n for n, _ in variants}) != len(variants):
        ap.error("--variant: each NAME once")
    print("uptime:", os.getloadavg(), flush=True)
    results: dict[str, list[dict]] = {n: [] for n, _ in variants}
    with tempfile.TemporaryDirectory(prefix="catnip-rt-") as tmp:
        for i in range(args.runs):
            for name, overrides in variants:
                r = one_run(args.scenario, overrides, Path(tmp) / f"{name}-{i}.db")
                results[name].append(r)
                pts = r.get("points", [])
                desc = (f"error: {r['error']}" if r["exit"] else
                        "; ".join(f"kept={p['realtime_ok']} late {p['late_events']}/{p['engine_events']}"
                                  f" p99 {p['late_p99_us']} us busy {p['cpu_busy_fraction']}"
                                  f" awake {p['keep_awake_cpus'] or 'no'}" for p in pts))
                print(f"[{i + 1}/{args.runs}] {name}: {r['wall_s']} s, {desc}", flush=True)
    print("uptime:", os.getloadavg())
    for name, _ in variants:
        print(summary(name, results[name]))
    if args.out:
        args.out.write_text(json.dumps({"scenario": args.scenario, "variants": dict(variants), "runs": results},
                                       indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
