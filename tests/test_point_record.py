"""The resolved record of a point (spec/record.py, testbed/plan.py, results/point_record.py): what
the network is built from, stored once, and read by the reports instead of the scenario's fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from catnip.controller.point_plan import PointPlan
from catnip.papers.servdiff import analysis as servdiff
from catnip.papers.tcpf import analysis as tcpf
from catnip.results import layouts
from catnip.results.point_record import record_of, summary
from catnip.results.store import Store
from catnip.spec import scenario as s
from catnip.spec.record import RECORD_VERSION, RecordError, parse
from catnip.testbed.engine import RouterEngine
from catnip.testbed.links import LinkDirection
from catnip.testbed.plan import plan
from tests.conftest import REPO

# TCP-friendly marking's edge/bottleneck with FRIO given once, as the routers' default policy: the
# bottleneck has no policy of its own, so FRIO runs on its data direction (spec.graph.resolve).
FRIO_BY_DEFAULT = """
name: frio-default
seed: 1
router:
  policy: {kind: frio, w_q: 0.002, mean_pkt_bytes: 1500,
           levels: [{min_th: 50KB, max_th: 490KB, max_p: 0.005}, {min_th: 10KB, max_th: 200KB, max_p: 0.25}]}
topology:
  kind: edge_bottleneck
  senders: 2
  sender_link: {rate: 100Mbit, delay: 0ms, buffer: 1000p}
  bottleneck: {rate: 10Mbit, delay: 0ms, buffer: 500KB,
               forward: {edge: [{kind: tcpf, interval: 400ms, pool: 300KB}]}}
  receiver_link: {rate: 100Mbit, delay: 0ms, buffer: 1000p, up: {delay: 200ms}}
tcp: {profile: linux-2.2, sack: true}
applications:
  - {kind: bulk, clients: senders, servers: receivers, direction: upload, flows_per_client: 5,
     stagger: 2s, duration: 57s, interval: 1s, measure_from: 15s, measure_for: 40s}
run: {time_limit: 3min}
"""


def _store_point(store: Store, tmp_path: Path, sweep: s.Sweep, run_id: str = "r1", index: int = 0) -> None:
    """A run and one point recorded the way the runner records them (PointPlan.create)."""
    assignment, sc = sweep.points[index]
    store.create_run(run_id, sweep.name, sweep.source, sweep.raw, sweep.sweep, sc.seed, "abc", {}, {})
    PointPlan(index, 0, assignment, sc, "", len(sweep.points), tmp_path / run_id / str(index)).create(store, run_id)


def test_a_router_default_policy_is_labelled_by_what_ran(tmp_path):
    path = tmp_path / "frio-default.yaml"
    path.write_text(FRIO_BY_DEFAULT)
    sweep = s.load(path)
    record = plan(sweep.points[0][1])
    data = record.direction("bottleneck-data")
    assert data.where == "links.0 (r1-r2).forward"
    assert data.policy["kind"] == "frio" and [e["kind"] for e in data.edge] == ["tcpf"]
    with Store(tmp_path / "t.db") as store:
        _store_point(store, tmp_path, sweep)
        store.update_point("r1", 0, status="done", realtime_ok=1)
        store.add_samples("r1", 0, [{"app": "bulk", "metric": "window_goodput", "host": "ctpd1", "flow": f"ctps1/{i}",
                                     "value": 8e5, "unit": "bit/s"} for i in range(10)])
        cells, _ = tcpf.cells(store, ["r1"])
        assert [c.cell.case for c in cells] == ["TCPF+FRIO"]
        assert cells[0].cell.tuning == "good" and cells[0].cell.flows == 10
        table = layouts.build("tcpf-tables", store, "r1")
        assert {r["case"] for r in table.records()} == {"TCPF+FRIO"}


def test_the_record_is_the_engines_configuration(tmp_path):
    """What the store keeps is what the engine is given: each router's config file, link by link."""
    sc = s.load(REPO / "scenarios" / "tcpf-quick.yaml").points[0][1]
    record = plan(sc, seed=7)

    class Router:
        def __init__(self, name):
            self.name = name

    routers = {r: Router("ctp" + r) for r in record.topology["routers"]}
    directions = [LinkDirection(spec=d, router=routers[d.router]) for d in record.links]
    for short, router in routers.items():
        mine = [d for d in directions if d.router is router]
        config = RouterEngine(router, [d.spec for d in mine], tmp_path, 7).config()
        assert config["links"] == [d.spec.engine_config(i) for i, d in enumerate(mine)]
        assert [link["name"] for link in config["links"]] == [d.name for d in record.links if d.router == short]
    assert record.seed == 7 and record.host("s1").sysctls["net.ipv4.tcp_sack"] == 1



