"""The application plug-ins bulk, telnet, burst and ftp (workloads/apps/): their schemas, samplers
and iperf3 parsing without root, then each end to end through the plug-in API on a line of
namespaces (testbed/netline.py) with a 10 Mbit/s htb on the router, and with its server killed."""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from catnip.results.store_runs import SAMPLE_KEYS
from catnip.testbed.netline import NetLine, NsNode
from catnip.workloads import ftp as ftp_proc
from catnip.workloads.apps import base
from catnip.spec.apps import parse_spec
from catnip.workloads.apps.base import AppContext, AppError, Host
from catnip.workloads.apps.bulk import parse_flow
from catnip.workloads.apps.burst import cell_tag, plan
from catnip.workloads.apps.common import host_seed, parse_size
from catnip.workloads.telnet import gaps

REPO = Path(__file__).resolve().parents[1]
PREFIX, NET = "ctpa", 68
RATE_BPS = 10_000_000


# --- no root: schemas, samplers, parsing --------------------------------------------------------

BASE = {"clients": "c", "servers": "s"}


@pytest.mark.parametrize("raw, field", [
    ({"kind": "bulk"}, "duration, bytes"),
    ({"kind": "bulk", "duration": "1.5s"}, "duration"),
    ({"kind": "bulk", "duration": 5, "bytes": "1MB"}, "duration, bytes"),
    ({"kind": "bulk", "bytes": "10p"}, "bytes"),
    ({"kind": "bulk", "bytes": "1MB", "flows_per_client": 0}, "flows_per_client"),
    ({"kind": "bulk", "bytes": "1MB", "interval": "10ms"}, "interval"),
    ({"kind": "bulk", "bytes": "1MB", "direction": "sideways"}, "direction"),
    ({"kind": "bulk", "bytes": "1MB", "congestion_control": "Reno; rm"}, "congestion_control"),
    ({"kind": "bulk", "bytes": "1MB", "stagger": "-1s"}, "stagger"),
    ({"kind": "bulk", "bytes": "1MB", "servers": None}, "servers"),
    ({"kind": "bulk", "bytes": "1MB", "flows": 3}, "flows"),
    ({"kind": "telnet"}, "duration, keystrokes"),
    ({"kind": "telnet", "keystrokes": 5, "model": "poisson"}, "model"),
    ({"kind": "telnet", "keystrokes": 5, "payload": 0}, "payload"),
    ({"kind": "telnet", "keystrokes": 5, "payload": "2KB"}, "payload"),
    ({"kind": "telnet", "keystrokes": 5, "mean": "fast"}, "mean"),
    ({"kind": "telnet", "keystrokes": 0}, "keystrokes"),
    ({"kind": "burst", "bursts": [], "idles": ["1s"]}, "bursts"),
    ({"kind": "burst", "bursts": ["5KB"]}, "idles"),
    ({"kind": "burst", "bursts": ["5KB"], "idles": ["-1s"]}, "idles"),
    ({"kind": "burst", "bursts": ["5 parsecs"], "idles": ["1s"]}, "bursts"),
    ({"kind": "burst", "bursts": ["5KB"], "idles": ["1s"], "cells": [["5KB", "1s"]]}, "cells"),
    ({"kind": "burst", "cells": [["5KB"]]}, "cells"),
    ({"kind": "burst", "cells": [["5KB", "1s"]], "order": "random"}, "order"),
    ({"kind": "burst", "cells": [["5KB", "1s"]], "repeat": 0}, "repeat"),
    ({"kind": "ftp"}, "files, duration"),
    ({"kind": "ftp", "files": 3, "shape": 1.0}, "shape"),
    ({"kind": "ftp", "files": 3, "size": "200KB", "mean_size": "100KB"}, "size"),
    ({"kind": "ftp", "files": 3, "max_size": "10KB"}, "max_size"),
    ({"kind": "ftp", "files": 3, "gap_mean": "2 fortnights"}, "gap_mean"),
    ({"kind": "ftp", "files": 3, "direction": "down"}, "direction"),
])
def test_bad_specs_name_the_field(raw, field):
    with pytest.raises(ValidationError) as err:
        parse_spec({**BASE, **raw})
    assert field in str(err.value)


