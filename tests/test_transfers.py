"""Transfer measurements on the testbed (controller/transfers.py): the path's RTT, W_max and
initial windows show in the latencies; the loss models drop, and the CATNIP error model spares
the marked segments. Small cases of scenarios/transfers/hysteresis-validation.yaml."""

from __future__ import annotations

import json
import statistics

import pytest

from catnip.spec import transfer as transfer_scenario
from catnip.controller import transfers
from catnip.results.store import Store
from tests.conftest import need_engine, need_root

pytestmark = [pytest.mark.netns, pytest.mark.slow]
SCENARIO = "scenarios/transfers/hysteresis-validation.yaml"


def _measure(tmp_path, overrides: list[str]) -> dict:
    need_root()
    need_engine()
    sc = transfer_scenario.load(SCENARIO, ["concurrency=50", *overrides])
    with Store(tmp_path / "t.db") as store:
        run_id = transfers.measure(sc, store, log=lambda *_: None)
        points = {p["point"]: dict(p) for p in store.points(run_id)}
        rows = [dict(r) for r in store.transfer_trials(run_id)]
    assert all(p["status"] == "done" for p in points.values()), points
    return {"points": points, "rows": rows}


def _latencies(rows, **match) -> list[float]:
    out = [r["latency"] for r in rows if all(r[k] == v for k, v in match.items())]
    assert out and None not in out, f"missing transfers for {match}"
    return out


def test_no_loss_latency_is_rounds_of_the_rtt(tmp_path, isolated_data, no_leftovers):
    res = _measure(tmp_path, ["sizes_kb=[1, 8, 200]", "loss=[{p: 0.0}]", "trials=4", "profiles=[linux, reno2004]"])
    rows = res["rows"]
    # linux: initial window 10, doubling; W_max 24 caps it: 10, 20, 24, 24, 24, 24, 17 = 7 rounds
    # (without the clamp: 10, 20, 40, 73 = 4 rounds, 0.8 s).
    assert 1.39 < statistics.fmean(_latencies(rows, profile="linux", size=204800)) < 1.5
    assert 0.199 < statistics.fmean(_latencies(rows, profile="linux", size=8192)) < 0.23
    # reno2004: 1 segment then one per ACK with delayed ACKs (gamma 1.5): 8 KB = 6 segments in
    # rounds of 1, 2, 3 plus delayed-ACK waits; Linux's own Reno (doubling) takes 0.645 s.
    assert 0.66 < statistics.fmean(_latencies(rows, profile="reno2004", size=8192)) < 0.78
    # one segment: one RTT plus Linux's 40 ms delayed-ACK timer
    assert 0.235 < statistics.fmean(_latencies(rows, profile="reno2004", size=1024)) < 0.27
    assert all(r["retransmissions"] == 0 for r in rows)


def test_bernoulli_loss_drops_and_the_catnip_error_model_spares_marked_segments(tmp_path, isolated_data,
                                                                                 no_leftovers):
    res = _measure(tmp_path, ["sizes_kb=[8]", "loss=[{p: 0.3}, {p: 0.3, p_high: 0}]", "trials=40",
                              "profiles=[linux]", "marking=partial"])
    bern = [r for r in res["rows"] if r["p_high"] is None]
    catnip = [r for r in res["rows"] if r["p_high"] == 0]
    # 8 KB = 6 segments: under Bernoulli 30% loss most transfers lose one (1 - 0.7^6 = 88%) ...
    assert sum(r["retransmissions"] > 0 for r in bern) > 20
    # ... with partial SPM all 6 are first-3/last-3 segments: AF11, never lost at p' = 0.
    assert all(r["high_segments"] == r["data_segments"] for r in catnip)
    assert all(r["retransmissions"] == 0 for r in catnip)
    fidelity = {p["point"]: json.loads(p["fidelity"]) for p in res["points"].values()}
    assert sum(fidelity[0]["data_dropped"].values()) > 20  # the engine's count agrees
    # Read while the engine's queues (data and ACK directions) were still bound: the kernel handed them
    # the data packets the engine counted, and the ACKs.
    assert fidelity[0]["kernel_queues"] == 2
    assert fidelity[0]["kernel_queued"] > sum(fidelity[0]["data_arrived"].values()) > 0
