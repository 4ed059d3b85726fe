"""The TCP-friendly marking paper's Tables 4-7 from runs (papers/tcpf/analysis.py, layout tcpf-tables):
the paper's numbers as entered, the grid scenario covering every cell of the paper once, the
metrics of a point against a hand computation, and the engine's window counters interpolated."""

from __future__ import annotations

import json
import math
import re
import statistics

import pytest

from catnip.papers.tcpf import analysis as tcpf
from catnip.papers.tcpf import published as tcpf_paper
from catnip.results import layouts
from catnip.results.store import Store
from catnip.spec import scenario as s
from catnip.testbed import engine
from catnip.testbed.plan import plan
from catnip.testbed.paths import REPO


def test_the_papers_tables_as_entered():
    assert len(tcpf_paper.PAPER) == 4 * 7 * 2
    # Section 6.2.1's headline numbers, read back from the data.
    assert tcpf_paper.paper("A", "NoMark+TailDrop", 100)[0] == 1140
    assert tcpf_paper.paper("A", "TCPF+FRIO", 100)[0] == 41
    assert tcpf_paper.paper("A", "NoMark+RED", 50)[0] == 491 and tcpf_paper.paper("A", "TCPF+FRIO", 50)[0] == 2
    assert tcpf_paper.paper("A", "TB+RIO", 100)[0] == 911
    # Table 7's misprint "9892" is entered as 9.892 KB/s.
    assert tcpf_paper.paper("D", "TCPF(O)+RIO", 100)[2] == 9.892
    # Every goodput is KB/s per flow: 100 x 11.421 KB/s is below the 10 Mbit/s link.
    for (config, case, flows), (_, loss, goodput, cov) in tcpf_paper.PAPER.items():
        assert 0.6e7 < flows * goodput * 8000 < 1e7, (config, case, flows)
        assert 0 < loss < 25 and 0 < cov < 1


def test_the_grid_covers_every_cell_of_the_paper_once():
    sweep = s.load(REPO / "scenarios" / "tcpf-grid.yaml")
    cells = [tcpf.classify(plan(sc)) for _, sc in sweep.points]
    assert len(cells) == len(set(cells)) == 52, "a cell measured twice in one run"
    covered = sorted((config, c.case, c.flows) for c in cells for config in c.configs())
    assert covered == sorted(tcpf_paper.PAPER), set(tcpf_paper.PAPER) ^ set(covered)
    assert {c.profile for c in cells} == {"linux-2.2"}


def test_the_quick_look_is_table_4_at_50_flows():
    sweep = s.load(REPO / "scenarios" / "tcpf-quick.yaml")
    cells = [tcpf.classify(plan(sc)) for _, sc in sweep.points]
    assert [c.case for c in cells] == list(tcpf_paper.CASES)
    assert all("A" in c.configs() and c.flows == 50 and c.tcp == "SACK" for c in cells)


def test_a_point_that_is_not_the_papers_experiment_is_named():
    record = plan(s.load(REPO / "scenarios" / "quick.yaml").points[0][1])
    with pytest.raises(tcpf.NotTcpf, match="'dumbbell' is not edge_bottleneck"):
        tcpf.classify(record)


def test_link_counters_are_interpolated_between_stats_lines():
    def line(t, arrived, dropped):
        return {"t": t, "links": {"a>b": {"arrived": {"high": [arrived, 0], "low": [2 * arrived, 0]},
                                          "sent": {}, "dropped": {"low": [dropped, 0]}}}}
    lines = [line(0.5, 100, 0), line(1.0, 200, 10), line(1.5, 400, 30)]
    at = engine.link_counters_at(lines, "a>b", 1.25)
    assert at["arrived"] == {"high": 300.0, "low": 600.0}
    assert at["dropped"] == {"low": 20.0}
    assert engine.link_counters_at(lines, "a>b", 1.0)["arrived"]["high"] == 200
    assert engine.link_counters_at(lines, "a>b", 0.4) is None and engine.link_counters_at(lines, "a>b", 1.6) is None
    assert engine.link_counters_at(lines, "c>d", 1.0) is None


def _point(store, run_id, point, sc, goodputs_bps, timeouts, arrived, dropped, realtime=True):
    store.create_point(run_id, point, 0, {}, sc.model_dump(), 1, record=plan(sc).model_dump(mode="json"))
    store.update_point(run_id, point, status="done", realtime_ok=int(realtime))
    rows = [{"app": "bulk", "metric": "window_goodput", "host": "ctpd1", "flow": f"ctps1/{i}", "value": v,
             "unit": "bit/s"} for i, v in enumerate(goodputs_bps)]
    rows += [{"app": "bulk", "metric": "window_nstat", "host": f"ctps{h}", "flow": "TcpExtTCPTimeouts", "value": t,
              "unit": "count"} for h, t in enumerate(timeouts)]
    rows += [{"app": "bulk", "metric": "window_nstat", "host": f"ctps{h}", "flow": "TcpExtTCPSackRecovery",
              "value": 10 * t, "unit": "count"} for h, t in enumerate(timeouts)]
    rows += [{"app": "bulk", "metric": "window_link", "host": "ctpr1", "tag": "ctpr1>ctpr2", "flow": f"arrived.{c}",
              "value": v, "unit": "pkt"} for c, v in arrived.items()]
    rows += [{"app": "bulk", "metric": "window_link", "host": "ctpr1", "tag": "ctpr1>ctpr2", "flow": f"dropped.{c}",
              "value": v, "unit": "pkt"} for c, v in dropped.items()]
    store.add_samples(run_id, point, rows)


