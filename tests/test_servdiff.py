"""Nouredine and Tobagi's reports (papers/servdiff/analysis.py; the layouts servdiff and servdiff-fair; the
figures of results/figures.py; `catnip report --figure`; the run page's section) on stores written
through the store's own API with numbers whose results are known by hand. No network, no runs."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import signal
import subprocess

import pytest
from click.testing import CliRunner

from catnip.cli.main import main
from catnip.controller.run_queue import RunQueue
from catnip.results import table as tables
from catnip.papers.servdiff import analysis as sd
from catnip.results import figures, layouts
from catnip.results.samples import t975
from catnip.results.store import Store
from catnip.spec.record import AppRecord, DirectionRecord, PointRecord, RunPlacement
from tests.conftest import REPO
from tests.test_dashboard_browser import browser  # noqa: F401 - the headless Chromium fixture
from catnip.webui.app import create_app

APPS = [
    {"kind": "telnet", "name": None},
    {"kind": "web", "name": "probe10", "http_version": "1.0", "page_set": "probe"},
    {"kind": "web", "name": "web10", "http_version": "1.0", "page_set": "random"},
    {"kind": "web", "name": "probe11", "http_version": "1.1", "page_set": "probe"},
    {"kind": "ftp", "name": None, "size": None},
    {"kind": "ftp", "name": "ftpprobe", "size": 204800},
]
TREE = {"kind": "tree", "bottleneck": {"rate": 2_000_000}}
DT, DS = {"router.policy": {"kind": "droptail"}}, {"router.policy": {"kind": "red3"}}


def _resolved(apps=APPS, topology=TREE) -> dict:
    """A point's record (spec/record.py) with these applications and a bottleneck of the topology's rate."""
    link = DirectionRecord(name="sa>da", where="links.0 (sa-da).forward", role="bottleneck-data", router="sa",
                           hook="egress", interface="ctpsa-eth9", rate_bps=int(topology["bottleneck"]["rate"]),
                           delay_s=0.0, buffer={"packets": 100}, policy={"kind": "droptail"})
    apps = [AppRecord(instance=a.get("name") or a["kind"], kind=a["kind"], clients=[], servers=[], params=a)
            for a in apps]
    return PointRecord(seed=1, topology={"kind": topology["kind"]}, links=[link], hosts=[], applications=apps,
                       marking={}, placement=RunPlacement(link_backend="engine")).model_dump(mode="json")


def _samples(app: str, metric: str, values, tag: str | None = None, host: str = "s1", flow: str | None = None,
             t0: float = 0.0, unit: str = "s") -> list[dict]:
    """One sample per value (None: a failed one), t counting up from t0."""
    return [{"app": app, "metric": metric, "host": host, "peer": "d1", "flow": flow, "tag": tag, "t": t0 + k,
             "value": v, "unit": unit, "error": "timeout" if v is None else None} for k, v in enumerate(values)]


def _links(store: Store, run_id: str, point: int, data: dict[str, tuple[int, int]], ack: tuple[int, int],
           rate: int | None = None) -> None:
    """The bottleneck's counters: per class (arrived, dropped) on the data direction; the reverse's."""
    final = {"links": {
        "sa>da": {"arrived": {c: [a, 0] for c, (a, _) in data.items()}, "sent": {},
                  "dropped": {c: [d, 0] for c, (_, d) in data.items()}},
        "da>sa": {"arrived": {"other": [ack[0], 0]}, "sent": {}, "dropped": {"other": [ack[1], 0]}}}}
    configs = {"sa>da": {"rate_bps": rate}} if rate else {}
    store.add_link_stats(run_id, point, "sa", final, {"sa>da": "bottleneck-data", "da>sa": "bottleneck-ack"}, configs,
                         {})


def _run(store: Store, run_id: str, points: list[tuple[dict, dict, list[dict]]], name: str = "servdiff-test",
         seed: int = 1, statuses: dict[int, str] | None = None, realtime: bool = True) -> None:
    store.create_run(run_id, name, "scenarios/x.yaml", {"name": name}, {}, seed, "abc", {}, {})
    for i, (assignment, resolved, rows) in enumerate(points):
        store.create_point(run_id, i, 0, assignment, {"name": name}, seed, record=resolved)
        store.add_samples(run_id, i, rows)
        status = (statuses or {}).get(i, "done")
        store.update_point(run_id, i, status=status, realtime_ok=int(realtime), finished=1.0)
    store.finish_run(run_id, "done")


def _point0() -> list[dict]:
    return (_samples("telnet", "echo_delay", [0.1, 0.12, 0.2, 1.1, None], "rtt80ms")
            + _samples("telnet", "echo_delay", [0.03, 0.05, 0.16], "rtt20ms", host="s2")
            + _samples("probe10", "page_time", [2.0, 6.0, 11.0, None], "rtt80ms")
            + _samples("web10", "page_time", [1.0, 3.0, 12.0], "rtt20ms", host="s2")
            + _samples("probe11", "page_time", [4.0, 5.0, 5.5], "rtt80ms")
            + _samples("ftpprobe", "file_time", [1.0, 2.0, 3.0, 5.0], "rtt80ms")
            + _samples("ftp", "file_time", [0.5, 8.0], "rtt20ms", host="s2"))


def _point1() -> list[dict]:
    return (_samples("telnet", "echo_delay", [0.05, 0.06, 0.07, 0.08], "rtt80ms")
            + _samples("probe10", "page_time", [1.0, 2.0], "rtt80ms")
            + _samples("ftpprobe", "file_time", [1.0, 1.5], "rtt80ms"))


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "catnip.db") as s:
        _run(s, "dt", [(DT, _resolved(), _point0()), (DS, _resolved(), _point1())])
        _links(s, "dt", 0, {"high": (100, 1), "low": (200, 10), "lowest": (300, 30), "other": (400, 40)}, (500, 5))
        _links(s, "dt", 1, {"high": (100, 0), "other": (100, 2)}, (50, 0))
        yield s


def _row(table, **match) -> dict:
    rows = [r for r in table.records() if all(r[k] == v for k, v in match.items())]
    assert len(rows) == 1, (match, rows)
    return rows[0]


# --- samples, CCDFs, fractions, percentiles ------------------------------------------------------------
def test_ccdf_is_exact_and_failures_stay_above_every_value():
    s = sd.Sample((1.0, 2.0, 2.0, 3.0), failed=1)
    assert s.n == 5
    assert s.ccdf() == [(1.0, 4 / 5), (2.0, 2 / 5), (3.0, 1 / 5)]  # the failed one is greater than all
    assert sd.Sample((1.0, 2.0), 0).ccdf() == [(1.0, 0.5), (2.0, 0.0)]
    assert s.above(2.0) == 2 / 5 and s.above(0.5) == 1.0 and s.above(3.0) == 1 / 5
    assert sd.Sample((), 0).above(1.0) is None and sd.Sample((), 0).ccdf() == []


def test_quantiles_rank_failures_last():
    s = sd.Sample((0.03, 0.05, 0.16), 0)
    assert s.quantile(0.9) == pytest.approx(0.05 + 0.8 * 0.11)
    assert s.quantile(0.5) == 0.05 and s.quantile(1.0) == 0.16
    failed = sd.Sample((1.0, 2.0, 3.0), 1)  # n = 4: p50 at rank 1.5, p90 at 2.7, among the failure
    assert failed.quantile(0.5) == 2.5 and failed.quantile(0.6) == pytest.approx(2.8)
    assert failed.quantile(0.9) is None and failed.quantile(2 / 3) == 3.0
    assert sd.Sample((), 2).quantile(0.1) is None
    with pytest.raises(ValueError, match="outside"):
        s.quantile(1.5)


def test_curves_per_scheme_split_by_version_page_set_and_tag(store):
    probes, notes = sd.curves(store, ["dt"], sd.Selection("web", "1.0", "probe"))
    assert [c.scheme.label for c in probes] == ["DropTail", "3-level RED"]
    assert [c.scheme.key for c in probes] == [0, 1] and notes == []
    assert probes[0].pooled == sd.Sample((2.0, 6.0, 11.0), 1)
    assert probes[0].pooled.ccdf() == [(2.0, 0.75), (6.0, 0.5), (11.0, 0.25)]
    rest, _ = sd.curves(store, ["dt"], sd.Selection("web", "1.0", "rest"))
    assert [c.pooled for c in rest] == [sd.Sample((1.0, 3.0, 12.0), 0)]  # red3 has no other pages: no curve
    both, _ = sd.curves(store, ["dt"], sd.Selection("web", None, "all"))
    assert both[0].pooled.n == 10
    echo80, _ = sd.curves(store, ["dt"], sd.Selection("telnet", tag="rtt80ms"))
    assert echo80[0].pooled == sd.Sample((0.1, 0.12, 0.2, 1.1), 1)
    probes_ftp, _ = sd.curves(store, ["dt"], sd.Selection("ftp-probe"))
    files, _ = sd.curves(store, ["dt"], sd.Selection("ftp"))
    assert probes_ftp[0].pooled.values == (1.0, 2.0, 3.0, 5.0) and files[0].pooled.values == (0.5, 1.0, 2.0, 3.0, 5.0, 8.0)


def test_page_set_marker_from_the_pages_table_or_the_spec(tmp_path):
    """Where the pages table has a page_set column, its marker wins over the spec's; without a
    marker anywhere every page is in 'all' and none is a probe."""
    with Store(tmp_path / "m.db") as s:
        apps = [{"kind": "web", "name": None, "http_version": "1.0"}]
        _run(s, "m", [({}, _resolved(apps), _samples("web", "page_time", [1.0, 7.0]))])
        data = sd.PointData(s, sd.schemes(s, ["m"])[0][0].members[0])
        assert not data.has_probe_pages()
        assert data.sample(sd.Selection("web", "1.0", "all")).n == 2
        assert data.sample(sd.Selection("web", "1.0", "probe")).n == 0
        s.db.execute("ALTER TABLE pages ADD COLUMN page_set TEXT")  # a later schema's column
        s.add_transfers("m", 0, [], [{"client": "s1", "page": 1, "round": 0, "start": 1.0, "duration": 7.0}])
        s.db.execute("UPDATE pages SET page_set='probe' WHERE start=1.0")
        s.db.commit()
        data = sd.PointData(s, sd.schemes(s, ["m"])[0][0].members[0])
        assert data.has_probe_pages()
        assert data.sample(sd.Selection("web", "1.0", "probe")) == sd.Sample((7.0,), 0)
        assert data.sample(sd.Selection("web", "1.0", "rest")) == sd.Sample((1.0,), 0)
    assert sd.is_probe("probes") and sd.is_probe(True) and not sd.is_probe("random") and not sd.is_probe(None)


# --- the servdiff table ------------------------------------------------------------------------------------
def test_table_fractions_percentiles_and_counts_by_hand(store):
    t = layouts.build("servdiff", store, "dt")
    a = _row(t, scheme="DropTail", tag="all")
    assert a["web_pages"] == "probes" and a["reps"] == 1
    # HTTP/1.0 probes 2, 6, 11 and a failure: > 5 s 3 of 4, > 10 s 2 of 4; HTTP/1.1 probes 4, 5, 5.5
    assert (a["h10_pages"], a["h10_failed"], a["h10_over_5s"], a["h10_over_10s"]) == (4, 1, 0.75, 0.5)
    assert (a["h11_pages"], a["h11_failed"], a["h11_over_5s"], a["h11_over_10s"]) == (3, 0, 1 / 3, 0.0)
    # echoes 0.03 0.05 0.1 0.12 0.16 0.2 1.1 and a failure: 4 of 8 above 150 ms; p90 among the failure
    assert (a["echoes"], a["echo_failed"], a["echo_over_150ms"]) == (8, 1, 0.5)
    assert a["echo_p90"] is None and a["echo_p99"] is None
    assert (a["ftp_probe_files"], a["ftp_probe_p50"], a["ftp_probe_p90"]) == (4, 2.5, pytest.approx(4.4))
    assert a["h10_over_5s_ci95"] is None  # one repetition: no interval
    r20 = _row(t, scheme="DropTail", tag="rtt20ms")
    assert (r20["echoes"], r20["echo_over_150ms"]) == (3, pytest.approx(1 / 3))
    assert r20["echo_p90"] == pytest.approx(0.138) and r20["echo_p99"] == pytest.approx(0.05 + 0.98 * 0.11)
    assert (r20["h10_pages"], r20["ftp_probe_files"], r20["loss"]) == (0, 0, None)  # loss only in the 'all' row
    r80 = _row(t, scheme="DropTail", tag="rtt80ms")
    assert (r80["echoes"], r80["echo_over_150ms"], r80["h10_over_10s"]) == (5, 0.6, 0.5)
    assert [r["tag"] for r in t.records()] == ["all", "rtt20ms", "rtt80ms", "all", "rtt80ms"]


def test_loss_per_drop_level_by_hand(store):
    t = layouts.build("servdiff", store, "dt")
    a = _row(t, scheme="DropTail", tag="all")
    assert (a["loss_arrived"], a["loss_dropped"], a["loss"]) == (1000, 81, 0.081)
    assert (a["high_loss_arrived"], a["high_loss"]) == (100, 0.01)
    assert (a["med_loss_arrived"], a["med_loss"]) == (200, 0.05)       # AF12
    assert (a["low_loss_arrived"], a["low_loss"]) == (700, 0.1)        # AF13 and unmarked: 70 of 700
    assert (a["reverse_loss_arrived"], a["reverse_loss"]) == (500, 0.01)
    b = _row(t, scheme="3-level RED", tag="all")
    assert (b["med_loss_arrived"], b["med_loss"], b["low_loss"], b["high_loss"]) == (0, None, 0.02, 0.0)


def test_repetitions_and_seeds_pool_with_student_t_intervals(tmp_path):
    """Two seeds of one scheme (runs joined with '+') and two repetitions of one sweep point: the
    mean of each one's value, the Student-t 95% interval over them, the samples summed."""
    with Store(tmp_path / "p.db") as s:
        quarter = _samples("telnet", "echo_delay", [0.1, 0.1, 0.1, 0.2])      # 1 of 4 above 150 ms
        three = _samples("telnet", "echo_delay", [0.1, 0.2, 0.2, 0.2])        # 3 of 4
        _run(s, "a1", [({}, _resolved(), quarter)], seed=1)
        _run(s, "a2", [({}, _resolved(), three)], seed=2)
        _links(s, "a1", 0, {"other": (100, 10)}, (10, 0))
        _links(s, "a2", 0, {"other": (300, 60)}, (10, 0))
        t = layouts.build("servdiff", s, "a1+a2")
        r = _row(t, tag="all")
        half = t975(1) * math.sqrt(2 * 0.25 ** 2) / math.sqrt(2)
        assert (r["reps"], r["runs"], r["echoes"], r["echo_over_150ms"]) == (2, "a1+a2", 8, 0.5)
        assert r["echo_over_150ms_ci95"] == pytest.approx(half)
        assert (r["loss_arrived"], r["loss"]) == (400, pytest.approx(0.15))  # mean of 10% and 20%, not 70 / 400
        assert r["loss_ci95"] == pytest.approx(t975(1) * math.sqrt(2 * 0.05 ** 2) / math.sqrt(2))
        # repetitions: two points of one sweep assignment in one run pool the same way
        s.create_run("reps", "servdiff-test", "x", {"name": "servdiff-test"}, {}, 1, "abc", {}, {})
        for i, rows in enumerate((quarter, three)):
            s.create_point("reps", i, i, {}, {}, 1 + 1000 * i, record=_resolved())
            s.add_samples("reps", i, rows)
            s.update_point("reps", i, status="done", realtime_ok=1)
        s.create_point("reps", 2, 2, {}, {}, 2001, record=_resolved())  # still running: left out, and said
        r = _row(layouts.build("servdiff", s, "reps"), tag="all")
        assert (r["reps"], r["echo_over_150ms"], r["echo_over_150ms_ci95"]) == (2, 0.5, pytest.approx(half))
        assert "reps point 2: left out, status running" in layouts.build("servdiff", s, "reps").notes
        with pytest.raises(ValueError, match="run a1 is given twice"):
            layouts.build("servdiff", s, "a1", "a1+a2")


