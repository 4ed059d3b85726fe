"""Builds the Mininet network of any topology graph (spec/graph.py) and plans its emulated link
directions (testbed/links.py).

Layout: every router is a Mininet host with IP forwarding; every host group has its own access
switch (Open vSwitch, or the Linux bridge) on its router, and every host keeps a dedicated
emulated access link to that router: the router's engine has one direction per host, selected
by address (docs/architecture.md, "How a link is emulated"). Router links are direct veth pairs.

Addressing: group g (in graph order) is 10.(g+1).0.0/16 with its router at .0.1 (CATNIP's
dumbbell keeps clients 10.1/16 and servers 10.2/16); router link k is 172.16.0.0/12's k-th /30.
Routing follows the graph: each router reaches every other group's block through the neighbour
on a path with the fewest hops (Graph.next_hops); hosts route everything through their router.
Names: 'ctp' + the graph's name for every node; a router's interfaces are NAME-ethN.

TCP: every host gets the scenario's `tcp` sysctls, overridden per host by Scenario.host_tcp (its
group's `tcp.groups` entry, a web server's `server_congestion_control` entry): congestion
control, slow start after idle, pacing ratios, the default route's initcwnd and rto_min, fq for `pacing: fq`.
The project senders' per-host parameters (a kernel-wide BPF map) are set by controller/point.py,
which clears them again.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from catnip.spec.graph import Graph, RouterLink
from catnip.spec.record import PointRecord
from catnip.spec.scenario import HostTcp, Scenario
from catnip.testbed import hostconfig
from catnip.testbed.links import LinkDirection
from catnip.testbed.plan import core_ips, group_net, host_ip, interfaces, plan
from catnip.testbed.machines import THIS, Machine
from catnip.testbed.paths import PREFIX
from catnip.workloads.apps.base import Host

@dataclass
class Network:
    """A built network: the Mininet object, hosts by name, routers, the link directions."""

    net: Any
    switch_kind: str
    graph: Graph
    hosts: dict[str, Host] = field(default_factory=dict)       # by short name (c1)
    routers: dict[str, Any] = field(default_factory=dict)      # short name -> Mininet node
    subnets: dict[str, str] = field(default_factory=dict)      # group -> address block
    directions: list[LinkDirection] = field(default_factory=list)
    mtu: int = 1500
    tcp: dict[str, HostTcp] = field(default_factory=dict)     # short name -> its TCP settings, as applied
    machine_of: dict[str, str] = field(default_factory=dict)  # router -> the machine it runs on (split only)
    tunnels: list[dict] = field(default_factory=list)         # links between machines (testbed/remote.py)
    machines: dict[str, Machine] = field(default_factory=dict)  # by name, this one included (split only)
    record: PointRecord | None = None  # what it was built from (testbed/plan.py): its link directions

    def hosts_of(self, name: str) -> list[Host]:
        """The hosts of a group, or of every group with that role, in graph order."""
        groups = {g.name for g in self.graph.groups_named(name)}
        return [h for h in self.hosts.values() if h.group in groups]

    def directions_with_role(self, prefix: str) -> list[LinkDirection]:
        return [d for d in self.directions if d.role.startswith(prefix)]

def _switch_class(kind: str):
    from mininet.node import OVSSwitch
    from mininet.nodelib import LinuxBridge
    if kind == "linuxbridge":
        return LinuxBridge
    # No controller: the switch learns MAC addresses itself (standalone fail mode).
    return partial(OVSSwitch, failMode="standalone", datapath="user" if kind == "ovs-user" else "kernel")


def _check_split(graph: Graph, split: dict[str, Machine], switch_kind: str) -> None:
    for router, machine in split.items():
        if router not in graph.routers:
            raise ValueError(f"split: {router!r} is not a router of this topology (routers: {', '.join(graph.routers)})")
        if machine.local:
            raise ValueError(f"split: router {router} on machine {machine.name}: give a machine reached by ssh")
        if machine.underlay is None:
            raise ValueError(f"split: machine {machine.name} has no underlay address for the tunnels")
    if split and switch_kind != "linuxbridge":
        # An Open vSwitch daemon serves one machine's switches; an imitated machine shares this one's.
        raise ValueError(f"split: the access switches of another machine are Linux bridges; {switch_kind} was asked")


def _check_tunnel_speed(tunnel: dict, link: RouterLink, rate: int) -> None:
    """A tunnel carries the emulated link: an underlay slower than the link's rate (the faster of
    its directions, as the record has them) would decide the rate itself, unseen. Checked where the
    underlay's driver gives a nominal speed."""
    for end in tunnel["ends"]:
        speed = end.get("underlay_speed_mbps")
        if speed is not None and rate > speed * 1e6:
            raise ValueError(f"links {link.a}-{link.b}: its {rate / 1e6:g} Mbit/s would cross machine {end['machine']}'s"
                             f" underlay {end['underlay_device']} of {speed} Mbit/s: the underlay would set the rate")


