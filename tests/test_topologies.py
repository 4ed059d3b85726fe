"""Topologies as data: the library expands into graphs, routing follows the graph, and bad input
gets one line naming the field before anything starts. Pure: no root needed."""

from __future__ import annotations

import pytest

from catnip.spec import scenario as s
from catnip.testbed.paths import REPO

QUICK = REPO / "scenarios" / "quick.yaml"
LINK = {"rate": "10Mbit", "delay": "1ms", "buffer": "10p"}


def graph_scenario(**topology) -> dict:
    return {"name": "g", "topology": {"kind": "graph", **topology},
            "applications": [{"kind": "bulk", "clients": "a", "servers": "b", "duration": "5s"}]}


def two_groups(**extra) -> dict:
    return dict(routers=["r1", "r2"], groups=[
        {"name": "a", "count": 2, "router": "r1", "prefix": "a", "link": LINK},
        {"name": "b", "count": 2, "router": "r2", "prefix": "b", "link": LINK}],
        links=[{"a": "r1", "b": "r2", **LINK}], **extra)


def error(raw: dict) -> str:
    with pytest.raises(s.ScenarioError) as exc:
        s.validate(raw)
    return str(exc.value)


def test_catnip_dumbbell_keeps_its_names_and_addresses():
    sc = s.load(QUICK).points[0][1]
    g = sc.graph()
    assert g.routers == ["rc", "rs"]
    assert [(x.name, x.count, x.router, x.host_names()[0]) for x in g.groups] == [
        ("clients", 10, "rc", "c1"), ("servers", 1, "rs", "v1")]
    assert g.links[0].data == "reverse"  # data flows from the servers' side
    assert sc.workload.parallel == 4 and sc.applications[0].clients == "clients"


def test_tree_expands_with_rtt_classes_and_routes_by_fewest_hops():
    sc = s.load(REPO / "scenarios" / "tree-small.yaml").points[0][1]
    t, g = sc.topology, sc.graph()
    assert sum(x.count for x in g.groups) == 32 and len(g.routers) == 14
    # pair i (source s_i, destination d_i) has RTT class i mod 3 on both sides
    src = [x for x in g.groups if x.role == "sources"]
    tags = [x.delay_class(i).tag for x in src for i in range(x.count)]
    assert tags[:4] == ["rtt20ms", "rtt80ms", "rtt200ms", "rtt20ms"] and tags[4] == "rtt80ms"
    # RTT = 2 (2 user + 2 l1 + 2 l2 + bottleneck) one-way delays
    d = src[0].delay_class(0).delay
    assert 2 * (2 * d + 2 * t.l1_link.delay + 2 * t.l2_link.delay + t.bottleneck.delay) == pytest.approx(0.020)
    hops = g.next_hops("se1")
    assert hops["de4"] == "sm1" and hops["se2"] == "sm1" and hops["dm2"] == "sm1"
    assert g.next_hops("sm2")["se1"] == "sa"  # up to the core and down the other branch
    # destination i has the RTT class of source i
    dst = [x for x in g.groups if x.role == "destinations"]
    assert [x.delay_class(i).tag for x in dst for i in range(x.count)] == tags


def test_tree_labels_the_data_direction_on_both_sides():
    sc = s.load(REPO / "scenarios" / "tree-small.yaml").points[0][1]  # data_from: destinations
    down = {(lk.a, lk.b): lk.data for lk in sc.graph().links}
    assert down[("se1", "sm1")] == "reverse" and down[("sm1", "sa")] == "reverse"  # data comes down to sources
    assert down[("de1", "dm1")] == "forward" and down[("sa", "da")] == "reverse"   # and goes up from destinations
    sc = s.load(REPO / "scenarios" / "tree-small.yaml", ["topology.data_from=sources"]).points[0][1]
    assert {lk.data for lk in sc.graph().links if lk.a.startswith("s")} == {"forward"}