def test_a_percentile_among_one_repetitions_failures_leaves_no_value(tmp_path):
    with Store(tmp_path / "f.db") as s:
        _run(s, "b1", [({}, _resolved(), _samples("telnet", "echo_delay", [0.1, 0.2, 0.3]))], seed=1)
        _run(s, "b2", [({}, _resolved(), _samples("telnet", "echo_delay", [0.1, 0.2, None]))], seed=2)
        r = _row(layouts.build("servdiff", s, "b1+b2"), tag="all")
        assert r["echo_p99"] is None and r["echoes"] == 6 and r["echo_failed"] == 1
        assert r["echo_over_150ms"] == pytest.approx(2 / 3)


def test_runs_compared_are_schemes_named_by_their_scenario(tmp_path):
    with Store(tmp_path / "c.db") as s:
        _run(s, "x1", [({}, _resolved(), _samples("telnet", "echo_delay", [0.1]))], name="tree-dt")
        _run(s, "x2", [({}, _resolved(), _samples("telnet", "echo_delay", [0.2]))], name="tree-tcpds")
        t = layouts.build("servdiff", s, "x1", "x2")
        assert [(r["scheme"], r["echo_over_150ms"]) for r in t.records()] == [("tree-dt", 0.0), ("tree-tcpds", 1.0)]
        with pytest.raises(layouts.LayoutError, match="no web, telnet or ftp samples"):
            _run(s, "x3", [({}, _resolved(), [])], name="empty")
            layouts.build("servdiff", s, "x3")
        with pytest.raises(ValueError, match="different scenarios"):
            layouts.build("servdiff", s, "x1+x2")