def test_good_specs_parse_units():
    bulk = parse_spec({**BASE, "kind": "bulk", "bytes": "1MB", "interval": "200ms", "stagger": "2s"})
    assert (bulk.bytes, bulk.interval, bulk.stagger) == (1 << 20, 0.2, 2.0)
    telnet = parse_spec({**BASE, "kind": "telnet", "duration": "1min", "mean": "200ms", "name": "tn"})
    assert (telnet.duration, telnet.mean, telnet.payload, telnet.instance) == (60.0, 0.2, 34, "tn")
    burst = parse_spec({**BASE, "kind": "burst", "bursts": ["5KB", "80KB"], "idles": ["1s", 2]})
    assert burst.cell_list() == [(5120, 1.0), (5120, 2.0), (81920, 1.0), (81920, 2.0)]
    cells = parse_spec({**BASE, "kind": "burst", "cells": [["40KB", "2s"], [1000, 0.5]]})
    assert cells.cell_list() == [(40960, 2.0), (1000, 0.5)]
    ftp = parse_spec({**BASE, "kind": "ftp", "duration": "30s", "max_size": "10MB"})
    assert ftp.size_model() == {"model": "pareto", "mean": 204800, "shape": 1.2, "max_size": 10 << 20}
    assert parse_spec({**BASE, "kind": "ftp", "files": 2, "size": "200KB"}).size_model() == \
        {"model": "fixed", "size": 204800}
    assert parse_size(1500) == 1500
    with pytest.raises(ValueError):
        parse_size(1.5)
    for spec in (bulk, telnet, burst, cells, ftp, parse_spec({**BASE, "kind": "ftp", "files": 2, "size": "200KB"})):
        assert parse_spec(spec.model_dump()) == spec  # what a stored scenario dumps parses again


def test_planned_work_must_fit_the_time_limit(tmp_path):
    ctx = AppContext(tmp_path, 1, 10.0, "python3", REPO, 0.0)
    hosts = ([Host("c0", "10.0.0.1", "c", 0)], [Host("s0", "10.0.0.2", "s", 0)])
    for raw, field in (({"kind": "telnet", "duration": "20s"}, "duration"),
                       ({"kind": "bulk", "duration": 8, "start": "3s"}, "duration"),
                       ({"kind": "burst", "bursts": [1000], "idles": ["3s"], "repeat": 4}, "idles"),
                       ({"kind": "ftp", "duration": "11s"}, "duration")):
        spec = parse_spec({**BASE, **raw})
        with pytest.raises(AppError, match=field):
            base.lookup(spec.kind)(spec, ctx, *hosts)


def test_pareto_sizes_follow_the_mean_median_and_cap():
    mean, shape = 200 * 1024, 1.2
    xm = ftp_proc.pareto_scale(mean, shape)
    draws = ftp_proc.sizes({"model": "pareto", "mean": mean, "shape": shape, "max_size": None}, 11)
    xs = [next(draws) for _ in range(200_000)]
    assert min(xs) >= round(xm)
    # The median x_m 2^(1/a) is sharp; the mean of a shape-1.2 Pareto converges slowly (infinite variance).
    assert statistics.median(xs) == pytest.approx(xm * 2 ** (1 / shape), rel=0.02)
    assert statistics.fmean(xs) == pytest.approx(mean, rel=0.25)
    cap = 2 << 20
    capped = ftp_proc.sizes({"model": "pareto", "mean": mean, "shape": shape, "max_size": cap}, 11)
    ys = [next(capped) for _ in range(200_000)]
    assert max(ys) == cap
    # E[min(X, c)] = x_m + x_m^a (c^(1-a) - x_m^(1-a)) / (1 - a)
    expect = xm + xm ** shape * (cap ** (1 - shape) - xm ** (1 - shape)) / (1 - shape)
    assert statistics.fmean(ys) == pytest.approx(expect, rel=0.02)
    fixed = ftp_proc.sizes({"model": "fixed", "size": 204800}, 1)
    assert {next(fixed) for _ in range(10)} == {204800}


def test_gaps_are_exponential_or_fixed_and_seeded():
    g = ftp_proc.gaps({"model": "exponential", "mean": 2.0}, "s/down/gap")
    xs = [next(g) for _ in range(50_000)]
    assert statistics.fmean(xs) == pytest.approx(2.0, rel=0.03)
    assert statistics.pstdev(xs) == pytest.approx(2.0, rel=0.05)  # exponential: sd = mean
    again = ftp_proc.gaps({"model": "exponential", "mean": 2.0}, "s/down/gap")
    assert [next(again) for _ in range(5)] == xs[:5]
    fixed = ftp_proc.gaps({"model": "fixed", "mean": 0.5}, 1)
    assert [next(fixed) for _ in range(3)] == [0.5] * 3