def _two_routers(**link) -> dict:
    """Two routers, a group of two hosts on each, one router link with `link`'s fields."""
    base = {"rate": "10Mbit", "delay": "1ms", "buffer": "10p"}
    return {"name": "g", "topology": {"kind": "graph", "routers": ["r1", "r2"], "groups": [
                {"name": "a", "count": 2, "router": "r1", "prefix": "a", "link": {**base, "up": {"rate": "2Mbit"}}},
                {"name": "b", "count": 2, "router": "r2", "prefix": "b", "link": base}],
            "links": [{"a": "r1", "b": "r2", **base, **link}]},
            "applications": [{"kind": "bulk", "clients": "a", "servers": "b", "duration": "5s"}]}


def test_the_kernel_backends_red_is_the_records_red():
    """The tc leaf of a kernel-backend direction has the record's RED parameters, the scenario's
    mean packet size and max_p included (no default applied outside spec/), and the record's buffer."""
    from catnip.testbed.links import KernelBackend
    raw = _two_routers(buffer="30p", policy={"kind": "red", "min_th": 5, "max_th": 15, "w_q": 0.002, "max_p": 0.05,
                                             "mean_pkt_bytes": 500})
    raw["run"] = {"link_backend": "kernel"}
    kernel = [d for d in plan(s.validate(raw)).links if d.point_to_point]
    assert [d.policy["mean_pkt_bytes"] for d in kernel] == [500, 500]
    for d in kernel:
        leaf = KernelBackend({}, None).plan(LinkDirection(d, None), 1500).commands()[2]
        red = leaf[leaf.index("red"):]
        assert dict(zip(red[1::2], red[2::2])) == {"limit": "15000", "min": "2500", "max": "7500", "avpkt": "500",
                                                   "probability": "0.05", "bandwidth": "10000000bit", "burst": "5"}


def test_a_host_uplinks_rate_is_in_the_record():
    """The rate a host's own htb serializes its uplink at is the record's (the network shapes it
    from there), shown on the run page; an uplink the engine serializes (a source queue) has its
    rate on the engine and none for the host."""
    record = plan(s.validate(_two_routers()))
    uplinks = {d.host: d for d in record.links if d.hook == "ingress"}
    assert {h: (d.rate_bps, d.host_rate_bps) for h, d in uplinks.items()} == {
        "a1": (0, 2_000_000), "a2": (0, 2_000_000), "b1": (0, 10_000_000), "b2": (0, 10_000_000)}
    shown = {row["where"]: row["rate"] for row in summary(record)["links"]}
    assert shown["groups.a.link.up"] == "2 Mbit/s (the host's htb)"
    raw = _two_routers()
    raw["topology"]["groups"][0]["link"]["up"] = {
        "rate": "2Mbit", "buffer": "64p", "policy": {
            "kind": "source_scheduler", "high": {"rate": "250kbit", "bucket": "6000B"},
            "med": {"rate": "110kbit", "bucket": "6000B"}, "classes": [[5201]], "downgrade_after": "200ms"}}
    sources = [d for d in plan(s.validate(raw)).links if d.role.startswith("source-")]
    assert [(d.host, d.rate_bps, d.host_rate_bps) for d in sources] == [("a1", 2_000_000, None), ("a2", 2_000_000, None)]

def test_a_point_from_before_records_gets_one_planned_from_its_run(tmp_path):
    """A point with no record of its own (recorded before records) reads the one the planner
    gives for its run's scenario, sweep (a scheme's set of fields included) and seed."""
    sweep = s.load(REPO / "scenarios" / "sd-schemes.yaml")
    with Store(tmp_path / "t.db") as store:
        _store_point(store, tmp_path, sweep, index=1)
        store.db.execute("UPDATE points SET record=NULL")
        store.db.commit()
        got = record_of(store.run("r1"), store.point("r1", 1))
    expected = plan(sweep.points[1][1])
    assert got.derived and not expected.derived
    assert got.model_copy(update={"derived": False}) == expected
    assert got.direction("bottleneck-data").policy == expected.direction("bottleneck-data").policy


def test_a_stored_record_is_read_back_and_a_newer_one_refused(tmp_path):
    sweep = s.load(REPO / "scenarios" / "quick.yaml")
    with Store(tmp_path / "t.db") as store:
        _store_point(store, tmp_path, sweep)
        row = store.point("r1", 0)
        assert record_of(store.run("r1"), row) == plan(sweep.points[0][1])
        newer = {**json.loads(row["record"]), "version": RECORD_VERSION + 1}
    with pytest.raises(RecordError, match=f"version {RECORD_VERSION + 1}; this code reads up to {RECORD_VERSION}"):
        parse(json.dumps(newer))
    with pytest.raises(RecordError, match="not JSON"):
        parse("{")