def test_layout_renders_text_csv_and_json_from_one_table(store):
    t = layouts.build("servdiff", store, "dt")
    rows = list(csv.DictReader(io.StringIO(tables.render_csv(t))))
    assert len(rows) == 5 and rows[0]["h10_over_5s"] == "0.75" and rows[0]["loss_arrived"] == "1000"
    assert rows[0]["echo_p90"] == "" and rows[1]["tag"] == "rtt20ms"
    doc = json.loads(tables.render_json(t))
    assert doc["layout"] == "servdiff" and doc["rows"][0]["echo_over_150ms"] == 0.5
    cols = {c["name"]: c for c in doc["columns"]}
    assert cols["echo_p90"]["unit"] == "s" and cols["loss"]["unit"] == "1" and cols["loss_arrived"]["unit"] == "pkt"
    text = layouts.render_text(t)
    assert re.search(r"DropTail\s+all\s+probes\s+\|\s+4\s+75\.0%\s+50\.0%\s+\|\s+3\s+33\.3%\s+0\.0%", text)
    assert re.search(r"DropTail\s+all\s+\|\s+8\s+1\s+50\.0%\s+failed\s+failed", text)
    assert re.search(r"DropTail\s+\|\s+8\.1% of 1000 \|\s+1\.0% of 100 \|\s+5\.0% of 200 \|\s+10\.0% of 700"
                     r" \|\s+1\.0% of 500", text)
    # a tag's row only where it has samples of the block: droptail's rtt20ms has echoes, no FTP probe
    telnet_block, ftp_block = text.split("Telnet echo delay")[1], text.split("FTP probe file")[1]
    assert re.search(r"DropTail +rtt20ms", telnet_block.split("FTP probe file")[0]) and "rtt20ms" not in ftp_block
    assert "did not keep real time" not in text


