"""A point's plan: its resolved record (spec/record.py) laid out from a scenario, touching nothing.

Names and addresses follow from the graph (testbed/network.py's module doc): group g is
10.(g+1).0.0/16 with its router at .0.1 and host i at host_ip(net, i + 1); router link k is
172.16.0.0/12's k-th /30; a router's interfaces are numbered in the order build() adds them (one
per host group it serves, in graph order, then one per router link, in graph order). Defaults are
applied by spec.graph.resolve, the policies' and edge functions' own engine_config and
Scenario.host_tcp: nothing here invents a value, so the record is what the scenario means.

network.build() builds its link directions from this record, so the record stored with a point
is the configuration its engines were given.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from catnip.spec.graph import Graph, RouterLink, resolve
from catnip.spec.record import AppRecord, DirectionRecord, HostRecord, PointRecord, RunPlacement
from catnip.spec.scenario import Scenario
from catnip.testbed import hostconfig
from catnip.testbed.paths import PREFIX

CORE_NET = ipaddress.ip_network("172.16.0.0/12")


def host_ip(net: ipaddress.IPv4Network, index: int) -> str:
    """Index 0 is the router (.1); hosts count from 1 (.2 onwards; .0 and .255 of each /24 skipped)."""
    return str(net.network_address + (index // 254) * 256 + (index % 254) + 1)


def group_net(position: int) -> ipaddress.IPv4Network:
    """The address block of the group at this position (spec.graph.Graph.subnets)."""
    return ipaddress.ip_network(f"10.{position + 1}.0.0/16")


def core_ips(k: int) -> tuple[str, str, int]:
    """Router link k's two addresses (its a end, its b end) and prefix length."""
    base = CORE_NET.network_address + 4 * k
    return str(base + 1), str(base + 2), 30


