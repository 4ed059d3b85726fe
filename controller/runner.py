"""Runs a loaded scenario: one emulated network per sweep point, records into the store.

Per point: build the dumbbell -> start the routers' engines (then their NFQUEUE rules) -> start
Apache on the servers -> optional capture -> start one workload client per client host ->
watch progress and the engines until the clients finish or the time limit -> collect counters
-> tear down. Teardown runs on every exit path (failure, Ctrl-C, SIGTERM); a failed point is
recorded as failed and the next point still runs. Only one run uses the machine at a time; its
points run one after another, or side by side in namespaces of their own (controller/parallel.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from spec.scenario import Scenario, Sweep, point_label
from results.store import Store
from testbed import apache, hostconfig, paths, processes, sender, spm
from testbed.capabilities import Capabilities
from testbed.engine import RouterEngine
from topologies import dumbbell
from workloads import docroot as docroot_mod
from workloads.pages import catnip_pages


class RunCancelled(Exception):
    """Ctrl-C, SIGTERM or a cancel request: the point is torn down and recorded as cancelled."""


class RunBusy(RuntimeError):
    pass


@dataclass
class Progress:
    """What a progress display needs; the CLI draws it, the dashboard will stream it."""

    run_id: str
    point: int
    points: int
    label: str
    pages_done: int = 0
    pages_total: int = 0
    elapsed: float = 0.0
    phase: str = "starting"
    bottleneck: dict = field(default_factory=dict)


ProgressSink = Callable[[Progress], None]


def _cmd_output(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def git_revision() -> str:
    rev = _cmd_output(["git", "-C", str(paths.REPO), "rev-parse", "HEAD"])
    if rev and _cmd_output(["git", "-C", str(paths.REPO), "status", "--porcelain", "--untracked-files=no"]):
        rev += "-dirty"
    return rev or "unknown"


def _first_line(args: list[str]) -> str:
    out = _cmd_output(args)
    return out.splitlines()[0] if out else "unknown"


def versions() -> dict[str, str]:
    import mininet.net
    return {
        "kernel": os.uname().release,
        "mininet": mininet.net.VERSION,
        "ovs": _first_line(["ovs-vsctl", "--version"]),
        "apache": _first_line(["/usr/sbin/apache2", "-v"]),
        "engine": _first_line([str(paths.engine_binary()), "--version"]),
        "python": _first_line([paths.python(), "--version"]),
    }


def close_abandoned_runs(store: Store) -> list[str]:
    """Runs recorded as running whose runner has gone (SIGKILL, a crash, a reboot) are marked
    interrupted, with their running points, so lists and the dashboard stop waiting for them;
    returns their ids. Runs recorded before runners were named cannot be told and stay as they are."""
    closed = []
    for run in store.running_runs():
        if run["runner"] and not processes.alive(run["runner"]):
            pid = run["runner"].split("/")[1]
            store.interrupt_run(run["id"], f"its runner (pid {pid}) ended without finishing it (killed, or the"
                                           " machine restarted); `catnip clean` removes what it left")
            closed.append(run["id"])
    return closed


@contextmanager
def machine_lock() -> Iterator[None]:
    """Two runs must never fight over the machine unnoticed."""
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    fh = open(paths.state_dir() / "lock", "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise RunBusy("another catnip run is using this machine (lock held on "
                      f"{paths.state_dir() / 'lock'}); wait for it or stop it") from None
    try:
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def machine_busy() -> bool:
    """Whether a run holds the machine lock now (the dashboard waits instead of failing)."""
    path = paths.state_dir() / "lock"
    if not path.exists():
        return False
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


@contextmanager
def signals_cancel() -> Iterator[None]:
    """SIGINT (Ctrl-C) and SIGTERM cancel the run cleanly, even where the shell that started us
    ignored SIGINT (background jobs of a non-interactive shell inherit SIG_IGN)."""
    def handler(signum, frame):
        # Only the first signal cancels; later ones must not break the teardown it starts.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: print("catnip: tearing down, please wait", file=sys.stderr))
        raise RunCancelled(f"stopped by {signal.Signals(signum).name}")
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextmanager
def cancel_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while tearing down (a cancel cutting teardown short would leave
    detached processes behind); one that came meanwhile is delivered afterwards."""
    got: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: got.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if got:
            signal.raise_signal(got[0])