# --- fair share and C.O.V. (Figs 16-17) ---------------------------------------------------------------------
def _bulk_run(s: Store, run_id: str, assignment: dict, window: bool = False, rate: int = 1_000_000) -> None:
    """Four long FTP flows on a 1 Mbit/s bottleneck (fair share 250 kbit/s), goodput every 2 s."""
    res = _resolved([{"kind": "bulk", "name": None, "interval": 2.0}],
                    {"kind": "tree", "bottleneck": {"rate": rate * 5 / 4}})  # 5 flows: 250 kbit/s each
    rows = []
    flows = [("s1/0", "rtt20ms", [300e3, 300e3, 300e3]), ("s2/0", "rtt200ms", [100e3, 200e3, 300e3]),
             ("s3/0", "rtt20ms", [250e3, 250e3, 250e3]), ("s4/0", "rtt200ms", [150e3, 150e3, 150e3])]
    for flow, tag, vals in flows:
        # with a window [100, 106): a sample before it and one at its end, both left out
        timed = list(zip((98.0, 100.0, 102.0, 104.0, 106.0), [999e3, *vals, 1e3])) if window else \
            list(zip((100.0, 102.0, 104.0), vals))
        rows += [{"app": "bulk", "metric": "goodput", "host": "d1", "peer": "s1", "flow": flow, "tag": tag, "t": t,
                  "value": v, "unit": "bit/s"} for t, v in timed]
        rows += _samples("bulk", "flow_goodput", [123.0], tag, flow=flow, unit="bit/s", t0=98.0)
        if window:
            rows += _samples("bulk", "window_goodput", [sum(vals) / 3], tag, flow=flow, unit="bit/s", t0=100.0)
            rows += _samples("bulk", "window_seconds", [6.0], tag, flow=flow, t0=100.0)
    rows += _samples("bulk", "flow_goodput", [None], "rtt200ms", flow="s5/0", unit="bit/s")  # never completed
    rows += _samples("bulk", "window_nstat", [3], None, flow="TcpExtTCPTimeouts", unit="count")  # not a flow
    s.create_run(run_id, "ftplong", "x", {"name": "ftplong"}, {}, 1, "abc", {}, {})
    s.create_point(run_id, 0, 0, assignment, {"name": "ftplong"}, 1, record=res)
    s.add_samples(run_id, 0, rows)
    _links(s, run_id, 0, {"other": (10, 0)}, (10, 0), rate=int(rate * 5 / 4))  # 5 flows: 250 kbit/s each
    s.update_point(run_id, 0, status="done", realtime_ok=1)
    s.finish_run(run_id, "done")


