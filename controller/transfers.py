"""Transfer measurements for the latency models (hysteresis paper, section 4).

A line of three namespaces, server -> router -> client (prefix ctpm-, removed afterwards). The
router's queue engine delays each direction by RTT/2 and applies the loss point's model to the
data direction only (Bernoulli p, or the CATNIP error model with p' for AF11 packets, which the
SPM marker at the server sets). Many transfers run at once: random loss needs no shared
bottleneck, and the link has no rate limit unless the scenario gives one. Each loss point gets a
fresh engine and a capture at the server; the latency of a transfer is read from that capture
(results/transfer_capture.py) and every transfer is one row of `transfer_trials`.

TCP profiles (docs/models.md):
- linux: this kernel's TCP as deployed (CUBIC, initial window 10, SACK, timestamps, RACK-TLP);
- reno2004: closer to the paper's ns-2 Reno: Reno growing one segment per ACK (catnip_ns2reno,
  bpf/catnip_cc.bpf.c), initial window 1, no SACK, no timestamps,
  no RACK or TLP (tcp_recovery 0, tcp_early_retrans 0), no F-RTO, no D-SACK, and a receiver
  that delays ACKs from the first segment (no quick-ACK mode).
Both: W_max as a clamp on the server's congestion window (bpf/cwnd_clamp.bpf.c says why not the
receiver's window), MSS via `advmss`, minimum RTO
via `rto_min`, no cached metrics between connections, no ECN.
"""

from __future__ import annotations

import json
import math
import random
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from catnip.controller import fidelity as fidelity_mod
from catnip.controller.recover import close_abandoned_runs
from catnip.controller.skeleton import (TeardownStack, kernel_resources, machine_lock, recorded_run,
                                 new_run_id, record_point, signals_cancel)
from catnip.testbed.metadata import git_revision, versions
from catnip.spec.transfer import LossPoint, TransferScenario
from catnip.results import transfer_capture
from catnip.results.store import Store
from catnip.testbed import hostconfig, paths, processes, spm
from catnip.testbed.capabilities import probe
from catnip.testbed.capture import Capture
from catnip.testbed.cwnd_clamp import CwndClamp
from catnip.spec.record import DirectionRecord
from catnip.testbed.engine import RouterEngine
from catnip.testbed.netline import NetLine, NsNode

SERVER_PORT = 5001
LINE = NetLine("ctpm", net=67)  # the project's `ctp` prefix: `catnip clean` knows these namespaces
SERVER_IF, CLIENT_IF, ROUTER_TO_SERVER = f"{LINE.prefix}-s0", f"{LINE.prefix}-c0", f"{LINE.prefix}-r0"
TIMESTAMP_BYTES = 12  # the timestamp option's share of every segment

COMMON_SYSCTLS = {"net.ipv4.tcp_no_metrics_save": 1, "net.ipv4.tcp_ecn": 0}
PROFILE_SYSCTLS = {
    "linux": {"net.ipv4.tcp_congestion_control": "cubic", "net.ipv4.tcp_sack": 1, "net.ipv4.tcp_timestamps": 1},
    "reno2004": {"net.ipv4.tcp_congestion_control": "catnip_ns2reno", "net.ipv4.tcp_sack": 0, "net.ipv4.tcp_timestamps": 0,
                 "net.ipv4.tcp_recovery": 0, "net.ipv4.tcp_early_retrans": 0, "net.ipv4.tcp_frto": 0,
                 "net.ipv4.tcp_dsack": 0},
}
MAX_LATE_FRACTION = 0.001  # as web runs allow by default (run.max_late_fraction)
PROFILE_INITCWND = {"linux": None, "reno2004": 1}
PROFILE_DELAYED_ACKS = {"linux": False, "reno2004": True}  # the receiver leaves quick-ACK mode

Progress = Callable[[str, int, int], None]  # (point label, transfers done, total)


def _timestamps(profile: str) -> bool:
    return bool(PROFILE_SYSCTLS[profile]["net.ipv4.tcp_timestamps"])


def configure_tcp(server: NsNode, client: NsNode, sc: TransferScenario, profile: str) -> None:
    """Sysctls and per-route options of one profile on both hosts."""
    for node in (server, client):
        hostconfig.set_sysctls(node, {**COMMON_SYSCTLS, **PROFILE_SYSCTLS[profile]})
    route = ["ip", "route", "replace", "default", "via", f"10.{LINE.net}.1.1", "dev", SERVER_IF,
             "rto_min", f"{int(round(sc.path.min_rto * 1000))}ms"]
    if PROFILE_INITCWND[profile]:
        route += ["initcwnd", str(PROFILE_INITCWND[profile])]
    hostconfig.run(server, *route)
    # The client advertises the MSS (plus room for timestamps, so data segments carry `mss` bytes).
    advmss = sc.path.mss + (TIMESTAMP_BYTES if _timestamps(profile) else 0)
    hostconfig.run(client, "ip", "route", "replace", "default", "via", f"10.{LINE.net}.2.1", "dev", CLIENT_IF,
                   "advmss", str(advmss))


