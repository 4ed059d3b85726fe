"""Side-by-side forwarding benchmark (not a test): TCP through a router, plain kernel forwarding
against every forwarded packet going through `catnip-engine run`. Run as root with the venv:

    .venv/bin/python benchmarks/forward_bench.py [--seconds 6] [--repeat 3] [--policy droptail]
        [--variant LABEL[:binary=PATH][,key=value...]]... [--perf-record DIR] [--out result.json]

A line of three namespaces (testbed/netline.py, prefix ctpf-, removed afterwards, also on Ctrl-C;
`catnip clean` finds them if the benchmark is killed): sender -> router -> receiver, veths at MTU
1500 with TSO/GSO/GRO off as in a run (testbed/hostconfig.disable_offloads). Each repetition runs
one iperf3 TCP transfer per mode, modes alternating (plain, engine, plain, engine, ...), so a
disturbance of the machine hits both alike. In engine mode the router runs the engine as a run
starts it (testbed/engine.RouterEngine: the same config and iptables rule, egress toward the
receiver) with one unlimited link (no rate, no delay, a 1000-packet buffer, the chosen policy).

Printed per repetition: Gbit/s of each mode, the engine/plain ratio, and for the engine its CPU
seconds per verdict (/proc/PID/stat utime and stime over the verdicts its stats counted), split
into user (the engine's code) and system (its receive and verdict calls, with the kernel's
forwarding of each released packet, which runs inside the verdict call).

`--variant` adds an engine mode: top-level engine config fields (`verdict_batch=1`) and/or another
engine binary (`binary=/tmp/old-engine`), so two builds or two settings are compared in one run.
The machine lock is taken (waiting for it) so no run or netns test shares the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from catnip.controller.skeleton import RunCancelled, machine_lock, signals_cancel  # noqa: E402
from catnip.spec.record import DirectionRecord  # noqa: E402
from catnip.testbed import hostconfig, paths  # noqa: E402
from catnip.testbed.engine import RouterEngine, iptables_rule  # noqa: E402
from catnip.testbed.netline import NetLine  # noqa: E402

LINE = NetLine("ctpf", net=67)
POLICIES = ("droptail", "catnip_good")


@dataclass
class Variant:
    label: str
    binary: Path | None = None
    settings: dict = field(default_factory=dict)


def parse_variant(text: str) -> Variant:
    """`LABEL[:binary=PATH][,key=value...]`; values are JSON where they parse (numbers, true)."""
    label, _, rest = text.partition(":")
    if not re.fullmatch(r"[A-Za-z0-9_.+-]{1,40}", label) or label == "plain":
        raise argparse.ArgumentTypeError(f"--variant {text!r}: the label must be 1-40 letters, digits or _.+- and"
                                         " not 'plain'")
    v = Variant(label)
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"--variant {text!r}: {item!r} is not key=value")
        if key == "binary":
            v.binary = Path(value)
            if not v.binary.is_file():
                raise argparse.ArgumentTypeError(f"--variant {text!r}: binary {value} does not exist")
            continue
        try:
            v.settings[key] = json.loads(value)
        except json.JSONDecodeError:
            v.settings[key] = value
    return v


class BenchEngine(RouterEngine):
    """A run's router engine with top-level config fields set by a variant."""

    settings: dict = {}

    def config(self) -> dict:
        return {**super().config(), **self.settings}


@contextmanager
def engine_binary(path: Path | None):
    """paths.engine_binary() reads CATNIP_ENGINE: point it at a variant's binary for one start."""
    old = os.environ.get("CATNIP_ENGINE")
    if path is not None:
        os.environ["CATNIP_ENGINE"] = str(path.resolve())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CATNIP_ENGINE", None)
        else:
            os.environ["CATNIP_ENGINE"] = old


def link_record(policy: str) -> DirectionRecord:
    return DirectionRecord(name="r>c", where="forward_bench", role="bench", router="r", hook="egress",
                           interface=LINE.router_out, rate_bps=0, delay_s=0.0, buffer={"packets": 1000},
                           policy={"kind": policy})


