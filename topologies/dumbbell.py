"""The dumbbell of CATNIP Fig. 3 (section IV-A), built with Mininet.

    clients --- access switch C --- routerC ===bottleneck=== routerS --- access switch S --- servers

Clients and servers sit on one access switch per side (Open vSwitch, or the Linux bridge), but
each keeps a dedicated emulated link to its router as in Fig. 3: the router's engine has one
link per host, selected by address (see docs/architecture.md, "How a link is emulated").
Addressing: clients 10.1.0.0/16, servers 10.2.0.0/16, bottleneck 10.0.0.0/30.
"""

from __future__ import annotations

import subprocess

import ipaddress
from dataclasses import dataclass, field
from functools import partial

from spec.scenario import LinkSpec, PolicySpec, Scenario
from testbed import hostconfig
from testbed.engine import EngineLink
from testbed.paths import PREFIX

CLIENT_NET = ipaddress.ip_network("10.1.0.0/16")
SERVER_NET = ipaddress.ip_network("10.2.0.0/16")
CORE_NET = ipaddress.ip_network("10.0.0.0/30")


def host_ip(net: ipaddress.IPv4Network, index: int) -> str:
    """Index 0 is the router (.1); hosts count from 1 (.2 onwards; .0 and .255 of each /24 skipped)."""
    return str(net.network_address + (index // 254) * 256 + (index % 254) + 1)


@dataclass
class Endpoint:
    """A client or server host and what the run needs to know about it."""

    name: str
    ip: str
    node: object = None
    intf: str = ""


@dataclass
class Dumbbell:
    """A built network: Mininet object, endpoints, routers and the engine plan per router."""

    net: object
    switch_kind: str
    clients: list[Endpoint]
    servers: list[Endpoint]
    router_c: object
    router_s: object
    engine_links: dict[str, list[EngineLink]] = field(default_factory=dict)
    bottleneck_intf: dict[str, str] = field(default_factory=dict)

    def server_for(self, client_index: int) -> Endpoint:
        """Each server serves its own block of clients (section IV-A: 10 clients per server)."""
        per = len(self.clients) / len(self.servers)
        return self.servers[min(int(client_index / per), len(self.servers) - 1)]

    @property
    def hosts(self) -> list[Endpoint]:
        return self.clients + self.servers

    @property
    def routers(self) -> list[object]:
        return [self.router_c, self.router_s]


def _switch_class(kind: str):
    from mininet.node import OVSSwitch
    from mininet.nodelib import LinuxBridge
    if kind == "linuxbridge":
        return LinuxBridge
    # No controller: the switch learns MAC addresses itself (standalone fail mode).
    return partial(OVSSwitch, failMode="standalone", datapath="user" if kind == "ovs-user" else "kernel")


def _mtu(scenario: Scenario) -> int:
    return scenario.topology.mss + 40 if scenario.topology.mss else 1500


def _host_links(router: str, hosts: list[Endpoint], intf: str, spec: LinkSpec, policy: PolicySpec) -> list[EngineLink]:
    links = []
    for h in hosts:
        links.append(EngineLink(name=f"{router}>{h.name}", hook="egress", interface=intf, rate_bps=spec.rate,
                                delay_s=spec.delay, buffer=spec.buffer, policy=policy.engine_config(spec.buffer),
                                match_dst=h.ip))
        links.append(EngineLink(name=f"{h.name}>{router}", hook="ingress", interface=intf, rate_bps=0,
                                delay_s=spec.delay, buffer=None, policy={"kind": "droptail"}, match_src=h.ip))
    return links


def plan_engine_links(d: Dumbbell, scenario: Scenario) -> None:
    topo = scenario.topology
    policy = scenario.router.policy
    bottleneck_policy = policy.engine_config(topo.bottleneck.buffer)
    rc, rs = d.router_c.name, d.router_s.name
    d.engine_links[rc] = [EngineLink(name=f"{rc}>{rs}", hook="egress", interface=d.bottleneck_intf[rc],
                                     rate_bps=topo.bottleneck.rate, delay_s=topo.bottleneck.delay,
                                     buffer=topo.bottleneck.buffer, policy=bottleneck_policy)]
    d.engine_links[rc] += _host_links(rc, d.clients, f"{rc}-eth0", topo.client_link, policy)
    d.engine_links[rs] = [EngineLink(name=f"{rs}>{rc}", hook="egress", interface=d.bottleneck_intf[rs],
                                     rate_bps=topo.bottleneck.rate, delay_s=topo.bottleneck.delay,
                                     buffer=topo.bottleneck.buffer, policy=bottleneck_policy)]
    d.engine_links[rs] += _host_links(rs, d.servers, f"{rs}-eth0", topo.server_link, policy)


def build(scenario: Scenario, switch_kind: str) -> Dumbbell:
    """Create and start the network; the caller must call `stop(d)` (also on failure)."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.node import Host

    # Mininet's warnings (e.g. about br_netfilter sysctls of the root namespace, which see no
    # rules of ours) would drown the progress display; its errors still show.
    setLogLevel("error")

    topo = scenario.topology
    net = Mininet(topo=None, controller=None, build=False, switch=_switch_class(switch_kind),
                  host=Host, autoSetMacs=False, waitConnected=False)
    d = Dumbbell(net=net, switch_kind=switch_kind, clients=[], servers=[], router_c=None, router_s=None)
    try:
        d.router_c = net.addHost(f"{PREFIX}rc", ip=None)
        d.router_s = net.addHost(f"{PREFIX}rs", ip=None)
        sw_c = net.addSwitch(f"{PREFIX}s1")
        sw_s = net.addSwitch(f"{PREFIX}s2")
        net.addLink(d.router_c, sw_c, intfName1=f"{PREFIX}rc-eth0")
        net.addLink(d.router_s, sw_s, intfName1=f"{PREFIX}rs-eth0")
        net.addLink(d.router_c, d.router_s, intfName1=f"{PREFIX}rc-eth1", intfName2=f"{PREFIX}rs-eth1")
        d.bottleneck_intf = {f"{PREFIX}rc": f"{PREFIX}rc-eth1", f"{PREFIX}rs": f"{PREFIX}rs-eth1"}
        for i in range(topo.clients):
            e = Endpoint(name=f"{PREFIX}c{i + 1}", ip=host_ip(CLIENT_NET, i + 1))
            e.node = net.addHost(e.name, ip=None)
            e.intf = f"{e.name}-eth0"
            net.addLink(e.node, sw_c, intfName1=e.intf)
            d.clients.append(e)
        for j in range(topo.servers):
            e = Endpoint(name=f"{PREFIX}v{j + 1}", ip=host_ip(SERVER_NET, j + 1))
            e.node = net.addHost(e.name, ip=None)
            e.intf = f"{e.name}-eth0"
            net.addLink(e.node, sw_s, intfName1=e.intf)
            d.servers.append(e)
        net.build()
        net.start()
        _configure(d, scenario)
        plan_engine_links(d, scenario)
    except BaseException:
        stop(d)
        raise
    return d


def _configure(d: Dumbbell, scenario: Scenario) -> None:
    topo, tcp = scenario.topology, scenario.tcp
    mtu = _mtu(scenario)
    rc, rs = d.router_c, d.router_s
    run = hostconfig.run
    # Switch-side veth ends live in the root namespace; they carry our prefix.
    for sw in d.net.switches:
        for intf in sw.intfList():
            if intf.name != "lo" and intf.name.startswith(PREFIX):
                hostconfig.disable_offloads(sw, intf.name)
                if topo.mss:
                    hostconfig.set_mtu(sw, intf.name, mtu)
                    if d.switch_kind.startswith("ovs"):
                        sw.cmd(f"ovs-vsctl set interface {intf.name} mtu_request={mtu}")
    gw_c, gw_s = host_ip(CLIENT_NET, 0), host_ip(SERVER_NET, 0)
    core_c, core_s = str(CORE_NET.network_address + 1), str(CORE_NET.network_address + 2)
    for router, lan_ip, lan_len, core_ip, peer, far_net in (
            (rc, gw_c, CLIENT_NET.prefixlen, core_c, core_s, SERVER_NET),
            (rs, gw_s, SERVER_NET.prefixlen, core_s, core_c, CLIENT_NET)):
        run(router, "ip", "addr", "add", f"{lan_ip}/{lan_len}", "dev", f"{router.name}-eth0")
        run(router, "ip", "addr", "add", f"{core_ip}/{CORE_NET.prefixlen}", "dev", f"{router.name}-eth1")
        for intf in (f"{router.name}-eth0", f"{router.name}-eth1"):
            hostconfig.disable_offloads(router, intf)
            if topo.mss:
                hostconfig.set_mtu(router, intf, mtu)
            run(router, "ip", "link", "set", intf, "up")
        run(router, "ip", "route", "add", str(far_net), "via", peer)
        hostconfig.set_sysctls(router, {"net.ipv4.ip_forward": 1, "net.ipv4.conf.all.rp_filter": 0,
                                        "net.ipv4.conf.default.rp_filter": 0})
    sysctls = hostconfig.tcp_sysctls(tcp.congestion_control, tcp.sack, tcp.timestamps)
    for group, net_, gw, spec in ((d.clients, CLIENT_NET, gw_c, topo.client_link),
                                  (d.servers, SERVER_NET, gw_s, topo.server_link)):
        for e in group:
            node = e.node
            run(node, "ip", "addr", "add", f"{e.ip}/{net_.prefixlen}", "dev", e.intf)
            hostconfig.disable_offloads(node, e.intf)
            if topo.mss:
                hostconfig.set_mtu(node, e.intf, mtu)
            run(node, "ip", "link", "set", e.intf, "up")
            route = ["ip", "route", "add", "default", "via", gw]
            if tcp.initial_cwnd:
                route += ["initcwnd", tcp.initial_cwnd]
            run(node, *route)
            hostconfig.set_sysctls(node, sysctls)
            hostconfig.shape_egress(node, e.intf, spec.rate, mtu)


def stop(d: Dumbbell) -> None:
    """Tear the network down; safe to call on a half-built network."""
    try:
        d.net.stop()
    except Exception:  # noqa: BLE001 - cleanup continues; `catnip clean` catches the rest
        pass
    # A run cancelled while Mininet was starting the switches can leave a Linux bridge that
    # net.stop() did not take down (seen: Ctrl-C in "building network"); ours carry our prefix.
    for sw in d.net.switches:
        subprocess.run(["ip", "link", "del", sw.name], capture_output=True, timeout=10)
