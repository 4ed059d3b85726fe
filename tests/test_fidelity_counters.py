"""The machine's counters behind a point's fidelity record (controller/fidelity.py) and an engine's
CPU time (testbed/engine.py), on fixed texts of /proc/stat, /proc/net/softnet_stat and
/proc/PID/stat."""

from __future__ import annotations

import os

import pytest

from catnip.controller import fidelity
from catnip.testbed.engine import process_cpu_seconds

STAT = """cpu  300 0 100 1600 0 0 20 10 0 0
cpu0 100 0 50 800 0 0 0 0 0 0
cpu1 200 0 50 800 0 0 20 10 0 0
intr 12345
"""
STAT_LATER = """cpu  600 0 200 2200 0 0 60 20 0 0
cpu0 150 0 50 1200 0 0 0 0 0 0
cpu1 450 0 150 1000 0 0 60 20 0 0
"""
# Columns: processed, dropped, time_squeeze, ... (hex). CPU 1's drop counter wraps past 2^32.
SOFTNET = "0000a000 00000001 00000000\n0000b000 fffffffe 00000000\n"
SOFTNET_LATER = "0000a100 00000001 00000000\n0000b100 00000001 00000000\n"


def test_each_cpu_by_its_number_and_the_backlog_drops_across_a_wrap():
    a = fidelity.machine_snapshot(STAT, SOFTNET)
    b = fidelity.machine_snapshot(STAT_LATER, SOFTNET_LATER)
    f = fidelity.machine_fidelity(a, b)
    assert f["cpus"] == [0, 1]
    # CPU 0: 50 busy of 450; CPU 1: 400 busy (with 40 softirq, 10 steal) of 600.
    assert f["cpu_busy_each"] == [round(50 / 450, 4), round(400 / 600, 4)]
    assert f["cpu_softirq_each"] == [0.0, round(40 / 600, 4)] and f["cpu_steal_each"] == [0.0, round(10 / 600, 4)]
    assert f["backlog_drops"] == 3  # 0xfffffffe -> 0x1 is 3 drops, not a negative count


def test_a_cpu_gone_between_readings_is_left_out():
    later = "cpu1 450 0 150 1000 0 0 60 20 0 0\n"
    f = fidelity.machine_fidelity(fidelity.machine_snapshot(STAT, ""), fidelity.machine_snapshot(later, ""))
    assert f["cpus"] == [1] and len(f["cpu_busy_each"]) == 1 and f["backlog_drops"] == 0


def _record(**kw) -> dict:
    return {"late_fraction": 0.0, "kernel_queue_drops": 0, "engines_without_final_stats": [], **kw}


@pytest.mark.parametrize("record, ok", [
    (_record(), True), (_record(backlog_drops=0), True), (_record(backlog_drops=1), False),
    (_record(kernel_queue_drops=2), False), (_record(late_fraction=0.002), False),
    (_record(engines_without_final_stats=["r1"]), False),
    # Packets the engine took without emulating them: an offload super-packet, an unbound queue's.
    (_record(gso_packets=0, unbound_packets=0), True), (_record(gso_packets=1), False),
    (_record(unbound_packets=3), False),
    # Another machine of a split topology: its backlog's drops count as ours; unread counters fail too.
    (_record(machines={"m2": {"backlog_drops": 0}}), True), (_record(machines={"m2": {"backlog_drops": 2}}), False),
    (_record(machines={"m2": None}), False), (_record(tunnel_drops=1), False), (_record(tunnel_drops=None), False)])
def test_real_time_needs_no_lost_packet(record, ok):
    assert fidelity.realtime_ok(record, 0.001) is ok


def test_process_cpu_time_counts_fields_after_the_command_name():
    # The command name may hold spaces and ')'; utime and stime are the 14th and 15th fields.
    tck = os.sysconf("SC_CLK_TCK")
    line = f"4242 (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 {3 * tck} {tck} 0 0 20 0 3 0 1 0 0"
    assert process_cpu_seconds(line) == pytest.approx(4.0)