def test_burst_plan_rounds_and_tags():
    spec = parse_spec({**BASE, "kind": "burst", "bursts": ["5KB", "80KB"], "idles": ["1s", "2s"], "repeat": 3,
                       "order": "fixed"})
    p = plan(spec, 1)
    assert p == spec.cell_list() * 3
    shuffled = spec.model_copy(update={"order": "shuffled"})
    a, b = plan(shuffled, 1), plan(shuffled, 2)
    assert a == plan(shuffled, 1) and a != b
    for rnd in range(3):  # each round holds every cell once
        assert sorted(a[4 * rnd:4 * rnd + 4]) == sorted(spec.cell_list())
    blocked = spec.model_copy(update={"order": "blocked"})  # each cell's repeats in a row, same for any seed
    assert plan(blocked, 1) == plan(blocked, 2) == [c for c in spec.cell_list() for _ in range(3)]
    assert cell_tag("", 40960, 2.0) == "40960B/2s"
    assert cell_tag("rtt200ms", 40960, 0.5).rsplit("/", 2) == ["rtt200ms", "40960B", "0.5s"]


# Saved iperf3 3.12 outputs, cut down: a 1 MB download (-R) at 10 Mbit/s and a 1 s upload.
DOWNLOAD_JSON = """{"start": {"test_start": {"protocol": "TCP", "num_streams": 1, "bytes": 1048576, "reverse": 1}},
"intervals": [
 {"sum": {"start": 0, "end": 0.200085, "seconds": 0.20008499920368195, "bytes": 253248, "bits_per_second": 10125616.65323843, "sender": false}},
 {"sum": {"start": 0.200085, "end": 0.400092, "seconds": 0.20000700652599335, "bytes": 238920, "bits_per_second": 9556465.21189044, "sender": false}},
 {"sum": {"start": 0.400092, "end": 0.60008, "seconds": 0.19998799264431, "bytes": 176656, "bits_per_second": 7066664.259756544, "sender": false}}],
"end": {"sum_sent": {"start": 0, "end": 0.865202, "seconds": 0.865202, "bytes": 1048576, "bits_per_second": 9695548.5539793, "retransmits": 164, "sender": false},
        "sum_received": {"start": 0, "end": 0.865131, "seconds": 0.865131, "bytes": 1048576, "bits_per_second": 9696344.253066877, "sender": false}},
"server_output_json": {
 "intervals": [{"sum": {"start": 0, "end": 0.865202, "seconds": 0.865202009677887, "bytes": 1048576, "bits_per_second": 9695548.44552784, "sender": true, "retransmits": 164}}],
 "end": {"sum_sent": {"start": 0, "end": 0.865202, "seconds": 0.865202, "bytes": 1048576, "bits_per_second": 9695548.5539793, "retransmits": 164, "sender": true},
         "sum_received": {"start": 0, "end": 0.865202, "seconds": 0.865202, "bytes": 0, "bits_per_second": 0, "sender": true}}}}"""

UPLOAD_JSON = """{"start": {"test_start": {"protocol": "TCP", "num_streams": 1, "duration": 1, "reverse": 0}},
"intervals": [
 {"sum": {"start": 0, "end": 0.501107, "seconds": 0.5011069774627686, "bytes": 155451392, "bits_per_second": 2481727838.42827, "sender": true, "retransmits": 39}},
 {"sum": {"start": 0.501107, "end": 1.000055, "seconds": 0.49894800782203674, "bytes": 203161600, "bits_per_second": 3257439201.1195374, "sender": true, "retransmits": 1}}],
"end": {"sum_sent": {"start": 0, "end": 1.000055, "seconds": 1.000055, "bytes": 358612992, "bits_per_second": 2868746154.9614773, "retransmits": 40, "sender": true},
        "sum_received": {"start": 0, "end": 1.000103, "seconds": 1.000103, "bytes": 334834136, "bits_per_second": 2678397213.0870523, "sender": true}},
"server_output_json": {
 "intervals": [
  {"sum": {"start": 0, "end": 0.5001, "seconds": 0.500100016593933, "bytes": 155058176, "bits_per_second": 2480434646.7503166, "sender": false}},
  {"sum": {"start": 0.5001, "end": 1.000103, "seconds": 0.5000029802322388, "bytes": 179775960, "bits_per_second": 2876398215.330614, "sender": false}}],
 "end": {"sum_received": {"start": 0, "end": 1.000103, "seconds": 1.000103, "bytes": 334834136, "bits_per_second": 2678397213.0870523, "sender": false}}}}"""