def test_fair_share_and_cov_per_rtt_class_by_hand(tmp_path):
    with Store(tmp_path / "l.db") as s:
        _bulk_run(s, "long", {"marking": "tcpds"})
        rep = sd.fair_share(s, ["long"])
        by = {f.flow: f for f in rep.flows}
        assert set(by) == {"s1/0", "s2/0", "s3/0", "s4/0", "s5/0"}  # the counter's 'flow' is not a flow
        assert by["s1/0"].fair_share == 250e3  # the rate the point ran (1.25 Mbit/s) over 5 flows
        # whole-flow throughput (flow_goodput) without a window
        assert by["s2/0"].throughput == 123.0
        assert by["s5/0"].throughput is None and by["s5/0"].error == "timeout"
        assert by["s2/0"].cov == pytest.approx(math.sqrt(2 / 3) * 100e3 / 200e3)  # population sdev / mean
        assert by["s2/0"].interval == 2.0 and len(by["s2/0"].series) == 3
        t = layouts.build("servdiff-fair", s, "long")
        r20 = _row(t, tag="rtt20ms")
        assert (r20["flows"], r20["failed"], r20["fair_share"], r20["cov"]) == (2, 0, 250e3, 0.0)
        r200 = _row(t, tag="rtt200ms")
        assert (r200["flows"], r200["failed"]) == (3, 1)
        assert r200["cov"] == pytest.approx((0.408248 + 0) / 2, rel=1e-5)