def test_the_layout_against_a_hand_computation(tmp_path):
    # 2 flows, so a hand computation stays short
    sweep = s.load(REPO / "scenarios" / "tcpf-quick.yaml", ["topology.senders=1", "applications=" + json.dumps(
        [{"kind": "bulk", "clients": "senders", "servers": "receivers", "direction": "upload", "flows_per_client": 2,
          "stagger": "2s", "duration": "57s", "interval": "1s", "measure_from": "15s", "measure_for": "40s"}])])
    frio = sweep.points[0][1]        # TCPF+FRIO
    taildrop = sweep.points[5][1]    # NoMark+TailDrop
    with Store(tmp_path / "t.db") as store:
        for run_id in ("s1", "s2"):
            store.create_run(run_id, "tcpf-quick", "x", {}, {}, 1, "", {}, {})
        _point(store, "s1", 0, frio, [160_000, 240_000], [3, 4], {"high": 900, "low": 100}, {"low": 50})
        _point(store, "s2", 0, frio, [200_000, 200_000], [1, 0], {"high": 950, "low": 50}, {"low": 10},
               realtime=False)
        _point(store, "s1", 1, taildrop, [100_000, 300_000], [9, 9], {"other": 1000}, {"other": 100})
        table = layouts.build("tcpf-tables", store, "s1", "s2")
    rows = {(r["config"], r["case"]): r for r in table.records()}
    f = rows[("A", "TCPF+FRIO")]
    assert f["flows"] == 2 and f["points"] == 2 and f["point_ids"] == "s1/0 s2/0"
    assert f["timeouts"] == pytest.approx((7 + 1) / 2)
    assert f["loss"] == pytest.approx((50 / 1000 + 10 / 1000) / 2)
    # 200 kbit/s per flow is 25 KB/s; the first point's flows 20 and 30 KB/s: C.O.V. 5/25.
    assert f["goodput"] == pytest.approx(25.0)
    assert f["cov"] == pytest.approx((0.2 + 0.0) / 2)
    # Student t with one degree of freedom: 12.706 x sdev / sqrt(2).
    assert f["timeouts_ci95"] == pytest.approx(12.7062 * statistics.stdev([7, 1]) / math.sqrt(2), rel=1e-3)
    assert f["realtime_ok"] is False
    assert f["recoveries"] == pytest.approx(10 * (7 + 1) / 2) and f["lost_retransmits"] is None
    assert [r["case"] for r in table.records()] == ["TCPF+FRIO", "NoMark+TailDrop", "NoMark+TailDrop"]
    assert f["paper_timeouts"] is None  # the paper has no 2-flow column
    # TailDrop stands in both SACK configurations, A and C.
    assert rows[("A", "NoMark+TailDrop")]["loss"] == rows[("C", "NoMark+TailDrop")]["loss"] == pytest.approx(0.1)
    assert rows[("C", "NoMark+TailDrop")]["red"] == "any"
    assert ("C", "TCPF+FRIO") not in rows


def test_the_layout_refuses_runs_of_another_experiment(tmp_path):
    with Store(tmp_path / "t.db") as store:
        store.create_run("w", "quick", "x", {}, {}, 1, "", {}, {})
        sc = s.load(REPO / "scenarios" / "quick.yaml").points[0][1]
        store.create_point("w", 0, 0, {}, sc.model_dump(), 1, record=plan(sc).model_dump(mode="json"))
        with pytest.raises(layouts.LayoutError, match="no point of w is a TCP-friendly marking experiment"):
            layouts.build("tcpf-tables", store, "w")


# --- the bulk application's measured window (workloads/apps/bulk.py) ---------------------------

def _bulk(**fields):
    from catnip.workloads.apps.bulk import BulkSpec
    return BulkSpec(**{"kind": "bulk", "clients": "senders", "servers": "receivers", "duration": "60s",
                       "stagger": "2s", **fields})


@pytest.mark.parametrize("fields, says", [
    ({"measure_from": "10s"}, "give both"),
    ({"measure_from": "1s", "measure_for": "30s"}, "before the last flow may launch"),
    ({"measure_from": "20s", "measure_for": "50s"}, "before the window does"),
    ({"measure_from": "20s", "measure_for": "1s"}, "fewer than two iperf3 intervals"),
    ({"measure_from": "20s", "measure_for": "10s", "duration": None, "bytes": "1MB"}, "needs flows of a duration"),
])
def test_a_window_the_flows_cannot_fill_is_refused(fields, says):
    with pytest.raises(ValueError, match=says):
        _bulk(**fields)
    assert _bulk(measure_from="20s", measure_for="40s").window() == (20.0, 60.0)