FAILED_JSON = """{"start": {}, "intervals": [{"sum": {"start": 0, "end": 0.500154, "seconds": 0.5001540184020996,
"bytes": 521976, "bits_per_second": 8349044.187110485, "sender": false}}], "end": {},
"error": "control socket has closed unexpectedly"}"""


def test_iperf3_json_parsing():
    down = parse_flow(json.loads(DOWNLOAD_JSON), None, "download")
    assert down["error"] is None
    assert [round(s, 6) for s, _, _ in down["intervals"]] == [0, 0.200085, 0.400092]
    assert down["intervals"][1][1] == pytest.approx(9556465.2)
    assert down["received"] == {"bytes": 1048576, "seconds": 0.865131, "bps": pytest.approx(9696344.25)}
    assert down["retransmits"] == 164
    assert parse_flow(json.loads(DOWNLOAD_JSON), None, "download", want_bytes=1 << 20)["error"] is None
    short = parse_flow(json.loads(DOWNLOAD_JSON), None, "download", want_bytes=2 << 20)
    assert short["error"] == "received 1048576 of 2097152 bytes"
    up = parse_flow(json.loads(UPLOAD_JSON), None, "upload")
    assert up["error"] is None
    # the receiver's (server's) intervals, not the sender's
    assert [bps for _, bps, _ in up["intervals"]] == pytest.approx([2480434646.75, 2876398215.33])
    assert up["received"]["bytes"] == 334834136
    assert up["retransmits"] == 40
    failed = parse_flow(json.loads(FAILED_JSON), None, "download")
    assert failed["error"] == "iperf3: control socket has closed unexpectedly"
    assert len(failed["intervals"]) == 1 and failed["received"] is None
    assert parse_flow(None, None, "upload")["error"] == "no iperf3 client output"


# --- root: end to end on a line of namespaces ---------------------------------------------------

def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith(f"{PREFIX}-")}


@pytest.fixture(scope="module")
def line():
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces")
    net = NetLine(PREFIX, NET)
    try:
        net.build()
        for dev in (net.router_out, f"{PREFIX}-r0"):  # 10 Mbit/s both ways, a 30-packet queue
            out = net.node("r").cmd(f"tc qdisc add dev {dev} root handle 1: htb default 1 && "
                                    f"tc class add dev {dev} parent 1: classid 1:1 htb rate {RATE_BPS}bit && "
                                    f"tc qdisc add dev {dev} parent 1:1 handle 10: pfifo limit 30 && echo ok")
            assert out.strip().endswith("ok"), out
        yield net
    finally:
        net.teardown()
        assert not _netns(), f"namespaces left behind: {_netns()}"


def _hosts(net: NetLine) -> tuple[Host, Host]:
    server = Host(f"{PREFIX}-s", net.sender_ip, "servers", 0, "", NsNode(net.names[0]))
    client = Host(f"{PREFIX}-c", net.receiver_ip, "clients", 0, "rtt0", NsNode(net.names[2]))
    return client, server


