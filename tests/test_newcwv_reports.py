"""The newCWV paper's reports (papers/newcwv/analysis.py, the layouts newcwv-gain, newcwv-loss, newcwv-trace
and ftp-throughput, the dashboard's charts) on stores written through the store's own API with
numbers whose results are known by hand; and the burst server's per-burst TCP_INFO statistics
(workloads/burst.py, workloads/apps/burst.py) on a loopback connection of this process."""

from __future__ import annotations

import html
import json
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import threading

import pytest
import yaml

from catnip.papers.newcwv import analysis as nc
from catnip.results import layouts
from catnip.results.samples import t975
from catnip.results.store import Store
from catnip.spec import scenario as s
from catnip.spec.record import PointRecord
from catnip.testbed.plan import plan
from tests.conftest import REPO
from tests.test_dashboard_browser import browser  # noqa: F401 - the headless Chromium fixture
from catnip.webui.app import create_app
from catnip.workloads import burst as burst_proc
from catnip.workloads import hostprog
from catnip.spec.apps import parse_spec
from catnip.workloads.apps.base import AppContext, Host, Proc
from catnip.workloads.apps.burst import INFINITE_SSTHRESH, Burst, server_stats

RENO = {"congestion_control": "reno"}
NEWCWV = {"congestion_control": "catnip_newcwv"}
PACED = {"congestion_control": "catnip_newcwv", "pacing": "internal", "pacing_ratio": 200}
T0 = 1000.0  # CLOCK_MONOTONIC of the first burst: any


def _resolved(servers: dict, iw: int = 3, mss: int | None = None, bulk: bool = False,
              timestamps: bool = True) -> dict:
    """The record (spec/record.py) of a point of Fig. 7's scenario with these burst servers' TCP
    settings, as the runner stores it."""
    raw = {k: v for k, v in yaml.safe_load((REPO / "scenarios" / "newcwv-fig7-unlimited.yaml").read_text()).items()
           if k != "sweep"}
    raw["tcp"] = {**raw["tcp"], "initial_cwnd": iw, "timestamps": timestamps, "groups": {"servers": servers}}
    if mss:
        raw["topology"] = {**raw["topology"], "mss": mss}
    if bulk:
        raw["topology"] = {**raw["topology"], "cross_pairs": 1}
        raw["applications"] = raw["applications"] + [
            {"kind": "bulk", "name": "ftp", "clients": "cross_clients", "servers": "cross_servers", "interval": "1s",
             "duration": "60s"}]
    return plan(s.validate(raw)).model_dump(mode="json")


def _sweep(sender: dict) -> dict:
    """The assignment of a point of a sweep over the burst servers' sender."""
    return {"tcp.groups.servers": sender}


def _bursts(cells: dict[str, list[float | None]], client: str = "c1", start: float = T0) -> list[dict]:
    """burst_time samples: per cell tag, the times of its bursts in order (None: a failed burst).
    The cells' bursts interleave in time as a shuffled plan's would."""
    rows, t = [], start
    longest = max(len(v) for v in cells.values())
    for k in range(longest):
        for tag, times in cells.items():
            if k < len(times):
                v = times[k]
                rows.append({"app": "burst", "metric": "burst_time", "host": client, "peer": "v1",
                             "flow": f"{client}/1", "tag": tag, "t": t, "value": v, "unit": "s",
                             "error": "timeout" if v is None else None})
                t += 5.0
    return rows


def _run(store: Store, run_id: str, points: list[tuple[dict, dict, list[dict]]], seed: int = 1,
         realtime: bool = True) -> None:
    """A finished run of scenario newcwv-test: points (assignment, resolved, samples)."""
    store.create_run(run_id, "newcwv-test", "scenarios/x.yaml", {"name": "newcwv-test"}, {}, seed, "abc", {}, {})
    for i, (assignment, resolved, samples) in enumerate(points):
        store.create_point(run_id, i, 0, assignment, {}, seed, record=resolved)
        store.add_samples(run_id, i, samples)
        store.update_point(run_id, i, status="done", realtime_ok=int(realtime), finished=1.0)
    store.finish_run(run_id, "done")


# Cell A: every pair gains exactly half. Cell B: unequal variance, so the mean of the per-burst
# gains (paper section 4.1) differs from the ratio of the means; its 4th newCWV burst failed.
A, B, C = "5120B/1s", "81920B/3s", "10240B/1s"
BASE_TIMES = {A: [1.0, 1.0, 1.0], B: [1.0, 4.0, 1.0, 2.0], C: [0.7]}
NEW_TIMES = {A: [0.5, 0.5, 0.5], B: [0.5, 1.0, 0.8, None]}
B_GAINS = [0.5, 0.75, 0.2]       # (Tr - Tc)/Tr of the three pairs
B_ROM = (2.0 - 2.3 / 3) / 2.0      # mean Tr 2.0, mean Tc 0.7667


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "catnip.db") as s:
        yield s


def _cell(table, **match):
    rows = [r for r in table.records() if all(r[k] == v for k, v in match.items())]
    assert len(rows) == 1, (match, rows)
    return rows[0]


