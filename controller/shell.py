"""`catnip shell`: a scenario's network up with its link directions in the queue engines, and
Mininet's command line on it, as `mn` gives one on its own topologies. The applications are not
started, and what a run attaches to hosts (SPM marking, the project's BPF senders) is not attached:
the shell is for looking at the network a scenario builds (`ctpc1 ping ctpv1`, tcpdump on a
router's interface, a host's shell), not for measuring."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import TextIO

from catnip.controller.skeleton import TeardownStack, kernel_resources, machine_lock, signals_cancel
from catnip.spec.scenario import Scenario
from catnip.testbed import network
from catnip.testbed.capabilities import Capabilities
from catnip.testbed.links import EngineBackend


class ShellRefused(ValueError):
    pass


def refusal(sc: Scenario) -> str | None:
    """What this shell cannot bring up for the scenario, or None."""
    if sc.run.machines:
        return "run.machines: the shell brings a network up on this machine only (docs/cluster.md)"
    if sc.run.link_backend != "engine":
        return "run.link_backend: the shell runs every link direction in the queue engine (use `engine`)"
    return None


def describe(net: network.Network) -> str:
    """The nodes by the names Mininet's commands take, and each link direction's emulation."""
    lines = ["hosts (short name -> node, address):"]
    for name, h in net.hosts.items():
        lines.append(f"  {name:>6} -> {h.name:<10} {h.ip}")
    lines.append("routers: " + ", ".join(f"{short} -> {node.name}" for short, node in net.routers.items()))
    lines.append("link directions (engine on the router named first):")
    for d in net.directions:
        rate = (f"{d.rate_bps / 1e6:g} Mbit/s" if d.rate_bps
                else f"{d.host_rate_bps / 1e6:g} Mbit/s by the host's htb" if d.host_rate_bps else "no rate limit")
        lines.append(f"  {d.name:<16} {d.role:<16} {rate}, {d.delay_s * 1000:g} ms, {d.policy['kind']}")
    return "\n".join(lines)


def interactive(sc: Scenario, caps: Capabilities, script: Path | None = None, stdin: TextIO = sys.stdin,
                out: TextIO = sys.stdout) -> None:
    """Bring the network up, run Mininet's CLI (the commands of `script`, or typed), tear it down:
    under the machine lock, and on every exit path (Ctrl-C, a closed terminal, an error)."""
    why = refusal(sc)
    if why:
        raise ShellRefused(why)
    from mininet.cli import CLI
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    Mininet.init()
    with machine_lock(), signals_cancel(), kernel_resources(sc.tcp.all_cc()), TeardownStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="catnip-shell-")))
        net = network.build(sc, caps.choose_switch(sc.topology.access_switch, sc.topology.ovs_datapath))
        stack.callback(network.stop, net)
        engines = EngineBackend(work, sc.seed, sc.run.late_threshold, sc.run.engine_spin)
        stack.callback(engines.stop)
        engines.start(list(net.routers.values()), net.directions)
        print(describe(net), file=out, flush=True)
        # After the build (network.build quiets Mininet to errors): the CLI prints its commands'
        # output at this level, and Mininet's own chatter stays out.
        setLogLevel("output")
        CLI(net.net, stdin=stdin, script=str(script) if script else None)