def _run(net: NetLine, tmp_path: Path, raw: dict, events: list | None = None, time_limit: float = 30.0):
    """The runner's steps; `events` are (seconds after start_at, action(app)). Returns (result,
    AppError raised by check or None, progress, start_at)."""
    client, server = _hosts(net)
    spec = parse_spec({**BASE, **raw})
    ctx = AppContext(tmp_path / spec.kind, 7, time_limit, str(REPO / ".venv" / "bin" / "python"), REPO, 0.0)
    app = base.lookup(spec.kind)(spec, ctx, [client], [server])
    failure = None
    try:
        app.start_servers()
        app.wait_ready(10)
        app.launch_clients()
        app.wait_clients_ready(time.monotonic() + 30)
        ctx.start_at = time.monotonic() + 0.5  # the clients are loaded: this is for reading their configs
        app.start_clients()
        deadline = time.monotonic() + time_limit
        events = sorted(events or [], key=lambda e: e[0])
        while not app.done():
            assert time.monotonic() < deadline, "the clients did not end on their own"
            while events and time.monotonic() > ctx.start_at + events[0][0]:
                events.pop(0)[1](app)
            try:
                app.check()
            except AppError as exc:
                failure = exc
                break
            time.sleep(0.05)
        if failure is None:
            app.check()
        done, total = app.progress()
        result = app.collect()
    finally:
        app.stop()
        app.stop()  # safe twice
    for ns in net.names:
        left = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False).stdout.split()
        assert not left, f"processes left in {ns} after stop(): {left}"
    for s in result.samples:
        assert set(s) == set(SAMPLE_KEYS), s
        assert s["app"] == spec.instance
    return result, failure, (done, total), ctx.start_at


def _sent_bytes(net: NetLine, dev: str) -> int:
    """Bytes the htb class of a router interface has sent: the data crossed it."""
    out = net.node("r").cmd(f"tc -s class show dev {dev} classid 1:1")
    return int(out.split(" Sent ", 1)[1].split()[0])


def _metric(result, name):
    return [s for s in result.samples if s["metric"] == name]


def _records(tmp_path: Path, kind: str, record: str) -> list[dict]:
    """The records of one kind ("end", "woke", ...) that _run's client of application `kind` wrote."""
    with open(tmp_path / kind / f"{kind}-{PREFIX}-c.jsonl") as fh:
        return [r for r in map(json.loads, fh) if r["kind"] == record]


def _end(tmp_path: Path, kind: str) -> dict:
    """The client's last record ({"kind": "end", ..., "mono": when it ended}), as _run's client wrote it."""
    (end,) = _records(tmp_path, kind, "end")
    return end


def _first_unit_in_time(res, tmp_path: Path, kind: str, start_at: float, offsets: dict) -> None:
    """One "woke" record per stream (None: the client's only one), each at its planned offset
    after the common start and no sooner than it; the result holds the latest, under the runner's
    0.1 s limit (an idle machine)."""
    woke = _records(tmp_path, kind, "woke")  # when it woke for each stream's first unit
    assert {r.get("stream"): r["offset"] for r in woke} == pytest.approx(offsets) and len(woke) == len(offsets)
    assert all(r["mono"] >= start_at + r["offset"] for r in woke)
    after = res.first_unit_after_due[f"{PREFIX}-c"]
    assert after == pytest.approx(max(r["mono"] - start_at - r["offset"] for r in woke)) and 0 <= after < 0.1


def _serialization(size: int) -> float:
    """Seconds `size` bytes of payload take at the shaped rate: what no transfer can beat."""
    return size * 8 / RATE_BPS


def _generous(size: int) -> float:
    """An upper bound on a transfer of `size` bytes that load cannot break: ten times its time at
    the shaped rate, plus a second for a retransmission timeout or a slow scheduler."""
    return 1.0 + 10 * _serialization(size)


@pytest.mark.netns
def test_bulk_download_goodput_is_the_link_rate(line, tmp_path):
    before = _sent_bytes(line, line.router_out)
    res, failure, progress, _ = _run(line, tmp_path, {"kind": "bulk", "bytes": "1MB", "interval": "200ms",
                                                   "congestion_control": "reno"})
    assert _sent_bytes(line, line.router_out) - before > 1 << 20  # server -> client
    assert failure is None and res.missing == [] and progress == (1, 1)
    (flow,) = _metric(res, "flow_goodput")
    assert flow["error"] is None and flow["host"] == f"{PREFIX}-c" and flow["tag"] == "rtt0"
    assert flow["value"] == pytest.approx(RATE_BPS, rel=0.10)
    goodput = _metric(res, "goodput")
    assert len(goodput) >= 4 and all(g["host"] == f"{PREFIX}-c" and g["unit"] == "bit/s" for g in goodput)
    ts = [g["t"] for g in goodput]
    # iperf3's interval timer: the first interval lasts its 200 ms (a timer is never early; a
    # late one, under load, makes it longer), and no interval lasts twice that
    assert ts == sorted(ts) and 0.19 <= ts[1] - ts[0] < 0.4
    assert all(0 < b - a < 0.4 for a, b in itertools.pairwise(ts))
    (start,) = _metric(res, "start")
    assert 0 < start["value"] < 0.3 and ts[0] == start["t"]  # the real launch: after the planned one
    (retr,) = _metric(res, "retransmits")
    assert retr["host"] == f"{PREFIX}-s" and retr["value"] >= 0