def test_gain_by_hand_one_run(store):
    _run(store, "r1", [({"tcp.groups.servers": RENO}, _resolved(RENO), _bursts(BASE_TIMES)),
                       ({"tcp.groups.servers": NEWCWV}, _resolved(NEWCWV), _bursts(NEW_TIMES))])
    table = layouts.build("newcwv-gain", store, "r1")
    a = _cell(table, size=5120, idle=1.0)
    assert (a["gain"], a["gain_rom"], a["pairs"], a["interval"]) == (0.5, 0.5, 3, "bursts")
    assert a["comparison"] == "catnip_newcwv vs reno, pacing off"
    assert (a["newcwv_point"], a["baseline_point"]) == (1, 0)
    assert (a["mean_baseline"], a["mean_newcwv"]) == (1.0, 0.5)
    b = _cell(table, size=81920, idle=3.0)
    assert b["gain"] == pytest.approx(statistics.fmean(B_GAINS))          # 48.3%
    assert b["gain_rom"] == pytest.approx(B_ROM)                          # 61.7%
    assert abs(b["gain"] - b["gain_rom"]) > 0.1
    # the failed burst: its pair is dropped, the failure counted
    assert (b["pairs"], b["failed_baseline"], b["failed_newcwv"], b["bursts_newcwv"]) == (3, 0, 1, 4)
    # one run: paired t intervals over its bursts, t(0.975, 2) = 4.3027
    assert b["gain_ci95"] == pytest.approx(4.3027 * statistics.stdev(B_GAINS) / math.sqrt(3), rel=2e-5)
    q = (2.3 / 3) / 2.0
    resid = [(tc - q * tr) / 2.0 for tr, tc in [(1.0, 0.5), (4.0, 1.0), (1.0, 0.8)]]
    assert b["gain_rom_ci95"] == pytest.approx(4.3027 * statistics.stdev(resid) / math.sqrt(3), rel=2e-5)
    # a cell only the baseline has: a row without a gain, and a note
    c = _cell(table, size=10240, idle=1.0)
    assert (c["pairs"], c["bursts_baseline"], c["bursts_newcwv"], c["unpaired"], c["gain"]) == (0, 1, 0, 1, None)
    assert any("10 KB / 1 s has no newCWV bursts" in n for n in table.notes)
    # rows sorted by size, then idle
    assert [(r["size"], r["idle"]) for r in table.records()] == [(5120, 1.0), (10240, 1.0), (81920, 3.0)]
    text = layouts.render_text(table)
    assert "catnip_newcwv vs reno, pacing off: point 1 vs baseline point 0" in text
    assert "48.3% ±" in text and "61.7% ±" in text and "over the bursts (paired t interval)" in text
    grid = text.splitlines()
    head = next(i for i, line in enumerate(grid) if "(Tr - Tc)/Tr (paper" in line)
    assert grid[head + 1].split() == ["size", "\\", "idle", "1", "s", "3", "s"]
    assert grid[head + 2].split()[:4] == ["5", "KB", "50.0%", "±0.0"] and grid[head + 2].split()[-1] == "-"


def test_pairing_follows_the_order_in_time(store):
    """The k-th baseline burst of a cell goes with the k-th newCWV burst: the mean of ratios
    depends on it (the ratio of means does not)."""
    base = _bursts({B: [3.0, 1.0]})
    new = _bursts({B: [0.5, 2.5]})
    new.reverse()  # stored out of order: the pairing reads the times, not the order of rows
    _run(store, "r1", [(_sweep(RENO), _resolved(RENO), base), (_sweep(NEWCWV), _resolved(NEWCWV), new)])
    b = _cell(layouts.build("newcwv-gain", store, "r1"), size=81920)
    assert b["gain"] == pytest.approx(((3.0 - 0.5) / 3.0 + (1.0 - 2.5) / 1.0) / 2)  # -33%; by size it would be +33%
    assert b["gain_rom"] == pytest.approx(0.25)


@pytest.mark.parametrize("n_runs", [2, 3])
def test_interval_over_runs(store, n_runs):
    """One run per seed: estimates pool the pairs, intervals come from the per-run gains."""
    per_run = [([1.0, 1.0], [0.5, 0.5]), ([1.0, 1.0], [0.6, 0.6]), ([2.0, 2.0], [0.8, 0.8])][:n_runs]
    for i, (tr, tc) in enumerate(per_run):
        _run(store, f"seed{i}", [({"tcp.groups.servers": RENO}, _resolved(RENO), _bursts({A: tr})),
                                 ({"tcp.groups.servers": NEWCWV}, _resolved(NEWCWV), _bursts({A: tc}))], seed=i)
    table = layouts.build("newcwv-gain", store, *[f"seed{i}" for i in range(n_runs)])
    a = _cell(table, size=5120)
    gains = [0.5, 0.4, 0.6][:n_runs]  # each run's gain; here its ratio of means too
    assert (a["runs"], a["pairs"], a["interval"]) == (n_runs, 2 * n_runs, "runs")
    assert a["gain"] == pytest.approx(statistics.fmean(gains))
    half = t975(n_runs - 1) * statistics.stdev(gains) / math.sqrt(n_runs)
    assert (t975(1), t975(2)) == (pytest.approx(12.7062, abs=1e-4), pytest.approx(4.3027, abs=1e-4))
    assert a["gain_ci95"] == pytest.approx(half) and a["gain_rom_ci95"] == pytest.approx(half)
    trs = [x for tr, _ in per_run for x in tr]
    tcs = [x for _, tc in per_run for x in tc]
    assert a["gain_rom"] == pytest.approx((statistics.fmean(trs) - statistics.fmean(tcs)) / statistics.fmean(trs))
    assert f"over the {n_runs} runs (Student t, {n_runs - 1} df" in layouts.render_text(table)


