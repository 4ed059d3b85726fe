"""The TCP-friendly marking paper's markers (tcpf, token_marker) and byte-mode droppers: their
parameters and placement are checked when the scenario loads (one line naming the field), and a
small real run through the engine marks IN and OUT and RIO drops by class (docs/tcpf-markers.md)."""

from __future__ import annotations

import copy
import json

import pytest

from catnip.spec import scenario as s
from catnip.testbed.paths import REPO
from tests.conftest import catnip, need_engine, need_root

RIO_TABLE_1 = {"kind": "rio", "w_q": 0.002, "levels": [{"min_th": "50KB", "max_th": "490KB", "max_p": 0.005},
                                                      {"min_th": "10KB", "max_th": "200KB", "max_p": 0.25}]}

BASE = {
    "name": "tcpf-markers", "seed": 1,
    "topology": {
        "kind": "edge_bottleneck", "senders": 2,
        "sender_link": {"rate": "100Mbit", "delay": "1ms", "buffer": "1000p"},
        "receiver_link": {"rate": "100Mbit", "delay": "1ms", "buffer": "1000p", "up": {"delay": "40ms"}},
        "bottleneck": {"rate": "10Mbit", "delay": "1ms", "buffer": "500KB", "policy": RIO_TABLE_1,
                       "forward": {"edge": [{"kind": "tcpf", "interval": "400ms", "pool": "300KB"}]}}},
    "applications": [{"kind": "bulk", "clients": "senders", "servers": "receivers", "direction": "upload",
                      "flows_per_client": 4, "duration": "20s", "measure_from": "6s", "measure_for": "12s"}],
    "run": {"time_limit": "3min"},
}


def scenario(**changes):
    """BASE with `changes` ({"topology.bottleneck.policy": ...}) applied."""
    raw = copy.deepcopy(BASE)
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = raw
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return raw


def error(raw) -> str:
    with pytest.raises(s.ScenarioError) as info:
        s.validate(raw, "")
    text = str(info.value)
    assert "\n" not in text, text
    return text


def test_the_markers_reach_the_engine_as_written():
    sc = s.validate(scenario(), "")
    fwd = sc.graph().links[0].forward
    tcpf = fwd.edge[0].engine_config({})
    assert tcpf == {"kind": "tcpf", "interval_us": 400_000, "pool_bytes": 300 * 1024, "in_dscp": 10,
                    "out_dscp": 12, "tiny_window": 4, "mss_bytes": 1460, "protect_retransmissions": True,
                    "retransmissions_use_tokens": True, "w_gain": 0.125, "e_gain": 0.5, "flow_idle_us": 120_000_000}
    tb = {"kind": "token_marker", "interval": "200ms", "pool": "100000B", "in_dscp": "AF11", "out_dscp": 14}
    sc = s.validate(scenario(**{"topology.bottleneck.forward": {"edge": [tb]}}), "")
    assert sc.graph().links[0].forward.edge[0].engine_config({}) == {
        "kind": "token_marker", "interval_us": 200_000, "pool_bytes": 100_000, "in_dscp": 10, "out_dscp": 14}
    # TCPF(O): the same without retransmission protection.
    old = {"kind": "tcpf", "protect_retransmissions": False}
    sc = s.validate(scenario(**{"topology.bottleneck.forward": {"edge": [old]}}), "")
    assert sc.graph().links[0].forward.edge[0].engine_config({})["protect_retransmissions"] is False


@pytest.mark.parametrize("marker, field, says", [
    ({"pool": -300}, "pool", "must be above 0 bytes"),
    ({"pool": "0B"}, "pool", "at least one byte"),
    ({"interval": 0}, "interval", "must be above 0"),
    ({"interval": "0ms"}, "interval", "must be above 0"),
    ({"w_gain": 1.5}, "w_gain", "less than or equal to 1"),
    ({"tiny_window": 0}, "tiny_window", "greater than or equal to 1"),
    ({"in_dscp": "AF14"}, "in_dscp", "is not a DSCP"),
    ({"in_dscp": "AF12"}, "", "out_dscp: must differ from in_dscp"),
    ({"flow_idle": "100ms"}, "", "flow_idle: 0.1 s is shorter than TCP's maximum RTO (120 s)"),
    ({"flow_idle": "130s", "interval": "200s"}, "", "flow_idle: 130 s is shorter than the interval"),
    ({"pools": 1}, "pools", "unknown field"),
])
def test_bad_marker_parameters_are_one_line_naming_the_field(marker, field, says):
    raw = scenario(**{"topology.bottleneck.forward": {"edge": [{"kind": "tcpf", **marker}]}})
    text = error(raw)
    assert f"topology.bottleneck.forward.edge.0{'.' + field if field else ''}" in text and says in text, text