@pytest.mark.netns
def test_bulk_upload_flows_share_the_link(line, tmp_path):
    before = _sent_bytes(line, f"{PREFIX}-r0")
    res, failure, _, _ = _run(line, tmp_path, {"kind": "bulk", "direction": "upload", "duration": 2,
                                            "flows_per_client": 2, "interval": "500ms", "start": "100ms",
                                            "stagger": "50ms", "congestion_control": "reno"})
    assert failure is None and res.missing == []
    assert _sent_bytes(line, f"{PREFIX}-r0") - before > 1 << 20  # client -> server
    flows = _metric(res, "flow_goodput")
    assert sorted(f["flow"] for f in flows) == [f"{PREFIX}-c/0", f"{PREFIX}-c/1"]
    assert all(f["host"] == f"{PREFIX}-s" for f in flows)  # the receiver
    # the flows overlap but for at most 50 ms of 2 s: together they fill the link
    assert sum(f["value"] for f in flows) == pytest.approx(RATE_BPS, rel=0.15)
    starts = _metric(res, "start")
    assert len(starts) == 2 and all(0.1 <= s["value"] <= 0.3 for s in starts), "launched late: machine overloaded?"
    for f in flows:  # 2 s in 0.5 s intervals (iperf3 may add a short last one)
        assert 4 <= len([g for g in _metric(res, "goodput") if g["flow"] == f["flow"]]) <= 5


@pytest.mark.netns
def test_telnet_echo_delays(line, tmp_path):
    res, failure, progress, start_at = _run(line, tmp_path, {"kind": "telnet", "keystrokes": 20, "mean": "20ms"})
    assert failure is None and res.missing == [] and progress == (20, 20)
    echoes = _metric(res, "echo_delay")
    assert len(echoes) == 20
    assert all(e["error"] is None and 0 <= e["value"] < 1 and e["unit"] == "s" for e in echoes)
    assert {e["flow"] for e in echoes} == {f"{PREFIX}-c/1"}  # one persistent connection
    _first_unit_in_time(res, tmp_path, "telnet", start_at, {None: 0.0})
    # one keystroke at a time: the next is typed the seeded gap after the echo
    client, _ = _hosts(line)
    gap = gaps("exponential", 0.02, host_seed(7, client, "telnet"))
    ts = [e["t"] for e in echoes]
    for (a, b), e in zip(itertools.pairwise(ts), echoes):
        expect = e["value"] + next(gap)
        assert expect <= b - a < expect + 0.1


@pytest.mark.netns
def test_telnet_runs_for_its_duration(line, tmp_path):
    res, failure, progress, start_at = _run(line, tmp_path, {"kind": "telnet", "duration": "1s", "model": "fixed",
                                                   "mean": "100ms"})
    assert failure is None and res.missing == [] and progress[1] == 0
    echoes = sorted(_metric(res, "echo_delay"), key=lambda e: e["t"])
    stop_at = start_at + 1.0
    # at most one keystroke per 100 ms gap in 1 s; a late (loaded) client only types fewer
    assert 2 <= len(echoes) <= 10 and echoes[0]["t"] >= start_at
    for a, b in itertools.pairwise(echoes):
        # each keystroke the gap after the previous echo, planned before the duration ended
        # (under load it may be written a little later: no upper bound on b["t"])
        assert a["t"] + a["value"] + 0.1 <= b["t"] + 1e-6 and a["t"] + a["value"] + 0.1 < stop_at
    # no room for one more: the client stopped when the next keystroke would start after the end
    assert _end(tmp_path, "telnet")["mono"] + 0.1 >= stop_at


