"""Emulated link directions and the backends that carry them.

A `LinkDirection` is one direction of one scenario link as the point's resolved record has it
(spec.record.DirectionRecord: where it sits, the hook and interface, the addresses it matches, its
rate, one-way delay, buffer, queue policy, random loss and edge functions), placed on the Mininet
node of its router. Backends turn directions into running emulation:

* `EngineBackend`: one queue-engine process per router (testbed/engine.py) owning every direction
  of that router: NFQUEUE steering rules, serialization, delay, buffer, policy, edge functions.
  It carries every direction and every policy.
* `KernelBackend`: tc qdiscs (htb rate, pfifo/bfifo or red, netem delay) on the egress interface
  of router-to-router directions, where the kernel has those qdiscs (the Debian 12 VM does; this
  machine lacks netem and red). Access links stay on the engine (they need per-host queues on a
  shared interface); what the kernel cannot carry is refused when the scenario loads
  (spec.graph.kernel_problem), missing qdiscs before the point's network is built. Its counters
  are the leaf qdiscs' (no priority classes, no dropped bytes).

Hosts serialize their own uplinks with htb (hostconfig.shape_egress): the router's engine adds the
uplink's delay and edge functions at its ingress.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catnip.spec.record import DirectionRecord
from catnip.testbed import hostconfig
from catnip.testbed.engine import RouterEngine


@dataclass
class LinkDirection:
    """A direction of the resolved record (spec.record.DirectionRecord: every field, defined once)
    placed on the Mininet node of the router that owns it."""

    spec: DirectionRecord
    router: Any                 # Mininet node of the router owning the direction

    def __getattr__(self, name: str) -> Any:
        # The record's fields read as the direction's own (d.rate_bps, d.policy, ...): one definition.
        if name == "spec":
            raise AttributeError(name)
        return getattr(self.spec, name)


class EngineBackend:
    """Every direction a router owns, in one engine process per router."""

    name = "engine"

    def __init__(self, workdir: Path, seed: int, late_threshold_s: float, spin_s: float,
                 arrival_logs: str | None = None):
        self.workdir, self.seed, self.late_threshold_s, self.spin_s = workdir, seed, late_threshold_s, spin_s
        # A path with `{router}` in it: each engine writes its arrivals there (run.arrival_log).
        self.arrival_logs = arrival_logs
        self.engines: list[RouterEngine] = []

    def start(self, routers: list[Any], directions: list[LinkDirection]) -> None:
        for router in routers:
            mine = [d.spec for d in directions if d.router is router]
            if not mine:
                continue
            log = Path(self.arrival_logs.replace("{router}", router.name)) if self.arrival_logs else None
            engine = RouterEngine(router, mine, self.workdir, self.seed, late_threshold_s=self.late_threshold_s,
                                  spin_s=self.spin_s, arrival_log=log)
            self.engines.append(engine)
            engine.start()

    def check(self) -> None:
        for e in self.engines:
            if not e.alive():
                raise RuntimeError(f"queue engine on {e.router.name} died (exit {e.proc.returncode}); log: {e.log_path}")
            silent = e.silent_for()
            if silent > e.silence_limit():
                raise RuntimeError(f"queue engine on {e.router.name} stopped answering: no stats line for {silent:.0f} s"
                                   f" (alive but not working: stopped or stuck); log: {e.log_path}")

    def stop(self) -> None:
        for e in self.engines:
            e.stop()


class KernelBackendError(RuntimeError):
    pass


class KernelBackend:
    """Router-to-router directions as tc qdiscs; the rest on the engine (see the module doc)."""

    name = "kernel"

    def __init__(self, qdiscs: dict[str, bool], engine: EngineBackend):
        self.qdiscs, self.engine = qdiscs, engine
        self.applied: list[LinkDirection] = []

    def plan(self, direction: LinkDirection, mtu: int):
        """The tc configuration of a direction the scenario already checked the kernel can carry
        (spec.graph.kernel_problem)."""
        from catnip.testbed.tc_backend import TcLink
        policy = direction.policy["kind"]
        buf = direction.buffer or {}
        red = None
        if policy == "red":
            p = direction.policy
            red = {k: p[k] for k in ("min_th", "max_th", "w_q", "max_p", "mean_pkt_bytes")}
        return TcLink(intf=direction.interface, rate_bps=direction.rate_bps, delay_us=int(round(direction.delay_s * 1e6)),
                      buffer_packets=buf.get("packets"), buffer_bytes=buf.get("bytes"), policy=policy, red=red, mtu=mtu)

    def start(self, routers: list[Any], directions: list[LinkDirection], mtu: int) -> None:
        kernel = [d for d in directions if d.point_to_point]
        plans = [(d, self.plan(d, mtu)) for d in kernel]
        missing = sorted({q for _, tc in plans for q in tc.needed() if not self.qdiscs.get(q)})
        if missing:
            raise KernelBackendError(f"run.link_backend: kernel needs the qdiscs {', '.join(missing)}, which this"
                                     " kernel lacks (`catnip check`); use run.link_backend: engine")
        for d, tc in plans:
            for cmd in tc.commands():
                hostconfig.run(d.router, *cmd)
            self.applied.append(d)
        self.engine.start(routers, [d for d in directions if not d.point_to_point])

    def check(self) -> None:
        self.engine.check()

    def counters(self) -> dict[str, dict]:
        """Per router, its tc directions' counters in the engine's stats shape (so reports read
        them alike): the leaf qdisc counts packets and bytes sent and packets dropped, without
        priority classes (all `other`) and without the dropped bytes (0)."""
        import json
        out: dict[str, dict] = {}
        for d in self.applied:
            if not hostconfig.shell_alive(d.router):
                continue
            text = d.router.cmd(f"tc -j -s qdisc show dev {d.interface}")
            leaf = next((q for q in json.loads(text[text.find("["):] or "[]") if q.get("handle") == "10:"), {})
            sent, sent_bytes, drops = leaf.get("packets", 0), leaf.get("bytes", 0), leaf.get("drops", 0)
            final = out.setdefault(d.router.name, {"final": True, "links": {}})
            final["links"][d.name] = {"arrived": {"other": [sent + drops, sent_bytes]}, "sent": {"other": [sent, sent_bytes]},
                                      "dropped": {"other": [drops, 0]}, "max_queue_pkts": None, "max_queue_bytes": None}
        return out

    def stop(self) -> None:
        self.engine.stop()
        for d in self.applied:
            d.router.cmd(f"tc qdisc del dev {d.interface} root 2>/dev/null")