def test_a_direction_delay_cannot_override_delay_classes():
    with pytest.raises(s.ScenarioError, match=r"link.down.delay: the group's delay_classes set its hosts' access delays"):
        s.load(REPO / "scenarios" / "tree-small.yaml", ["topology.user_link.down={delay: 5ms}"])


def test_more_groups_than_addresses_are_refused():
    groups = [{"name": f"g{i}", "count": 1, "router": "r1", "prefix": "h", "first": i + 1, "link": LINK}
              for i in range(255)]
    raw = graph_scenario(routers=["r1"], groups=groups)
    raw["applications"] = [{"kind": "bulk", "clients": "g0", "servers": "g1", "duration": "5s"}]
    assert "groups: 255 host groups; at most 254" in error(raw)


def test_planned_work_must_fit_the_time_limit():
    raw = graph_scenario(**two_groups())
    raw["applications"][0]["duration"] = "10min"
    s.validate(raw)  # 600 s fit the default 900 s
    raw["run"] = {"time_limit": "2min"}
    assert error(raw) == "applications.0.duration: the planned 600 s do not fit in run.time_limit (120 s)"


def test_kernel_backend_refuses_byte_red_thresholds():
    raw = graph_scenario(**two_groups())
    raw["run"] = {"link_backend": "kernel"}
    raw["topology"]["links"][0]["policy"] = {"kind": "red", "min_th": "5KB", "max_th": "9KB", "w_q": 0.002}
    assert "kernel red takes thresholds in packets or shares, not sizes" in error(raw)
    raw["topology"]["links"][0]["policy"] = {"kind": "red", "min_th": 2, "max_th": 6, "w_q": 0.002}
    raw["topology"]["links"][0]["buffer"] = "10KB"
    sc = s.validate(raw)
    assert sc.kernel_qdiscs() == {"htb", "red", "netem"}


def test_kernel_red_limit_is_the_byte_buffer():
    from catnip.testbed.tc_backend import TcLink
    red = {"min_th": 5, "max_th": 15, "w_q": 0.002, "max_p": 0.1, "mean_pkt_bytes": 1000}
    leaf = TcLink("x", 10**6, 0, None, 65536, "red", red).commands()[2]
    assert leaf[leaf.index("limit") + 1] == "65536"
    leaf = TcLink("x", 10**6, 0, 20, None, "red", red).commands()[2]
    assert leaf[leaf.index("limit") + 1] == "20000"


@pytest.mark.parametrize("change, message", [
    (dict(links=[]), "the graph is not connected: no path from r1 to r2"),
    (dict(links=[{"a": "r1", "b": "r9", **LINK}]), "links.0: unknown router 'r9'"),
    (dict(links=[{"a": "r1", "b": "r1", **LINK}]), "links.0: a link joins two different routers"),
    (dict(routers=["r1", "r2", "r3"]), "the graph is not connected: no path from r1 to r3"),
    (dict(routers=["r1", "R2"]), "router name 'R2'"),
    (dict(links=[{"a": "r1", "b": "r2", **LINK, "rate": "0.4bit"}]), "'0.4bit' rounds to 0 bit/s"),
    (dict(links=[{"a": "r1", "b": "r2", **LINK, "delay": float("inf")}]), "inf is not a finite duration"),
    (dict(links=[{"a": "r1", "b": "r2", **LINK, "delay": "20s"}]), "one-way delay above 10 s"),
    (dict(links=[{"a": "r1", "b": "r2", **LINK, "rate": "500Gbit"}]), "above 100Gbit"),
])
def test_graph_errors_name_the_field(change, message):
    raw = two_groups()
    raw.update(change)
    assert message in error(graph_scenario(**raw))


def test_group_errors_name_the_group():
    raw = two_groups()
    raw["groups"][1] = {**raw["groups"][1], "router": "r7"}
    assert "groups.b.router: unknown router 'r7'" in error(graph_scenario(**raw))
    raw = two_groups()
    raw["groups"][1] = {**raw["groups"][1], "prefix": "a"}
    assert "host name 'a1' also used by group a" in error(graph_scenario(**raw))