def test_runs_of_different_scenarios_are_refused(store):
    _run(store, "r1", [({}, _resolved(RENO), _bursts({A: [1.0]}))])
    store.create_run("other", "another-scenario", "x.yaml", {}, {}, 1, "abc", {}, {})
    with pytest.raises(layouts.LayoutError, match="repetitions of one scenario"):
        layouts.build("newcwv-gain", store, "r1", "other")
    with pytest.raises(layouts.LayoutError, match="not joined with"):
        layouts.build("newcwv-gain", store, "r1+other")
    with pytest.raises(KeyError):
        layouts.build("newcwv-gain", store, "nosuchrun")


def test_baseline_is_the_other_sender_with_the_same_other_assignments(store):
    """Points (sender x IW): newCWV at IW 3 pairs with the baseline at IW 3, at IW 10 with IW 10;
    the paced newCWV point is compared too, named with both senders in full."""
    times = {(3, "reno"): 1.0, (3, "new"): 0.5, (10, "reno"): 0.8, (10, "new"): 0.6, (3, "paced"): 0.75}
    points = []
    for iw in (3, 10):
        for name, sender in (("reno", RENO), ("new", NEWCWV), ("paced", PACED)):
            if (iw, name) in times:
                points.append(({"tcp.groups.servers": sender, "tcp.initial_cwnd": iw}, _resolved(sender, iw),
                               _bursts({A: [times[(iw, name)]] * 2})))
    _run(store, "r1", points)
    table = layouts.build("newcwv-gain", store, "r1")
    got = {(r["newcwv_point"], r["baseline_point"]): (r["comparison"], r["gain"]) for r in table.records()}
    assert got == {
        (1, 0): ("catnip_newcwv vs reno, pacing off [initial_cwnd 3]", pytest.approx(0.5)),
        (2, 0): ("catnip_newcwv, pacing internal 200% vs reno, pacing off [initial_cwnd 3]", pytest.approx(0.25)),
        (4, 3): ("catnip_newcwv vs reno, pacing off [initial_cwnd 10]", pytest.approx(0.25))}


def _record(servers: dict, **kw) -> PointRecord:
    return PointRecord.model_validate(_resolved(servers, **kw))


def test_senders_and_contexts_from_what_the_servers_ran():
    # the group's own congestion control, else tcp.congestion_control; slow start after idle as it ran
    assert nc.sender_of(_record(NEWCWV), "servers") == nc.Sender("catnip_newcwv", "off", None, False)
    assert nc.sender_of(_record({}), "servers") == nc.Sender("reno", "off", None, True)
    assert nc.sender_of(_record(PACED), "servers").label() == "catnip_newcwv, pacing internal 200%"
    # said where it is not the sender's default (Reno restarts after idle, newCWV keeps its window)
    assert nc.sender_of(_record({"slow_start_after_idle": False}), "servers").label() == \
        "reno, pacing off, slow start after idle off"
    assert nc.sender_of(_record({"pacing": False}), "servers").pacing == "off"
    resolved = _record(NEWCWV)
    ctx = nc.context_of({"tcp.groups.servers": {**NEWCWV, "newcwv": {"bins": 5}, "initial_cwnd": 10},
                         "tcp.congestion_control": "reno", "topology.bottleneck.rate": "2Mbit"}, resolved, "servers")
    # the group has its own congestion control: tcp.congestion_control is another host's business
    assert ctx == {"tcp.groups.servers.initial_cwnd": 10, "tcp.congestion_control": "reno",
                   "topology.bottleneck.rate": "2Mbit"}
    assert nc.context_of({"tcp.congestion_control": "reno"}, _record({}), "servers") == {}
    assert nc.parse_cell("rtt200ms/40960B/2s") == nc.Cell(40960, 2.0, "rtt200ms")
    assert nc.parse_cell("40960B/0.25s") == nc.Cell(40960, 0.25, "")
    assert nc.parse_cell("warm") is None and nc.parse_cell(None) is None


def test_no_newcwv_point_or_no_bursts(store):
    _run(store, "r1", [({}, _resolved(RENO), _bursts({A: [1.0]}))])
    table = layouts.build("newcwv-gain", store, "r1")
    assert table.rows == () and any("nothing to compare" in n for n in table.notes)
    store.create_run("web", "newcwv-test", "x.yaml", {}, {}, 1, "abc", {}, {})
    web = plan(s.load(REPO / "scenarios" / "quick.yaml").points[0][1])
    store.create_point("web", 0, 0, {}, {}, 1, record=web.model_dump(mode="json"))
    with pytest.raises(layouts.LayoutError, match="no burst application"):
        layouts.build("newcwv-gain", store, "web")


