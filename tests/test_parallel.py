"""Sweep points side by side (--jobs): each in namespaces of its own, recorded, torn down."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from catnip.controller import parallel
from catnip.testbed import cleanup
from catnip.testbed.paths import REPO
from tests.conftest import catnip, need_engine
from tests.test_run import SMALL


TWO_POINTS = ["--set", "sweep.router.policy=[{kind: droptail}, {kind: catnip_good}]"]
# Side by side needs the Linux bridge (OVS bridges are global); `auto` picks OVS where the kernel has it.
BRIDGE = ["--set", "topology.access_switch=linuxbridge"]


@pytest.fixture(autouse=True)
def _engine_for_runs(request):
    """Runs need the built engine (the netns marker brings the root gate)."""
    if request.node.get_closest_marker("netns"):
        need_engine()


def _points(isolated_data) -> list[sqlite3.Row]:
    db = sqlite3.connect(isolated_data / "data" / "catnip.db")
    db.row_factory = sqlite3.Row
    return db.execute("SELECT point, status, started, finished, realtime_ok, fidelity FROM points"
                      " ORDER BY point").fetchall()


@pytest.mark.netns
def test_two_points_run_side_by_side(isolated_data, no_leftovers):
    # Room 100% and no settling: the second point starts as soon as the first runs its workload.
    # Think times of 2 s keep the first workload (10 pages a client, ~20 s) longer than the second
    # point's launch and build, so overlap does not depend on how fast this machine is (a CI run
    # once saw 30 zero-think pages finish 0.03 s before the second point started).
    res = catnip("run", str(REPO / "scenarios" / "quick.yaml"), *SMALL, *BRIDGE, *TWO_POINTS, "--json",
                 "--set", "workload.think_time={model: fixed, mean: 2s}",
                 "--jobs", "2", "--room", "100", "--settle", "0")
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["status"] == "done"
    assert [p["pages_completed"] for p in summary["points"]] == [30, 30]
    first, second = _points(isolated_data)
    assert second["started"] < first["finished"], "the points did not overlap"
    conc = [json.loads(p["fidelity"])["concurrency"] for p in (first, second)]
    assert [c["beside_at_start"] for c in conc] == [0, 1]
    assert 0 <= conc[1]["cpu_busy_before_start"] <= 1
    # Each point's engines counted their own verdicts (the namespaces kept the two networks apart).
    assert all(json.loads(p["fidelity"])["engine_events"] > 1000 for p in (first, second))


@pytest.mark.netns
def test_ctrl_c_cancels_every_running_point(isolated_data, no_leftovers):
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "run", str(REPO / "scenarios" / "quick.yaml"),
                             *SMALL, *BRIDGE, *TWO_POINTS, "--set", "workload.rounds=20",
                             "--set", "workload.think_time={model: fixed, mean: 1s}",
                             "--jobs", "2", "--room", "100", "--settle", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            clients = {cmd.split("/point")[1][:2] for _, cmd in cleanup.our_processes() if "catnip.workloads.client" in cmd}
            if len(clients) == 2:  # both points' clients are running
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        else:
            pytest.fail("the two points never ran at once")
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert cleanup.leftovers() == {}, "every point's own teardown must leave nothing"
    assert [p["status"] for p in _points(isolated_data)] == ["cancelled", "cancelled"]


@pytest.mark.netns
def test_killed_runner_takes_its_points_down(isolated_data, no_leftovers):
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "run", str(REPO / "scenarios" / "quick.yaml"),
                             *SMALL, *BRIDGE, "--set", "workload.rounds=20", "--jobs", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    deadline = time.monotonic() + 90
    while not any("catnip.workloads.client" in cmd for _, cmd in cleanup.our_processes()):
        assert time.monotonic() < deadline and proc.poll() is None, "clients never started"
        time.sleep(0.5)
    proc.kill()  # no teardown by the runner: the worker notices and tears its point down itself
    proc.wait()
    # Only what the runner set up for the whole run may stay (for `catnip clean`): the allowed
    # congestion-control list, the BPF congestion controls, the run's own cgroup (now empty).
    run_level = {"sysctl", "congestion_controls", "cgroups"}
    deadline = time.monotonic() + 120
    while set(cleanup.leftovers()) - run_level and time.monotonic() < deadline:
        time.sleep(1)
    assert set(cleanup.leftovers()) <= run_level, cleanup.leftovers()
    from catnip.testbed import run_cgroup
    assert not any(run_cgroup.processes(Path(g)) for g in cleanup.leftovers().get("cgroups", [])), \
        "the killed runner's cgroup holds no process once its points are down"
    # The runner's watchdog (testbed/run_watchdog.py) ended its group, point workers included, so
    # no point recorded its own end; the run no longer shows as running once its runner is gone,
    # and what its points' clients wrote is read back (controller/recover.py).
    runs = json.loads(catnip("list", "--json").stdout)
    assert [r["status"] for r in runs] in (["interrupted"], ["recovered"]), runs
    assert f"pid {proc.pid}" in runs[0]["error"], runs[0]["error"]
    assert [p["status"] for p in _points(isolated_data)] in (["interrupted"], ["recovered"])
    cleanup.clean()


@pytest.mark.netns
def test_ovs_access_switch_cannot_run_side_by_side(isolated_data):
    res = catnip("run", str(REPO / "scenarios" / "quick.yaml"), "--set", "topology.access_switch=ovs",
                 "--jobs", "2")
    assert res.returncode == 2
    assert "--jobs" in res.stderr
    assert not (isolated_data / "data" / "catnip.db").exists()


def test_code_changed_during_a_run_fails_the_point_clearly(tmp_path, monkeypatch):
    from catnip.controller import point_worker
    spec = tmp_path / "worker.pickle"
    spec.write_bytes(b"not read")
    assert point_worker.main(str(spec), "0" * 16) == 3
    assert spec.exists(), "the spec must not be unpickled with code other than the runner's"


def test_code_fingerprint_follows_the_sources(tmp_path, monkeypatch):
    from catnip.testbed import paths
    for pkg in paths.CODE_PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "m.py").write_text("x = 1\n")
    monkeypatch.setattr(paths, "REPO", tmp_path)
    before = paths.code_fingerprint()
    assert paths.code_fingerprint() == before
    (tmp_path / "results" / "m.py").write_text("x = 2\n")
    assert paths.code_fingerprint() != before


def test_cpu_gauge_measures_over_its_window():
    gauge = parallel.CpuGauge()
    gauge.sample()
    assert gauge.busy(parallel.WINDOW_S) is None, "less than a window sampled"
    t, busy, total = gauge._samples[-1]
    gauge._samples.clear()
    gauge._samples.extend([(t - 12, busy - 900, total - 1000), (t - 4, busy - 100, total - 200), (t, busy, total)])
    # From the newest sample at least a window old: 900 busy of 1000 jiffies.
    assert gauge.busy(parallel.WINDOW_S) == pytest.approx(0.9)
    assert gauge.busy(4) == pytest.approx(0.5)