def test_application_on_an_unknown_group_is_refused():
    raw = graph_scenario(**two_groups())
    raw["applications"][0]["servers"] = "nowhere"
    assert "applications.0.servers: no host group or role 'nowhere' in the topology (it has: a, b)" in error(raw)
    raw["applications"][0] = {"kind": "teleport", "clients": "a"}
    assert "applications.0: application kind 'teleport' not allowed:" in error(raw)


def test_marker_rules_must_name_existing_groups():
    from catnip.spec.edge import Mark
    mark = Mark(rules=[{"src": "ghosts", "dscp": "AF11"}])
    with pytest.raises(ValueError, match="names host group 'ghosts', which the topology does not have"):
        mark.engine_config({"a": "10.1.0.0/16"})
    assert mark.model_copy().rules[0].dscp == 10
    with pytest.raises(ValueError, match="not a DSCP"):
        Mark(rules=[{"dscp": "AF99"}])


def test_up_direction_has_no_queue_of_its_own():
    raw = two_groups()
    raw["groups"][0] = {**raw["groups"][0], "link": {**LINK, "up": {"buffer": "5p"}}}
    assert "up: buffer and policy do not apply" in error(graph_scenario(**raw))


def test_workload_and_applications_are_exclusive():
    raw = {"name": "x", "topology": {"clients": 1, "servers": 1, "client_link": LINK, "server_link": LINK,
                                     "bottleneck": LINK}, "workload": {}, "applications": []}
    assert "workload and applications: give one" in error(raw)


def test_byte_thresholds_reach_the_engine_in_bytes():
    from catnip.spec.policy import Rio
    rio = Rio(w_q=0.002, levels=[{"min_th": "50KB", "max_th": "490KB", "max_p": 0.005},
                                 {"min_th": "10KB", "max_th": "200KB", "max_p": 0.25}])
    block = rio.engine_config({"bytes": 500 * 1024})
    assert block["levels"][0]["min_th"] == {"bytes": 51200} and block["levels"][1]["max_th"] == {"bytes": 204800}
    with pytest.raises(ValueError, match="every level's thresholds must be sizes, or none"):
        Rio(w_q=0.002, levels=[{"min_th": "50KB", "max_th": "490KB"}, {"min_th": 1, "max_th": 5}])


def test_byte_rates_are_read_as_bytes():
    from catnip.spec.units import parse_rate
    assert parse_rate("10MB/s") == 80_000_000 and parse_rate("10Mb/s") == 10_000_000
    assert parse_rate("100KBps") == 800_000 and parse_rate("1.5Mbit") == 1_500_000


def test_link_problems_are_found_before_anything_starts():
    raw = graph_scenario(**two_groups())
    raw["topology"]["links"][0]["policy"] = {"kind": "wrr", "weights": [1, 99]}
    assert error(raw).startswith("topology.links.0 (r1-r2).forward: wrr: queue 0's share of the buffer")
    raw = graph_scenario(**two_groups())
    raw["topology"]["groups"][0]["link"] = {**LINK, "up": {"edge": [{"kind": "police", "rate": "1Mbit",
                                                                    "bucket": "6000B", "exceed": "sometimes"}]}}
    assert "topology.groups.0.link.up.edge.0.exceed: 'sometimes': exceed is 'drop' or {remark: DSCP}" in error(raw)
    raw = graph_scenario(**two_groups())
    raw["topology"]["links"][0]["edge"] = [{"kind": "mark", "rules": [{"src": "ghosts", "dscp": 10}]}]
    assert "topology.links.0 (r1-r2).forward: mark rule names host group 'ghosts'" in error(raw)
    raw = graph_scenario(**two_groups())
    raw["run"] = {"link_backend": "kernel"}
    raw["topology"]["links"][0]["policy"] = {"kind": "catnip_good"}
    assert "run.link_backend 'kernel' has droptail and red" in error(raw)
    raw = graph_scenario(**two_groups())
    raw["run"] = {"capture": True}
    assert error(raw) == "run.capture: the topology has no link with role 'bottleneck' to capture at"