def test_unfinished_points_are_left_out_and_named(store):
    _run(store, "r1", [(_sweep(RENO), _resolved(RENO), _bursts({A: [1.0, 1.0]})),
                       (_sweep(NEWCWV), _resolved(NEWCWV), _bursts({A: [0.5, 0.5]}))])
    store.update_point("r1", 1, status="failed")
    table = layouts.build("newcwv-gain", store, "r1")
    assert table.rows == ()
    assert any("point 1 (newCWV) left out: failed" in n
               for n in table.notes)


def test_cwnd_per_sender(store):
    def cwnd(values, host="v1"):
        return [{"app": "burst", "metric": "burst_cwnd", "host": host, "flow": "c1/1", "tag": A, "t": T0 + i,
                 "value": v, "unit": "segments"} for i, v in enumerate(values)]
    _run(store, "r1", [(_sweep(RENO), _resolved(RENO), _bursts({A: [1.0, 1.0]}) + cwnd([3, 3])),
                       (_sweep(NEWCWV), _resolved(NEWCWV), _bursts({A: [0.5, 0.5]}) + cwnd([20, 30]))])
    a = _cell(layouts.build("newcwv-gain", store, "r1"), size=5120)
    assert (a["cwnd_baseline"], a["cwnd_newcwv"]) == (3.0, 25.0)


def _retrans(values: list[int], tag: str = A) -> list[dict]:
    return [{"app": "burst", "metric": "burst_retrans", "host": "v1", "flow": "c1/1", "tag": tag, "t": T0 + 5 * i,
             "value": v, "unit": "segments"} for i, v in enumerate(values)]


def _link_stats(store: Store, run_id: str, point: int, arrived: int, dropped: int) -> None:
    final = {"links": {"r1>r2": {"arrived": {"other": [arrived, 0]}, "sent": {"other": [arrived - dropped, 0]},
                                 "dropped": {"other": [dropped, 0]}},
                       "r2>r1": {"arrived": {"other": [500, 0]}, "sent": {"other": [500, 0]},
                                 "dropped": {"other": [7, 0]}}}}
    store.add_link_stats(run_id, point, "r1", final, {"r1>r2": "bottleneck-data", "r2>r1": "bottleneck-ack"}, {}, {})


def test_loss_per_cell_and_drops_per_point(store):
    _run(store, "r1", [(_sweep(RENO), _resolved(RENO), _bursts({A: [1.0, 1.0, None]}) + _retrans([0, 2, 4])),
                       (_sweep(NEWCWV), _resolved(NEWCWV), _bursts({A: [0.5, 0.5, 0.5]}) + _retrans([1, 1, 1]))])
    _link_stats(store, "r1", 0, 1000, 30)
    _link_stats(store, "r1", 1, 1000, 50)
    table = layouts.build("newcwv-loss", store, "r1")
    base = _cell(table, point=0)
    assert (base["bursts"], base["failed"], base["retrans_mean"], base["retrans_total"]) == (3, 1, 2.0, 6.0)
    assert base["retrans_ci95"] == pytest.approx(4.3027 * 2.0 / math.sqrt(3), rel=2e-5) and base["interval"] == "bursts"
    # the data direction's drops only (catnip-loss reads the same role)
    assert (base["bottleneck_drops"], base["bottleneck_arrived"], base["bottleneck_loss"]) == (30, 1000, 0.03)
    new = _cell(table, point=1)
    assert (new["retrans_mean"], new["retrans_ci95"], new["bottleneck_drops"]) == (1.0, 0.0, 50)
    assert new["sender"] == "catnip_newcwv, pacing off"
    text = layouts.render_text(table)
    assert "bottleneck drops 30 of 1000 packets (3.0%)" in text and "2.00 ±4.97 (3)" in text


def test_loss_over_runs(store):
    for i, vals in enumerate(([0, 2], [2, 4])):
        _run(store, f"s{i}", [(_sweep(NEWCWV), _resolved(NEWCWV), _bursts({A: [0.5, 0.5]}) + _retrans(vals))], seed=i)
        _link_stats(store, f"s{i}", 0, 100, 10)
    row = _cell(layouts.build("newcwv-loss", store, "s0", "s1"), point=0)
    assert (row["runs"], row["bursts"], row["retrans_mean"], row["interval"]) == (2, 4, 2.0, "runs")
    assert row["retrans_ci95"] == pytest.approx(12.7062 * statistics.stdev([1.0, 3.0]) / math.sqrt(2), rel=2e-5)
    assert (row["bottleneck_drops"], row["bottleneck_arrived"]) == (20, 200)


def _trace(flow: str, t: float, event: str, **values) -> list[dict]:
    units = {"cwnd": "segments", "ssthresh": "segments", "pipeack": "bytes", "pipeack_sample": "bytes"}
    return [{"app": "sender", "metric": m, "host": "v1", "flow": flow, "tag": event, "t": t, "value": v,
             "unit": units[m]} for m, v in values.items()]


