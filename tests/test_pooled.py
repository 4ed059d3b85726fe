"""Repetitions pooled per sweep point (results/pooled.py, `catnip report --pool`)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from catnip.cli.main import main
from catnip.results import pooled
from catnip.results.store import Store


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
        dt, cg = pooled.pooled_runs_report(store, ["r1"])["points"]
        assert dt["members"] == [("r1", 0), ("r1", 1)] and dt["table"][0]["n"] == 3 and dt["table"][0]["mean"] == 2.0
        assert dt["table"][1]["failed"] == 2
        assert cg["members"] == [("r1", 2), ("r1", 3)] and cg["excluded_not_done"] == [("r1", 4)]
        assert cg["table"][0]["mean"] == 5.0
        _, cg = pooled.pooled_runs_report(store, ["r1"], realtime_only=True)["points"]
        assert cg["members"] == [("r1", 2)] and cg["excluded_not_real_time"] == [("r1", 3)]
        assert cg["table"][0]["mean"] == 1.0
        with pytest.raises(KeyError):
            pooled.pooled_runs_report(store, ["nope"])


def test_cli_pool(db):
    res = CliRunner().invoke(main, ["report", "r1", "--db", str(db), "--pool", "--realtime-only"])
    assert res.exit_code == 0, res.output
    assert "left out, real time not kept: points [3]" in res.output
    assert "left out, did not finish: points [4]" in res.output
    # catnip_good's page 1 against droptail's (1.0, 3.0 and 2.0 s): 1.0 / 2.0 with only real-time
    # repetitions (point 3's 9.0 s is out); 5.0 / 2.0 with it.
    assert "Against #0 (DropTail, 2 repetition(s))" in res.output
    assert "   1          0.50      -\n" in res.output  # one catnip_good page: no spread to compare
    res = CliRunner().invoke(main, ["report", "r1", "--db", str(db), "--pool"])
    # 5.0 / 2.0, +- Student t at the Welch df of the two means (tests/test_samples.py by hand).
    assert "   1   2.50+-16.68" in res.output, res.output
    res = CliRunner().invoke(main, ["report", "r1", "--db", str(db), "--realtime-only"])
    assert res.exit_code != 0 and "--realtime-only goes with --pool" in res.output


@pytest.mark.parametrize("args, message", [
    (["r1", "--against", "1"], "--against goes with --pool"),
    (["r1+r1", "--pool"], "names a run twice"),
    (["r1+r2"], "add --pool"),
    (["r1", "--pool", "--against", "5"], "pooled point #5 does not exist: the pooled report has #0 to #1"),
    (["r1+r", "--pool"], "names run r1 twice"),  # a prefix and the full id of one run
])
def test_cli_pool_rejects(db, args, message):
    res = CliRunner().invoke(main, ["report", *args, "--db", str(db)])
    assert res.exit_code == 2 and message in res.output, res.output


def test_cli_pool_without_a_base_to_compare_with(db):
    # Only real-time repetitions, with droptail's left out: the tables print, the comparison says why not.
    with Store(db) as store:
        store.update_point("r1", 0, realtime_ok=0)
        store.update_point("r1", 1, realtime_ok=0)
    res = CliRunner().invoke(main, ["report", "r1", "--db", str(db), "--pool", "--realtime-only"])
    assert res.exit_code == 0, res.output
    assert "No comparison: pooled point #0 (DropTail) has no completed pages" in res.output
    res = CliRunner().invoke(main, ["report", "r1", "--db", str(db), "--pool", "--realtime-only", "--against", "1"])
    assert res.exit_code == 0 and "Against #1" in res.output, res.output


def test_cli_pool_refuses_transfer_runs(db):
    with Store(db) as store:
        store.create_run("x1", "hyst", "x", {"kind": "transfers"}, {}, 1, "abc", {}, {})
    res = CliRunner().invoke(main, ["report", "x1", "--db", str(db), "--pool"])
    assert res.exit_code == 2 and "catnip model validate" in res.output, res.output


def _seeded_points(store, run: str, seed: int, pages: dict[str, list[float]]) -> None:
    store.create_run(run, "routers", "x", {"name": "routers"}, {}, seed, "abc", {}, {})
    for point, (policy, durations) in enumerate(pages.items()):
        store.create_point(run, point, 0, {"router.policy": {"kind": policy}}, {}, seed)
        store.update_point(run, point, realtime_ok=1, status="done")
        store.add_transfers(run, point, [], [_page(f"c{i}", pg, d) for pg in (1, 2) for i, d in enumerate(durations)])
        # 100 high and 100 low packets at the bottleneck; `point` high and 10 * point low ones dropped.
        final = {"links": {"b": {"arrived": {"high": [100, 1], "low": [100, 1]},
                                 "dropped": {"high": [point, 1], "low": [10 * point, 1]}}}}
        store.add_link_stats(run, point, "r1", final, {"b": "bottleneck-data"}, {}, {})


def test_seeds_pooled_and_contrasted(tmp_path):
    from catnip.results import contrast
    with Store(tmp_path / "db") as store:
        # Page times of two seeds: catnip_good clearly faster than droptail, catnip_bad alike.
        _seeded_points(store, "s1", 1, {"droptail": [2.0, 2.2, 1.8], "catnip_good": [1.0, 1.1, 0.9],
                                        "catnip_bad": [1.0, 3.0, 2.0]})
        _seeded_points(store, "s2", 2, {"droptail": [2.1, 1.9, 2.0], "catnip_good": [1.0, 1.0, 1.0],
                                        "catnip_bad": [2.5, 1.5, 2.0]})
        rep = pooled.pooled_runs_report(store, ["s1", "s2"])
        assert [len(p["members"]) for p in rep["points"]] == [2, 2, 2] and rep["points"][0]["table"][0]["n"] == 6
        assert rep["points"][0]["repeated_seeds"] == []
        c = contrast.against(rep)
        good, bad = c["columns"]
        assert good["pages"][0]["relative"] == pytest.approx(1.0 / 2.0)
        assert good["faster"] == 2 and good["apart_faster"] == [1, 2] and good["ratio_below_one"] == [1, 2]
        assert bad["pages"][0]["relative"] == pytest.approx(1.0) and bad["apart_faster"] == bad["apart_slower"] == []
        assert bad["ratio_below_one"] == bad["ratio_above_one"] == [] and bad["sdev_lower"] == 0
        # Against catnip_good instead: droptail is now the slower one.
        dt = contrast.against(rep, base=1)["columns"][0]
        assert dt["pages"][0]["relative"] == pytest.approx(2.0) and dt["apart_slower"] == [1, 2]
        text = contrast.render_text(c)
        assert "#1: faster on 2 of 2 pages" in text and "means' intervals apart: faster on pages [1, 2]" in text
        assert "#2: faster on 0 of 2 pages" in text
        # Loss pooled over both seeds: catnip_bad (point 2) drops 2 of 100 high and 20 of 100 low per seed.
        assert "bottleneck loss all/high/low 11.00/2.00/20.00%" in text
        assert "#0 (base): bottleneck loss all/high/low 0.00/0.00/0.00%" in text
        _seeded_points(store, "s1-again", 1, {"droptail": [2.0, 2.2, 1.8]})
    res = CliRunner().invoke(main, ["report", "s1+s2", "--pool", "--db", str(tmp_path / "db")])
    assert res.exit_code == 0, res.output
    assert "2 runs and their repetitions pooled" in res.output and "s1 points [0], s2 points [0]" in res.output
    assert "warning" not in res.output
    res = CliRunner().invoke(main, ["report", "s1+s1-again", "--pool", "--db", str(tmp_path / "db")])
    assert "warning: seed(s) [1] pooled more than once" in res.output, res.output
    assert "layout of CATNIP Tables IV/VII/X" in res.output and "Against #0" in res.output


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
    from catnip.results import compare
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
        assert cmp["excluded_not_real_time"] == [{"run_id": "b1+b2", "label": "64 KB buffer",
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
    from catnip.results import compare
    with Store(seeds_db) as store:
        store.create_run("r", "wan", "x", {"name": "wan"}, {}, 1, "abc", {}, {})
        for point, (buffer, rep, d, status) in enumerate([("64KB", 0, 2.0, "done"), ("64KB", 1, 2.0, "done"),
                                                          ("128KB", 0, 6.0, "done"), ("128KB", 1, 9.0, "failed")]):
            store.create_point("r", point, rep, {"topology.bottleneck.buffer": buffer}, {}, 1)
            store.update_point("r", point, realtime_ok=1, status=status)
            store.add_transfers("r", point, [], [_page("c0", 1, d)])
        cmp = compare.compare(store, ["b1+b2", "r"])
        c64, c128 = cmp["columns"]
        assert (c64["label"], c128["label"]) == ("64 KB buffer", "128 KB buffer")
        assert c64["relative"][1] == pytest.approx(2.0 / 4.0) and c128["relative"][1] == pytest.approx(6.0 / 4.0)
        assert cmp["excluded_not_done"] == [{"run_id": "r", "label": "128 KB buffer",
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


def test_runs_differing_beyond_the_seed_are_not_pooled(seeds_db):
    """Same scenario name, but one run had an override (--set): not seeds of one experiment."""
    with Store(seeds_db) as store:
        store.create_run("modern", "wan", "x", {"name": "wan", "tcp": {"profile": "modern"}}, {}, 3, "abc", {}, {})
        with pytest.raises(ValueError, match=r"differ in more than the seed \(tcp.profile\)"):
            pooled.pooled_runs_report(store, ["b1", "modern"])
        store.create_run("seed9", "wan", "x", {"name": "wan", "seed": 9}, {}, 9, "abc", {}, {})
        pooled.pooled_runs_report(store, ["b1", "seed9"])  # the seed alone may differ
        # so may keeping idle CPUs awake (a point re-run with it after missing real time)
        store.create_run("awake", "wan", "x", {"name": "wan", "run": {"keep_awake": True}}, {}, 1, "abc", {}, {})
        pooled.pooled_runs_report(store, ["b1", "awake"])
        store.create_run("awake2", "wan", "x", {"name": "wan", "run": {"keep_awake": True, "time_limit": 60}},
                         {}, 1, "abc", {}, {})
        with pytest.raises(ValueError, match=r"differ in more than the seed \(run.time_limit\)"):
            pooled.pooled_runs_report(store, ["b1", "awake2"])


def test_runs_of_different_engines_are_not_pooled(seeds_db):
    """Issue 46: seeds measured before a fix of the engine are not pooled with seeds after it."""
    with Store(seeds_db) as store:
        for run, sha in [("old", "a" * 64), ("new", "b" * 64), ("new2", "b" * 64)]:
            store.create_run(run, "wan", "x", {"name": "wan"}, {}, 3, "abc", {"engine_sha256": sha}, {})
        with pytest.raises(ValueError, match=r"ran different queue engines \(aaaaaaaaaaaa: old; bbbbbbbbbbbb: new\)"):
            pooled.pooled_runs_report(store, ["old", "new"])
        pooled.pooled_runs_report(store, ["new", "new2"])  # the same engine
        pooled.pooled_runs_report(store, ["b1", "new"])    # a run that stored no engine hash: not compared


def test_report_without_verdict_calls_says_so_without_failing():
    # An engine that never gave a verdict writes no call percentile (null): the report must still print.
    from catnip.results import report
    fidelity = {"late_events": 0, "engine_events": 0, "late_threshold_us": 1000, "max_late_us": 0,
                "kernel_queue_drops": 0, "late_at_issue_events": 0, "verdict_calls": 0, "slow_verdict_calls": 0}
    text = "\n".join(report.fidelity_lines(fidelity))
    assert "0 of 0 verdict calls took longer than 1 ms: the kernel" in text
    fidelity.update(verdict_calls=10, slow_verdict_calls=1, verdict_call_p99_us=1536, max_verdict_call_us=2500.0)
    assert "(worse router's p99 1536 us, max 2.5 ms)" in "\n".join(report.fidelity_lines(fidelity))