class TeardownStack(ExitStack):
    """An ExitStack whose unwinding a cancel signal cannot interrupt (cancel_deferred)."""

    def __exit__(self, *exc):
        with cancel_deferred():
            return super().__exit__(*exc)


@contextmanager
def run_resources(scenarios: list[Scenario]) -> Iterator[None]:
    """What the kernel holds globally and every point of a run shares, set up once per run (so
    points can run side by side) and undone on every exit path: the CATNIP congestion controls
    (kernel-global names), the global list of allowed congestion controls, the served documents."""
    from mininet.net import Mininet
    # Mininet raises the socket buffer and neighbour-table limits in the namespace it starts in;
    # hosts copy them from the initial namespace, so that must happen here, not in a worker's.
    Mininet.init()
    ccs: set[str] = set().union(*(s.tcp.all_cc() for s in scenarios))
    with TeardownStack() as stack:
        if ccs & set(sender.NAMES):
            stack.callback(_unregister_senders)
            sender.register()
        for cc in sorted(ccs):
            previous_cc = hostconfig.allow_congestion_control(cc)
            if previous_cc is not None:
                orig = paths.state_dir() / "allowed_cc.orig"
                if not orig.exists():  # the list before the first change: what `catnip clean` restores
                    orig.write_text(previous_cc)
                stack.callback(_restore_cc, previous_cc)
        paths.state_dir().chmod(0o755)
        docroot_mod.write_docroot(catnip_pages(), paths.docroot())
        yield


def _unregister_senders() -> None:
    sender.unregister()
    if not spm.PIN_ROOT.exists():  # no marker left that shares the document map
        sender.release_shared_map()


def _restore_cc(previous: str) -> None:
    hostconfig.restore_allowed_congestion_control(previous)
    (paths.state_dir() / "allowed_cc.orig").unlink(missing_ok=True)


def cpu_times() -> list[int]:
    """The machine's CPU jiffies: user nice system idle iowait irq softirq steal (/proc/stat)."""
    with open("/proc/stat") as fh:
        return [int(x) for x in fh.readline().split()[1:9]]


def new_run_id(name: str) -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{name[:24]}-{uuid.uuid4().hex[:4]}"


def link_roles(d: dumbbell.Dumbbell) -> dict[str, str]:
    rc, rs = d.router_c.name, d.router_s.name
    roles = {}
    for router, links in d.engine_links.items():
        for link in links:
            if link.hook == "ingress":
                roles[link.name] = "ingress-delay"
            elif link.name == f"{rs}>{rc}":
                roles[link.name] = "bottleneck-data"
            elif link.name == f"{rc}>{rs}":
                roles[link.name] = "bottleneck-ack"
            else:
                roles[link.name] = "access-client" if router == rc else "access-server"
    return roles


