"""One sweep point on one freshly built network, for any topology and any applications, in phases:

    plan    what the point runs: its resolved record (controller/point_plan.py, spec/record.py)
    build   the network from the record (testbed/network.py), its link backend (testbed/links.py),
            the CPUs (testbed/placement.py); other machines (controller/point_machines.py)
    start   the senders' kernel side (controller/point_senders.py), every application's servers,
            the bottleneck capture (testbed/capture.py), the clients on one common start
    watch   progress, processes and engines until the applications finish or the time limit
    collect samples and records, the engines' and hosts' counters, the fidelity record and the
            real-time verdict (controller/point_collect.py, controller/fidelity.py)

Each part owns its state and its teardown, which runs on every exit path (failure, Ctrl-C,
SIGTERM) and a cancel cannot cut short. What the applications measured before a failure or a
cancel is recorded all the same; a point whose applications lost data (a client died, pages
missing) fails with what was missing.

Per-host TCP (`tcp` and `tcp.groups`, resolved by spec.scenario.Scenario.host_tcp, in the record)
is set as the network is built. The point's environment records every host's settings
(`tcp_hosts`: which host had which sender, read back from the namespaces of `tcp.groups` hosts).
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from catnip.controller import fidelity as fidelity_mod
from catnip.controller.point_collect import Collector
from catnip.controller.point_machines import OtherMachines
from catnip.controller.point_senders import SenderSide
from catnip.controller.skeleton import RunCancelled, TeardownStack
from catnip.results.store import Store
from catnip.testbed import hostconfig, keep_awake, metadata, network, paths, placement, spm
from catnip.testbed.capabilities import Capabilities
from catnip.testbed.capture import Capture
from catnip.testbed.links import EngineBackend, KernelBackend
from catnip.workloads.apps.base import AppContext, Application, lookup

if TYPE_CHECKING:
    from catnip.controller.point_plan import PointPlan
    from catnip.controller.skeleton import Progress

# The clients start on a common clock. The web, Telnet, FTP and burst clients are launched first
# and say READY once loaded (workloads/gate.py): the first about 1 s after its launch, the rest at
# up to 0.09 s each (100 web clients beside another point's workload, measured 2026-11-27,
# docs/fidelity.md). Once all have, the common start is set START_DELAY_S ahead, for writing their
# configs and releasing them, and for launching the clients of applications without the gate (bulk
# flows' launchers; a plug-in's), allowed LAUNCH_S_PER_CLIENT each. A client ready after its
# instant fails the point's real time (controller/fidelity.client_start). The launch timeout is
# only the bound past which a client that never says READY fails the point.
START_DELAY_S = 2.0
LAUNCH_S_PER_CLIENT = 0.1
LAUNCH_TIMEOUT_S = 60.0
LAUNCH_TIMEOUT_S_PER_CLIENT = 1.0


def cpu_times() -> list[int]:
    """The machine's CPU jiffies: user nice system idle iowait irq softirq steal (/proc/stat)."""
    with open("/proc/stat") as fh:
        return [int(x) for x in fh.readline().split()[1:9]]