def test_window_goodput_and_counters():
    from catnip.workloads.apps.bulk import delivered, window_counters
    # ss lines of a receiver: the flow from 10.0.0.2 to port 5202 (control and data connections);
    # another flow on 5201; a data connection opened only after the window's start counts from 0.
    first = {"t": 10.0, "conns": [["10.0.1.2:5202", "10.0.0.2:40001", 37], ["10.0.1.2:5202", "10.0.0.2:40002", 1000],
                                  ["10.0.1.2:5201", "10.0.0.2:40003", 5000]]}
    last = {"t": 12.0, "conns": [["10.0.1.2:5202", "10.0.0.2:40001", 37], ["10.0.1.2:5202", "10.0.0.2:40002", 9000],
                                 ["10.0.1.2:5201", "10.0.0.2:40003", 5000], ["10.0.1.2:5203", "10.0.0.2:40009", 700]]}
    assert delivered([first, last], 5202, "10.0.0.2") == (2.0, 8000)
    assert delivered([first, last], 5203, "10.0.0.2") == (2.0, 700)
    assert delivered([first, last], 5202, "10.0.0.9") is None      # another peer's connection is not the flow
    assert delivered([first], 5202, "10.0.0.2") is None
    # Download: the receiver is the client, the server's port is the peer's.
    down = [{"t": 0, "conns": [["10.0.0.2:40002", "10.0.1.2:5202", 100]]},
            {"t": 1, "conns": [["10.0.0.2:40002", "10.0.1.2:5202", 400]]}]
    assert delivered(down, 5202, "10.0.1.2") == (1, 300)
    lines = [{"t": 1, "counters": {"TcpExtTCPTimeouts": 5, "TcpOutSegs": 100}},
             {"t": 2, "counters": {"TcpExtTCPTimeouts": 9, "TcpOutSegs": 250, "TcpRetransSegs": 7}}]
    diff = window_counters(lines)
    assert diff["TcpExtTCPTimeouts"] == 4 and diff["TcpOutSegs"] == 150 and diff["TcpRetransSegs"] == 7
    assert window_counters(lines[:1]) is None


# --- the dashboard's run page ----------------------------------------------------------------

def test_the_run_page_shows_the_tables_beside_the_papers(tmp_path):
    from catnip.controller.run_queue import RunQueue
    from catnip.webui.app import create_app
    resolved = s.load(REPO / "scenarios" / "tcpf-quick.yaml").points[0][1]
    db = tmp_path / "catnip.db"
    with Store(db) as store:
        store.create_run("tq", "tcpf-quick", "x", {"name": "tcpf-quick"}, {}, 1, "", {}, {})
        _point(store, "tq", 0, resolved, [180_000] * 50, [1, 2], {"high": 900, "low": 100}, {"low": 40},
               realtime=False)
        store.finish_run("tq", "done")
        store.create_run("other", "quick", "x", {"name": "quick"}, {}, 1, "", {}, {})
        store.finish_run("other", "done")
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=db, scenarios_dir=tmp_path, queue=queue)
    try:
        client = app.test_client()
        page = client.get("/runs/tq").get_data(as_text=True)
        row = re.search(r'<tr class="tcpf-row">(.*?)</tr>', page, re.S).group(1)
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
        # Timeouts 3 (paper 2), loss 4% (2.14%), 22.5 KB/s (22.236), C.O.V. 0, the point not real time.
        assert cells[:5] == ["linux-2.2", "A", "TCPF+FRIO*", "50", "1"], cells
        assert cells[5:9] == ["3 (2)", "4.00% (2.14%)", "22.500 (22.236)", "0.00 (0.03)"], cells
        csv_text = client.get("/runs/tq/layouts/tcpf-tables.csv").get_data(as_text=True)
        assert csv_text.startswith("profile,config,tcp,red,case,flows") and "TCPF+FRIO" in csv_text
        assert 'id="tcpf"' not in client.get("/runs/other").get_data(as_text=True)
    finally:
        queue.shutdown(timeout=5)


def test_an_override_the_sweep_would_replace_is_refused():
    with pytest.raises(s.ScenarioError, match="the sweep replaces topology.bottleneck in every point") as info:
        s.load(REPO / "scenarios" / "tcpf-quick.yaml", ["topology.bottleneck.forward={edge: [{kind: tcpf}]}"])
    assert "\n" not in str(info.value)
    with pytest.raises(s.ScenarioError, match="the sweep replaces tcp.sack"):
        s.load(REPO / "scenarios" / "tcpf-grid.yaml", ["tcp.sack=false"])
    # Beside the swept paths, and the sweep itself, an override applies.
    sweep = s.load(REPO / "scenarios" / "tcpf-grid.yaml", ["tcp.profile=modern", "sweep.tcp.sack=[true]"])
    assert len(sweep.points) == 26 and {sc.tcp.profile for _, sc in sweep.points} == {"modern"}