def interfaces(graph: Graph) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Each group's interface on its router, and each router link's (a end, b end) interfaces,
    numbered per router in the order build() adds them."""
    count: dict[str, int] = {}

    def port(router: str) -> str:
        count[router] = count.get(router, -1) + 1
        return f"{PREFIX}{router}-eth{count[router]}"

    lan = {g.name: port(g.router) for g in graph.groups}
    core = [(port(link.a), port(link.b)) for link in graph.links]
    return lan, core


def _engine_policy(policy: Any, buffer: dict | None, where: str) -> dict:
    try:
        return policy.engine_config(buffer)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def core_role(link: RouterLink, direction: str) -> str:
    """`bottleneck-data` / `bottleneck-ack` (CATNIP's dumbbell: data from the servers' side, rs -> rc)."""
    return f"{link.role or 'core'}-{'data' if direction == link.data else 'ack'}"


def _directions(sc: Scenario, graph: Graph, kernel: bool) -> list[DirectionRecord]:
    default, subnets = sc.router.policy, graph.subnets()
    lan, core = interfaces(graph)
    out: list[DirectionRecord] = []
    for gi, group in enumerate(graph.groups):
        rname = PREFIX + group.router
        where = f"groups.{group.name}.link"
        for i, short in enumerate(group.host_names()):
            cls = group.delay_class(i)
            delay = cls.delay if cls else None
            ip = host_ip(group_net(gi), i + 1)
            down = resolve(group.link, group.link.down, default, delay)
            up = resolve(group.link, group.link.up, default, delay)
            out.append(DirectionRecord(
                name=f"{rname}>{PREFIX}{short}", where=f"{where}.down", role=f"access-{group.role or group.name}",
                router=group.router, host=short, hook="egress", interface=lan[group.name], rate_bps=down.rate,
                delay_s=down.delay, buffer=down.buffer, policy=_engine_policy(down.policy, down.buffer, where),
                loss=down.loss.engine_config() if down.loss else None,
                edge=[e.engine_config(subnets) for e in down.edge], match_dst=ip))
            if group.link.source_queue():
                # The sending host's own queues and scheduler (Nouredine-Tobagi 6.2): the engine serializes the
                # uplink at its rate; the host has no shaper of its own, so its backlog waits here.
                up_rate, up_buffer, host_rate = up.rate, group.link.up.buffer, None
                up_policy = _engine_policy(group.link.up.policy, up_buffer, f"{where}.up")
                role = f"source-{group.role or group.name}"
            else:
                # The host's htb serializes its uplink; the router adds its delay and edge functions.
                up_rate, up_buffer, up_policy, role = 0, None, {"kind": "droptail"}, "ingress-delay"
                host_rate = up.rate
            out.append(DirectionRecord(
                name=f"{PREFIX}{short}>{rname}", where=f"{where}.up", role=role, router=group.router, host=short,
                hook="ingress", interface=lan[group.name], rate_bps=up_rate, host_rate_bps=host_rate, delay_s=up.delay,
                buffer=up_buffer,
                policy=up_policy, loss=up.loss.engine_config() if up.loss else None,
                edge=[e.engine_config(subnets) for e in up.edge], match_src=ip))
    for k, (link, (ia, ib)) in enumerate(zip(graph.links, core)):
        for src, dst, intf, d, label in ((link.a, link.b, ia, link.forward, "forward"),
                                         (link.b, link.a, ib, link.reverse, "reverse")):
            r = resolve(link, d, default)
            where = f"links.{k} ({link.a}-{link.b}).{label}"
            out.append(DirectionRecord(
                name=f"{PREFIX}{src}>{PREFIX}{dst}", where=where, role=core_role(link, label), router=src,
                hook="egress", interface=intf, rate_bps=r.rate, delay_s=r.delay, buffer=r.buffer,
                policy=_engine_policy(r.policy, r.buffer, f"links {link.a}-{link.b} ({label})"),
                loss=r.loss.engine_config() if r.loss else None, edge=[e.engine_config(subnets) for e in r.edge],
                point_to_point=True, backend="kernel" if kernel else "engine"))
    return out


def _hosts(sc: Scenario, graph: Graph) -> list[HostRecord]:
    tcp = sc.host_tcp()
    common = hostconfig.tcp_sysctls(sc.tcp.congestion_control, sc.tcp.sack, sc.tcp.timestamps)
    out = []
    for gi, group in enumerate(graph.groups):
        for i, short in enumerate(group.host_names()):
            cls = group.delay_class(i)
            out.append(HostRecord(name=short, group=group.name, role=group.role, router=group.router,
                                  ip=host_ip(group_net(gi), i + 1), tag=cls.tag if cls else "",
                                  tcp=tcp[short].record(), sysctls={**common, **tcp[short].sysctls()}))
    return out


def _applications(sc: Scenario, graph: Graph) -> list[AppRecord]:
    def hosts(selector: str | None) -> list[str]:
        return [h for g in graph.groups_named(selector) for h in g.host_names()] if selector else []
    return [AppRecord(instance=a.instance, kind=a.kind, clients=hosts(a.clients), servers=hosts(a.servers),
                      params=a.model_dump(mode="json")) for a in sc.applications]


def plan(sc: Scenario, seed: int | None = None) -> PointRecord:
    """The record of a point of this scenario (seed: the point's own, default the scenario's)."""
    graph = sc.graph()
    topo = sc.topology
    kernel = sc.run.link_backend == "kernel"
    return PointRecord(
        seed=sc.seed if seed is None else seed,
        topology={"kind": topo.kind, "mss": topo.mss, "mtu": topo.mss + 40 if topo.mss else 1500,
                  "routers": list(graph.routers),
                  "groups": [{"name": g.name, "router": g.router, "role": g.role, "count": g.count}
                             for g in graph.groups],
                  "links": [{"a": link.a, "b": link.b, "role": link.role, "data": link.data} for link in graph.links]},
        tcp_profile=sc.tcp.profile,
        links=_directions(sc, graph, kernel),
        hosts=_hosts(sc, graph),
        applications=_applications(sc, graph),
        marking=sc.marking.model_dump(mode="json"),
        placement=RunPlacement(link_backend=sc.run.link_backend, cpus=sc.run.placement,
                               machine_of={r: label for label, m in sc.run.machines.items() for r in m.routers}))