def test_fair_share_over_a_measured_window(tmp_path):
    with Store(tmp_path / "w.db") as s:
        _bulk_run(s, "long", {}, window=True)
        by = {f.flow: f for f in sd.fair_share(s, ["long"]).flows}
        assert [v for _, v in by["s2/0"].series] == [100e3, 200e3, 300e3]  # the samples at t 98 and 106 left out
        assert by["s2/0"].throughput == 200e3 and by["s2/0"].ratio == 0.8
        t = layouts.build("servdiff-fair", s, "long")
        r20, r200 = _row(t, tag="rtt20ms"), _row(t, tag="rtt200ms")
        assert (r20["ratio"], r20["ratio_min"], r20["ratio_max"]) == (pytest.approx(1.1), 1.0, 1.2)
        assert (r200["ratio"], r200["ratio_min"], r200["ratio_max"]) == (pytest.approx(0.7), 0.6, 0.8)
        assert r200["samples"] == 6 and r200["sample_interval"] == 2.0
        assert _row(t, tag="all")["ratio"] == pytest.approx(0.9)
        text = layouts.render_text(t)
        assert re.search(r"rtt200ms \|\s+3\s+1\s+250\.0 kb/s\s+0\.700\s+0\.600\s+0\.800", text)
        assert sd.default_flow(sd.fair_share(s, ["long"])).flow == "s2/0"  # the longest RTT's first flow


def test_fair_share_without_rate_counters_uses_the_topology_and_without_flows_says_so(tmp_path):
    with Store(tmp_path / "r.db") as s:
        rows = [{**r, "flow": f"s{k}/0"} for k, r in enumerate(_samples("bulk", "flow_goodput", [500e3, 1500e3],
                                                                          unit="bit/s"))]
        _run(s, "nolinks", [({}, _resolved([{"kind": "bulk", "name": None}], TREE), rows)])
        flows = sd.fair_share(s, ["nolinks"]).flows
        assert [(f.flow, f.fair_share, f.ratio) for f in flows] == [("s0/0", 1e6, 0.5), ("s1/0", 1e6, 1.5)]  # 2 Mbit/s / 2
        _run(s, "web", [({}, _resolved(), _point1())])
        with pytest.raises(layouts.LayoutError, match="no long FTP"):
            layouts.build("servdiff-fair", s, "web")


# --- figures -------------------------------------------------------------------------------------------------
def test_ccdf_figure_steps_thresholds_and_dashes(store):
    fig = sd.figure(store, ["dt"], "web-1.0")
    names = [d["name"] for d in fig.spec["data"]]
    # each curve labelled with its samples and, as in Fig. 2, the bottleneck's drop rate
    assert names == ["DropTail (probes) (n=4, 1 failed; loss 8.1%)",
                     "DropTail (other pages) (n=3; loss 8.1%)",
                     "3-level RED (probes) (n=2; loss 1.0%)"]
    probe, rest, red = fig.spec["data"]
    assert (probe["x"], probe["y"]) == ([2.0, 2.0, 6.0, 11.0], [1.0, 0.75, 0.5, 0.25])  # ends at the failure
    assert (rest["x"], rest["y"]) == ([1.0, 1.0, 3.0, 12.0], [1.0, 0.666667, 0.333333, 0.333333])
    assert rest["line"]["dash"] == "dash" and "dash" not in probe["line"] and probe["line"]["shape"] == "hv"
    assert probe["line"]["color"] == rest["line"]["color"] == figures.color(0) != red["line"]["color"]
    assert [(s["x0"], s["x1"]) for s in fig.spec["layout"]["shapes"]] == [(5.0, 5.0), (10.0, 10.0)]
    assert [a["text"] for a in fig.spec["layout"]["annotations"]] == ["5 s", "10 s"]
    assert fig.spec["layout"]["yaxis"]["type"] == "log" and fig.spec["layout"]["xaxis"]["title"]["text"].endswith("(s)")
    assert fig.lines[0] == "DropTail (probes): 4 samples (1 failed), 75.0% above 5 s, 50.0%" \
                           " above 10 s"
    telnet = sd.figure(store, ["dt"], "telnet", tag="rtt80ms")
    assert [(s["x0"]) for s in telnet.spec["layout"]["shapes"]] == [0.15]
    assert telnet.spec["data"][0]["y"] == [1.0, 0.8, 0.6, 0.4, 0.2]
    assert sd.figure(store, ["dt"], "ftp-probes").spec["layout"]["shapes"] == []  # no limit for the FTP probes
    with pytest.raises(sd.NoData, match="no samples for figure web-1.1, tag rtt20ms"):
        sd.figure(store, ["dt"], "web-1.1", tag="rtt20ms")