@pytest.mark.parametrize("levels, says", [
    ([{"min_th": "200KB", "max_th": "200KB"}, {"min_th": "10KB", "max_th": "30KB"}],
     "levels.0: min_th (204800B) must be below max_th (204800B)"),
    ([{"min_th": "50KB", "max_th": "490KB"}, {"min_th": "30KB", "max_th": "10KB"}],
     "levels.1: min_th (30720B) must be below max_th (10240B)"),
    ([{"min_th": "50KB", "max_th": "490KB", "max_p": 0}, {"min_th": "10KB", "max_th": "30KB"}],
     "levels.0.max_p: 0: Input should be greater than 0"),
    ([{"min_th": "50KB", "max_th": "490KB", "max_p": 1.5}, {"min_th": "10KB", "max_th": "30KB"}],
     "levels.0.max_p: 1.5: Input should be less than or equal to 1"),
])
def test_bad_dropper_thresholds_are_one_line_naming_the_level(levels, says):
    for kind in ("rio", "frio"):
        text = error(scenario(**{"topology.bottleneck.policy": {**RIO_TABLE_1, "kind": kind, "levels": levels}}))
        assert "topology.bottleneck.policy" in text and says in text, text


def test_markers_where_they_cannot_work_are_refused():
    tcpf = [{"kind": "tcpf"}]
    # On the link as a whole: its reverse direction (r2 -> r1) would mark ACKs.
    text = error(scenario(**{"topology.bottleneck.forward": None, "topology.bottleneck.edge": tcpf}))
    assert "links.0 (r1-r2).reverse.edge: a tcpf marker on r2 -> r1 would mark the ACKs" in text
    # On an access link: one marker, and one pool, per host.
    text = error(scenario(**{"topology.sender_link.up": {"edge": tcpf}}))
    assert "groups.senders.link.up.edge: a tcpf marker on an access link would be one per host" in text
    # On a direction that does not exist.
    text = error(scenario(**{"topology.bottleneck.forward": None, "topology.bottleneck.up": {"edge": tcpf}}))
    assert "topology.bottleneck.up: unknown field" in text
    # The token marker has no TCP awareness: per host it is the per-source reading of the TB pool.
    s.validate(scenario(**{"topology.sender_link.up": {"edge": [{"kind": "token_marker"}]}}), "")


def test_a_tcpf_marker_must_see_the_acks_of_what_it_marks():
    # A square of routers, each with hosts: routes are fewest hops with ties broken by link order,
    # so traffic and its ACKs may take different sides of the square.
    from catnip.spec.graph import Graph
    link = {"rate": "10Mbit", "delay": "1ms", "buffer": "100p"}
    access = {"rate": "100Mbit", "delay": "1ms", "buffer": "100p"}
    groups = [{"name": n, "count": 1, "router": r, "prefix": p, "link": access}
              for n, r, p in (("a", "r1", "a"), ("b", "r2", "b"), ("c", "r3", "c"), ("d", "r4", "d"))]
    # r1 -> r3 goes r1, r2, r3 (r1's first link) through the marker on r2 -> r3; r3 -> r1 goes
    # r3, r4, r1 (r3's first link is to r4): the marker on r2 never sees those ACKs.
    links = [{"a": "r1", "b": "r2", **link}, {"a": "r3", "b": "r4", **link},
             {"a": "r2", "b": "r3", **link, "forward": {"edge": [{"kind": "tcpf"}]}}, {"a": "r4", "b": "r1", **link}]
    g = dict(routers=["r1", "r2", "r3", "r4"], groups=groups, links=links)
    with pytest.raises(ValueError) as info:
        Graph(**g)
    assert "cannot see the ACKs of traffic from r1 to r3: they return by r3 -> r4 -> r1" in str(info.value)
    # The same square with the links listed so that the routes it carries are symmetric is accepted.
    Graph(**{**g, "links": [links[0], links[2], links[1], links[3]]})
    assert Graph(**{**g, "links": [links[0], links[2], links[1], links[3]]}).path("r3", "r1") == ["r3", "r2", "r1"]


# --- a real run through the engine -------------------------------------------------------------


def _engine_link(data_dir, router: str, link: str) -> dict:
    files = sorted(data_dir.rglob(f"engine-ctp{router}.stats.jsonl"))
    assert files, f"no engine stats for {router} under {data_dir}"
    lines = [json.loads(line) for line in files[-1].read_text().splitlines() if line.strip()]
    final = [line for line in lines if line.get("final")]
    return (final or lines)[-1]["links"][link]