def test_the_servdiff_fair_share_reads_the_rate_the_bottleneck_ran(tmp_path):
    """A bottleneck whose data direction has a rate of its own (forward.rate) runs at that rate;
    the fair share is that rate over the flows, not the link's shared rate."""
    path = tmp_path / "fwd.yaml"
    path.write_text(FRIO_BY_DEFAULT.replace("forward: {edge:", "forward: {rate: 4Mbit, edge:"))
    sweep = s.load(path)
    with Store(tmp_path / "t.db") as store:
        _store_point(store, tmp_path, sweep)
        store.update_point("r1", 0, status="done", realtime_ok=1)
        member = servdiff.Member("r1", 0, 0, 1, True, record_of(store.run("r1"), store.point("r1", 0)))
        assert servdiff.bottleneck_rate(store, member) == 4e6
        assert servdiff.bottleneck_rate(store, member, "bottleneck-ack") == 10e6


def test_the_burst_servers_sender_is_what_they_ran(tmp_path):
    """newCWV Fig. 10's two senders, labelled from the burst servers' TCP in the record."""
    from catnip.results import burst_capture
    sweep = s.load(REPO / "scenarios" / "newcwv-fig10-pacing-seq.yaml")
    with Store(tmp_path / "t.db") as store:
        _store_point(store, tmp_path, sweep, index=0)
        store.create_point("r1", 1, 0, sweep.points[1][0], {}, 1, record=plan(sweep.points[1][1]).model_dump(mode="json"))
        assert burst_capture.sender_label(store, "r1", 0) == "catnip_newcwv"
        assert burst_capture.sender_label(store, "r1", 1) == "catnip_newcwv, paced (internal, 200%)"
        with pytest.raises(burst_capture.CaptureError, match="no point 5"):
            burst_capture.sender_label(store, "r1", 5)


def test_the_run_page_shows_what_ran_and_labels_it_by_that(tmp_path):
    """The FRIO-by-default scenario on the dashboard: its TCPF row says FRIO, and the point's
    record (the bottleneck's data direction with FRIO and the tcpf marker) is on the page."""
    import re

    from catnip.controller.run_queue import RunQueue
    from catnip.webui.app import create_app
    path = tmp_path / "frio-default.yaml"
    path.write_text(FRIO_BY_DEFAULT)
    db = tmp_path / "catnip.db"
    with Store(db) as store:
        _store_point(store, tmp_path, s.load(path))
        store.update_point("r1", 0, status="done", realtime_ok=1)
        store.add_samples("r1", 0, [{"app": "bulk", "metric": "window_goodput", "host": "ctpd1", "flow": f"ctps1/{i}",
                                     "value": 8e5, "unit": "bit/s"} for i in range(10)])
        store.finish_run("r1", "done")
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=db, scenarios_dir=tmp_path, queue=queue)
    try:
        page = app.test_client().get("/runs/r1").get_data(as_text=True)
        row = re.search(r'<tr class="tcpf-row">(.*?)</tr>', page, re.S).group(1)
        assert "TCPF+FRIO" in row and "TailDrop" not in row
        links = re.search(r'<table class="record-links">(.*?)</table>', page, re.S).group(1)
        data = next(r for r in re.findall(r"<tr>(.*?)</tr>", links, re.S) if "bottleneck-data" in r)
        assert "links.0 (r1-r2).forward" in data and "frio (" in data and "tcpf (" in data
        assert "What ran, point 0" in page
    finally:
        queue.shutdown(timeout=5)


def test_the_record_travels_with_an_export(tmp_path):
    """`catnip export` carries the record; `catnip import` puts it back byte for byte."""
    import subprocess
    import sys
    sweep = s.load(REPO / "scenarios" / "quick.yaml")
    with Store(tmp_path / "a.db") as store:
        _store_point(store, tmp_path, sweep)
        store.update_point("r1", 0, status="done")
        store.finish_run("r1", "done")
        before = store.point("r1", 0)["record"]
    cli = [sys.executable, "-m", "catnip.cli.main"]
    for args in (["export", "r1", "--db", str(tmp_path / "a.db"), "--out", str(tmp_path / "r1.json.gz")],
                 ["import", str(tmp_path / "r1.json.gz"), "--db", str(tmp_path / "b.db")]):
        res = subprocess.run(cli + args, capture_output=True, text=True, cwd=REPO, timeout=120)
        assert res.returncode == 0, res.stderr
    with Store(tmp_path / "b.db") as store:
        assert store.point("r1", 0)["record"] == before
        assert record_of(store.run("r1"), store.point("r1", 0)) == plan(sweep.points[0][1])