def test_ccdf_steps():
    assert figures.ccdf_steps([(1.0, 0.5), (2.0, 0.0)]) == ([1.0, 1.0, 2.0], [1.0, 0.5, 0.5])
    assert figures.ccdf_steps([(3.0, 0.0)]) == ([3.0], [1.0])
    assert figures.ccdf_steps([(1.0, 0.75), (4.0, 0.25)]) == ([1.0, 1.0, 4.0], [1.0, 0.75, 0.25])
    assert figures.ccdf_steps([]) == ([], [])


def test_fair_share_figures(tmp_path):
    with Store(tmp_path / "f.db") as s:
        _bulk_run(s, "w", {}, window=True)
        fig = sd.figure(s, ["w"], "fair-share").spec
        assert [d["x"] for d in fig["data"]] == [["rtt20ms", "rtt200ms"]] * 2
        ratio, cov_ = fig["data"]
        assert ratio["y"] == [pytest.approx(1.1), pytest.approx(0.7)] and cov_["line"]["dash"] == "dot"
        assert cov_["y"][0] == 0.0 and cov_["y"][1] == pytest.approx(0.408248 / 2, rel=1e-5)
        flow = sd.figure(s, ["w"], "flow-throughput")
        (series,) = flow.spec["data"]
        assert series["x"] == [0.0, 2.0, 4.0] and series["y"] == [100.0, 200.0, 300.0]
        assert flow.spec["layout"]["shapes"][0]["y0"] == 250.0  # the fair share, kbit/s
        assert "s2/0 (rtt200ms)" in flow.spec["layout"]["title"]["text"]
        assert sd.figure(s, ["w"], "flow-throughput", flow="s1/0").spec["data"][0]["y"] == [300.0] * 3
        with pytest.raises(sd.NoData, match="no flow 'nope'.*s1/0, s2/0, s3/0, s4/0, s5/0"):
            sd.figure(s, ["w"], "flow-throughput", flow="nope")
    for name, kw, message in (("nope", {}, "one of web-1.0"), ("telnet", {"flow": "s1/0"}, "--flow goes with"),
                              ("fair-share", {"tag": "rtt20ms"}, "--tag does not apply")):
        with pytest.raises(ValueError, match=message):
            sd.check_figure(name, **kw)


def test_figure_specs_pass_plotly_s_schema(store):
    for f in sd.run_figures(store, ["dt"]):
        figures._checked(f.spec)  # a misspelt property fails here
    assert [f.name for f in sd.run_figures(store, ["dt"])] == ["web-1.0", "web-1.1", "telnet", "telnet",
                                                               "ftp-probes", "ftp-files"]


# --- the CLI -------------------------------------------------------------------------------------------------
def _cli(db, *args):
    return CliRunner().invoke(main, ["report", *args, "--db", str(db)])


