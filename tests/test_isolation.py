"""Isolation between runs and cleanup: one machine lock whatever CATNIP_STATE says, `catnip clean`
refuses to wreck a live run (--force says what it stops), and selects only what runs own."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from catnip.controller.skeleton import RunBusy, machine_lock
from catnip.testbed import cleanup, paths
from tests.conftest import catnip, need_root

HOLD = ("import sys, time\n"
        "from controller.skeleton import machine_lock\n"
        "with machine_lock():\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(300)\n")


def _other_env(tmp_path, name: str) -> dict:
    return {**os.environ, "CATNIP_STATE": str(tmp_path / f"{name}-state"), "CATNIP_DATA": str(tmp_path / f"{name}-data")}


@pytest.fixture
def run_holding_lock(tmp_path):
    """A process that holds the machine lock the way a run does, from its own CATNIP_STATE."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD], cwd=paths.REPO, env=_other_env(tmp_path, "first"),
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()
    # Its watchdog (testbed/run_watchdog.py) takes the lock to remove what a killed run left, some
    # time after the kill: the next test starts once that watchdog has left (the lock being free
    # right after the kill says nothing, the watchdog may not have taken it yet).
    deadline = time.monotonic() + 60
    while _watchdogs_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _watchdogs_of(proc.pid), "the killed holder's watchdog is still running after 60 s"
    assert not cleanup.run_in_progress(), "the machine lock is still held after the holder's watchdog left"


def _watchdogs_of(runner_pid: int) -> list[int]:
    """Pids of the watchdogs started for the runner `runner_pid` (their command line names it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"catnip.testbed.run_watchdog" in argv and str(runner_pid).encode() in argv:
            found.append(int(entry))
    return found


def _alive(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


def test_clean_refuses_while_a_run_holds_the_lock_and_names_it(tmp_path, run_holding_lock):
    need_root()
    res = catnip("clean", env=_other_env(tmp_path, "second"))
    assert res.returncode != 0
    assert "a run is in progress" in res.stderr and f"pid {run_holding_lock.pid} since" in res.stderr
    assert _alive(run_holding_lock)


def test_a_second_run_with_another_state_dir_is_refused(tmp_path, run_holding_lock, monkeypatch):
    need_root()
    monkeypatch.setenv("CATNIP_STATE", str(tmp_path / "second-state"))
    with pytest.raises(RunBusy, match=f"pid {run_holding_lock.pid} since"):
        with machine_lock():
            pass
    assert _alive(run_holding_lock)


def test_clean_force_says_what_it_stops_and_stops_it(tmp_path, run_holding_lock):
    need_root()
    res = catnip("clean", "--force")
    assert res.returncode == 0, res.stderr
    assert f"will stop the run holding the machine lock (pid {run_holding_lock.pid}" in res.stderr
    run_holding_lock.wait(timeout=30)
    assert cleanup.run_in_progress() is None


def test_clean_leaves_an_unrelated_reader_of_the_data_dir_alone(tmp_path):
    need_root()
    log = paths.REPO / "data" / "isolation-test.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("x\n")
    tail = subprocess.Popen(["tail", "-f", str(log)], stdout=subprocess.DEVNULL)
    try:
        res = catnip("clean", env={**os.environ, "CATNIP_DATA": str(paths.REPO / "data")})
        assert res.returncode == 0, res.stderr
        assert _alive(tail)
    finally:
        tail.kill()
        tail.wait()
        log.unlink()


def test_clean_from_another_environment_removes_a_killed_runs_process(tmp_path):
    """A run's process (here a stand-in for its Apache: in a host's network namespace, reading under
    the default state directory) is found by a clean whose CATNIP_STATE/CATNIP_DATA point elsewhere."""
    need_root()
    paths.MACHINE_DIR.mkdir(parents=True, exist_ok=True)
    log = paths.MACHINE_DIR / "isolation-test.log"
    log.write_text("x\n")
    orphan = subprocess.Popen(["unshare", "-n", "tail", "-f", str(log)], stdout=subprocess.DEVNULL)
    try:
        res = catnip("clean", env=_other_env(tmp_path, "elsewhere"))
        assert res.returncode == 0, res.stderr
        orphan.wait(timeout=30)
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()
        log.unlink()