@pytest.mark.netns
def test_burst_times_per_cell(line, tmp_path):
    res, failure, progress, start_at = _run(line, tmp_path, {"kind": "burst", "bursts": ["5KB", "80KB"],
                                                   "idles": ["100ms", "300ms"], "repeat": 2, "warmup": "10KB"})
    assert failure is None and res.missing == [] and progress == (8, 8)
    _first_unit_in_time(res, tmp_path, "burst", start_at, {None: 0.0})
    bursts = _metric(res, "burst_time")
    cells: dict[str, list[float]] = {}
    for b in bursts:
        assert b["error"] is None and b["flow"] == f"{PREFIX}-c/1"
        cells.setdefault(b["tag"], []).append(b["value"])
    assert sorted(cells) == ["rtt0/5120B/0.1s", "rtt0/5120B/0.3s", "rtt0/81920B/0.1s", "rtt0/81920B/0.3s"]
    assert all(len(v) == 2 for v in cells.values())
    big = cells["rtt0/81920B/0.1s"] + cells["rtt0/81920B/0.3s"]
    assert all(0.064 <= v < _generous(81920) for v in big)  # 80 KB at 10 Mbit/s: at least 65.5 ms of payload
    assert all(v < _generous(5120) for v in cells["rtt0/5120B/0.1s"] + cells["rtt0/5120B/0.3s"])
    (warm,) = _metric(res, "warmup_time")
    assert warm["error"] is None and warm["t"] < min(b["t"] for b in bursts)
    # A burst's time ends at its last byte, and the idle of the next is counted from there: the
    # next request is written no sooner than the end of the burst before it plus its own idle.
    idle = {b["t"]: float(b["tag"].rsplit("/", 1)[1].rstrip("s")) for b in bursts}
    chain = sorted([warm, *bursts], key=lambda b: b["t"])
    for a, b in itertools.pairwise(chain):
        assert a["t"] + a["value"] + idle[b["t"]] <= b["t"] + 1e-6
    # The server's side of each burst (its TCP_INFO), joined to the client's burst by flow, cell
    # and t; the client closed its connection, so even the last burst has its retransmissions.
    by_burst = {(b["flow"], b["tag"], b["t"]) for b in bursts}
    for metric in ("burst_cwnd", "burst_retrans"):
        rows = _metric(res, metric)
        assert {(r["flow"], r["tag"], r["t"]) for r in rows} == by_burst and len(rows) == len(bursts)
        assert all(r["host"] == f"{PREFIX}-s" and r["peer"] == f"{PREFIX}-c" and r["unit"] == "segments"
                   and r["error"] is None for r in rows)
    assert all(r["value"] >= 1 for r in _metric(res, "burst_cwnd"))
    assert all(r["value"] >= 0 for r in _metric(res, "burst_retrans"))


@pytest.mark.netns
def test_ftp_both_directions(line, tmp_path):
    res, failure, progress, start_at = _run(line, tmp_path, {"kind": "ftp", "direction": "both", "files": 3,
                                                   "gap_mean": "50ms", "max_size": "1MB"})
    assert failure is None and res.missing == [] and progress == (6, 6)
    times, sizes = _metric(res, "file_time"), _metric(res, "file_bytes")
    assert len(times) == len(sizes) == 6
    for t in times:
        client, direction, _, size = t["flow"].split("/")
        assert client == f"{PREFIX}-c" and t["error"] is None
        assert t["host"] == (f"{PREFIX}-c" if direction == "down" else f"{PREFIX}-s")
        # both directions at 10 Mbit/s (htb lets a burst by)
        assert 0.9 * _serialization(int(size)) <= t["value"] < _generous(int(size))
    assert sorted(s["value"] for s in sizes) == sorted(int(t["flow"].split("/")[3]) for t in times)
    # each stream waits a seeded gap, then a file, then a gap after that file's end, ...
    client, _ = _hosts(line)
    seed = host_seed(7, client, "ftp")
    first_gaps = {d: next(ftp_proc.gaps({"model": "exponential", "mean": 0.05}, f"{seed}/{d}/gap"))
                  for d in ("down", "up")}
    _first_unit_in_time(res, tmp_path, "ftp", start_at, first_gaps)
    for direction in ("down", "up"):
        gap = ftp_proc.gaps({"model": "exponential", "mean": 0.05}, f"{seed}/{direction}/gap")
        size = ftp_proc.sizes({"model": "pareto", "mean": 204800, "shape": 1.2, "max_size": 1 << 20},
                              f"{seed}/{direction}/size")
        files = sorted((t for t in times if t["flow"].split("/")[1] == direction), key=lambda t: t["t"])
        assert [int(t["flow"].split("/")[3]) for t in files] == [next(size) for _ in files]
        ready = start_at
        for t in files:
            # a file ends at its receiver's last byte; the client learns it a few ms later (an upload:
            # one round trip), more under load, and then waits its gap
            g = next(gap)
            assert ready + g <= t["t"] < ready + g + 0.5
            ready = t["t"] + t["value"]