def build(scenario: Scenario, switch_kind: str, split: dict[str, Machine] | None = None,
          record: PointRecord | None = None) -> Network:
    """Create and start the network; the caller must call `stop(n)` (also on failure). Its link
    directions are the record's (testbed/plan.py; planned here when none is given).

    `split` places routers on other machines (router -> Machine): each goes with its groups' switch
    and hosts; a router link between machines is a VXLAN tunnel over the machines' underlays."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.node import Host as MnHost

    # Mininet's warnings (e.g. about br_netfilter sysctls of the root namespace, which see no
    # rules of ours) would drown the progress display; its errors still show.
    setLogLevel("error")
    graph = scenario.graph()
    split = dict(split or {})
    _check_split(graph, split, switch_kind)
    net = Mininet(topo=None, controller=None, build=False, switch=_switch_class(switch_kind), host=MnHost,
                  autoSetMacs=False, waitConnected=False)
    record = record or plan(scenario)
    n = Network(net=net, switch_kind=switch_kind, graph=graph, mtu=record.topology["mtu"], record=record)
    lan, core_intf = interfaces(graph)  # each router's interfaces, named as the record names them
    try:
        if split:  # Mininet Cluster Edition's classes, only where a run asks for them
            from catnip.testbed import remote
        def on(router: str, switch: bool = False) -> dict:
            """Mininet parameters of a node that goes with `router`: nothing where it is on this machine."""
            if router not in split:
                return {}
            n.machine_of[router] = split[router].name
            n.machines.setdefault(split[router].name, split[router])
            n.machines.setdefault(THIS.name, THIS)
            return {"cls": remote.RemoteLinuxBridge if switch else remote.RemoteHost, "machine": split[router]}

        link_cls = {"cls": remote.VxlanLink} if split else {}  # a veth pair within a machine, as Link's
        for r in graph.routers:
            n.routers[r] = net.addHost(PREFIX + r, ip=None, **on(r))
        for gi, group in enumerate(graph.groups):
            sw = net.addSwitch(f"{PREFIX}s{gi + 1}", **on(group.router, switch=True))
            net.addLink(n.routers[group.router], sw, intfName1=lan[group.name], **link_cls)
            n.subnets[group.name] = graph.subnets()[group.name]
            for i, short in enumerate(group.host_names()):
                cls = group.delay_class(i)
                node = net.addHost(PREFIX + short, ip=None, **on(group.router))
                net.addLink(node, sw, intfName1=f"{PREFIX}{short}-eth0", **link_cls)
                n.hosts[short] = Host(name=PREFIX + short, ip=host_ip(group_net(gi), i + 1), group=group.name,
                                      index=i, tag=cls.tag if cls else "", node=node)
        for k, (link, (ia, ib)) in enumerate(zip(graph.links, core_intf)):
            ends = {PREFIX + r: split.get(r, THIS) for r in (link.a, link.b)}
            tunnel = {"vni": k + 1, "machines": ends, "mtu": n.mtu} if split else {}  # the VNI names the link
            made = net.addLink(n.routers[link.a], n.routers[link.b], intfName1=ia, intfName2=ib, **link_cls, **tunnel)
            if getattr(made, "tunnel_record", None):
                rate = max(d.rate_bps for d in record.links if d.where.startswith(f"links.{k} ("))
                _check_tunnel_speed(made.tunnel_record, link, rate)
                n.tunnels.append({"link": f"{PREFIX}{link.a}-{PREFIX}{link.b}", "routers": [link.a, link.b],
                                  "link_addresses": list(core_ips(k)[:2]), **made.tunnel_record})
        net.build()
        net.start()
        _configure(n, scenario, lan, core_intf)
        n.directions = [LinkDirection(spec=d, router=n.routers[d.router]) for d in record.links]
    except BaseException:
        stop(n)
        raise
    return n


def _configure(n: Network, scenario: Scenario, lan: dict[str, str], core_intf: list[tuple[str, str]]) -> None:
    topo, graph = scenario.topology, n.graph
    run = hostconfig.run
    # Switch-side veth ends live in the root namespace; they carry our prefix.
    for sw in n.net.switches:
        for intf in sw.intfList():
            if intf.name != "lo" and intf.name.startswith(PREFIX):
                hostconfig.disable_offloads(sw, intf.name)
                if topo.mss:
                    hostconfig.set_mtu(sw, intf.name, n.mtu)
                    if n.switch_kind.startswith("ovs"):
                        sw.cmd(f"ovs-vsctl set interface {intf.name} mtu_request={n.mtu}")
    addr: dict[str, str] = {}  # router -> its address on each link, by neighbour: "a>b" -> ip of b
    for k, (link, (ia, ib)) in enumerate(zip(graph.links, core_intf)):
        ip_a, ip_b, plen = core_ips(k)
        run(n.routers[link.a], "ip", "addr", "add", f"{ip_a}/{plen}", "dev", ia)
        run(n.routers[link.b], "ip", "addr", "add", f"{ip_b}/{plen}", "dev", ib)
        addr[f"{link.a}>{link.b}"], addr[f"{link.b}>{link.a}"] = ip_b, ip_a
    for gi, group in enumerate(graph.groups):
        net = group_net(gi)
        run(n.routers[group.router], "ip", "addr", "add", f"{host_ip(net, 0)}/{net.prefixlen}", "dev", lan[group.name])
    for name, router in n.routers.items():
        for intf in router.intfList():
            if intf.name == "lo":
                continue
            hostconfig.disable_offloads(router, intf.name)
            if topo.mss:
                hostconfig.set_mtu(router, intf.name, n.mtu)
            run(router, "ip", "link", "set", intf.name, "up")
        hostconfig.set_sysctls(router, {"net.ipv4.ip_forward": 1, "net.ipv4.conf.all.rp_filter": 0,
                                        "net.ipv4.conf.default.rp_filter": 0})
        hops = graph.next_hops(name)
        for gi, group in enumerate(graph.groups):
            if group.router != name:
                run(router, "ip", "route", "add", str(group_net(gi)), "via", addr[f"{name}>{hops[group.router]}"])
    n.tcp = scenario.host_tcp()
    hosts = {h.name: h for h in n.record.hosts}
    uplinks = {d.host: d for d in n.record.links if d.host and d.hook == "ingress"}  # each host's, as planned
    for gi, group in enumerate(graph.groups):
        net = group_net(gi)
        for short in group.host_names():
            h = n.hosts[short]
            intf = f"{h.name}-eth0"
            run(h.node, "ip", "addr", "add", f"{h.ip}/{net.prefixlen}", "dev", intf)
            hostconfig.disable_offloads(h.node, intf)
            if topo.mss:
                hostconfig.set_mtu(h.node, intf, n.mtu)
            run(h.node, "ip", "link", "set", intf, "up")
            settings = n.tcp[short]  # the `tcp` defaults with the host's group's and web server's own
            run(h.node, "ip", "route", "add", "default", "via", host_ip(net, 0), *settings.route_options())
            hostconfig.set_sysctls(h.node, hosts[short].sysctls)  # the record's: the common ones and its own
            if uplinks[short].host_rate_bps:  # else the engine serializes it, the host's queues in the scheduler
                hostconfig.shape_egress(h.node, intf, uplinks[short].host_rate_bps, n.mtu)
            if settings.pacing == "fq":  # the machine has fq: checked before the run (controller/runner.py)
                hostconfig.pace_with_fq(h.node, intf)


def stop(n: Network) -> None:
    """Tear the network down; safe to call on a half-built network."""
    # A node whose shell was killed (by someone's cleanup) would make Mininet's stop wait forever on
    # it: a dead switch's bridge is removed below all the same; a link with a dead end is deleted
    # from its live end (a veth pair goes with either end), or goes with the dead node's namespace.
    dead = [sw for sw in n.net.switches if not hostconfig.shell_alive(sw)]
    n.net.switches = [sw for sw in n.net.switches if sw not in dead]
    gone = {id(node) for node in n.net.hosts if not hostconfig.shell_alive(node)}
    for link in [link for link in n.net.links if {id(link.intf1.node), id(link.intf2.node)} & gone]:
        n.net.links.remove(link)
        for intf in (link.intf1, link.intf2):
            if id(intf.node) not in gone and hostconfig.shell_alive(intf.node):
                intf.delete()
                break
    try:
        n.net.stop()
    except Exception:  # noqa: BLE001 - cleanup continues; `catnip clean` catches the rest
        pass
    n.net.switches += dead
    # A run cancelled while Mininet was starting the switches can leave a Linux bridge that
    # net.stop() did not take down (seen: Ctrl-C in "building network"); ours carry our prefix.
    for sw in n.net.switches:
        machine = getattr(sw, "machine", THIS)  # a bridge of another machine is removed there
        try:
            subprocess.run(machine.argv(["ip", "link", "del", sw.name]), capture_output=True, timeout=10,
                           stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            continue  # that machine does not answer; the other bridges still go