def test_trace_in_segments_of_the_mss(store):
    flow = "10.2.0.2:8070-40000"
    samples = (_trace(flow, 100.0, "sample", cwnd=10, pipeack_sample=14600)
               + _trace(flow, 100.5, "closedown", cwnd=5, pipeack=14600, ssthresh=8)
               + _trace(flow, 100.2, "tx_start", cwnd=10))
    # segments of 1460 bytes without timestamps; 1448 with them (the kernel's mss_cache); topology.mss
    _run(store, "r1", [({"tcp.groups.servers.newcwv.bins": 4}, _resolved(NEWCWV, timestamps=False), samples),
                       ({"tcp.groups.servers.newcwv.bins": 5}, _resolved(NEWCWV), samples[:2]),
                       ({"tcp.groups.servers.newcwv.bins": 6}, _resolved(NEWCWV, mss=1012), samples[:2])])
    table = layouts.build("newcwv-trace", store, "r1")
    rows = [(r["point"], r["t"], r["event"], r["cwnd"], r["ssthresh"], r["pipeack"], r["pipeack_sample"], r["mss"])
            for r in table.records()]
    assert rows == [(0, 0.0, "sample", 10, None, None, 10.0, 1460),
                    (0, pytest.approx(0.2), "tx_start", 10, None, None, None, 1460),
                    (0, 0.5, "closedown", 5, 8, 10.0, None, 1460),
                    (1, 0.0, "sample", 10, None, None, pytest.approx(14600 / 1448), 1448),
                    (2, 0.0, "sample", 10, None, None, pytest.approx(14.6), 1000)]
    assert "pipeACK in segments of 1460 bytes" in layouts.render_text(table)
    _run(store, "r2", [({}, _resolved(NEWCWV), _bursts({A: [0.5]}))])
    assert "has no newCWV trace" in layouts.render_text(layouts.build("newcwv-trace", store, "r2"))


def test_trace_summary_counts_samples_the_filter_held_above(store):
    flow = "10.2.0.2:8070-40000"
    samples = (_trace(flow, 10.0, "sample", cwnd=20, pipeack=29200, pipeack_sample=29200)
               + _trace(flow, 10.3, "sample", cwnd=31, pipeack=29200, pipeack_sample=2920)
               + _trace(flow, 10.6, "sample", cwnd=25, pipeack=4380, pipeack_sample=4380)
               + _trace(flow, 11.0, "tx_start", cwnd=25))
    _run(store, "r3", [({"scheme": "filter-4-bins"}, _resolved(NEWCWV, timestamps=False), samples)])
    text = layouts.render_text(layouts.build("newcwv-trace", store, "r3"))
    assert ("3 pipeACK samples, pipeACK above the sample at 1; largest pipeACK 20.0 segments;"
            " largest cwnd 31 segments at 0.30 s") in text, text


def _ftp(t0: float, values: list[float]) -> list[dict]:
    rows = [{"app": "ftp", "metric": "start", "host": "x1", "flow": "x1/0", "t": t0, "value": 0.0, "unit": "s"}]
    rows += [{"app": "ftp", "metric": "goodput", "host": "x1", "flow": "x1/0", "t": t0 + 0.1 + k, "value": v,
              "unit": "bit/s"} for k, v in enumerate(values)]
    return rows


def _one_burst(t: float, seconds: float, size: int) -> list[dict]:
    return [{"app": "burst", "metric": "burst_time", "host": "c1", "flow": "c1/1", "tag": f"{size}B/1s", "t": t,
             "value": seconds, "unit": "s"}]


def test_ftp_throughput_bins_means_ratio_and_fairness(store):
    # The newCWV point's FTP flow: 1..6 Mbit/s over six 1 s intervals; the baseline's half that.
    # One burst of 62500 B in 0.5 s (1 Mbit/s) from 0.75 s to 1.25 s after the first interval
    # began: half in the 1 Mbit/s interval, half in the 2 Mbit/s one, so FTP had 1.5 Mbit/s then.
    new = [1e6 * (k + 1) for k in range(6)]
    _run(store, "r1", [(_sweep(RENO), _resolved(RENO, bulk=True), _ftp(50.0, [v / 2 for v in new])),
                       (_sweep(NEWCWV), _resolved(NEWCWV, bulk=True), _ftp(50.0, new) + _one_burst(50.85, 0.5, 62500))])
    rep = nc.ftp_throughput(store, ["r1"], width=2.0)
    base, p = rep.points
    assert p.bins == {0: 1.5e6, 1: 3.5e6, 2: 5.5e6} and base.bins[2] == 2.75e6
    assert (p.mean, base.mean, p.ratio, base.ratio, p.baseline_point) == (3.5e6, 1.75e6, 2.0, 1.0, 0)
    assert (p.http_rate, p.ftp_rate_bursts) == (pytest.approx(1e6), pytest.approx(1.5e6))
    assert p.jain == pytest.approx(2.5 ** 2 / (2 * (1 + 1.5 ** 2)))
    assert base.jain is None  # no bursts at that point
    table = layouts.build("ftp-throughput", store, "r1")  # bins of the iperf3 interval (1 s)
    assert [c.name for c in table.columns] == ["row", "t", "unit", "p0 reno", "p1 catnip_newcwv"]
    bins = [r for r in table.records() if r["row"] == "bin"]
    assert [r["t"] for r in bins] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and bins[3]["p1 catnip_newcwv"] == 4e6
    ratio = _cell(table, row="ratio_to_baseline")
    assert (ratio["unit"], ratio["p0 reno"], ratio["p1 catnip_newcwv"]) == ("1", 1.0, 2.0)
    assert "Jain's index 0.962" in layouts.render_text(table)


def test_fairness_index():
    assert nc.jain([1.0, 1.0]) == 1.0 and nc.jain([1.0, 0.0]) == 0.5 and nc.jain([]) is None