class PointRun:
    """One sweep point on one freshly built network."""

    def __init__(self, run_id: str, plan: "PointPlan", caps: Capabilities, store: Store, artifacts: Path,
                 progress: ProgressSink, cancelled: Callable[[], bool], concurrency: dict | None = None):
        self.run_id, self.index, self.sc, self.seed = run_id, plan.index, plan.scenario, plan.seed
        self.concurrency = concurrency  # how crowded the machine was when the point started (parallel.py)
        self.caps, self.store, self.workdir, self.artifacts = caps, store, plan.workdir, artifacts
        self.progress, self.cancelled = progress, cancelled
        self.engines: list[RouterEngine] = []
        self.servers: list[apache.ApacheServer] = []
        self.clients: list[tuple[dumbbell.Endpoint, subprocess.Popen, Path]] = []
        self.capture: subprocess.Popen | None = None
        self.marker: spm.SpmMarker | None = None

    def execute(self, prog: Progress) -> None:
        sc = self.sc
        switch = self.caps.choose_switch(sc.topology.access_switch, sc.topology.ovs_datapath)
        self.store.update_point(self.run_id, self.index, switch_kind=switch, link_backend="engine")
        with TeardownStack() as stack:
            prog.phase = "building network"
            self.progress(prog)
            d = dumbbell.build(sc, switch)
            stack.callback(dumbbell.stop, d)
            stack.callback(self._stop_processes)
            for router in d.routers:
                engine = RouterEngine(router, d.engine_links[router.name], self.workdir, self.seed,
                                      late_threshold_s=sc.run.late_threshold, spin_s=sc.run.engine_spin)
                self.engines.append(engine)
                engine.start()
            for i, server in enumerate(d.servers):
                hostconfig.set_sysctls(server.node, {"net.ipv4.tcp_congestion_control": sc.tcp.server_cc(i)})
            if sc.marking.spm or sc.tcp.all_cc() & set(sender.NEED_DOCUMENTS):
                prog.phase = "loading the SPM marker" if sc.marking.spm else "loading the document-size program"
                self.progress(prog)
                self._load_marker(d, stack)
            prog.phase = "starting servers"
            self.progress(prog)
            root = paths.docroot()  # written once per run (run_resources)
            for server in d.servers:
                srv = apache.ApacheServer(workdir=self.workdir / server.name, docroot=root, listen_ip=server.ip,
                                          port=80, http_version=sc.workload.http_version,
                                          catnip_module=spm.MOD_CATNIP if self.marker else None)
                srv.prepare()
                console = open(srv.console_log, "w")
                # With SPM the server runs in the marker's cgroup, where its setsockopt reaches BPF.
                join = spm.joiner(self.marker.cgroup) if self.marker else None
                srv.proc = server.node.popen(srv.argv(), stdout=console, stderr=subprocess.STDOUT, preexec_fn=join)
                self.servers.append(srv)
            for srv, server in zip(self.servers, d.servers):
                srv.wait_ready(server.node, timeout=10)
            if sc.run.capture:
                self._start_capture(d)
            self.store.update_point(self.run_id, self.index, sysctls={
                "client": hostconfig.read_sysctls(d.clients[0].node),
                "server": hostconfig.read_sysctls(d.servers[0].node),
                "router": hostconfig.read_sysctls(d.router_s)},
                offloads={"client": hostconfig.offloads(d.clients[0].node, d.clients[0].intf),
                          "server": hostconfig.offloads(d.servers[0].node, d.servers[0].intf),
                          "router": hostconfig.offloads(d.router_s, d.bottleneck_intf[d.router_s.name])})
            prog.phase = "running workload"
            self.cpu_start = cpu_times()
            self._start_clients(d)
            self._watch(d, prog)
            self.cpu_end = cpu_times()
            prog.phase = "collecting"
            self.progress(prog)
            self._collect(d)

    def _load_marker(self, d: dumbbell.Dumbbell, stack: ExitStack) -> None:
        m = self.sc.marking
        self.marker = spm.SpmMarker(spm.SpmRules(enabled=m.spm, first=m.first, last=m.last, small_cwnd=m.small_cwnd, scope=m.scope,
                                                 control=m.control, retransmissions=m.retransmissions),
                                    name=f"{self.run_id[-4:]}-p{self.index}")
        stack.callback(self._unload_marker)
        self.marker.load()
        self.marker.make_cgroup()
        for i, server in enumerate(d.servers):
            hostconfig.one_packet_per_skb(server.node, server.intf)
            self.marker.attach_tc(server.intf, ["nsenter", "-t", str(server.node.pid), "-n"])
            if self.sc.tcp.server_cc(i) in sender.PACING:
                # TCP paces at cwnd x MSS / RTT x ratio: 100% spreads the last window over one RTT.
                hostconfig.set_sysctls(server.node, {"net.ipv4.tcp_pacing_ss_ratio": 100,
                                                     "net.ipv4.tcp_pacing_ca_ratio": 100})

    def _unload_marker(self) -> None:
        problems = self.marker.unload() if self.marker else []
        if problems:
            print("catnip: SPM teardown: " + "; ".join(problems), file=sys.stderr)

    def _start_capture(self, d: dumbbell.Dumbbell) -> None:
        path = self.artifacts / f"point{self.index}-bottleneck.pcap"
        path.parent.mkdir(parents=True, exist_ok=True)
        intf = d.bottleneck_intf[d.router_s.name]
        self.capture = d.router_s.popen(["tcpdump", "-i", intf, "-s", "128", "-U", "-w", str(path)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.store.update_point(self.run_id, self.index, capture=str(path))

    def _start_clients(self, d: dumbbell.Dumbbell) -> None:
        wl = self.sc.workload
        rng = random.Random(self.seed)
        for i, client in enumerate(d.clients):
            server = d.server_for(i)
            order_seed = rng.randrange(2**31)
            cfg = {
                "client": client.name, "server": server.ip, "port": 80, "server_name": server.name,
                "pages": wl.pages, "rounds": wl.rounds, "seed": order_seed,
                "think_time": wl.think_time.model_dump(), "parallel": wl.parallel,
                "http_version": wl.http_version, "persistent": wl.persistent, "object_timeout": wl.object_timeout,
                "session_timeout": self.sc.run.time_limit,
                # Launching 100 Python clients takes a moment: start them all on a common clock.
                "start_delay": 2.0 + rng.uniform(0, wl.start_stagger),
            }
            cfg_path = self.workdir / f"client-{client.name}.json"
            out_path = self.workdir / f"client-{client.name}.jsonl"
            cfg_path.write_text(json.dumps(cfg))
            log = open(self.workdir / f"client-{client.name}.log", "w")
            proc = client.node.popen([paths.python(), "-m", "workloads.client", str(cfg_path), str(out_path)],
                                     stdout=log, stderr=subprocess.STDOUT, cwd=str(paths.REPO))
            self.clients.append((client, proc, out_path))

    def _pages_done(self) -> int:
        done = 0
        for _, _, out in self.clients:
            try:
                with open(out, "rb") as fh:
                    done += fh.read().count(b'"kind": "page"')
            except FileNotFoundError:
                pass
        return done

    def _watch(self, d: dumbbell.Dumbbell, prog: Progress) -> None:
        start = time.monotonic()
        limit = self.sc.run.time_limit
        bottleneck = next(e for e in self.engines if e.router is d.router_s)
        data_link = f"{d.router_s.name}>{d.router_c.name}"
        last_t = None
        while True:
            time.sleep(0.5)
            if self.cancelled():
                raise RunCancelled("cancelled")
            for e in self.engines:
                if not e.alive():
                    raise RuntimeError(f"queue engine on {e.router.name} died (exit {e.proc.returncode}); "
                                       f"log: {e.log_path}")
            stats = bottleneck.latest_stats()
            if stats and stats.get("t") != last_t:
                last_t = stats["t"]
                s = stats["links"].get(data_link, {})
                sent = sum(v[1] for v in s.get("sent", {}).values())
                drops = {cls: v[0] for cls, v in s.get("dropped", {}).items()}
                dropped = sum(drops.values())
                # Written as it comes, so the dashboard can draw the run live.
                self.store.add_queue_samples(self.run_id, self.index, [(
                    d.router_s.name, data_link, stats["t"], s.get("queue_pkts"), s.get("queue_bytes"), sent, dropped,
                    drops.get("high", 0), dropped - drops.get("high", 0))])
                prog.bottleneck = {"queue_pkts": s.get("queue_pkts"), "sent_bytes": sent, "dropped": dropped}
            prog.pages_done = self._pages_done()
            prog.elapsed = time.monotonic() - start
            self.progress(prog)
            if all(proc.poll() is not None for _, proc, _ in self.clients):
                break
            if prog.elapsed > limit:
                raise RuntimeError(f"time limit {limit:.0f} s reached with {prog.pages_done} of "
                                   f"{prog.pages_total} pages done (run.time_limit)")

    def _collect(self, d: dumbbell.Dumbbell) -> None:
        objects, pages = [], []
        for client, proc, out in self.clients:
            server = d.server_for(d.clients.index(client)).name
            try:
                lines = out.read_text().splitlines()
            except FileNotFoundError:
                lines = []
            for line in lines:
                rec = json.loads(line)
                rec.setdefault("client", client.name)
                rec.setdefault("server", server)
                if rec.get("kind") == "object":
                    objects.append(rec)
                elif rec.get("kind") == "page":
                    pages.append(rec)
        self.store.add_transfers(self.run_id, self.index, objects, pages)
        if self.marker and self.sc.marking.spm:
            try:
                marking = self.marker.counters()
            except spm.SpmError as exc:  # the run's other records are worth keeping
                marking = {"error": str(exc)}
            self.store.update_point(self.run_id, self.index, marking=marking)
        for e in d.hosts:
            self.store.add_tcp_counters(self.run_id, self.index, e.name, hostconfig.nstat(e.node))
        kernel = {}
        for engine in self.engines:
            kernel[engine.router.name] = {r["link"]: r for r in engine.kernel_queue_counters()}
            engine.stop()
        roles = link_roles(d)
        late = events = kdrops = 0
        max_late = 0.0
        quantiles: dict[str, int] = {}
        causes: dict[str, float] = {}  # what made verdicts late (engine/src/stats.rs, LatenessCauses)
        no_final: list[str] = []  # engines that did not write their closing counters
        for engine in self.engines:
            final = engine.latest_stats() or {}
            configs = {l["name"]: l for l in engine.config()["links"]}
            self.store.add_link_stats(self.run_id, self.index, engine.router.name, final, roles, configs,
                                      kernel[engine.router.name])
            eng = final.get("engine", {})
            late += eng.get("late_events", 0)
            events += eng.get("events", 0)
            max_late = max(max_late, eng.get("max_late_us", 0) or 0)
            for q in ("late_p50_us", "late_p99_us", "late_p999_us"):  # the worse router's
                if eng.get(q) is not None:
                    quantiles[q] = max(quantiles.get(q, 0), eng[q])
            for k in ("late_at_issue_events", "verdict_calls", "slow_verdict_calls"):
                if eng.get(k) is not None:
                    causes[k] = causes.get(k, 0) + eng[k]
            for k in ("verdict_call_p99_us", "late_at_issue_p99_us", "max_verdict_call_us", "max_late_at_issue_us"):
                if eng.get(k) is not None:
                    causes[k] = max(causes.get(k, 0), eng[k])
            kdrops += sum((r["queue_dropped"] + r["user_dropped"]) for r in kernel[engine.router.name].values())
            if not final.get("final"):
                no_final.append(engine.router.name)
        failed_clients = [c.name for c, proc, _ in self.clients if proc.returncode not in (0, None)]
        late_fraction = late / events if events else 0.0
        # user nice system idle iowait irq softirq steal: how busy the machine was, and how much
        # of its CPU the hypervisor took away (steal) while the workload ran.
        delta = [b - a for a, b in zip(self.cpu_start, self.cpu_end)]
        total = sum(delta) or 1
        fidelity_cpu = {"cpu_busy_fraction": round(1 - (delta[3] + delta[4]) / total, 4),
                        "cpu_steal_fraction": round(delta[7] / total, 4)}
        fidelity = {**fidelity_cpu, "engine_events": events, "late_events": late, "late_fraction": late_fraction,
                    "max_late_us": max_late, **quantiles, **causes, "kernel_queue_drops": kdrops, "failed_clients": failed_clients,
                    "engines_without_final_stats": no_final,
                    "late_threshold_us": int(self.sc.run.late_threshold * 1e6)}
        if self.concurrency is not None:
            fidelity["concurrency"] = self.concurrency
        ok = late_fraction <= self.sc.run.max_late_fraction and kdrops == 0 and not no_final
        self.store.update_point(self.run_id, self.index, fidelity=fidelity, realtime_ok=int(ok))

    def _stop_processes(self) -> None:
        for _, proc, _ in self.clients:
            if proc.poll() is None:
                proc.terminate()
        for _, proc, _ in self.clients:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self.capture and self.capture.poll() is None:
            self.capture.send_signal(signal.SIGINT)
            try:
                self.capture.wait(5)
            except subprocess.TimeoutExpired:
                self.capture.kill()
        for srv in self.servers:
            srv.stop()
        for engine in self.engines:
            engine.stop()


def recording_progress(sink: ProgressSink, store: Store, every: float = 1.0) -> ProgressSink:
    """Also write progress to the store (at most once a second, and at each change of phase)."""
    last: dict[int, tuple[float, str]] = {}

    def record(p: Progress) -> None:
        sink(p)
        t, phase = last.get(p.point, (0.0, ""))
        if p.phase != phase or time.monotonic() - t >= every:
            last[p.point] = (time.monotonic(), p.phase)
            store.add_progress(p.run_id, p.point, p.elapsed, p.phase, p.pages_done, p.pages_total)
    return record


def record_point(store: Store, run_id: str, index: int, execute: Callable[[], None]) -> str | None:
    """Run one point and record how it ended: done; cancelled (raised again as RunCancelled); or
    failed, returned as the run's error while the next point still runs."""
    try:
        execute()
        store.update_point(run_id, index, status="done", finished=time.time())
        return None
    except (RunCancelled, KeyboardInterrupt) as exc:
        store.update_point(run_id, index, status="cancelled", error=str(exc) or "interrupted", finished=time.time())
        raise RunCancelled(str(exc) or "interrupted") from None
    except Exception as exc:  # noqa: BLE001 - recorded; the next point still runs
        store.update_point(run_id, index, status="failed", error=f"{type(exc).__name__}: {exc}", finished=time.time())
        return f"point {index}: {exc}"


def run(sweep: Sweep, caps: Capabilities, store: Store, progress: ProgressSink = lambda p: None,
        cancelled: Callable[[], bool] = lambda: False, run_id: str | None = None, jobs: int = 1,
        room: float = 0.5, settle: float = 30.0) -> str:
    """Run every point of a sweep; returns the run id. Records survive failures of single points.

    jobs > 1 runs up to that many points side by side, each in a network namespace of its own,
    starting another only while the machine has room: every running point `settle` seconds into
    its workload and the CPU busy below `room` (controller/parallel.py)."""
    problems = caps.blocking_problems()
    if problems:
        raise RuntimeError("this machine cannot run scenarios: " + "; ".join(problems))
    if jobs > 1:
        from controller import parallel
        parallel.check_isolatable(sweep, caps)
    run_id = run_id or new_run_id(sweep.name)
    first = sweep.points[0][1]
    reps = first.run.repetitions
    with machine_lock(), signals_cancel():
        close_abandoned_runs(store)
        store.create_run(run_id, sweep.name, sweep.source, sweep.raw, sweep.sweep, first.seed, git_revision(),
                         versions(), caps.to_dict(), runner=processes.identity())
        artifacts = paths.data_dir() / "runs" / run_id
        status, error = "done", None
        total = len(sweep.points) * reps
        plans = []
        for assignment, scenario in sweep.points:
            for rep in range(reps):
                index = len(plans)
                plans.append(PointPlan(index, rep, assignment, scenario, point_label(assignment, sweep.name),
                                       total, artifacts / f"point{index}"))
        try:
            with run_resources([s for _, s in sweep.points]):
                if jobs > 1:
                    failures = parallel.run_points(plans, run_id, caps, store, artifacts, progress, cancelled,
                                                   jobs, room, settle)
                else:
                    failures = [f for plan in plans
                                if (f := _run_in_process(plan, run_id, caps, store, artifacts,
                                                         recording_progress(progress, store), cancelled))]
            if failures:
                status, error = "failed", failures[-1]
        except RunCancelled as exc:
            status, error = "cancelled", str(exc)
            raise
        except Exception as exc:  # set-up shared by the points failed (e.g. registering the senders)
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            store.finish_run(run_id, status, error)
    return run_id


@dataclass
class PointPlan:
    """One point of a run, before it runs: what it is, where its files go."""

    index: int
    rep: int
    assignment: dict
    scenario: Scenario
    label: str
    points: int
    workdir: Path

    @property
    def seed(self) -> int:
        return self.scenario.seed + 1000 * self.rep

    def progress(self, run_id: str) -> Progress:
        sc = self.scenario
        return Progress(run_id, self.index, self.points, self.label,
                        pages_total=sc.topology.clients * len(sc.workload.pages) * sc.workload.rounds)

    def create(self, store: Store, run_id: str) -> None:
        # Configs, logs and client records stay with the run (enough to explain it).
        self.workdir.mkdir(parents=True, exist_ok=True)
        store.create_point(run_id, self.index, self.rep, self.assignment, self.scenario.model_dump(), self.seed)


def _run_in_process(plan: PointPlan, run_id: str, caps: Capabilities, store: Store, artifacts: Path,
                    progress: ProgressSink, cancelled: Callable[[], bool]) -> str | None:
    plan.create(store, run_id)
    point = PointRun(run_id, plan, caps, store, artifacts, progress, cancelled)
    prog = plan.progress(run_id)
    return record_point(store, run_id, plan.index, lambda: point.execute(prog))