class PointRun:
    """One sweep point on one freshly built network."""

    def __init__(self, run_id: str, plan: "PointPlan", caps: Capabilities, store: Store, artifacts: Path,
                 progress: Callable, cancelled: Callable[[], bool], concurrency: dict | None = None):
        self.run_id, self.index, self.sc, self.seed = run_id, plan.index, plan.scenario, plan.seed
        self.record = plan.record  # what this point runs: its network is built from it (spec/record.py)
        self.concurrency = concurrency  # how crowded the machine was when the point started (parallel.py)
        self.caps, self.store, self.workdir, self.artifacts = caps, store, plan.workdir, artifacts
        self.progress, self.cancelled = progress, cancelled
        self.net: network.Network | None = None
        self.placement = placement.Placement("shared")  # run.placement, planned when the point starts
        self.placement_applied: dict = {}  # what the kernel holds after placing (_place)
        self.backend: EngineBackend | KernelBackend | None = None
        self.apps: list[Application] = []
        self.capture: Capture | None = None
        self.machines = OtherMachines(run_id, self.index, self.sc)
        self.senders = SenderSide(f"{run_id[-4:]}-p{self.index}", self.sc, self.machines)
        self.collector = Collector(store, run_id, self.index)
        self.machine_start: dict = {}
        self.machine_end: dict = {}

    # --- the point -----------------------------------------------------------------------
    def execute(self, prog: "Progress") -> None:
        with TeardownStack() as stack:
            self._build(prog, stack)
            self._start(prog, stack)
            self._workload(prog)

    def _build(self, prog: "Progress", stack: TeardownStack) -> None:
        """The network from the record, its link backend, the CPUs: everything torn down by `stack`."""
        sc = self.sc
        # Another machine's access switches are Linux bridges (spec: run.machines refuses OVS).
        switch = ("linuxbridge" if sc.run.machines
                  else self.caps.choose_switch(sc.topology.access_switch, sc.topology.ovs_datapath))
        if sc.run.link_backend == "kernel":
            # Checked before anything is built (what the kernel can carry was checked when the scenario loaded).
            missing = sorted(q for q in sc.kernel_qdiscs() | {"netem"} if not self.caps.qdiscs.get(q))
            if missing:
                raise RuntimeError(f"run.link_backend 'kernel' is not available on this machine: it lacks the qdiscs"
                                   f" {', '.join(missing)} (`catnip check`); use run.link_backend: engine")
        self.store.update_point(self.run_id, self.index, switch_kind=switch, link_backend=sc.run.link_backend)
        self.placement = placement.plan(sc.run.placement)
        every_cpu = sorted(os.sched_getaffinity(0))  # before the placement narrows this process's
        # Entered first, so the shells (and Apache, the clients) are born off the engines' CPUs.
        stack.enter_context(self.placement.for_this_process())
        self._phase(prog, "building network")
        split = self.machines.enter(stack)  # entered first: the network goes down before its machines
        record = self.record
        self.net = net = network.build(sc, switch, split, record=record)
        # What was built with what: the record as stored, with the switch the machine gave it.
        self.store.update_point(self.run_id, self.index, record=record.model_copy(update={
            "placement": record.placement.model_copy(update={"switch_kind": switch})}).model_dump(mode="json"))
        stack.callback(network.stop, net)
        if net.tunnels:
            self._phase(prog, "measuring the tunnels between machines")
            self.machines.measure_tunnels(net)
        stack.callback(self._stop_processes)
        logs = str(self.artifacts / f"point{self.index}-{{router}}-arrivals.csv") if sc.run.arrival_log else None
        engines = EngineBackend(self.workdir, self.seed, sc.run.late_threshold, sc.run.engine_spin, logs)
        self.backend = (KernelBackend(self.caps.qdiscs, engines) if sc.run.link_backend == "kernel" else engines)
        routers = list(net.routers.values())
        if isinstance(self.backend, KernelBackend):
            self.backend.start(routers, net.directions, net.mtu)
        else:
            self.backend.start(routers, net.directions)
        self.placement_applied = place(self.placement, net, self._engines())
        if sc.run.keep_awake:
            awake = keep_awake.KeepAwake()
            stack.callback(awake.stop)
            self.placement_applied["keep_awake_cpus"] = awake.start(every_cpu)
            if self.machines.helpers:  # each other machine's CPUs too, until its helper ends
                self.placement_applied["keep_awake_cpus_by_machine"] = self.machines.keep_awake()

    def _start(self, prog: "Progress", stack: TeardownStack) -> None:
        """The senders' kernel side, the servers, the capture and the clients on their common start."""
        # Each host's congestion control, sysctls, initcwnd and fq are set as the network is built.
        self.senders.load(self.net, stack, lambda phase: self._phase(prog, phase))
        self._phase(prog, "starting servers")
        self.apps = make_apps(self.sc, self.seed, self.workdir, self.net, self.senders.marker,
                              self.machines.clock_offsets())
        for app in self.apps:
            app.start_servers()
        for app in self.apps:
            app.wait_ready(timeout=10)
        if self.sc.run.capture:
            self._start_capture()
        self.collector.environment(self.net, self._engines(), tcp_hosts(self.sc, self.net))
        self.machine_start = fidelity_mod.machine_snapshot()
        self.machines.snapshot_start(self.net)
        start_at = self._launch_clients(prog)
        prog.phase = "running workload"
        for app in self.apps:
            app.ctx.start_at = start_at
            app.start_clients()

    def _workload(self, prog: "Progress") -> None:
        """Watch it, then collect; on a failure, a time limit or a cancel, what was measured is kept,
        with the engines' counters, the senders' trace and the real-time verdict of the part that ran."""
        try:
            self._watch(prog)
        except BaseException:
            self._snapshot_end()
            self.collector.apps(self.apps, partial=True)
            for step, what in ((self._record_trace, "trace"), (self._collect, "counters")):
                try:
                    step()
                except Exception as exc:  # noqa: BLE001 - the original error is the one to report
                    print(f"catnip: {what} of the failed point not recorded: {exc}", file=sys.stderr)
            raise
        self._snapshot_end()
        self._phase(prog, "collecting")
        try:
            self.collector.apps(self.apps, partial=False)
            self._record_trace()
        finally:  # the trace, counters and the verdict also when data went missing
            try:
                self._record_trace()  # done already unless the applications' records failed
            finally:
                self._collect()

    def _launch_clients(self, prog: "Progress") -> float:
        """Launch the clients that load before the start is known (workloads/gate.py), wait until
        each says READY, and return the common start: a margin for releasing them and for starting
        the clients of applications without the gate, which launch only then."""
        for app in self.apps:
            app.launch_clients()
        gated = sum(len(app.gated_clients()) for app in self.apps)
        if gated:
            self._phase(prog, f"launching {gated} clients")
            deadline = time.monotonic() + LAUNCH_TIMEOUT_S + LAUNCH_TIMEOUT_S_PER_CLIENT * gated
            for app in self.apps:
                app.wait_clients_ready(deadline, self._still_running)
        ungated = [app for app in self.apps if not app.gated_clients()]
        return (time.monotonic() + START_DELAY_S + LAUNCH_S_PER_CLIENT * sum(app.launches() for app in self.apps)
                + self.machines.remote_start_s(ungated))

    def _still_running(self) -> None:
        """Raise if the run was cancelled or an engine failed (while waiting for the clients)."""
        if self.cancelled():
            raise RunCancelled("cancelled")
        self.backend.check()

    def _phase(self, prog: "Progress", phase: str) -> None:
        prog.phase = phase
        self.progress(prog)

    # --- set-up --------------------------------------------------------------------------
    def _start_capture(self) -> None:
        data = self.net.directions_with_role("bottleneck-data")
        if not data:
            raise ValueError("run.capture: the topology has no link with role 'bottleneck' to capture at")
        path = self.artifacts / f"point{self.index}-bottleneck.pcap"
        self.capture = Capture(data[0].router, data[0].interface, path,
                               pid_file=paths.state_dir() / f"capture-{self.run_id}-p{self.index}.pid")
        self.capture.start()
        self.store.update_point(self.run_id, self.index, capture=str(path))

    def _engines(self) -> list:
        b = self.backend
        return (b.engine if isinstance(b, KernelBackend) else b).engines if b else []

    # --- while it runs -------------------------------------------------------------------
    def _watch(self, prog: "Progress") -> None:
        start = time.monotonic()
        limit = self.sc.run.time_limit
        data = self.net.directions_with_role("bottleneck-data")
        watched = [(d, next((e for e in self._engines() if e.router is d.router), None)) for d in data]
        last_t: dict[str, float] = {}
        while True:
            time.sleep(0.5)  # the progress display's pace; nothing waits for readiness here
            self._still_running()
            for app in self.apps:
                app.check()
            for d, engine in watched:
                sample_bottleneck(self.store, self.run_id, self.index, prog, d, engine, last_t)
            done = [app.progress() for app in self.apps]
            # One open-ended application (a duration, not a count) makes the point's total open-ended too.
            prog.pages_done = sum(d for d, _ in done)
            prog.pages_total = 0 if any(t == 0 for _, t in done) else sum(t for _, t in done)
            prog.unit = self._units()
            if len(self.apps) > 1:
                prog.detail = ", ".join(f"{app.spec.instance} {d}{'/' + str(t) if t else ''} {app.progress_unit}"
                                        for app, (d, t) in zip(self.apps, done))
            prog.elapsed = time.monotonic() - start
            self.progress(prog)
            if all(app.done() for app in self.apps):
                return
            if prog.elapsed > limit:
                raise RuntimeError(f"time limit {limit:.0f} s reached with {prog.pages_done} of "
                                   f"{prog.pages_total} {self._units()} done (run.time_limit)")

    def _units(self) -> str:
        units = {app.progress_unit for app in self.apps}
        return units.pop() if len(units) == 1 else "units"

    # --- after ---------------------------------------------------------------------------
    def _snapshot_end(self) -> None:
        self.machine_end = fidelity_mod.machine_snapshot()
        self.machines.snapshot_end(self.net)

    def _record_trace(self) -> None:
        self.senders.record_trace(self.collector.add_samples)

    def _collect(self) -> None:
        """The marking and engines' counters, the hosts' TCP counters, the fidelity record and the
        real-time verdict, once."""
        if self.collector.counted:
            return
        self.collector.counted = True
        net, sc = self.net, self.sc
        spm_counts = self.senders.spm_counters()
        if spm_counts is not None:
            self.store.update_point(self.run_id, self.index, marking=spm_counts)
        marking = self.senders.marking_counters()
        if marking is not None:
            self.store.update_point(self.run_id, self.index, marking=marking)
        lost = self.collector.host_counters(net)
        links = self.collector.link_counters(net, self.backend, self._engines(), self.apps)
        lost += [name for name, r in net.routers.items() if not hostconfig.shell_alive(r)]
        after = metadata.point_environment(net, [], "after") if not lost else {"skipped": f"nodes lost: {lost}"}
        keep_awake_on = sc.run.keep_awake
        fidelity = {**fidelity_mod.cpu_fidelity(self.machine_start["cpu"], self.machine_end["cpu"],
                                                nice_is_idle=keep_awake_on),
                    **fidelity_mod.machine_fidelity(self.machine_start, self.machine_end, nice_is_idle=keep_awake_on),
                    "placement": {**self.placement.record(), **self.placement_applied},
                    **links,
                    "failed_clients": self.collector.failed_clients(self.apps),
                    "late_threshold_us": int(sc.run.late_threshold * 1e6), "nodes_lost": lost,
                    "client_start": self.collector.client_start(),
                    **self.machines.fidelity(net)}
        if self.concurrency is not None:
            fidelity["concurrency"] = self.concurrency
        self.collector.verdict(fidelity, sc.run.max_late_fraction, after)

    def _stop_processes(self) -> None:
        """Every step runs even when an earlier one fails; the first failure is raised at the end."""
        steps = [app.stop for app in self.apps] + ([self.capture.stop] if self.capture else [])
        if self.backend:
            steps.append(self.backend.stop)
        failure = None
        for step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the rest must still be stopped
                failure = failure or exc
        if failure:
            raise failure