# --- the dashboard ---------------------------------------------------------------------------------
def _record_web_runs(s: Store) -> None:
    """r1: bursts, a trace and an FTP flow; r2: bursts only."""
    flow = "10.2.0.2:8070-40000"
    trace = (_trace(flow, 100.0, "sample", cwnd=10, pipeack_sample=14600)
             + _trace(flow, 100.5, "ack", cwnd=12, pipeack=14480))
    _run(s, "r1", [({"tcp.groups.servers": RENO}, _resolved(RENO, bulk=True),
                    _bursts(BASE_TIMES) + _ftp(50.0, [1e6, 1e6])),
                   ({"tcp.groups.servers": NEWCWV}, _resolved(NEWCWV, bulk=True),
                    _bursts(NEW_TIMES) + trace + _ftp(50.0, [2e6, 2e6]))])
    _run(s, "r2", [({"tcp.groups.servers": RENO}, _resolved(RENO), _bursts({A: [1.0]})),
                   ({"tcp.groups.servers": NEWCWV}, _resolved(NEWCWV), _bursts({A: [0.8]}))])


@pytest.fixture
def web(tmp_path):
    db = tmp_path / "catnip.db"
    with Store(db) as s:
        _record_web_runs(s)
    from catnip.controller.run_queue import RunQueue
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=db, scenarios_dir=tmp_path, queue=queue)
    yield app.test_client()
    queue.shutdown(timeout=5)


def test_run_page_draws_the_gain_grid_trace_and_ftp(web):
    page = web.get("/runs/r1").get_data(as_text=True)
    assert 'id="newcwv-gain-0"' in page and 'id="newcwv-trace-0"' in page and 'id="newcwv-ftp"' in page
    for name in ("newcwv-gain", "newcwv-loss", "newcwv-trace", "ftp-throughput"):
        assert f"/runs/r1/layouts/{name}.csv" in page and f"/runs/r1/layouts/{name}.json" in page
    data = json.loads(page.split('<script id="newcwv-data" type="application/json">', 1)[1].split("</script>")[0])
    (heat,) = data["gain"]
    h = heat["data"][0]
    assert h["type"] == "heatmap" and h["x"] == ["1 s", "3 s"] and h["y"] == ["5 KB", "10 KB", "80 KB"]
    assert h["z"] == [[50.0, None], [None, None], [None, 48.33]]
    assert h["text"][2][1] == "48.3%" and "± 68.4 (95%, over bursts)" in h["customdata"][2][1]
    assert "ratio of means 61.7%" in h["customdata"][2][1]
    assert [t["name"] for t in data["trace"][0]["data"]] == ["cwnd", "pipeACK (max filter)", "pipeACK sample per round"]
    assert data["trace"][0]["data"][2]["y"] == [round(14600 / 1448, 2)]  # segments of 1448 B: timestamps on
    assert [t["y"] for t in data["ftp"]["data"]] == [[1.0, 1.0], [2.0, 2.0]]


def test_run_without_bursts_has_no_newcwv_section(web, tmp_path):
    page = web.get("/runs/r2").get_data(as_text=True)
    assert 'id="newcwv-gain-0"' in page and "newcwv-trace-0" not in page and 'id="newcwv-ftp"' not in page


def test_layout_downloads(web):
    r = web.get("/runs/r1/layouts/newcwv-gain.csv")
    assert r.status_code == 200 and r.mimetype == "text/csv"
    head = r.get_data(as_text=True).splitlines()[0].split(",")
    assert head[:3] == ["comparison", "newcwv_point", "baseline_point"] and "gain_rom_ci95" in head
    body = web.get("/runs/r1/layouts/newcwv-gain.json").get_json()
    assert body["layout"] == "newcwv-gain" and {r["size"] for r in body["rows"]} == {5120, 10240, 81920}
    assert "pacing off" in web.get("/runs/r1/layouts/newcwv-gain.txt").get_data(as_text=True)
    # the seeds as repetitions: ?run= adds runs of the same scenario
    two = web.get("/runs/r1/layouts/newcwv-gain.json?run=r2").get_json()
    assert two["run_ids"] == ["r1", "r2"] and _row(two, 5120)["interval"] == "runs"


def test_the_heat_map_is_drawn_in_a_browser(tmp_path, browser):  # noqa: F811 - the imported fixture
    """The run page in headless Chromium: Plotly draws the gain heat map with each cell's value,
    the trace and the FTP throughput; a screenshot goes to tests/artifacts/dashboard/."""
    from selenium.webdriver.common.by import By

    from tests.test_dashboard_browser import _shot, _wait
    db = tmp_path / "catnip.db"
    with Store(db) as s:
        _record_web_runs(s)
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "web", "--port", "0", "--db", str(db)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    try:
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
        assert match, "catnip web did not announce its address"
        d = browser
        d.get(f"http://127.0.0.1:{match.group(1)}/runs/r1")
        _wait("the newCWV charts", lambda: len(d.find_elements(By.CSS_SELECTOR, "#newcwv .main-svg")) >= 3, 20)
        assert d.find_elements(By.CSS_SELECTOR, "#newcwv-gain-0 .heatmaplayer image, #newcwv-gain-0 .heatmaplayer")
        shown = {e.text for e in d.find_elements(By.CSS_SELECTOR, "#newcwv-gain-0 .heatmaplayer text")}
        assert {"50.0%", "48.3%", "-"} <= shown, shown
        legend = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#newcwv-trace-0 .legendtext")]
        assert legend == ["cwnd", "pipeACK (max filter)", "pipeACK sample per round"], legend
        assert len(d.find_elements(By.CSS_SELECTOR, "#newcwv-ftp .scatterlayer .trace")) == 2
        _shot(d, "newcwv-run")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def _row(body, size):
    return next(r for r in body["rows"] if r["size"] == size)