def test_cli_layouts_and_figure_spec(store):
    db = store.path
    res = _cli(db, "dt", "--layout", "servdiff", "--csv")
    assert res.exit_code == 0, res.output
    assert res.output == tables.render_csv(layouts.build("servdiff", store, "dt")).replace("\r\n", "\n")
    res = _cli(db, "dt", "--layout", "servdiff")
    assert res.exit_code == 0 and res.output.startswith("Service differentiation (Nouredine and Tobagi 2002): dt")
    res = _cli(db, "dt", "--figure", "telnet", "--tag", "rtt80ms", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == sd.figure(store, ["dt"], "telnet", "rtt80ms").spec
    assert "servdiff" in _cli(db, "--layouts").output and "servdiff-fair" in _cli(db, "--layouts").output


@pytest.mark.parametrize("args, message", [
    (["dt", "--tag", "rtt80ms"], "--tag goes with --figure"),
    (["dt", "--layout", "servdiff", "--out", "x.svg"], "--out goes with --figure, not --layout servdiff"),
    (["dt", "--figure", "telnet", "--loss"], "--loss and --figure telnet: choose one view"),
    (["dt", "--figure", "bogus"], "figure 'bogus': one of web-1.0"),
    (["dt", "--figure", "telnet", "--flow", "s1/0"], "--flow goes with the flow-throughput figure"),
    (["dt", "--figure", "telnet", "--out", "x.txt"], "the extension must be one of .svg, .pdf, .png"),
    (["dt", "--figure", "telnet", "--csv"], "--csv and --figure"),
    (["dt", "--figure", "fair-share"], "no long FTP (bulk) flows in dt"),
    (["nosuch", "--figure", "telnet"], "no run 'nosuch'"),
])
def test_cli_figure_refusals_in_one_line(store, args, message):
    res = _cli(store.path, *args)
    assert res.exit_code != 0 and message in res.output, res.output


@pytest.mark.slow
def test_cli_writes_the_figure_file(store, tmp_path):
    missing = figures.export_missing()
    if missing:
        pytest.skip(f"figure export: {missing}")
    out = tmp_path / "echo.svg"
    res = _cli(store.path, "dt", "--figure", "telnet", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[-1] == f"figure: {out}" and out.read_text().lstrip().startswith("<svg")
    assert "DropTail: 8 samples (1 failed), 50.0% above 150 ms" in res.output


# --- the dashboard -----------------------------------------------------------------------------------------------
@pytest.fixture
def client(store, tmp_path):
    _run(store, "catnip", [({}, {"topology": {"kind": "dumbbell"},
                                 "applications": [{"kind": "web", "name": None, "http_version": "1.0"}]},
                            _samples("web", "page_time", [1.0]))], name="quick")
    queue = RunQueue(store.path, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=store.path, scenarios_dir=tmp_path, queue=queue)
    yield app.test_client()
    queue.shutdown(timeout=5)


def test_run_page_shows_the_table_and_the_ccdfs(client, store):
    page = client.get("/runs/dt").get_data(as_text=True)
    section = re.search(r'<section id="servdiff">(.*?)</section>', page, re.DOTALL).group(1)
    rows = re.findall(r'<tr class="servdiff-row">(.*?)</tr>', section, re.DOTALL)
    assert len(rows) == 2  # the every-tag rows
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", rows[0], re.DOTALL)]
    assert cells[1:] == ["4", "75.0%", "50.0%", "3", "33.3%", "0.0%", "8", "50.0%", "failed", "failed", "4", "2.500",
                         "4.400", "8.1%", "1.0%", "5.0%", "10.0%"]
    specs = json.loads(re.search(r'<script id="servdiff-data" type="application/json">(.*?)</script>', section,
                                 re.DOTALL).group(1))
    assert specs == [f.spec for f in sd.run_figures(store, ["dt"])]
    assert section.count('class="chart servdiff-figure"') == len(specs) == 6
    assert 'href="/runs/dt/layouts/servdiff.csv"' in section and "servdiff-fair" not in section
    csv_ = client.get("/runs/dt/layouts/servdiff.csv")
    assert csv_.status_code == 200 and csv_.get_data(as_text=True).startswith("scheme,runs,reps,tag,web_pages")


def test_run_page_of_other_experiments_has_no_section(client):
    page = client.get("/runs/catnip")
    assert page.status_code == 200 and 'id="servdiff"' not in page.get_data(as_text=True)


def test_run_page_of_a_long_ftp_run_shows_the_fair_share(store, tmp_path):
    _bulk_run(store, "long", {}, window=True)
    queue = RunQueue(store.path, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    try:
        page = create_app(db=store.path, scenarios_dir=tmp_path, queue=queue).test_client().get("/runs/long")
        section = re.search(r'<section id="servdiff">(.*?)</section>', page.get_data(as_text=True), re.DOTALL).group(1)
        assert 'href="/runs/long/layouts/servdiff-fair.txt"' in section
        # no web, telnet or FTP samples: the table holds the bottleneck's loss only
        row = re.search(r'<tr class="servdiff-row">(.*?)</tr>', section, re.DOTALL).group(1)
        assert re.findall(r"<td>(\d+)</td>", row) == ["0", "0", "0", "0"]
        specs = json.loads(re.search(r'type="application/json">(.*?)</script>', section, re.DOTALL).group(1))
        assert [s["layout"]["title"]["text"][:13] for s in specs] == ["Long FTP: thr", "Long FTP thro"]
    finally:
        queue.shutdown(timeout=5)


def test_the_ccdfs_are_drawn_in_a_browser(store, browser):  # noqa: F811 - the imported fixture
    """The run page in headless Chromium: the page's own script draws every servdiff spec, the
    paper's limits as dotted lines with their labels; a screenshot goes to tests/artifacts/dashboard/."""
    from selenium.webdriver.common.by import By

    from tests.test_dashboard_browser import _shot, _wait
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "web", "--port", "0", "--db", str(store.path)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=os.environ.copy())
    try:
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
        assert match, "catnip web did not announce its address"
        d = browser
        d.get(f"http://127.0.0.1:{match.group(1)}/runs/dt")
        _wait("the servdiff charts", lambda: len(d.find_elements(By.CSS_SELECTOR, "#servdiff .main-svg")) >= 6, 20)
        limits = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#servdiff-figure-0 .annotation-text")]
        assert limits == ["5 s", "10 s"], limits
        assert len(d.find_elements(By.CSS_SELECTOR, "#servdiff-figure-0 .scatterlayer .trace")) == 3
        assert [e.text for e in d.find_elements(By.CSS_SELECTOR, "#servdiff-figure-3 .annotation-text")] == ["150 ms"]
        _shot(d, "servdiff-run")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
