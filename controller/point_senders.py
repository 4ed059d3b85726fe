"""A point's sender side in the kernel: the project senders' per-host parameters, the SPM marker
(or the document-size program), TCP-state marking and the initial RTO, loaded before the servers
start and unloaded at teardown; at the end, their counters and the newCWV trace.

Per-host parameters (spec.senders.PACEABLE: internal pacing, newCWV's NVP, bins and trace) go into
testbed/sender.py's kernel-wide map by the host's network namespace cookie (testbed/netns.py) and
are cleared at teardown. The newCWV trace (`tcp.groups.G.newcwv.trace: true`) is read from the
ring's head at the point's start, for the point's own namespaces, as samples of application
"sender" (trace_samples): metrics `cwnd` and `ssthresh` (segments), `pipeack` and
`pipeack_sample` (bytes), host = the sender's host, flow = "IP:SPORT-DPORT", tag = the event, t
on CLOCK_MONOTONIC like every application's samples.

A host on another machine is served by the point's helper there (controller/point_machines.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from catnip.controller.point_machines import OtherMachines
from catnip.controller.skeleton import TeardownStack
from catnip.spec import senders
from catnip.spec.scenario import Scenario
from catnip.testbed import hostconfig, netns, rto_init, sender, spm, tcpds
from catnip.workloads.apps.base import AppError

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


def _unload_bpf(obj, what: str) -> None:
    problems = obj.unload()
    if problems:
        print(f"catnip: {what} teardown: " + "; ".join(problems), file=sys.stderr)


class SenderSide:
    """The kernel-side sender settings of one point, from `load` to teardown."""

    def __init__(self, name: str, sc: Scenario, machines: OtherMachines):
        self.name, self.sc, self.machines = name, sc, machines  # name: the BPF objects' ("ab12-p0")
        self.marker: spm.SpmMarker | None = None
        self.ds_marker: tcpds.TcpStateMarker | None = None
        self.rto: rto_init.InitialRto | None = None
        self.ds_there: list[str] = []   # the other machines whose helper loaded TCP-state marking
        self.rto_there: list[str] = []  # the other machines whose helper set an initial RTO
        self.params_set: list[int] = []  # namespace cookies given sender parameters (cleared at teardown)
        self.traced: dict[int, str] = {}  # namespace cookie -> host name, of the senders that trace
        self.trace_from = 0               # the trace's head when this point set its parameters
        self.trace_recorded = False

    def load(self, net, stack: TeardownStack, phase: Callable[[str], None]) -> None:
        """Everything the scenario asks of the senders' kernel, each with its teardown on `stack`."""
        sc = self.sc
        self._set_sender_params(net, stack)
        if sc.marking.spm or sc.tcp.all_cc() & set(senders.NEED_DOCUMENTS):
            phase("loading the SPM marker" if sc.marking.spm else "loading the document-size program")
            web = sc.app("web")
            self._load_marker(net.hosts_of(web.servers) if web and web.servers else [], stack)
        if sc.marking.tcp_state is not None:
            phase("loading the TCP-state marker")
            self._load_tcp_state_marker(net, stack)
        if any(t.initial_rto is not None for t in net.tcp.values()):
            phase("setting the initial RTO")
            self._set_initial_rto(net, stack)

    def _load_marker(self, servers, stack: TeardownStack) -> None:
        m = self.sc.marking
        self.marker = spm.SpmMarker(spm.SpmRules(enabled=m.spm, first=m.first, last=m.last, small_cwnd=m.small_cwnd,
                                                 scope=m.scope, control=m.control, retransmissions=m.retransmissions),
                                    name=self.name)
        stack.callback(_unload_bpf, self.marker, "SPM")
        self.marker.load()
        self.marker.make_cgroup()
        # The last-window senders' pacing ratios (100%) come with the hosts' TCP settings (Scenario.host_tcp).
        for server in servers:
            intf = f"{server.name}-eth0"
            hostconfig.one_packet_per_skb(server.node, intf)
            self.marker.attach_tc(intf, ["nsenter", "-t", str(server.node.pid), "-n"])

    def _load_tcp_state_marker(self, net, stack: TeardownStack) -> None:
        """TCP-DS at every host (each one sends: data, echoes or ACKs), in each host's machine's
        kernel: here, and on another machine by the point's helper there."""
        m = self.sc.marking.tcp_state
        rules = tcpds.TcpdsRules(high_thresh=m.high_thresh, med_thresh=m.med_thresh, randomized=m.randomized,
                                 always_high=tuple(tuple(r) for r in m.always_high))
        thresholds = [(net.hosts[short].ip, high, med) for short, (high, med) in self.sc.tcp_state_thresholds().items()]
        there: dict[str, list] = {}
        for h in net.hosts.values():
            hostconfig.one_packet_per_skb(h.node, f"{h.name}-eth0")  # the marker sees each wire segment
            machine = getattr(h.node, "machine", None)
            if machine is not None:
                there.setdefault(machine.name, []).append([h.node.pid, f"{h.name}-eth0"])
                continue
            if self.ds_marker is None:
                self.ds_marker = tcpds.TcpStateMarker(rules, name=self.name)
                stack.callback(_unload_bpf, self.ds_marker, "TCP-state marker")
                self.ds_marker.load()
                for address, high, med in thresholds:
                    self.ds_marker.set_host(address, high, med)
            self.ds_marker.attach(f"{h.name}-eth0", ["nsenter", "-t", str(h.node.pid), "-n"])
        for label, attach in there.items():
            self.machines.helpers[label].ask({"tcp_state": {
                "rules": [rules.high_thresh, rules.med_thresh, rules.randomized, [list(r) for r in rules.always_high]],
                "hosts": [list(t) for t in thresholds], "attach": attach}})
            self.ds_there.append(label)

    def _set_initial_rto(self, net, stack: TeardownStack) -> None:
        """Each host's value, in its own machine's kernel: here by this process, on another machine
        by the point's helper there (testbed/machine_helper.py)."""
        for short, h in net.hosts.items():
            seconds = net.tcp[short].initial_rto
            if seconds is None:
                continue
            machine = getattr(h.node, "machine", None)
            if machine is not None:
                self.machines.helpers[machine.name].ask({"initial_rto": h.node.pid, "seconds": seconds})
                if machine.name not in self.rto_there:
                    self.rto_there.append(machine.name)
                continue
            if self.rto is None:
                self.rto = rto_init.InitialRto(name=self.name)
                stack.callback(_unload_bpf, self.rto, "initial RTO")
                self.rto.load()
            self.rto.set(h.node.pid, seconds)

    def _set_sender_params(self, net, stack: TeardownStack) -> None:
        """The per-host parameters of the project senders that read them, in testbed/sender.py's
        kernel-wide map keyed by the host's network namespace, cleared on every exit path. The
        trace is read from the head it has now: a point beside this one may be tracing too, so
        nothing is cleared."""
        wanted = [(h, params) for short, h in net.hosts.items() if (params := net.tcp[short].sender_params) is not None]
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

    # --- at the end -----------------------------------------------------------------------------
    def record_trace(self, add_samples: Callable[[list[dict]], None]) -> None:
        """The newCWV trace of the hosts whose group asked for it, once, handed to `add_samples`
        as samples of application "sender" (trace_samples)."""
        if not self.traced or self.trace_recorded:
            return
        self.trace_recorded = True
        entries = sender.read_trace(set(self.traced), since=self.trace_from)
        add_samples(trace_samples(entries, self.traced))
        lost = sender.trace_lost(self.trace_from)
        if lost:  # the ring is shared by the points side by side: a trace cut short is data lost
            raise AppError(f"data missing: the newCWV trace ring ({sender.TRACE_SLOTS} entries, shared by points"
                           f" side by side) was overwritten while this point ran: {lost} entries written since it"
                           " started are gone, some of them may be this point's")

    def spm_counters(self) -> dict | None:
        """The SPM marker's counters, where the scenario marks with it."""
        if not (self.marker and self.sc.marking.spm):
            return None
        try:
            return self.marker.counters()
        except spm.SpmError as exc:  # the run's other records are worth keeping
            return {"error": str(exc)}

    def marking_counters(self) -> dict | None:
        """TCP-state marking's counters and the initial RTO's answers, summed over the machines
        (each machine's part kept beside the sum); None where neither was loaded."""
        if not (self.ds_marker or self.rto or self.ds_there or self.rto_there):
            return None
        marking: dict[str, Any] = {}
        for what, read in (("tcp_state", self.ds_marker and self.ds_marker.counters),
                           ("initial_rto_answers", self.rto and self.rto.answers)):
            if read:
                try:
                    marking[what] = read()
                except spm.SpmError as exc:  # the run's other records are worth keeping
                    marking[what] = {"error": str(exc)}
        # Another machine's marker and initial RTO count its hosts' packets: kept by machine, and summed in.
        for counts in self.machines.ask(self.ds_there, {"tcp_state_counters": True}, "tcp_state", marking):
            total = marking.setdefault("tcp_state", {})
            if "error" not in total:
                for key, value in counts.items():
                    total[key] = total.get(key, 0) + value
        for answers in self.machines.ask(self.rto_there, {"initial_rto_answers": True}, "initial_rto_answers",
                                         marking):
            if isinstance(marking.get("initial_rto_answers", 0), int):
                marking["initial_rto_answers"] = marking.get("initial_rto_answers", 0) + answers
        return marking

