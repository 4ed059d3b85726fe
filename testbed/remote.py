"""Mininet nodes on another machine and the links between machines, built on Mininet Cluster
Edition (`mininet/examples/cluster.py`, shipped with Debian's mininet; docs/cluster.md says why it
and not MaxiNet).

Cluster Edition's `RemoteMixin` runs a node's shell and processes through ssh; `RemoteLink` joins
nodes of one machine with a veth pair and nodes of two machines with a tunnel. Three things differ
here, each for a reason of this testbed:
- ssh is a `Machine`'s (testbed/machines.py): root on both ends, so no `sudo` (Cluster Edition puts
  `sudo -E` before every command, and Debian 12 has no sudo unless asked); each argument quoted
  (Cluster Edition joins them unquoted, which breaks `sh -c SCRIPT`); ssh's input closed unless the
  caller gives one, so it never reads the runner's terminal.
- The tunnel is VXLAN (`VxlanLink`), not GRE or `ssh -w`: this kernel has no GRE and loads no
  modules, and `ssh -w` carries Ethernet over TCP in user space (retransmissions and copies inside
  an emulated link). A VXLAN device keeps its UDP socket in the namespace it was made in, so it is
  made in each machine's own namespace, on its underlay, and moved into the node.
- The underlay must carry a node's whole frame plus VXLAN's 50 bytes: checked, never an MTU lowered
  in silence (Cluster Edition's GRE link sets 1450 on every link).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Any

from mininet.examples.cluster import RemoteLink, RemoteMixin
from mininet.node import Host
from mininet.nodelib import LinuxBridge

from catnip.testbed.machines import Machine, MachineError

VXLAN_PORT = 4789  # IANA's VXLAN port
VXLAN_OVERHEAD = 50  # inner Ethernet 14, outer IPv4 20, UDP 8, VXLAN 8


class OverSsh(RemoteMixin):
    """A node whose shell and processes run on `machine`, through its ssh."""

    def __init__(self, name: str, machine: Machine, **params: Any) -> None:
        if machine.local:
            raise ValueError(f"{name}: a remote node needs a machine reached by ssh, not this one")
        self.machine = machine
        super().__init__(name, server=machine.address, user="root", serverIP=machine.address, **params)

    def popen(self, *args, **kwargs):
        # `mnexec -d` forks when its caller leads its process group, as the command of an ssh session
        # does: the ssh client here would end at once with status 0 while the program ran on. With
        # `-a` alone the program is the session's, so its ssh client ends with it and says its status.
        kwargs.setdefault("mncmd", ["mnexec", "-a", str(self.pid)])
        return super().popen(*args, **kwargs)

    def _popen(self, cmd, sudo: bool = True, tt: bool = True, **params):  # noqa: ARG002 (no sudo: root)
        if isinstance(cmd, str):
            cmd = cmd.split()
        if params.pop("preexec_fn", None) is not None:
            raise ValueError(f"{self.name}: a process on machine {self.machine.name} cannot run a local preexec_fn")
        cwd = params.pop("cwd", None)
        if cwd is not None:  # Popen's cwd would apply to the local ssh client
            cmd = ["sh", "-c", 'cd "$0" && exec "$@"', str(cwd), *cmd]
        params.setdefault("stdin", subprocess.DEVNULL)
        # Insulated from the runner's Ctrl-C like a local node's shell; the network's stop ends it
        # with SIGHUP, which ssh leaves ignored if it starts ignored (a runner under nohup): the
        # default is restored, or the stop waits for a client that never ends.
        return subprocess.Popen(self.machine.argv(list(cmd), tty=tt), preexec_fn=_own_group_hup_default, **params)


def _own_group_hup_default() -> None:
    os.setpgrp()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class RemoteHost(OverSsh, Host):
    """A host (or a router: a host that forwards) on another machine."""


class RemoteLinuxBridge(OverSsh, LinuxBridge):
    """A Linux bridge in another machine's own namespace (Open vSwitch serves only the namespace its
    daemon runs in, which on an imitated machine is this machine's)."""