def _engine(router: NsNode, sc: TransferScenario, loss: LossPoint, workdir: Path, seed: int) -> RouterEngine:
    path = {"router": "r", "hook": "egress", "rate_bps": sc.path.rate, "delay_s": sc.path.rtt / 2, "buffer": None}
    links = [DirectionRecord(name="r>c", where="path (router -> client)", role="path-data", interface=LINE.router_out,
                             policy=loss.policy(), **path),
             DirectionRecord(name="r>s", where="path (router -> server)", role="path-ack", interface=ROUTER_TO_SERVER,
                             policy={"kind": "droptail"}, **path)]
    # Lateness that matters is relative to the round trip: 1% of it (at least 1 ms).
    return RouterEngine(router, links, workdir, seed, late_threshold_s=late_threshold(sc), stats_interval_ms=1000)


def late_threshold(sc: TransferScenario) -> float:
    return max(0.001, sc.path.rtt / 100)


def _stop(proc: subprocess.Popen | None, sig: int = signal.SIGTERM) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _run_client(client: NsNode, plan_file: Path, sc: TransferScenario, profile: str, label: str, total: int,
                progress: Progress, stack: ExitStack) -> list[dict]:
    argv = [paths.python(), "-m", "catnip.workloads.transfers", "client", LINE.sender_ip, str(SERVER_PORT),
            "--plan", str(plan_file), "--concurrency", str(sc.concurrency), "--timeout", str(sc.transfer_timeout)]
    if PROFILE_DELAYED_ACKS[profile]:
        argv.append("--delayed-acks")
    proc = client.popen(argv, cwd=str(paths.REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stack.callback(_stop, proc, signal.SIGKILL)
    errors: list[str] = []

    def follow_stderr() -> None:
        for line in proc.stderr:
            if line.startswith("PROGRESS "):
                done, _ = line.split()[1:3]
                progress(label, int(done), total)
            else:
                errors.append(line.rstrip())
    reader = threading.Thread(target=follow_stderr, daemon=True)
    reader.start()
    results = [json.loads(line) for line in proc.stdout if line.startswith("{")]
    proc.wait()
    reader.join(5)
    if proc.returncode != 0:
        raise RuntimeError(f"transfer client exited {proc.returncode}: {' | '.join(errors[-5:])}")
    return results


def _fidelity(engine: RouterEngine, kernel_rows: list[dict]) -> tuple[dict, bool]:
    """The verdict web runs use (controller/fidelity.py), with the threshold at 1% of the RTT;
    `kernel_rows` the engine's queues as the kernel counted them while it was still bound."""
    final = engine.latest_stats() or {}
    data = final.get("links", {}).get("r>c", {})
    kernel = {r["link"]: r for r in kernel_rows}
    fidelity = {**fidelity_mod.engine_fidelity({engine.router.name: final}, {engine.router.name: kernel}),
                "data_arrived": {k: v[0] for k, v in data.get("arrived", {}).items()},
                "data_dropped": {k: v[0] for k, v in data.get("dropped", {}).items()},
                "final_stats": bool(final.get("final"))}
    return fidelity, fidelity_mod.realtime_ok(fidelity, MAX_LATE_FRACTION)


def _rows(results: list[dict], matched: dict, profile: str, loss: LossPoint, mss: int) -> list[dict]:
    rows = []
    for r in results:
        found = matched.get((r["size"], r["trial"]))
        flow = found if isinstance(found, transfer_capture.Flow) else None
        error = r.get("error") or (found if isinstance(found, str) else None)
        if error is None and (flow is None or flow.latency() is None):
            error = "transfer not found complete in the capture"
        rows.append({"profile": profile, "p": loss.p, "p_high": loss.p_high, "trial": r["trial"], "size": r["size"],
                     "packets": math.ceil(r["size"] / mss), "latency": None if error else flow.latency(),
                     "data_segments": flow.data_segments if flow else None,
                     "retransmissions": flow.retransmissions if flow else None,
                     "high_segments": flow.dscp_high if flow else None, "error": error})
    return rows


def _point(index: int, profile: str, loss: LossPoint, sc: TransferScenario, nodes: dict[str, NsNode],
           workdir: Path, store: Store, run_id: str, progress: Progress, keep_capture: bool) -> None:
    label = f"{profile} {loss.label()}"
    seed = sc.seed * 1000 + index
    configure_tcp(nodes["s"], nodes["c"], sc, profile)
    plan = [{"trial": t, "size": kb * 1024} for kb in sc.sizes_kb for t in range(sc.trials)]
    random.Random(seed).shuffle(plan)  # sizes interleaved: slow phases of the machine hit all sizes alike
    plan_file = workdir / "plan.json"
    plan_file.write_text(json.dumps(plan))
    pcap = workdir / "server.pcap"
    with ExitStack() as stack:
        engine = _engine(nodes["r"], sc, loss, workdir, seed)
        stack.callback(engine.stop)
        engine.start()
        capture = Capture(nodes["s"], SERVER_IF, pcap, bpf_filter=f"tcp port {SERVER_PORT}", buffer_kib=65536).start()
        stack.callback(capture.stop)
        progress(label, 0, len(plan))
        results = _run_client(nodes["c"], plan_file, sc, profile, label, len(plan), progress, stack)
        time.sleep(1.0)  # the last ACKs reach the capture
        capture.stop()
        kernel_rows = engine.kernel_queue_counters()  # a stopped engine's queue is unbound: its row gone
        engine.stop()
        fidelity, ok = _fidelity(engine, kernel_rows)
    matched = transfer_capture.match(transfer_capture.read(pcap, LINE.sender_ip, SERVER_PORT), results)
    rows = _rows(results, matched, profile, loss, sc.path.mss)
    store.add_transfer_trials(run_id, index, rows)
    failed = sum(1 for r in rows if r["error"])
    fidelity["failed_transfers"] = failed
    why = fidelity_mod.bypassed(fidelity, [engine.router.name])  # the transfers went around the lossy link
    store.update_point(run_id, index, fidelity=fidelity, realtime_ok=int(ok and why is None),
                       sysctls=hostconfig.read_sysctls(nodes["s"]), capture=str(pcap) if keep_capture else None)
    if not keep_capture:
        pcap.unlink(missing_ok=True)
    if why:
        raise RuntimeError(why)


def measure(sc: TransferScenario, store: Store, source: str = "", progress: Progress = lambda *_: None,
            run_id: str | None = None, keep_captures: bool = False, log=print) -> str:
    """Run every (profile, loss) point of a transfer scenario; returns the run id."""
    caps = probe()
    problems = [] if caps.root else ["not root: namespaces and iptables need root"]
    if "engine" not in caps.link_backends:
        problems.append("the queue engine is not usable (NFQUEUE and the built engine; run `make setup`)")
    problems += [f"missing tool: {t}" for t in ("ip", "iptables", "tcpdump") if not caps.tools.get(t)]
    if problems:
        raise RuntimeError("this machine cannot run the measurement: " + "; ".join(problems))
    run_id = run_id or new_run_id(sc.name)
    with machine_lock(), signals_cancel():
        close_abandoned_runs(store)
        store.create_run(run_id, sc.name, source, sc.model_dump(), {}, sc.seed, git_revision(), versions(),
                         caps.to_dict(), runner=processes.identity())
        artifacts = paths.runs_dir(store.path) / run_id
        with recorded_run(store, run_id) as end, TeardownStack() as stack:
            # The same kernel-global set-up as runs: the allowed list is saved for `catnip clean`.
            stack.enter_context(kernel_resources(PROFILE_SYSCTLS[p]["net.ipv4.tcp_congestion_control"]
                                                 for p in sc.profiles))
            log("building the path (server -> router -> client)")
            stack.callback(LINE.teardown)
            LINE.build()
            nodes = {w: LINE.node(w) for w in "src"}
            hostconfig.set_sysctls(nodes["c"], {"net.ipv4.ip_local_port_range": "10000 65000"})
            # The server's cgroup carries the document-size program (and the marker when a
            # loss point uses the CATNIP error model) and the W_max clamp.
            marking = any(loss.p_high is not None for loss in sc.loss)
            rules = spm.SpmRules(small_cwnd=sc.marking == "full") if marking else spm.SpmRules(enabled=False)
            marker = spm.SpmMarker(rules, name=f"mv-{run_id[-4:]}")
            stack.callback(marker.unload)
            marker.load()
            cgroup = marker.make_cgroup()
            if marking:
                hostconfig.one_packet_per_skb(nodes["s"], SERVER_IF)
                marker.attach_tc(SERVER_IF, nodes["s"].prefix)
            clamp = CwndClamp(sc.path.wmax, name=f"mv-{run_id[-4:]}")
            stack.callback(clamp.unload)
            clamp.load()
            clamp.attach(cgroup)
            server = nodes["s"].popen([paths.python(), "-m", "catnip.workloads.transfers", "server", LINE.sender_ip,
                                       str(SERVER_PORT)], cwd=str(paths.REPO), stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True,
                                      preexec_fn=spm.joiner(cgroup))
            stack.callback(_stop, server, signal.SIGKILL)
            if server.stdout.readline().strip() != "READY":
                raise RuntimeError("the transfer server did not start")
            for index, (profile, loss) in enumerate(sc.points()):
                workdir = artifacts / f"point{index}"
                workdir.mkdir(parents=True, exist_ok=True)
                store.create_point(run_id, index, 0, {"profile": profile, **loss.model_dump()}, sc.model_dump(),
                                   sc.seed * 1000 + index)
                failure = record_point(store, run_id, index, lambda: _point(
                    index, profile, loss, sc, nodes, workdir, store, run_id, progress, keep_captures))
                if failure:
                    end.fail(failure)
    return run_id


if __name__ == "__main__":  # pragma: no cover - use `catnip model measure`
    sys.exit("use: catnip model measure SCENARIO")