@pytest.mark.netns
@pytest.mark.parametrize("kind", ["tcpf", "token_marker"])
def test_a_small_run_marks_in_and_out_and_rio_drops_out_first(kind, tmp_path, isolated_data, no_leftovers):
    need_root()
    need_engine()
    import yaml
    path = tmp_path / "tcpf-small.yaml"
    marker = {"kind": kind, "interval": "400ms", "pool": "300KB"}
    path.write_text(yaml.safe_dump(scenario(**{"topology.bottleneck.forward": {"edge": [marker]}})))
    res = catnip("run", str(path), "--json", timeout=400)
    assert res.returncode == 0, res.stderr[-3000:]
    link = _engine_link(isolated_data / "data", "r1", "ctpr1>ctpr2")
    marker = link["edge"][0]
    assert marker["kind"] == kind
    # Both marks, an allocation (refill) every 400 ms of ~20 s, and for TCPF the ACKs seen on r1's
    # access links.
    assert marker["in"] > 1000 and marker["out"] > 1000, marker
    if kind == "tcpf":
        assert marker["acks"] > 1000 and marker["allocations"] >= 30, marker
    else:
        assert marker["refills"] >= 30 and marker["pool_spent"] == marker["in_bytes"], marker
        assert marker["in_bytes"] <= marker["refills"] * 300 * 1024
    assert marker["in"] + marker["out"] == sum(c[0] for c in link["arrived"].values())
    # What left the edge is what the queue counted by class: IN is AF11 (high), OUT AF12 (low).
    assert link["arrived"]["high"][0] == marker["in"] and link["arrived"]["low"][0] == marker["out"]
    # RIO with Table 1: OUT packets are dropped from 10 KB of average queue on, IN ones from 50 KB
    # of IN packets: IN loses far less, as a share of its arrivals, than OUT.
    dropped_in, dropped_out = link["dropped"]["high"][0], link["dropped"]["low"][0]
    print(f"marker {marker}; dropped IN {dropped_in}, OUT {dropped_out}")  # shown with pytest -s
    assert dropped_out > 20, link["dropped"]
    rate_in, rate_out = dropped_in / marker["in"], dropped_out / marker["out"]
    assert rate_in < rate_out / 5, (rate_in, rate_out, link["dropped"])
    assert json.loads(res.stdout)["status"] == "done"
    _check_the_measured_window(isolated_data / "data" / "catnip.db", json.loads(res.stdout)["run_id"], kind)


def _check_the_measured_window(db, run_id: str, kind: str) -> None:
    """The bulk application's window (6-18 s): every flow's goodput, the senders' counters and the
    bottleneck's packets over the same 12 s, and the tcpf-tables layout built from them."""
    from catnip.results import layouts
    from catnip.results.store import Store
    with Store(db) as store:
        rows = [r for r in store.samples(run_id, 0) if r["metric"].startswith("window_")]
        table = layouts.build("tcpf-tables", store, run_id)
    assert not [r for r in rows if r["error"]], [r for r in rows if r["error"]]
    goodputs = [r["value"] for r in rows if r["metric"] == "window_goodput"]
    assert len(goodputs) == 8 and 5e6 < sum(goodputs) < 10.2e6, goodputs
    nstat = {}
    for r in rows:
        if r["metric"] == "window_nstat":
            nstat[r["flow"]] = nstat.get(r["flow"], 0) + r["value"]
    arrived = sum(r["value"] for r in rows if r["metric"] == "window_link" and r["flow"].startswith("arrived."))
    # Every data segment the senders sent in the window crossed the bottleneck in it: Linux counts
    # new segments in OutSegs and retransmitted ones in RetransSegs only. The engine's counters,
    # interpolated at the window's ends on its own clock, must agree (2%: the ends are a few ms apart).
    sent = nstat["TcpOutSegs"] + nstat["TcpRetransSegs"]
    print(f"window: {sent} segments sent, {arrived:.0f} arrived at the bottleneck")  # pytest -s
    assert abs(arrived - sent) < 0.02 * sent, (arrived, nstat)
    row = table.records()[0]
    assert row["case"] == ("TCPF+RIO" if kind == "tcpf" else "TB+RIO") and row["flows"] == 8 and row["config"] == "A"
    assert row["goodput"] == pytest.approx(sum(goodputs) / 8 / 8000)


def test_docs_name_every_marker_parameter():
    text = (REPO / "docs" / "tcpf-markers.md").read_text()
    from catnip.spec.edge import Tcpf, TokenMarker
    for cls in (Tcpf, TokenMarker):
        for field in cls.model_fields:
            assert f"`{field}`" in text, f"docs/tcpf-markers.md does not describe {cls.__name__}.{field}"


@pytest.mark.netns
def test_check_reports_the_markers_from_the_engine_itself():
    need_root()
    need_engine()
    data = json.loads(catnip("check", "--json").stdout)
    assert {"tcpf", "token_marker"} <= set(data["engine_kinds"]["edge"]), data["engine_kinds"]
    assert "rio" in data["engine_kinds"]["policies"]
    assert "TCP-friendly markers (tcpf, token_marker): " in catnip("check").stdout