class VxlanLink(RemoteLink):
    """A veth pair between nodes of one machine; between two machines, a VXLAN device on each
    machine's underlay, moved into its node. `vni` names the tunnel (one per link of a run);
    `machines` gives the machine of each node by name (this one: machines.THIS); `mtu` is the frame
    size the nodes use."""

    def __init__(self, node1, node2, vni: int = 1, machines: dict[str, Machine] | None = None,
                 mtu: int = 1500, **kwargs: Any) -> None:
        self.vni, self.machines, self.mtu = vni, dict(machines or {}), mtu
        self.tunnel_record: dict | None = None
        super().__init__(node1, node2, **kwargs)

    def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None):  # noqa: N802 (Mininet's)
        missing = [n.name for n in (node1, node2) if n.name not in self.machines]
        if missing:
            raise MachineError(f"link {node1.name}-{node2.name}: no machine given for {', '.join(missing)}")
        m1, m2 = self.machines[node1.name], self.machines[node2.name]
        a1, a2 = _addresses(m1, m2)
        record = {"vni": self.vni, "port": VXLAN_PORT, "overhead": VXLAN_OVERHEAD, "ends": []}
        for node, intf, addr, machine, local, remote in ((node1, intfname1, addr1, m1, a1, a2),
                                                         (node2, intfname2, addr2, m2, a2, a1)):
            underlay_dev, underlay_mtu, speed = _underlay(machine, remote)
            if underlay_mtu - VXLAN_OVERHEAD < self.mtu:
                raise MachineError(
                    f"link {node1.name}-{node2.name}: machine {machine.name}'s underlay {underlay_dev} has MTU"
                    f" {underlay_mtu}, which carries {underlay_mtu - VXLAN_OVERHEAD}-byte frames through VXLAN, not"
                    f" the {self.mtu} the nodes use: raise the underlay's MTU to {self.mtu + VXLAN_OVERHEAD} or set"
                    f" topology.mss to at most {underlay_mtu - VXLAN_OVERHEAD - 40}")
            machine.run(["ip", "link", "add", intf, *(["address", addr] if addr else []), "type", "vxlan",
                         "id", str(self.vni), "local", local, "remote", remote, "dstport", str(VXLAN_PORT),
                         "nolearning"])
            try:
                machine.run(["ip", "link", "set", intf, "netns", str(node.pid)])
            except MachineError:
                machine.run(["ip", "link", "del", intf])
                raise
            record["ends"].append({"node": node.name, "machine": machine.name, "device": intf, "local": local,
                                   "remote": remote, "underlay_device": underlay_dev, "underlay_mtu": underlay_mtu,
                                   "underlay_speed_mbps": speed})
        self.tunnel_record = record
        return record

    def stop(self) -> None:
        if self.tunnel_record is not None:
            for intf in (self.intf1, self.intf2):
                if intf is not None:
                    intf.delete()
            self.tunnel_record = None
        else:
            super().stop()


def _addresses(m1: Machine, m2: Machine) -> tuple[str, str]:
    """Each machine's own address toward the other: a machine reached by ssh is reached at its
    `underlay`; this one at the source address its route toward that machine takes."""
    if m1.local or m2.local:
        here, there = (m1, m2) if m1.local else (m2, m1)
        mine = _route(here, there.underlay)["prefsrc"]
        return (mine, there.underlay) if m1.local else (there.underlay, mine)
    _route(m1, m2.underlay)  # two other machines: each must reach the other
    _route(m2, m1.underlay)
    return m1.underlay, m2.underlay


def _route(machine: Machine, to: str) -> dict:
    try:
        route = json.loads(machine.run(["ip", "-j", "route", "get", to]))[0]
    except (MachineError, ValueError, IndexError) as exc:
        raise MachineError(f"machine {machine.name}: no route to {to} for a tunnel: {exc}") from None
    if "prefsrc" not in route:
        raise MachineError(f"machine {machine.name}: its route to {to} has no source address for a tunnel: {route}")
    return route


def _underlay(machine: Machine, remote: str) -> tuple[str, int, int | None]:
    """The device `machine` reaches `remote` through, its MTU and its nominal speed in Mbit/s
    (None where the driver gives none)."""
    try:
        route = json.loads(machine.run(["ip", "-j", "route", "get", remote]))[0]
        link = json.loads(machine.run(["ip", "-j", "link", "show", "dev", route["dev"]]))[0]
    except (MachineError, ValueError, KeyError, IndexError) as exc:
        raise MachineError(f"machine {machine.name}: no underlay route to {remote}: {exc}") from None
    try:
        speed = int(machine.run(["cat", f"/sys/class/net/{route['dev']}/speed"]).strip())
    except (MachineError, ValueError):
        speed = None
    return route["dev"], int(link["mtu"]), speed if speed and speed > 0 else None