def make_apps(sc, seed: int, workdir: Path, net: network.Network, marker, clock_offsets: dict) -> list[Application]:
    """Every application of the scenario on the network's hosts, each with its own context."""
    rng = random.Random(seed)
    apps = []
    for i, spec in enumerate(sc.applications):
        cls = lookup(spec.kind)
        # The first application draws from the point's seed itself (so a web-only scenario makes
        # the same random choices as before applications were plug-ins); the others from seeds
        # derived from it.
        app_seed = seed if i == 0 else rng.randrange(2**31)
        ctx = AppContext(workdir=workdir / spec.instance if len(sc.applications) > 1 else workdir,
                         seed=app_seed, time_limit=sc.run.time_limit, python=paths.python(),
                         repo=paths.REPO, start_at=0.0, docroot=paths.docroot(),
                         server_preexec=spm.joiner(marker.cgroup) if marker else None,
                         catnip_module=spm.MOD_CATNIP if marker else None, clock_offsets=clock_offsets)
        servers = net.hosts_of(spec.servers) if spec.servers else []
        apps.append(cls(spec, ctx, net.hosts_of(spec.clients), servers))
    return apps


def tcp_hosts(sc, net: network.Network) -> dict[str, dict]:
    """Which host had which sender: every host's TCP settings (Scenario.host_tcp; sender_params
    as set in testbed/sender.py's map), and for the hosts of a `tcp.groups` group what their
    namespace reads back (sysctls, default route, qdiscs)."""
    out = {}
    for short, h in net.hosts.items():
        rec = net.tcp[short].record()
        if h.group in sc.tcp.groups:
            rec["applied"] = hostconfig.read_host_tcp(h.node, f"{h.name}-eth0")
        out[h.name] = rec
    return out