def test_engines_that_took_no_packet_mean_the_links_were_bypassed(tmp_path):
    """A point whose engines ran the workload and took no packet fails: its traffic went around the
    emulated links (seen once: 100 pages done, both engines at 0 packets, "real time kept")."""
    from catnip.controller.point_collect import Collector
    from catnip.results.store import Store

    record = {"engine_cpu_s": {"ctprc": 0.27, "ctprs": 0.11}, "engine_events": 0, "late_events": 0,
              "late_fraction": 0.0, "kernel_queue_drops": 0, "engines_without_final_stats": []}
    assert "ctprc, ctprs took no packet" in fidelity.bypassed(record)
    assert fidelity.bypassed({**record, "engine_events": 21735}) is None
    assert fidelity.bypassed({**record, "engine_cpu_s": {}}) is None  # no engine: nothing to bypass
    assert "of r took no packet" in fidelity.bypassed({"engine_events": 0}, ["r"])  # transfers name theirs
    with Store(tmp_path / "t.db") as store:
        store.create_run("r1", "t", "t.yaml", {}, {}, 1, "rev", {}, {})
        store.create_point("r1", 0, 0, {}, {}, 1)
        collector = Collector(store, "r1", 0)
        with pytest.raises(RuntimeError, match="went around the emulated links"):
            collector.verdict(record, 0.001, {})
        point = store.points("r1")[0]
        assert point["realtime_ok"] == 0 and json_of(point["fidelity"])["engine_events"] == 0
        collector.verdict({**record, "engine_events": 10}, 0.001, {})
        assert store.points("r1")[0]["realtime_ok"] == 1


# /proc/net/netfilter/nfnetlink_queue as the kernel prints it (nfqnl_seq_show): queue, peer port
# id, waiting, copy mode, copy range, kernel drops, user drops, last packet id, 1.
NFQUEUE_PROC = """    0  12345     0 2 65531     0     0    21810  1
    1  12345     3 2 65531     4     1       17  1
    7  12345     0 2 65531     0     0        0  1
"""


def test_the_kernels_queue_rows_name_their_links_and_what_they_were_handed():
    from catnip.testbed.engine import nfqueue_counters
    rows = nfqueue_counters(NFQUEUE_PROC, ["r>c", "c>r"])
    assert [(r["link"], r["queued"], r["queue_total"], r["queue_dropped"], r["user_dropped"]) for r in rows] == [
        ("r>c", 21810, 0, 0, 0), ("c>r", 17, 3, 4, 1), (None, 0, 0, 0, 0)]
    rec = fidelity.engine_fidelity({"r": {"final": True, "engine": {"events": 0}}}, {"r": {r["link"]: r for r in rows}})
    assert (rec["kernel_queued"], rec["kernel_queues"], rec["kernel_queue_drops"]) == (21827, 3, 5)


@pytest.mark.parametrize("kernel, says", [
    # The kernel handed the engines packets they did not count: the counters, not the path, failed.
    ({"kernel_queued": 21810, "kernel_queues": 2}, "yet the kernel handed 21,810 to their queues"),
    ({"kernel_queued": 0, "kernel_queues": 2}, "their NFQUEUE rules matched no packet"),
    ({"kernel_queued": 0, "kernel_queues": 0}, "no engine had its queue bound at the end"),
    ({}, "their NFQUEUE rules missing or not matching"),  # a record from before the kernel's count was kept
])
def test_a_bypass_says_which_side_lost_the_packets(kernel, says):
    record = {"engine_cpu_s": {"ctprc": 0.2}, "engine_events": 0, **kernel}
    assert says in fidelity.bypassed(record)


def json_of(text):
    import json
    return json.loads(text)


def test_the_engines_unemulated_packets_are_summed_over_routers():
    finals = {"r1": {"final": True, "engine": {"events": 10, "gso_packets": 1, "unbound_packets": 0}},
              "r2": {"final": True, "engine": {"events": 5, "unbound_packets": 2}}}
    rec = fidelity.engine_fidelity(finals, {})
    assert (rec["gso_packets"], rec["unbound_packets"], rec["engine_events"]) == (1, 2, 15)
