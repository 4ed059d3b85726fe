"""run.keep_awake (testbed/keep_awake.py): one SCHED_IDLE, nice-19 busy loop per CPU, whose time
the kernel books as nice and the fidelity record then counts as idle (controller/fidelity.py)."""

from __future__ import annotations

import os
import time

import pytest

from catnip.controller import fidelity
from catnip.controller.parallel import CpuGauge
from catnip.testbed.keep_awake import KeepAwake

# user nice system idle iowait irq softirq steal: 300 jiffies of nice on CPU 1 between the readings
STAT = "cpu  100 0 100 1800 0 0 0 0\ncpu0 50 0 50 900 0 0 0 0\ncpu1 50 0 50 900 0 0 0 0\n"
STAT_LATER = "cpu  200 300 200 2400 0 0 0 0\ncpu0 100 0 100 1300 0 0 0 0\ncpu1 100 300 100 1100 0 0 0 0\n"


def test_nice_time_is_idle_only_when_asked():
    a, b = fidelity.machine_snapshot(STAT, ""), fidelity.machine_snapshot(STAT_LATER, "")
    # CPU 0: 100 busy of 500; CPU 1: 100 user+system, 300 nice and 200 idle of 600
    assert fidelity.machine_fidelity(a, b)["cpu_busy_each"] == [0.2, round(400 / 600, 4)]
    assert fidelity.machine_fidelity(a, b, nice_is_idle=True)["cpu_busy_each"] == [0.2, round(100 / 600, 4)]
    plain = fidelity.cpu_fidelity(a["cpu"], b["cpu"])
    awake = fidelity.cpu_fidelity(a["cpu"], b["cpu"], nice_is_idle=True)
    assert (plain["cpu_busy_fraction"], awake["cpu_busy_fraction"]) == (round(500 / 1100, 4), round(200 / 1100, 4))


def test_the_room_gauge_counts_nice_as_idle_when_asked(monkeypatch):
    from catnip.controller import parallel
    readings = iter([[100, 0, 100, 1800, 0, 0, 0, 0], [200, 300, 200, 2400, 0, 0, 0, 0]] * 2)
    monkeypatch.setattr(parallel, "cpu_times", lambda: next(readings))
    busy = []
    for nice_is_idle in (False, True):
        gauge = CpuGauge(nice_is_idle=nice_is_idle)
        gauge.sample()
        gauge.sample()
        busy.append(round(gauge.busy(1e-9), 4))
    assert busy == [round(500 / 1100, 4), round(200 / 1100, 4)]


def _nice_jiffies() -> int:
    with open("/proc/stat") as fh:
        return int(fh.readline().split()[2])


def test_the_loops_are_idle_class_on_their_cpu_and_their_time_is_nice():
    cpus = sorted(os.sched_getaffinity(0))
    awake = KeepAwake()
    before = _nice_jiffies()
    try:
        assert awake.start(cpus) == cpus
        for cpu, p in zip(cpus, awake.procs):
            assert os.sched_getscheduler(p.pid) == os.SCHED_IDLE
            assert os.sched_getaffinity(p.pid) == {cpu}
            assert os.getpriority(os.PRIO_PROCESS, p.pid) == 19
        deadline = time.monotonic() + 10
        while _nice_jiffies() - before < 20:  # 0.2 s of CPU at USER_HZ 100: the loops are running
            assert time.monotonic() < deadline, "the loops' time does not show as nice time"
            time.sleep(0.05)
    finally:
        procs = list(awake.procs)
        awake.stop()
    assert all(p.poll() is not None for p in procs) and awake.procs == []


@pytest.mark.netns
def test_another_machine_keeps_its_cpus_awake_until_the_point_lets_go(no_leftovers):
    """The point's helper there runs the loops (an imitation's CPUs are this machine's, so they are
    seen here too), SCHED_IDLE on one CPU each, in the helper's run cgroup, and ends them at the end
    of its input."""
    import sys
    from pathlib import Path
    from catnip.testbed import machine_helper, machines
    from catnip.testbed.keep_awake import LOOP
    from catnip.testbed.paths import REPO

    def loops() -> list[int]:
        found = []
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if proc.joinpath("cmdline").read_bytes().split(b"\0")[1:3] == [b"-c", LOOP.encode()]:
                    found.append(int(proc.name))
            except (OSError, IndexError):
                continue
        return found

    with machines.imitated("m2") as m2:
        helper = machine_helper.MachineHelper(m2, "awake-test", sys.executable, str(REPO))
        if not helper.cgroup:
            helper.close()
            pytest.skip("the helper made no run cgroup (cgroup v2 with a writable hierarchy is needed)")
        try:
            cpus = helper.ask({"keep_awake": True})
            assert cpus == sorted(os.sched_getaffinity(0))
            pids = loops()
            assert len(pids) == len(cpus), pids
            assert {os.sched_getscheduler(p) for p in pids} == {os.SCHED_IDLE}
            assert sorted(min(os.sched_getaffinity(p)) for p in pids) == cpus
            assert all(Path(f"/proc/{p}/cgroup").read_text().strip().endswith(Path(helper.cgroup).name)
                       for p in pids)
            with pytest.raises(machine_helper.HelperError, match="run already"):
                helper.ask({"keep_awake": True})
        finally:
            problems = helper.close()
        assert problems == [] and helper.proc.returncode == 0 and loops() == []


def test_the_loops_are_on_by_default_and_a_scenario_can_turn_them_off():
    """The default since 2026-11-28 (docs/fidelity.md, "The default run, run after run"): make run's
    own scenario resolves with the loops on, and `run.keep_awake: false` still turns them off."""
    from catnip.spec.scenario import load
    from catnip.testbed import paths

    quick = paths.REPO / "scenarios" / "quick.yaml"
    assert [sc.run.keep_awake for _, sc in load(quick).points] == [True]
    assert [sc.run.keep_awake for _, sc in load(quick, overrides=["run.keep_awake=false"]).points] == [False]