def cpu_counters() -> tuple[int, int]:
    """(all jiffies, steal jiffies) of the machine, /proc/stat."""
    vals = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
    return sum(vals), vals[7]


def load_average() -> float:
    return float(open("/proc/loadavg").read().split()[0])


def iperf(seconds: float) -> float:
    """One TCP transfer sender -> receiver; Gbit/s received after the first second (slow start)."""
    res = subprocess.run([*LINE.ns("s"), "iperf3", "-c", LINE.receiver_ip, "-t", str(seconds + 1), "-O", "1", "-J"],
                         capture_output=True, text=True, timeout=seconds + 60)
    try:
        out = json.loads(res.stdout)
        return out["end"]["sum_received"]["bits_per_second"] / 1e9
    except (json.JSONDecodeError, KeyError) as exc:
        raise RuntimeError(f"iperf3 failed (exit {res.returncode}): {res.stdout[-300:]} {res.stderr[-300:]}") from exc


def verdicts(stats: dict) -> int:
    link = (stats or {}).get("links", {}).get("r>c", {})
    return sum(v[0] for k in ("sent", "dropped") for v in link.get(k, {}).values())


def run_engine_rep(work: Path, variant: Variant, policy: str, seconds: float, perf_dir: Path | None, rep: int) -> dict:
    BenchEngine.settings = variant.settings
    eng = BenchEngine(router=LINE.node("r"), links=[link_record(policy)], workdir=work, seed=1)
    with engine_binary(variant.binary):
        eng.start()
    perf = None
    try:
        with open(f"/proc/{eng.proc.pid}/stat") as fh:
            t0 = _utime_stime(fh.read())
        if perf_dir is not None:
            perf_dir.mkdir(parents=True, exist_ok=True)
            perf = subprocess.Popen(["perf", "record", "-g", "-q", "-o", str(perf_dir / f"{variant.label}-{rep}.data"),
                                     "-p", str(eng.proc.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        gbps = iperf(seconds)
        with open(f"/proc/{eng.proc.pid}/stat") as fh:
            t1 = _utime_stime(fh.read())
    finally:
        if perf is not None:
            perf.send_signal(2)
            perf.wait(30)
        # Rule first: with the engine gone, a queue without a listener drops every packet.
        rule = iptables_rule(eng.links[0], 0)
        hostconfig.run(eng.router, *[("-D" if a == "-A" else a) for a in rule])
        eng.stop()
    final = eng.latest_stats() or {}
    n = verdicts(final)
    errs = final.get("engine", {})
    user, system = t1[0] - t0[0], t1[1] - t0[1]
    return {"gbps": gbps, "verdicts": n, "cpu_user_s": user, "cpu_sys_s": system,
            "us_per_verdict": 1e6 * (user + system) / n if n else None,
            "user_us_per_verdict": 1e6 * user / n if n else None,
            "sys_us_per_verdict": 1e6 * system / n if n else None,
            "nfq_errors": errs.get("nfq_errors"), "engine_stats": errs}


def _utime_stime(stat: str) -> tuple[float, float]:
    """utime and stime of a /proc/PID/stat line, seconds (fields after the parenthesised name)."""
    fields = stat.rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tck, int(fields[12]) / tck


def wait_listening(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f":{port} " in subprocess.run([*LINE.ns("c"), "ss", "-Hltn"], capture_output=True, text=True).stdout:
            return
        time.sleep(0.05)
    raise RuntimeError(f"iperf3 server in {LINE.names[2]} not listening on {port} after {timeout:.0f} s")


def build_line() -> None:
    LINE.build()
    for which, dev in (("s", f"{LINE.prefix}-s0"), ("r", f"{LINE.prefix}-r0"), ("r", LINE.router_out),
                       ("c", f"{LINE.prefix}-c0")):
        hostconfig.disable_offloads(LINE.node(which), dev)  # raises if one stays on


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=6, help="measured seconds per transfer (after 1 s omitted)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--policy", choices=POLICIES, default="droptail")
    ap.add_argument("--variant", type=parse_variant, action="append", default=[],
                    help="an engine mode: LABEL[:binary=PATH][,key=value...] (default: one, 'engine')")
    ap.add_argument("--no-plain", action="store_true", help="only the engine variants (compare builds)")
    ap.add_argument("--perf-record", type=Path, default=None, help="perf record -g the engine into DIR/LABEL-REP.data")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("forward_bench: needs root (network namespaces, iptables)")
    if not 1 <= args.repeat <= 50 or not 1 <= args.seconds <= 120:
        sys.exit("forward_bench: --repeat must be 1-50 and --seconds 1-120")
    variants = args.variant or [Variant("engine")]
    if len({v.label for v in variants}) != len(variants):
        sys.exit("forward_bench: --variant labels must differ")
    for v in variants:
        if v.binary is None and not paths.engine_binary().exists():
            sys.exit(f"forward_bench: {paths.engine_binary()} missing; run `make setup`")
    modes = ([] if args.no_plain else ["plain"]) + [v.label for v in variants]
    by_label = {v.label: v for v in variants}
    results: dict = {"policy": args.policy, "seconds": args.seconds, "modes": modes, "reps": [],
                     "variants": {v.label: {"binary": str(v.binary or paths.engine_binary()), **v.settings}
                                  for v in variants},
                     "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release}}
    print(f"uptime load {load_average():.2f}; modes {', '.join(modes)}; {args.repeat} x {args.seconds:g} s",
          flush=True)
    try:
        with machine_lock(wait=True), signals_cancel(), tempfile.TemporaryDirectory(prefix="ctpf-") as tmp:
            build_line()
            server = LINE.node("c").popen(["iperf3", "-s"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_listening(5201)
                for rep in range(args.repeat):
                    row: dict = {"rep": rep + 1}
                    for mode in modes:
                        load, (tot0, st0) = load_average(), cpu_counters()
                        if mode == "plain":
                            r = {"gbps": iperf(args.seconds)}
                        else:
                            r = run_engine_rep(Path(tmp), by_label[mode], args.policy, args.seconds,
                                               args.perf_record, rep + 1)
                        tot1, st1 = cpu_counters()
                        r["load"], r["steal"] = load, (st1 - st0) / max(1, tot1 - tot0)
                        row[mode] = r
                        extra = (f"  {r['us_per_verdict']:.2f} us CPU/verdict (user {r['user_us_per_verdict']:.2f},"
                                 f" sys {r['sys_us_per_verdict']:.2f}; {r['verdicts']:,} verdicts)"
                                 if mode != "plain" and r["verdicts"] else "")
                        ratio = (f"  {r['gbps'] / row['plain']['gbps']:.2f} of plain"
                                 if mode != "plain" and "plain" in row else "")
                        print(f"rep {rep + 1} {mode:<10} {r['gbps']:6.2f} Gbit/s{ratio}{extra}"
                              f"  (load {load:.2f}, steal {100 * r['steal']:.1f}%)", flush=True)
                    results["reps"].append(row)
            finally:
                server.terminate()
                server.wait(10)
                LINE.teardown()
    except RunCancelled as exc:
        sys.exit(f"forward_bench: {exc}; the line is removed")
    print("\nmedian (min-max) over the repetitions:")
    for mode in modes:
        g = [row[mode]["gbps"] for row in results["reps"]]
        line = f"  {mode:<10} {statistics.median(g):6.2f} Gbit/s ({min(g):.2f}-{max(g):.2f})"
        if mode != "plain":
            if "plain" in modes:
                q = [row[mode]["gbps"] / row["plain"]["gbps"] for row in results["reps"]]
                line += f"  ratio {statistics.median(q):.2f} ({min(q):.2f}-{max(q):.2f})"
            c = [row[mode]["us_per_verdict"] for row in results["reps"] if row[mode]["us_per_verdict"]]
            if c:
                line += f"  {statistics.median(c):.2f} us CPU/verdict ({min(c):.2f}-{max(c):.2f})"
        print(line)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
