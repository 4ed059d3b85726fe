"""A point's other machines (`run.machines`, docs/cluster.md): reaching them, each one's helper and
clock, their CPU and backlog counters, the tunnels between them, and what of all that goes into
the point's fidelity record. A point on one machine has none of it: every method is then a no-op
that adds nothing to the record.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from typing import Any

from catnip.controller import fidelity as fidelity_mod
from catnip.controller.skeleton import TeardownStack
from catnip.spec.scenario import Scenario
from catnip.testbed import machine_helper, machines, paths, tunnels


def session_seconds(machine) -> float:
    """How long one command over ssh takes there, the quickest of three."""
    times = []
    for _ in range(3):
        t = time.monotonic()
        machine.run(["true"])
        times.append(time.monotonic() - t)
    return min(times)


class OtherMachines:
    """The other machines of one point, from `enter` (which makes an imitated one) to teardown."""

    def __init__(self, run_id: str, index: int, sc: Scenario):
        self.run_id, self.index, self.sc = run_id, index, sc
        self.helpers: dict[str, machine_helper.MachineHelper] = {}  # label -> the point's helper there
        self.clocks: dict[str, dict] = {}  # label -> its clock offset, at start and end
        self.start: dict[str, dict | None] = {}  # label -> its machine snapshot
        self.end: dict[str, dict | None] = {}
        self.underlay_start: list | None = None  # each tunnel's underlay counters (split topologies)
        self.underlay_end: list | None = None

    def enter(self, stack: TeardownStack) -> dict:
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
                                  "session_s": session_seconds(machine)}
        return split

    @staticmethod
    def _close_helper(helper) -> None:
        for problem in helper.close():
            print(f"catnip: machine {helper.machine.name}: {problem}", file=sys.stderr)

    def clock_offsets(self) -> dict[str, float]:
        return {label: c["start"]["offset"] for label, c in self.clocks.items()}

    def keep_awake(self) -> dict:
        """Each other machine's CPUs kept awake until its helper ends: the CPUs, by machine."""
        return {label: helper.ask({"keep_awake": True}) for label, helper in self.helpers.items()}

    def remote_start_s(self, apps: list) -> float:
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

    def ask(self, labels: list[str], request: dict, key: str, marking: dict) -> list:
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

    # --- measured at the start and the end of the workload -------------------------------------
    @staticmethod
    def measure_tunnels(net) -> None:
        """Each tunnel's own round trip, before the engines emulate the links it carries: the
        fidelity record keeps it beside the emulated delays it adds to."""
        for t in net.tunnels:
            a, _ = t["routers"]
            t["rtt_before_engines"] = tunnels.tunnel_rtt(t, net.routers[a], t["link_addresses"][1])

    def snapshot_start(self, net) -> None:
        self.start = self._snapshots()
        self.underlay_start = self._underlay_counters(net)

    def snapshot_end(self, net) -> None:
        self.end = self._snapshots()
        self.underlay_end = self._underlay_counters(net)
        for label, c in self.clocks.items():
            try:
                c["end"] = c["machine"].clock_offset(python=paths.python())
            except (machines.MachineError, ValueError, OSError) as exc:  # unmeasured; the records still go in
                print(f"catnip: machine {label}'s clock not read at the end: {exc}", file=sys.stderr)

    def _snapshots(self) -> dict[str, dict | None]:
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

    @staticmethod
    def _underlay_counters(net) -> list | None:
        """Each tunnel's underlay counters now; None when another machine did not answer (the point's
        own records still go in, and its tunnels count as unmeasured)."""
        try:
            return [tunnels.underlay_counters(t, net.machines) for t in net.tunnels]
        except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
            print(f"catnip: the tunnels' underlay counters not read: {exc}", file=sys.stderr)
            return None

    # --- the fidelity record --------------------------------------------------------------------
    def fidelity(self, net) -> dict[str, Any]:
        """What the point's fidelity record holds of the other machines and the tunnels."""
        return {**self._tunnel_fidelity(net), **self._clock_fidelity(), **self._others_fidelity()}

    def _others_fidelity(self) -> dict:
        """Each other machine's busy, softirq and steal shares and backlog drops over the workload,
        as this machine's are recorded; None where a snapshot is missing (then not real time)."""
        out = {}
        for label in self.clocks:
            start, end = self.start.get(label), self.end.get(label)
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

    def _tunnel_fidelity(self, net) -> dict:
        if not net.tunnels:
            return {}
        if self.underlay_start is None or self.underlay_end is None:  # unmeasured: not real time
            return {"tunnels": net.tunnels, "tunnel_drops": None}
        measured = [{**t, "underlay_change": tunnels.counter_change(before, after)}
                    for t, before, after in zip(net.tunnels, self.underlay_start, self.underlay_end)]
        return {"tunnels": measured, "tunnel_drops": tunnels.drops(measured)}