@pytest.mark.netns
def test_ftp_fixed_size_probes(line, tmp_path):
    res, failure, _, _ = _run(line, tmp_path, {"kind": "ftp", "size": "200KB", "files": 2, "gap_mean": "50ms",
                                            "gap_model": "fixed"})
    assert failure is None and res.missing == []
    times = _metric(res, "file_time")
    assert [t["flow"].split("/")[3] for t in times] == ["204800", "204800"]
    assert all(0.9 * _serialization(204800) <= t["value"] < _generous(204800) for t in times)


def _forwarding(on: bool):
    def act(app) -> None:  # the router is no host of the application: reached by its namespace
        rule = "-D FORWARD -j DROP" if on else "-I FORWARD -j DROP"
        subprocess.run(["ip", "netns", "exec", f"{PREFIX}-r", "sh", "-c", f"iptables {rule}"], check=True)
    return act


@pytest.mark.netns
@pytest.mark.parametrize("raw", [
    {"kind": "telnet", "keystrokes": 40, "model": "fixed", "mean": "30ms", "timeout": "150ms"},
    {"kind": "burst", "cells": [["20KB", "30ms"]], "repeat": 30, "timeout": "150ms"},
    {"kind": "ftp", "files": 30, "size": "20KB", "gap_model": "fixed", "gap_mean": "30ms", "timeout": "150ms"},
], ids=lambda raw: raw["kind"])
def test_a_stalled_path_fails_units_and_the_client_reconnects(line, tmp_path, raw):
    """The router drops everything for 0.6 s: the units under way fail (samples with an error:
    measurements, not missing data), and the client goes on over a new connection once the path is back."""
    try:
        res, failure, progress, _ = _run(line, tmp_path, raw,
                                                events=[(0.3, _forwarding(False)), (0.9, _forwarding(True))])
    finally:
        subprocess.run(["ip", "netns", "exec", f"{PREFIX}-r", "iptables", "-F", "FORWARD"], check=False)
    assert failure is None and progress[0] == 30 + 10 * (raw["kind"] == "telnet")
    metric = {"telnet": "echo_delay", "burst": "burst_time", "ftp": "file_time"}[raw["kind"]]
    rows = sorted(_metric(res, metric), key=lambda r: r["t"])
    failed = [r for r in rows if r["error"]]
    assert failed and all(r["value"] is None for r in failed)
    assert res.missing == []
    after = [r for r in rows if r["t"] > failed[-1]["t"]]
    assert after and all(r["error"] is None and r["value"] < 0.15 for r in after)
    if raw["kind"] != "ftp":  # ftp opens a connection per file anyway
        assert after[0]["flow"] != rows[0]["flow"], "no new connection after the stall"


@pytest.mark.netns
@pytest.mark.parametrize("raw", [
    {"kind": "bulk", "duration": 3, "interval": "500ms"},
    {"kind": "telnet", "duration": "3s", "mean": "50ms"},
    {"kind": "burst", "cells": [["20KB", "100ms"]], "repeat": 20},
    {"kind": "ftp", "duration": "3s", "gap_mean": "50ms", "size": "100KB"},
], ids=lambda raw: raw["kind"])
@pytest.mark.parametrize("role", ["server", "client"])
def test_a_killed_process_fails_check_and_collect_reports_missing(line, tmp_path, raw, role):
    def kill(app) -> None:
        for p in app.procs:
            if p.role == role:
                p.popen.kill()
                p.popen.wait()

    res, failure, _, _ = _run(line, tmp_path, raw, events=[(0.8, kill)])
    assert isinstance(failure, AppError) and role in str(failure)
    assert res.missing, f"collect() must report what the dead {role} left unmeasured"
    if role == "client" and raw["kind"] != "bulk":
        assert any("ended early" in m for m in res.missing)
    if raw["kind"] == "bulk":
        (flow,) = _metric(res, "flow_goodput")
        assert flow["value"] is None and flow["error"]