@pytest.mark.parametrize("url, status, message", [
    ("/runs/r1/layouts/no-such-layout.csv", 404, "no layout 'no-such-layout'"),
    ("/runs/r1/layouts/newcwv-gain.xlsx", 404, "no 'xlsx' download"),
    ("/runs/bad%20id/layouts/newcwv-gain.csv", 400, "is not a run id"),
    ("/runs/nosuch/layouts/newcwv-gain.csv", 404, "no run 'nosuch'"),
    ("/runs/r1/layouts/newcwv-gain.csv?run=bad%20id", 400, "not a run id"),
    ("/runs/r1/layouts/newcwv-gain.csv?run=nosuch", 404, "no run 'nosuch'"),
    ("/runs/r1/layouts/newcwv-trace.csv?run=r2", 400, "takes 1 run id(s), not 2"),
    ("/runs/r1/layouts/catnip-table-xi.json", 400, "takes 2 or more run id(s)"),
])
def test_layout_download_bad_requests(web, url, status, message):
    r = web.get(url)
    assert r.status_code == status and message in html.unescape(r.get_data(as_text=True))


# --- the burst server's statistics ---------------------------------------------------------------
def test_tcp_info_offsets_on_a_loopback_connection():
    with socket.create_server(("127.0.0.1", 0)) as lsock, \
            socket.create_connection(lsock.getsockname()) as cli, lsock.accept()[0] as srv:
        info = burst_proc.tcp_info(srv)
        # Before any data: ESTABLISHED, Linux's initial window (RFC 6928: 10), no loss yet so the
        # kernel's infinite ssthresh, nothing retransmitted, snd_mss what TCP_MAXSEG says.
        assert info["state"] == burst_proc.TCP_ESTABLISHED
        assert (info["cwnd"], info["ssthresh"], info["total_retrans"]) == (10, INFINITE_SSTHRESH, 0)
        assert info["mss"] == srv.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
        assert info["rto_us"] >= 200_000  # TCP_RTO_MIN
        srv.sendall(b"x" * 100_000)
        got = 0
        while got < 100_000:
            got += len(cli.recv(65536))
        after = burst_proc.tcp_info(srv)
        assert after["cwnd"] >= 10 and after["total_retrans"] == 0


class _Records:
    """A stats log in memory: the handler's records, and a condition to wait on."""

    def __init__(self):
        self.recs: list[dict] = []
        self.cond = threading.Condition()

    def emit(self, rec: dict) -> None:
        with self.cond:
            self.recs.append(rec)
            self.cond.notify_all()

    def wait_for(self, kind: str, timeout: float = 10.0) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: any(r["kind"] == kind for r in self.recs), timeout)


def test_burst_server_records_each_burst_and_the_close():
    stats = _Records()
    server = hostprog.Server(("127.0.0.1", 0), burst_proc._Handler)
    server.nagle, server.stats = False, stats
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection(server.server_address) as s:
            for rid, size in ((-1, 1000), (0, 5000), (1, 80_000)):
                s.sendall(b"%d %d\n" % (size, rid))
                got = 0
                while got < size:
                    got += len(s.recv(65536))
            port = s.getsockname()[1]
        stats.wait_for("close")
    finally:
        server.shutdown()
        server.server_close()
    reqs = [r for r in stats.recs if r["kind"] == "request"]
    assert [(r["id"], r["n"], r["size"]) for r in reqs] == [(-1, 0, 1000), (0, 1, 5000), (1, 2, 80_000)]
    assert all(r["peer"] == f"127.0.0.1:{port}" and r["client"] == "127.0.0.1" for r in stats.recs)
    assert all(r["cwnd"] >= 1 and r["total_retrans"] == 0 and r["ssthresh"] == INFINITE_SSTHRESH for r in reqs)
    (close,) = [r for r in stats.recs if r["kind"] == "close"]
    assert (close["requests"], close["total_retrans"]) == (3, 0)
    per_burst = server_stats(stats.recs)
    assert set(per_burst) == {("127.0.0.1", -1), ("127.0.0.1", 0), ("127.0.0.1", 1)}
    assert all(v["retrans"] == 0 for v in per_burst.values())
    # the request line without a burst number still works (and is not joined to a burst)
    assert burst_proc.parse_request(b"5000") == (5000, None) and burst_proc.parse_request(b"5000 7") == (5000, 7)
    assert burst_proc.parse_request(b"0 1") is None and burst_proc.parse_request(b"x") is None


