"""One sweep point on one freshly built network, for any topology and any applications.

    build the network (testbed/network.py) -> start its link backend (testbed/links.py)
    -> the project senders' per-host parameters, the sender-side BPF (SPM marker, document sizes)
    -> every application's servers -> wait until ready -> its clients (one common start)
    -> watch progress, processes and engines until the applications finish or the time limit
    -> collect samples and records, the newCWV trace -> engines' counters
    -> the real-time verdict (controller/fidelity.py)

Per-host TCP (`tcp` and `tcp.groups`, resolved by spec.scenario.Scenario.host_tcp) is set as the
network is built; the parameters of the senders that read them (spec.senders.PACEABLE: internal
pacing, newCWV's NVP, bins and trace) go into testbed/sender.py's kernel-wide map by the host's
network namespace cookie (testbed/netns.py) and are cleared at teardown. The point's environment
records every host's settings (`tcp_hosts`: which host had which sender, read back from the
namespaces of `tcp.groups` hosts).

The newCWV trace (`tcp.groups.G.newcwv.trace: true`) is read from the ring's head at the point's
start, for the point's own namespaces, when its workload ends (also when it failed), as samples
of application "sender" (trace_samples): metrics `cwnd` and `ssthresh` (segments), `pipeack` and
`pipeack_sample` (bytes), host = the sender's host, flow = "IP:SPORT-DPORT", tag = the event, t on CLOCK_MONOTONIC like every
application's samples.

Teardown runs on every exit path (failure, Ctrl-C, SIGTERM) and a cancel cannot cut it short.
What the applications measured before a failure or a cancel is recorded all the same; a point
whose applications lost data (a client died, pages missing) fails with what was missing.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from controller import fidelity as fidelity_mod
from controller.skeleton import RunCancelled, TeardownStack
from results.store import Store
from testbed import engine as engine_mod
from testbed import (hostconfig, keep_awake, machine_helper, machines, metadata, netns, network, paths, placement,
                     rto_init, sender, spm, tcpds, tunnels)
from testbed.capabilities import Capabilities
from testbed.links import EngineBackend, KernelBackend
from workloads.apps.base import AppContext, AppError, Application, lookup

if TYPE_CHECKING:
    from controller.point_plan import PointPlan
    from controller.skeleton import Progress

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


TRACE_METRICS = (("cwnd", "cwnd", "segments"), ("pipeack", "pipeack", "bytes"),
                 ("pipeack_sample", "sample", "bytes"), ("ssthresh", "ssthresh", "segments"))
INFINITE_SSTHRESH = 0x7FFFFFFF  # the kernel's ssthresh before the first loss (TCP_INFINITE_SSTHRESH)


def trace_samples(entries: list[dict], host_names: dict[int, str]) -> list[dict]:
    """Rows of the samples table from testbed/sender.py's newCWV trace, four metrics per event of
    application "sender": `cwnd` (segments), `pipeack` (bytes; none while pipeACK is undefined,
    RFC 7661 section 4.2), `pipeack_sample` (bytes: the round's sample the max filter took in;
    none when the event took none) and `ssthresh` (segments; none while it is the kernel's initial
    infinity). host = the sender's host name (host_names: namespace cookie -> name),
    flow = "IP:SPORT-DPORT" (the sender's address and
    port, the peer's port), tag = the event, t = the event's time in seconds on CLOCK_MONOTONIC,
    the clock of the applications' samples (a burst's `burst_time` t is on it too)."""
    rows = []
    for e in entries:
        base = {"app": "sender", "host": host_names.get(e["netns"], e["ip"]), "peer": None,
                "flow": f"{e['ip']}:{e['sport']}-{e['dport']}", "tag": e["event"], "t": e["t"]}
        for metric, key, unit in TRACE_METRICS:
            value = e.get(key)
            if value is None or (key == "ssthresh" and value >= INFINITE_SSTHRESH):
                continue
            rows.append({**base, "metric": metric, "value": value, "unit": unit})
    return rows


def _session_seconds(machine) -> float:
    """How long one command over ssh takes there, the quickest of three."""
    times = []
    for _ in range(3):
        t = time.monotonic()
        machine.run(["true"])
        times.append(time.monotonic() - t)
    return min(times)


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
        self.capture: subprocess.Popen | None = None
        self.capture_machine = None  # the other machine the bottleneck's router is on, if it is
        self.capture_pid_file: Path | None = None
        self.marker: spm.SpmMarker | None = None
        self.ds_marker: tcpds.TcpStateMarker | None = None
        self.rto: rto_init.InitialRto | None = None
        self.recorded = False
        self.ready_after_start: dict[str, dict[str, float]] = {}  # application -> client -> s (AppResult)
        self.first_unit_after_due: dict[str, dict[str, float]] = {}  # the same, for the first unit's start
        self.stopped_by_us: set[int] = set()  # processes we ended (time limit, cancel): not failures
        self.counted = False
        self.params_set: list[int] = []  # namespace cookies given sender parameters (cleared at teardown)
        self.traced: dict[int, str] = {}  # namespace cookie -> host name, of the senders that trace
        self.trace_from = 0               # the trace's head when this point set its parameters
        self.trace_recorded = False
        self.underlay_start: list | None = None  # each tunnel's underlay counters (split topologies)
        self.underlay_end: list | None = None
        self.clocks: dict[str, dict] = {}  # another machine's name -> its clock offset, at start and end
        self.helpers: dict[str, machine_helper.MachineHelper] = {}  # another machine's name -> the point's helper there
        self.ds_there: list[str] = []  # the other machines whose helper loaded TCP-state marking
        self.rto_there: list[str] = []  # the other machines whose helper set an initial RTO
        self.others_start: dict[str, dict | None] = {}  # another machine's name -> its machine snapshot
        self.others_end: dict[str, dict | None] = {}

    # --- the point -----------------------------------------------------------------------
    def execute(self, prog: "Progress") -> None:
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
        with TeardownStack() as stack:
            # Entered first, so the shells (and Apache, the clients) are born off the engines' CPUs.
            stack.enter_context(self.placement.for_this_process())
            self._phase(prog, "building network")
            split = self._machines(stack)  # entered first: the network goes down before its machines
            record = self.record
            self.net = net = network.build(sc, switch, split, record=record)
            # What was built with what: the record as stored, with the switch the machine gave it.
            self.store.update_point(self.run_id, self.index, record=record.model_copy(update={
                "placement": record.placement.model_copy(update={"switch_kind": switch})}).model_dump(mode="json"))
            stack.callback(network.stop, net)
            if net.tunnels:
                self._phase(prog, "measuring the tunnels between machines")
                self._measure_tunnels(net)
            stack.callback(self._stop_processes)
            engines = EngineBackend(self.workdir, self.seed, sc.run.late_threshold, sc.run.engine_spin)
            self.backend = (KernelBackend(self.caps.qdiscs, engines) if sc.run.link_backend == "kernel" else engines)
            routers = list(net.routers.values())
            if isinstance(self.backend, KernelBackend):
                self.backend.start(routers, net.directions, net.mtu)
            else:
                self.backend.start(routers, net.directions)
            self._place(net)
            if sc.run.keep_awake:
                awake = keep_awake.KeepAwake()
                stack.callback(awake.stop)
                self.placement_applied["keep_awake_cpus"] = awake.start(every_cpu)
                for label, helper in self.helpers.items():  # each other machine's CPUs too, until its helper ends
                    self.placement_applied.setdefault("keep_awake_cpus_by_machine", {})[label] = \
                        helper.ask({"keep_awake": True})
            # Each host's congestion control, sysctls, initcwnd and fq are set as the network is
            # built (Network.tcp); the project senders' per-host parameters are set here.
            self._set_sender_params(stack)
            servers = self._web_servers()
            if sc.marking.spm or sc.tcp.all_cc() & set(sender.NEED_DOCUMENTS):
                self._phase(prog, "loading the SPM marker" if sc.marking.spm else "loading the document-size program")
                self._load_marker(servers, stack)
            if sc.marking.tcp_state is not None:
                self._phase(prog, "loading the TCP-state marker")
                self._load_tcp_state_marker(stack)
            if any(t.initial_rto is not None for t in net.tcp.values()):
                self._phase(prog, "setting the initial RTO")
                self._set_initial_rto(stack)
            self._phase(prog, "starting servers")
            self._make_apps()
            for app in self.apps:
                app.start_servers()
            for app in self.apps:
                app.wait_ready(timeout=10)
            if sc.run.capture:
                self._start_capture()
            self._record_environment()
            self.machine_start = fidelity_mod.machine_snapshot()
            self.others_start = self._other_snapshots()
            self.underlay_start = self._underlay_counters()
            start_at = self._launch_clients(prog)
            prog.phase = "running workload"
            for app in self.apps:
                app.ctx.start_at = start_at
                app.start_clients()
            try:
                self._watch(prog)
            except BaseException:
                # What was measured before a failure, a time limit or a cancel is kept, with the
                # engines' counters, the senders' trace and the real-time verdict of the part that ran.
                self._snapshot_end()
                self._record_apps(partial=True)
                for step, what in ((self._record_trace, "trace"), (self._collect_counters, "counters")):
                    try:
                        step()
                    except Exception as exc:  # noqa: BLE001 - the original error is the one to report
                        print(f"catnip: {what} of the failed point not recorded: {exc}", file=sys.stderr)
                raise
            self._snapshot_end()
            self._phase(prog, "collecting")
            try:
                self._record_apps(partial=False)
                self._record_trace()
            finally:  # the trace, counters and the verdict also when data went missing
                try:
                    self._record_trace()  # done already unless the applications' records failed
                finally:
                    self._collect_counters()

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
                + self._remote_start_s(ungated))

    def _still_running(self) -> None:
        """Raise if the run was cancelled or an engine failed (while waiting for the clients)."""
        if self.cancelled():
            raise RunCancelled("cancelled")
        self.backend.check()

    def _snapshot_end(self) -> None:
        self.machine_end = fidelity_mod.machine_snapshot()
        self.others_end = self._other_snapshots()
        self.underlay_end = self._underlay_counters()
        for label, c in self.clocks.items():
            try:
                c["end"] = c["machine"].clock_offset(python=paths.python())
            except (machines.MachineError, ValueError, OSError) as exc:  # unmeasured; the records still go in
                print(f"catnip: machine {label}'s clock not read at the end: {exc}", file=sys.stderr)

    def _underlay_counters(self) -> list | None:
        """Each tunnel's underlay counters now; None when another machine did not answer (the point's
        own records still go in, and its tunnels count as unmeasured)."""
        try:
            return [tunnels.underlay_counters(t, self.net.machines) for t in self.net.tunnels]
        except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
            print(f"catnip: the tunnels' underlay counters not read: {exc}", file=sys.stderr)
            return None

    def _machines(self, stack: TeardownStack) -> dict:
        """run.machines: router -> the Machine it runs on; an imitated one is made here, for the point."""
        split = {}
        for i, (label, m) in enumerate(self.sc.run.machines.items()):
            machine = (stack.enter_context(machines.imitated(label, index=i, clock_shift=m.clock_shift))
                       if m.address == "imitated"
                       else machines.reached(label, m.address))
            stack.enter_context(machines.held(machine))
            # The point's helper there: its run cgroup, into which every command for that machine
            # starts from now on, and what lives in that machine's kernel (testbed/machine_helper.py).
            helper = machine_helper.MachineHelper(machine, f"{self.run_id[-4:]}-p{self.index}-{label}",
                                                  paths.python(), str(paths.REPO))
            stack.callback(self._close_helper, helper)
            self.helpers[label] = helper
            if helper.cgroup:
                machine = dataclasses.replace(machine, cgroup=helper.cgroup)
            split.update({r: machine for r in m.routers})
            # Its programs run on our clock (workloads/apps/elsewhere.py), by the offset measured here.
            self.clocks[label] = {"start": machine.clock_offset(python=paths.python()), "machine": machine,
                                  "session_s": _session_seconds(machine)}
        return split

    @staticmethod
    def _close_helper(helper) -> None:
        for problem in helper.close():
            print(f"catnip: machine {helper.machine.name}: {problem}", file=sys.stderr)

    def _remote_start_s(self, apps: list[Application]) -> float:
        """The common start's extra delay for the programs of `apps` on other machines: one whose
        clients are there opens one ssh session for its agent (workloads/apps/elsewhere.py) unless
        its servers opened it, at the time one took here."""
        extra = 0.0
        for label, c in self.clocks.items():
            for app in apps:
                if label not in app.agents and any(getattr(getattr(h.node, "machine", None), "name", None) == label
                                                   for h in app.clients):
                    extra += c["session_s"]
        return extra

    def _other_snapshots(self) -> dict[str, dict | None]:
        """Each other machine's CPU times and receive backlog drops now (fidelity.machine_snapshot
        from its /proc); None for one that did not answer."""
        out: dict[str, dict | None] = {}
        for label, c in self.clocks.items():
            try:
                stat = c["machine"].run(["cat", "/proc/stat"])
                softnet = c["machine"].run(["sh", "-c", "cat /proc/net/softnet_stat 2>/dev/null; true"])
                out[label] = fidelity_mod.machine_snapshot(stat, softnet)
            except machines.MachineError as exc:
                print(f"catnip: machine {label}'s CPU and backlog counters not read: {exc}", file=sys.stderr)
                out[label] = None
        return out

    def _others_fidelity(self) -> dict:
        """Each other machine's busy, softirq and steal shares and backlog drops over the workload,
        as this machine's are recorded; None where a snapshot is missing (then not real time)."""
        out = {}
        for label in self.clocks:
            start, end = self.others_start.get(label), self.others_end.get(label)
            out[label] = (fidelity_mod.machine_fidelity(start, end, nice_is_idle=self.sc.run.keep_awake)
                          if start and end else None)
        return {"machines": out} if out else {}

    def _clock_fidelity(self) -> dict:
        """Each other machine's clock offset at the start and the end of the point: the programs
        there ran on the start's, so the change is how far their instants drifted from ours."""
        out = {}
        for label, c in self.clocks.items():
            start, end = c["start"], c.get("end")
            out[label] = {"offset_start_s": start["offset"], "uncertainty_start_s": start["uncertainty"],
                          "offset_end_s": end["offset"] if end else None,
                          "uncertainty_end_s": end["uncertainty"] if end else None,
                          "drift_s": end["offset"] - start["offset"] if end else None,
                          "ssh_session_s": c["session_s"]}
        return {"clocks": out} if out else {}

    def _measure_tunnels(self, net: network.Network) -> None:
        """Each tunnel's own round trip, before the engines emulate the links it carries: the
        fidelity record keeps it beside the emulated delays it adds to."""
        for t in net.tunnels:
            a, _ = t["routers"]
            t["rtt_before_engines"] = tunnels.tunnel_rtt(t, net.routers[a], t["link_addresses"][1])

    def _tunnel_fidelity(self) -> dict:
        if not self.net.tunnels:
            return {}
        if self.underlay_start is None or self.underlay_end is None:  # unmeasured: not real time
            return {"tunnels": self.net.tunnels, "tunnel_drops": None}
        measured = [{**t, "underlay_change": tunnels.counter_change(before, after)}
                    for t, before, after in zip(self.net.tunnels, self.underlay_start, self.underlay_end)]
        return {"tunnels": measured, "tunnel_drops": tunnels.drops(measured)}

    def _phase(self, prog: "Progress", phase: str) -> None:
        prog.phase = phase
        self.progress(prog)

    # --- set-up --------------------------------------------------------------------------
    def _web_servers(self):
        """The hosts serving CATNIP's web sessions: SPM marks them, `tcp.server_congestion_control` applies."""
        web = self.sc.app("web")
        return self.net.hosts_of(web.servers) if web and web.servers else []

    def _load_marker(self, servers, stack: TeardownStack) -> None:
        m = self.sc.marking
        self.marker = spm.SpmMarker(spm.SpmRules(enabled=m.spm, first=m.first, last=m.last, small_cwnd=m.small_cwnd,
                                                 scope=m.scope, control=m.control, retransmissions=m.retransmissions),
                                    name=f"{self.run_id[-4:]}-p{self.index}")
        stack.callback(self._unload_bpf, self.marker, "SPM")
        self.marker.load()
        self.marker.make_cgroup()
        # The last-window senders' pacing ratios (100%) come with the hosts' TCP settings (Scenario.host_tcp).
        for server in servers:
            intf = f"{server.name}-eth0"
            hostconfig.one_packet_per_skb(server.node, intf)
            self.marker.attach_tc(intf, ["nsenter", "-t", str(server.node.pid), "-n"])

    def _load_tcp_state_marker(self, stack: TeardownStack) -> None:
        """TCP-DS at every host (each one sends: data, echoes or ACKs), in each host's machine's
        kernel: here, and on another machine by the point's helper there."""
        m = self.sc.marking.tcp_state
        rules = tcpds.TcpdsRules(high_thresh=m.high_thresh, med_thresh=m.med_thresh, randomized=m.randomized,
                                 always_high=tuple(tuple(r) for r in m.always_high))
        thresholds = [(self.net.hosts[short].ip, high, med)
                      for short, (high, med) in self.sc.tcp_state_thresholds().items()]
        there: dict[str, list] = {}
        for h in self.net.hosts.values():
            hostconfig.one_packet_per_skb(h.node, f"{h.name}-eth0")  # the marker sees each wire segment
            machine = getattr(h.node, "machine", None)
            if machine is not None:
                there.setdefault(machine.name, []).append([h.node.pid, f"{h.name}-eth0"])
                continue
            if self.ds_marker is None:
                self.ds_marker = tcpds.TcpStateMarker(rules, name=f"{self.run_id[-4:]}-p{self.index}")
                stack.callback(self._unload_bpf, self.ds_marker, "TCP-state marker")
                self.ds_marker.load()
                for address, high, med in thresholds:
                    self.ds_marker.set_host(address, high, med)
            self.ds_marker.attach(f"{h.name}-eth0", ["nsenter", "-t", str(h.node.pid), "-n"])
        for label, attach in there.items():
            self.helpers[label].ask({"tcp_state": {
                "rules": [rules.high_thresh, rules.med_thresh, rules.randomized, [list(r) for r in rules.always_high]],
                "hosts": [list(t) for t in thresholds], "attach": attach}})
            self.ds_there.append(label)

    def _set_initial_rto(self, stack: TeardownStack) -> None:
        """Each host's value, in its own machine's kernel: here by this process, on another machine
        by the point's helper there (testbed/machine_helper.py)."""
        for short, h in self.net.hosts.items():
            seconds = self.net.tcp[short].initial_rto
            if seconds is None:
                continue
            machine = getattr(h.node, "machine", None)
            if machine is not None:
                self.helpers[machine.name].ask({"initial_rto": h.node.pid, "seconds": seconds})
                if machine.name not in self.rto_there:
                    self.rto_there.append(machine.name)
                continue
            if self.rto is None:
                self.rto = rto_init.InitialRto(name=f"{self.run_id[-4:]}-p{self.index}")
                stack.callback(self._unload_bpf, self.rto, "initial RTO")
                self.rto.load()
            self.rto.set(h.node.pid, seconds)

    @staticmethod
    def _unload_bpf(obj, what: str) -> None:
        problems = obj.unload()
        if problems:
            print(f"catnip: {what} teardown: " + "; ".join(problems), file=sys.stderr)


    def _set_sender_params(self, stack: TeardownStack) -> None:
        """The per-host parameters of the project senders that read them (spec.senders.PACEABLE:
        internal pacing, newCWV's NVP, bins and trace), in testbed/sender.py's kernel-wide map keyed
        by the host's network namespace, cleared on every exit path. The trace is read from the
        head it has now: a point beside this one may be tracing too, so nothing is cleared."""
        wanted = [(h, params) for short, h in self.net.hosts.items()
                  if (params := self.net.tcp[short].sender_params) is not None]
        if not wanted:
            return
        stack.callback(self._clear_sender_params)
        self.trace_from = sender.trace_head()
        for h, params in wanted:
            cookie = netns.cookie(h.node.pid)
            self.params_set.append(cookie)
            sender.set_host_params(cookie, sender.HostParams(**params))
            if params["trace"]:
                self.traced[cookie] = h.name

    def _clear_sender_params(self) -> None:
        failure = None
        for cookie in self.params_set:
            try:
                sender.clear_host_params(cookie)
            except Exception as exc:  # noqa: BLE001 - the other hosts' entries must still go
                failure = failure or exc
        if failure:
            raise failure

    def _make_apps(self) -> None:
        rng = random.Random(self.seed)
        for i, spec in enumerate(self.sc.applications):
            cls = lookup(spec.kind)
            # The first application draws from the point's seed itself (so a web-only scenario makes
            # the same random choices as before applications were plug-ins); the others from seeds
            # derived from it.
            seed = self.seed if i == 0 else rng.randrange(2**31)
            ctx = AppContext(workdir=self.workdir / spec.instance if len(self.sc.applications) > 1 else self.workdir,
                             seed=seed, time_limit=self.sc.run.time_limit, python=paths.python(),
                             repo=paths.REPO, start_at=0.0, docroot=paths.docroot(),
                             server_preexec=spm.joiner(self.marker.cgroup) if self.marker else None,
                             catnip_module=spm.MOD_CATNIP if self.marker else None,
                             clock_offsets={label: c["start"]["offset"] for label, c in self.clocks.items()})
            servers = self.net.hosts_of(spec.servers) if spec.servers else []
            self.apps.append(cls(spec, ctx, self.net.hosts_of(spec.clients), servers))

    def _start_capture(self) -> None:
        data = self.net.directions_with_role("bottleneck-data")
        if not data:
            raise ValueError("run.capture: the topology has no link with role 'bottleneck' to capture at")
        path = self.artifacts / f"point{self.index}-bottleneck.pcap"
        path.parent.mkdir(parents=True, exist_ok=True)
        # --immediate-mode: libpcap otherwise hands packets over in batches (up to a second late),
        # and those still in its buffer when the capture is stopped are lost (seen: a run's last burst).
        argv = ["tcpdump", "-i", data[0].interface, "-s", "128", "-U", "--immediate-mode", "-w", str(path)]
        machine = getattr(data[0].router, "machine", None)
        if machine is None:
            self.capture = data[0].router.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            # A router on another machine: the capture comes back on tcpdump's output (-w -) into the
            # same local file, and tcpdump is stopped there by its pid (ssh would not pass SIGINT on).
            self.capture_pid_file = paths.state_dir() / f"capture-{self.run_id}-p{self.index}.pid"
            with open(path, "wb") as out:
                self.capture = data[0].router.popen(machines.with_pid_file(argv[:-1] + ["-"], self.capture_pid_file),
                                                    stdout=out, stderr=subprocess.DEVNULL)
            self.capture_machine = machine
        self.store.update_point(self.run_id, self.index, capture=str(path))

    def _record_environment(self) -> None:
        net = self.net
        first = {}  # one host per group, named by its role where it has one (CATNIP: client, server)
        roles = {g.name: g.role or g.name for g in net.graph.groups}
        for h in net.hosts.values():
            first.setdefault(roles[h.group], h)
        some_router = next(iter(net.routers.values()))
        self.store.update_point(
            self.run_id, self.index,
            sysctls={**{g: hostconfig.read_sysctls(h.node) for g, h in first.items()},
                     "router": hostconfig.read_sysctls(some_router)},
            offloads={g: hostconfig.offloads(h.node, f"{h.name}-eth0") for g, h in first.items()},
            environment={**metadata.point_environment(net, self._engines(), "before"),
                         "tcp_hosts": self._tcp_hosts()})

    def _tcp_hosts(self) -> dict[str, dict]:
        """Which host had which sender: every host's TCP settings (Scenario.host_tcp; sender_params
        as set in testbed/sender.py's map), and for the hosts of a `tcp.groups` group what their
        namespace reads back (sysctls, default route, qdiscs)."""
        out = {}
        for short, h in self.net.hosts.items():
            rec = self.net.tcp[short].record()
            if h.group in self.sc.tcp.groups:
                rec["applied"] = hostconfig.read_host_tcp(h.node, f"{h.name}-eth0")
            out[h.name] = rec
        return out

    def _place(self, net: network.Network) -> None:
        """run.placement: the engines onto their CPUs, every veth's receive processing off them."""
        # An engine on another machine is placed by that machine's scheduler (placement: split is
        # refused with run.machines); only this machine's are read back.
        engines = {e.router.name: self.placement.pin_engine(e.proc.pid) for e in self._engines() if e.machine is None}
        nodes = list({id(n): n for n in [*net.net.hosts, *net.routers.values()]}.values())
        ports = [i.name for sw in net.net.switches for i in sw.intfList() if i.name != "lo"]
        steered = self.placement.steer_receive(nodes, ports)
        # As the kernel holds it, read back: the engines' threads, and a host's shell (started by
        # this thread, as Apache and the clients are: they inherit the same affinity).
        host = next((h.node for h in net.hosts.values() if getattr(h.node, "machine", None) is None), None)
        self.placement_applied = {"engine_threads_on": engines,
                                  "hosts_on": sorted(os.sched_getaffinity(host.pid)) if host else None,
                                  "receive_steered_devices": steered}

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
                stats = engine.latest_stats() if engine else None
                if stats and stats.get("t") != last_t.get(d.name):
                    last_t[d.name] = stats["t"]
                    s = stats["links"].get(d.name, {})
                    sent = sum(v[1] for v in s.get("sent", {}).values())
                    drops = {cls: v[0] for cls, v in s.get("dropped", {}).items()}
                    dropped = sum(drops.values())
                    # Written as it comes, so the dashboard can draw the run live.
                    self.store.add_queue_samples(self.run_id, self.index, [(
                        d.router.name, d.name, stats["t"], s.get("queue_pkts"), s.get("queue_bytes"), sent, dropped,
                        drops.get("high", 0), dropped - drops.get("high", 0))])
                    prog.bottleneck = {"queue_pkts": s.get("queue_pkts"), "sent_bytes": sent, "dropped": dropped}
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
    def _record_apps(self, partial: bool) -> None:
        """Every application's samples and records into the store, once; missing data fails the point."""
        if self.recorded:
            return
        self.recorded = True
        missing = []
        for app in self.apps:
            if partial:
                # Clients still running now are stopped by us, not failed: note them first.
                self.stopped_by_us.update(id(p) for p in app.procs if p.popen.poll() is None)
                app.stop()  # outputs complete before they are read
            try:
                app.sync_files()  # what programs on other machines wrote, complete here
                result = app.collect()
            except Exception as exc:  # noqa: BLE001 - the other applications' data is still kept
                missing.append(f"{app.spec.instance}: its results could not be read ({exc})")
                continue
            if "objects" in result.records or "pages" in result.records:
                self.store.add_transfers(self.run_id, self.index, result.records.get("objects", []),
                                         result.records.get("pages", []))
            self.store.add_samples(self.run_id, self.index, result.samples)
            self.ready_after_start[app.spec.instance] = result.ready_after_start
            self.first_unit_after_due[app.spec.instance] = result.first_unit_after_due
            missing += result.missing
        if missing and not partial:
            raise AppError("data missing: " + "; ".join(missing[:10]) + (f" (and {len(missing) - 10} more)"
                                                                         if len(missing) > 10 else ""))

    def _record_trace(self) -> None:
        """The newCWV trace of the hosts whose group asked for it (`tcp.groups.G.newcwv.trace`), once,
        as samples of application "sender" (trace_samples)."""
        if not self.traced or self.trace_recorded:
            return
        self.trace_recorded = True
        entries = sender.read_trace(set(self.traced), since=self.trace_from)
        self.store.add_samples(self.run_id, self.index, trace_samples(entries, self.traced))
        lost = sender.trace_lost(self.trace_from)
        if lost:  # the ring is shared by the points side by side: a trace cut short is data lost
            raise AppError(f"data missing: the newCWV trace ring ({sender.TRACE_SLOTS} entries, shared by points"
                           f" side by side) was overwritten while this point ran: {lost} entries written since it"
                           " started are gone, some of them may be this point's")

    def _collect_counters(self) -> None:
        if self.counted:
            return
        self.counted = True
        net = self.net
        if self.marker and self.sc.marking.spm:
            try:
                marking = self.marker.counters()
            except spm.SpmError as exc:  # the run's other records are worth keeping
                marking = {"error": str(exc)}
            self.store.update_point(self.run_id, self.index, marking=marking)
        if self.ds_marker or self.rto or self.ds_there or self.rto_there:
            marking = {}
            for what, read in (("tcp_state", self.ds_marker and self.ds_marker.counters),
                               ("initial_rto_answers", self.rto and self.rto.answers)):
                if read:
                    try:
                        marking[what] = read()
                    except spm.SpmError as exc:  # the run's other records are worth keeping
                        marking[what] = {"error": str(exc)}
            # Another machine's marker and initial RTO count its hosts' packets: kept by machine, and summed in.
            for counts in self._ask_helpers(self.ds_there, {"tcp_state_counters": True}, "tcp_state", marking):
                total = marking.setdefault("tcp_state", {})
                if "error" not in total:
                    for key, value in counts.items():
                        total[key] = total.get(key, 0) + value
            for answers in self._ask_helpers(self.rto_there, {"initial_rto_answers": True}, "initial_rto_answers",
                                             marking):
                if isinstance(marking.get("initial_rto_answers", 0), int):
                    marking["initial_rto_answers"] = marking.get("initial_rto_answers", 0) + answers
            self.store.update_point(self.run_id, self.index, marking=marking)
        lost = [h.name for h in net.hosts.values() if not hostconfig.shell_alive(h.node)]
        for h in net.hosts.values():
            if h.name not in lost:  # a node whose shell died cannot be asked (its cmd would block)
                self.store.add_tcp_counters(self.run_id, self.index, h.name, hostconfig.nstat(h.node))
        engines = self._engines()
        if isinstance(self.backend, KernelBackend):  # router links in tc: their qdiscs' counters
            for router, final in self.backend.counters().items():
                self.store.add_link_stats(self.run_id, self.index, router, final, {d.name: d.role for d in net.directions},
                                          {}, {})
        kernel = {e.router.name: {r["link"]: r for r in e.kernel_queue_counters()} for e in engines}
        engine_cpu = {e.router.name: e.cpu_seconds() for e in engines}
        for e in engines:
            e.stop()
        self._record_window_links(engines)
        roles = {d.name: d.role for d in net.directions}
        finals = {}
        for e in engines:
            final = e.latest_stats() or {}
            finals[e.router.name] = final
            configs = {link["name"]: link for link in e.config()["links"]}
            self.store.add_link_stats(self.run_id, self.index, e.router.name, final, roles, configs,
                                      kernel[e.router.name])
        lost += [name for name, r in net.routers.items() if not hostconfig.shell_alive(r)]
        after = metadata.point_environment(net, [], "after") if not lost else {"skipped": f"nodes lost: {lost}"}
        fidelity = {**fidelity_mod.cpu_fidelity(self.machine_start["cpu"], self.machine_end["cpu"],
                                                nice_is_idle=self.sc.run.keep_awake),
                    **fidelity_mod.machine_fidelity(self.machine_start, self.machine_end,
                                                    nice_is_idle=self.sc.run.keep_awake),
                    "placement": {**self.placement.record(), **self.placement_applied},
                    "engine_cpu_s": engine_cpu,
                    **fidelity_mod.engine_fidelity(finals, kernel),
                    "failed_clients": [p.host.name for app in self.apps for p in app.procs
                                       if p.role == "client" and p.popen.returncode not in (0, None)
                                       and id(p) not in self.stopped_by_us],
                    "late_threshold_us": int(self.sc.run.late_threshold * 1e6), "nodes_lost": lost,
                    "client_start": fidelity_mod.client_start(self.ready_after_start,
                                                              self.first_unit_after_due),
                    **self._tunnel_fidelity(), **self._clock_fidelity(), **self._others_fidelity()}
        if self.concurrency is not None:
            fidelity["concurrency"] = self.concurrency
        ok = fidelity_mod.realtime_ok(fidelity, self.sc.run.max_late_fraction)
        self.store.update_point(self.run_id, self.index, fidelity=fidelity, realtime_ok=int(ok),
                                environment_after=after)

    def _ask_helpers(self, labels: list[str], request: dict, key: str, marking: dict) -> list:
        """Each machine's helper's answer to `request`, kept in marking[KEY_by_machine] (an error
        there when it could not answer, and its label in marking["unanswered"][KEY]: the sum in
        marking[KEY] then lacks that machine's part); returns the answers that came."""
        got = []
        for label in labels:
            try:
                value = self.helpers[label].ask(request)
            except machine_helper.HelperError as exc:
                value = {"error": str(exc)}
                marking.setdefault("unanswered", {}).setdefault(key, []).append(label)
            else:
                got.append(value)
            marking.setdefault(f"{key}_by_machine", {})[label] = value
        return got

    def _record_window_links(self, engines: list) -> None:
        """For each application with a measured window: every bottleneck data direction's packets
        arrived and dropped per class over that window, from its engine's stats lines (interpolated
        at the window's ends), as samples of the application: metric `window_link`, host the
        router, flow `arrived.<class>` or `dropped.<class>`, tag the direction. An end outside the
        stats lines is an error sample, never a guess."""
        rows, lines_of = [], {}  # each engine's stats file read once, whatever the applications
        for app in self.apps:
            window = app.measured_window()
            if window is None:
                continue
            for d in self.net.directions_with_role("bottleneck-data"):
                e = next((e for e in engines if e.router is d.router), None)
                if e is None or e.clock_start is None:
                    continue  # a kernel-backed link: its qdisc counters are read once, at the end
                if id(e) not in lines_of:
                    lines_of[id(e)] = engine_mod.stats_lines(e.stats_path)
                lines = lines_of[id(e)]
                ends = [engine_mod.link_counters_at(lines, d.name, w - e.clock_start) for w in window]
                row = {"app": app.spec.instance, "metric": "window_link", "host": d.router.name, "peer": None,
                       "tag": d.name, "t": window[0], "unit": "pkt"}
                if None in ends:
                    rows.append({**row, "flow": "arrived.all", "value": None,
                                 "error": f"the engine's stats lines of {d.name} do not cover the measured window"})
                    continue
                for what in ("arrived", "dropped"):
                    classes = sorted(set(ends[0][what]) | set(ends[1][what]))
                    for cls in classes:
                        rows.append({**row, "flow": f"{what}.{cls}", "error": None,
                                     "value": ends[1][what].get(cls, 0.0) - ends[0][what].get(cls, 0.0)})
        if rows:
            self.store.add_samples(self.run_id, self.index, rows)

    def _stop_processes(self) -> None:
        """Every step runs even when an earlier one fails; the first failure is raised at the end."""
        steps = [app.stop for app in self.apps] + [self._stop_capture]
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

    def _stop_capture(self) -> None:
        if self.capture and self.capture.poll() is None:
            if self.capture_machine is not None:  # it writes its last packets and ends, its ssh with it
                self.capture_machine.signal_pid_files([self.capture_pid_file], "INT")
            else:
                self.capture.send_signal(signal.SIGINT)
            try:
                self.capture.wait(5)
            except subprocess.TimeoutExpired:
                if self.capture_machine is not None:
                    self.capture_machine.signal_pid_files([self.capture_pid_file], "KILL")
                self.capture.kill()
        if self.capture_machine is not None and self.capture_pid_file is not None:
            try:
                self.capture_machine.run(["rm", "-f", str(self.capture_pid_file)])
            except machines.MachineError:
                pass  # the machine is gone: so is its run state
            self.capture_pid_file = None