def place(plan: placement.Placement, net: network.Network, engines: list) -> dict:
    """run.placement: the engines onto their CPUs, every veth's receive processing off them;
    returns what the kernel holds after placing, read back."""
    # An engine on another machine is placed by that machine's scheduler (placement: split is
    # refused with run.machines); only this machine's are read back.
    pinned = {e.router.name: plan.pin_engine(e.proc.pid) for e in engines if e.machine is None}
    nodes = list({id(n): n for n in [*net.net.hosts, *net.routers.values()]}.values())
    ports = [i.name for sw in net.net.switches for i in sw.intfList() if i.name != "lo"]
    steered = plan.steer_receive(nodes, ports)
    # As the kernel holds it: the engines' threads, and a host's shell (started by this thread, as
    # Apache and the clients are: they inherit the same affinity).
    host = next((h.node for h in net.hosts.values() if getattr(h.node, "machine", None) is None), None)
    return {"engine_threads_on": pinned, "hosts_on": sorted(os.sched_getaffinity(host.pid)) if host else None,
            "receive_steered_devices": steered}


def sample_bottleneck(store: Store, run_id: str, index: int, prog: "Progress", d, engine,
                      last_t: dict[str, float]) -> None:
    """A bottleneck direction's newest engine stats line into the store (the dashboard draws the
    run live from it) and the progress, once."""
    stats = engine.latest_stats() if engine else None
    if not stats or stats.get("t") == last_t.get(d.name):
        return
    last_t[d.name] = stats["t"]
    s = stats["links"].get(d.name, {})
    sent = sum(v[1] for v in s.get("sent", {}).values())
    drops = {cls: v[0] for cls, v in s.get("dropped", {}).items()}
    dropped = sum(drops.values())
    store.add_queue_samples(run_id, index, [(d.router.name, d.name, stats["t"], s.get("queue_pkts"),
                                             s.get("queue_bytes"), sent, dropped, drops.get("high", 0),
                                             dropped - drops.get("high", 0))])
    prog.bottleneck = {"queue_pkts": s.get("queue_pkts"), "sent_bytes": sent, "dropped": dropped}
