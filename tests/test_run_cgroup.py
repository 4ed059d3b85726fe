"""The run's cgroup (testbed/run_cgroup.py): what a run started is known by the kernel's record, not
by command lines, and nothing started in it outlives the run or a `catnip clean` after a kill."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from catnip.testbed import cleanup, run_cgroup, run_watchdog
from tests.conftest import need_root, wait_until


@pytest.fixture
def hierarchy():
    need_root()
    root = run_cgroup.hierarchy()
    if root is None:
        pytest.skip("no cgroup-v2 hierarchy mounted here")
    return root


def test_a_run_group_holds_what_the_run_starts_and_ends_it(hierarchy):
    before = run_cgroup.own_group()
    with run_watchdog.joined() as group:
        assert group is not None and group.name == f"{run_cgroup.PREFIX}{os.getpid()}"
        assert run_cgroup.own_group() == group and run_cgroup.current_run_group() == group
        # A process with nothing of ours on its command line, and one in a group nested inside.
        leaked = subprocess.Popen(["sleep", "300"])
        nested = group / "nested"
        nested.mkdir()
        inner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                 preexec_fn=lambda: (nested / "cgroup.procs").write_text(str(os.getpid())))
        wait_until(lambda: {leaked.pid, inner.pid} <= set(run_cgroup.processes(group)), 10, "both in the group")
    assert run_cgroup.own_group() == before, "the runner goes back where it was"
    assert leaked.wait(10) == -9 and inner.wait(10) == -9, "what the run left running is ended with it"
    assert not group.exists() and not nested.exists()


def test_clean_finds_a_killed_runs_processes_by_their_group(hierarchy):
    """A run killed by SIGKILL leaves its group behind with its processes: cleanup selects them by
    membership (a bare `sleep` has no marker on its command line) and removes the group."""
    group = hierarchy / f"{run_cgroup.PREFIX}999999999"
    group.mkdir()
    try:
        proc = subprocess.Popen(["sleep", "300"], preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
        wait_until(lambda: proc.pid in run_cgroup.processes(group), 10, "the process in the group")
        assert proc.pid in {pid for pid, _ in cleanup.our_processes()}
        assert str(group) in cleanup.leftovers().get("cgroups", [])
        assert run_cgroup.remove(group) == []
        assert proc.wait(10) == -9 and not group.exists()
    finally:
        if group.exists():
            run_cgroup.remove(group)
