"""Repetitions pooled per sweep point (results/pooled.py, `catnip report --pool`)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from controller.cli import main
from results import pooled
from results.store import Store


def _page(client: str, page: int, duration: float | None, error: str | None = None) -> dict:
    return {"client": client, "server": "ctpv1", "page": page, "round": 0, "start": 0, "end": 1,
            "duration": duration, "objects": 1, "bytes": 1, "error": error}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "db"
    with Store(path) as store:
        store.create_run("r1", "reps", "x", {"name": "reps"}, {}, 1, "abc", {}, {})
        # Two sweep values x two repetitions; point 3 did not keep real time, point 4 failed.
        for point, (policy, rt, status, durations) in enumerate([
                ("droptail", 1, "done", (1.0, 3.0)), ("droptail", 1, "done", (2.0,)),
                ("catnip_good", 1, "done", (1.0,)), ("catnip_good", 0, "done", (9.0,)),
                ("catnip_good", 1, "failed", (7.0,))]):
            store.create_point("r1", point, point % 2, {"router.policy": {"kind": policy}}, {}, 1)
            store.update_point("r1", point, realtime_ok=rt, status=status)
            store.add_transfers("r1", point, [], [_page(f"c{i}", 1, d) for i, d in enumerate(durations)]
                                + [_page("cx", 2, None, "timeout")])
    return path


def test_pooled_tables_count_what_they_leave_out(db):
    with Store(db) as store:
        dt, cg = pooled.pooled_report(store, "r1")["groups"]
        assert dt["points"] == [0, 1] and dt["table"][0]["n"] == 3 and dt["table"][0]["mean"] == 2.0
        assert dt["table"][1]["failed"] == 2
        assert cg["points"] == [2, 3] and cg["excluded_not_done"] == [4] and cg["table"][0]["mean"] == 5.0
        _, cg = pooled.pooled_report(store, "r1", realtime_only=True)["groups"]
        assert cg["points"] == [2] and cg["excluded_not_real_time"] == [3] and cg["table"][0]["mean"] == 1.0
        with pytest.raises(KeyError):
            pooled.pooled_report(store, "nope")


def test_cli_pool(db):
    res = CliRunner().invoke(main, ["report", "r1", "--db", str(db), "--pool", "--realtime-only"])
    assert res.exit_code == 0, res.output
    assert "left out, real time not kept: points [3]" in res.output
    assert "left out, did not finish: points [4]" in res.output
    res = CliRunner().invoke(main, ["report", "r1", "--db", str(db), "--realtime-only"])
    assert res.exit_code != 0 and "--realtime-only goes with --pool" in res.output


@pytest.fixture
def seeds_db(tmp_path):
    """Table XI twice (seeds 1 and 2): baseline and CATNIP runs over two buffers; the 64KB point
    of the seed-2 baseline did not keep real time."""
    path = tmp_path / "db"
    with Store(path) as store:
        for run, seed, durations in [("b1", 1, {0: 2.0, 1: 4.0}), ("b2", 2, {0: 6.0, 1: 4.0}),
                                     ("c1", 1, {0: 1.0, 1: 3.0}), ("c2", 2, {0: 3.0, 1: 3.0})]:
            store.create_run(run, "wan", "x", {"name": "wan"}, {}, seed, "abc", {}, {})
            for point, buffer in enumerate(["64KB", "128KB"]):
                store.create_point(run, point, 0, {"topology.bottleneck.buffer": buffer}, {}, seed)
                store.update_point(run, point, realtime_ok=int(not (run == "b2" and point == 0)), status="done")
                store.add_transfers(run, point, [], [_page(f"c{i}", 1, durations[point] + d) for i, d in
                                                     enumerate((-0.5, 0.5))])
    return path


def test_compare_pools_runs_joined_by_plus(seeds_db):
    from results import compare
    with Store(seeds_db) as store:
        cmp = compare.compare(store, ["b1+b2", "c1+c2"])
        c64, c128 = cmp["columns"]
        # 64KB: CATNIP pages 0.5, 1.5, 2.5, 3.5 (mean 2.0) over baseline 1.5, 2.5, 5.5, 6.5 (mean 4.0).
        assert c64["relative"][1] == pytest.approx(0.5) and c64["baseline_realtime_ok"] is False
        assert c128["relative"][1] == pytest.approx(0.75) and c128["realtime_ok"] is True
        # Only points that kept real time: the seed-2 baseline's 64KB point is left out, and said so.
        cmp = compare.compare(store, ["b1+b2", "c1+c2"], realtime_only=True)
        c64, c128 = cmp["columns"]
        assert c64["relative"][1] == pytest.approx(2.0 / 2.0) and c64["baseline_realtime_ok"] is True
        assert cmp["excluded_not_real_time"] == [{"run_id": "b1+b2", "label": "topology.bottleneck.buffer=64KB",
                                                 "member": ("b2", 0)}]
        assert "1 left out (b2 point 0)" in compare.render_text(cmp)
        with pytest.raises(KeyError, match="no run 'c3'"):
            compare.compare(store, ["b1", "c1+c3"])


def test_cli_compare_realtime_only(seeds_db):
    res = CliRunner().invoke(main, ["compare", "b1+b2", "c1+c2", "--db", str(seeds_db), "--realtime-only"])
    assert res.exit_code == 0, res.output
    assert "Only points that kept real time: 1 left out" in res.output
    assert "Real time NOT kept" not in res.output


def test_compare_pools_every_side_when_one_is_pooled(seeds_db):
    # A run with two repetitions per buffer against a pooled baseline: each buffer divides by the
    # same buffer's pool, never by another buffer's.
    from results import compare
    with Store(seeds_db) as store:
        store.create_run("r", "wan", "x", {"name": "wan"}, {}, 1, "abc", {}, {})
        for point, (buffer, rep, d, status) in enumerate([("64KB", 0, 2.0, "done"), ("64KB", 1, 2.0, "done"),
                                                          ("128KB", 0, 6.0, "done"), ("128KB", 1, 9.0, "failed")]):
            store.create_point("r", point, rep, {"topology.bottleneck.buffer": buffer}, {}, 1)
            store.update_point("r", point, realtime_ok=1, status=status)
            store.add_transfers("r", point, [], [_page("c0", 1, d)])
        cmp = compare.compare(store, ["b1+b2", "r"])
        c64, c128 = cmp["columns"]
        assert (c64["label"], c128["label"]) == ("topology.bottleneck.buffer=64KB", "topology.bottleneck.buffer=128KB")
        assert c64["relative"][1] == pytest.approx(2.0 / 4.0) and c128["relative"][1] == pytest.approx(6.0 / 4.0)
        assert cmp["excluded_not_done"] == [{"run_id": "r", "label": "topology.bottleneck.buffer=128KB",
                                             "member": ("r", 3)}]
        assert "Left out, did not finish: 1 (r point 3)" in compare.render_text(cmp)


@pytest.mark.parametrize("spec, message", [("b1++b2", "single '+'"), ("b1+b1", "names a run twice")])
def test_compare_rejects_bad_run_lists(seeds_db, spec, message):
    res = CliRunner().invoke(main, ["compare", spec, "c1", "--db", str(seeds_db)])
    assert res.exit_code == 2 and message in res.output, res.output


def test_runs_of_different_scenarios_are_not_pooled(seeds_db):
    with Store(seeds_db) as store:
        store.create_run("other", "quick", "x", {"name": "quick"}, {}, 1, "abc", {}, {})
        with pytest.raises(ValueError, match="cannot be pooled: quick, wan"):
            pooled.pooled_runs_report(store, ["b1", "other"])


def test_report_without_verdict_calls_says_so_without_failing():
    # An engine that never gave a verdict writes no call percentile (null): the report must still print.
    from results import report
    fidelity = {"late_events": 0, "engine_events": 0, "late_threshold_us": 1000, "max_late_us": 0,
                "kernel_queue_drops": 0, "late_at_issue_events": 0, "verdict_calls": 0, "slow_verdict_calls": 0}
    text = "\n".join(report.fidelity_lines(fidelity))
    assert "0 of 0 verdict calls took longer than 1 ms: the kernel" in text
    fidelity.update(verdict_calls=10, slow_verdict_calls=1, verdict_call_p99_us=1536, max_verdict_call_us=2500.0)
    assert "(worse router's p99 1536 us, max 2.5 ms)" in "\n".join(report.fidelity_lines(fidelity))