def test_retransmissions_per_burst_from_successive_readings():
    def req(peer, n, rid, total, size=1000):
        return {"kind": "request", "peer": peer, "client": "10.0.0.1", "id": rid, "n": n, "size": size,
                "cwnd": 10 + n, "ssthresh": INFINITE_SSTHRESH, "total_retrans": total}
    recs = [req("a:1", 0, -1, 0), req("a:1", 1, 0, 2), req("a:1", 2, 1, 5),
            {"kind": "close", "peer": "a:1", "client": "10.0.0.1", "total_retrans": 6},
            req("a:2", 0, 2, 0), req("a:2", 1, 3, 1)]  # a second connection, not closed yet
    got = {k[1]: v["retrans"] for k, v in server_stats(recs).items()}
    assert got == {-1: 2, 0: 3, 1: 1, 2: 1, 3: None}


def test_burst_samples_join_the_client_burst(tmp_path):
    spec = parse_spec({"kind": "burst", "clients": "clients", "servers": "servers", "cells": [["5KB", "1s"]]})
    client = Host("c1", "10.0.0.1", "clients", 0, "rtt200ms")
    server = Host("v1", "10.1.0.1", "servers", 0, "")
    app = Burst(spec, AppContext(tmp_path, 1, 60.0, "python", tmp_path, 0.0), [client], [server])
    app.server_side = {("10.0.0.1", 0): {"size": 5120, "cwnd": 12, "ssthresh": INFINITE_SSTHRESH, "retrans": 2},
                       ("10.0.0.1", 1): {"size": 5120, "cwnd": 7, "ssthresh": 5, "retrans": None},
                       ("10.0.0.1", 2): {"size": 1000, "cwnd": 9, "ssthresh": 5, "retrans": 0}}
    rec = {"kind": "burst", "seq": 0, "size": 5120, "idle": 1.0, "conn": 2, "t": 10.5, "time": 0.4, "error": None}
    rows = {r["metric"]: r for r in app.samples_of(rec, client, server)}
    assert set(rows) == {"burst_time", "burst_cwnd", "burst_retrans"}  # ssthresh still infinite: no sample
    for m in ("burst_cwnd", "burst_retrans"):
        r = rows[m]
        assert (r["host"], r["peer"], r["flow"], r["tag"], r["t"], r["unit"]) == \
            ("v1", "c1", "c1/2", "rtt200ms/5120B/1s", 10.5, "segments")
    assert (rows["burst_cwnd"]["value"], rows["burst_retrans"]["value"]) == (12, 2)
    second = {r["metric"]: r["value"] for r in app.samples_of({**rec, "seq": 1}, client, server)}
    assert second == {"burst_time": 0.4, "burst_cwnd": 7, "burst_ssthresh": 5}
    # a burst the server never saw, or saw with another size (not this burst): only the client's sample
    assert [r["metric"] for r in app.samples_of({**rec, "seq": 5}, client, server)] == ["burst_time"]
    assert [r["metric"] for r in app.samples_of({**rec, "seq": 2}, client, server)] == ["burst_time"]


class _Popen:
    """A server process as read_server_stats sees it: poll() runs `on_poll` (the FIN arriving
    while collect waits) and answers `code`."""

    def __init__(self, code=None, on_poll=None):
        self.code, self.on_poll, self.polls = code, on_poll, 0

    def poll(self):
        self.polls += 1
        if self.on_poll:
            self.on_poll()
        return self.code


def _collecting_app(tmp_path, popen):
    spec = parse_spec({"kind": "burst", "clients": "clients", "servers": "servers", "cells": [["5KB", "1s"]]})
    server = Host("v1", "10.1.0.1", "servers", 0, "")
    app = Burst(spec, AppContext(tmp_path, 1, 60.0, "python", tmp_path, 0.0),
                [Host("c1", "10.0.0.1", "clients", 0, "")], [server])
    app.procs.append(Proc(server, "server", popen, tmp_path / "log"))
    path = app.stats_path(server)
    path.write_text("".join(json.dumps({"kind": "request", "peer": "10.0.0.1:5", "client": "10.0.0.1", "id": i,
                                        "n": i, "size": 5120, "cwnd": 3, "ssthresh": 7, "total_retrans": 2 * i})
                            + "\n" for i in range(2)))
    return app, path


def test_collect_waits_for_the_close_of_each_connection(tmp_path):
    def fin():
        with open(path, "a") as fh:
            fh.write(json.dumps({"kind": "close", "peer": "10.0.0.1:5", "client": "10.0.0.1", "total_retrans": 5})
                     + "\n")
    popen = _Popen(on_poll=fin)
    app, path = _collecting_app(tmp_path, popen)
    app.read_server_stats()
    assert {k: v["retrans"] for k, v in app.server_side.items()} == {("10.0.0.1", 0): 2, ("10.0.0.1", 1): 3}
    assert popen.polls == 1


@pytest.mark.parametrize("code", [0, None])
def test_collect_does_not_wait_for_a_dead_server_or_forever(tmp_path, monkeypatch, code):
    monkeypatch.setattr("catnip.workloads.apps.burst.CLOSE_WAIT_S", 0.2)
    app, _ = _collecting_app(tmp_path, _Popen(code))
    app.read_server_stats()
    # the last burst's close never came: no retransmissions for it, the others' still known
    assert {k: v["retrans"] for k, v in app.server_side.items()} == {("10.0.0.1", 0): 2, ("10.0.0.1", 1): None}
