"""Stopping a group of child processes with one deadline for all of them; telling whether a
recorded process still runs."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def stop_all(procs: list[subprocess.Popen], timeout: float) -> list[subprocess.Popen]:
    """SIGTERM every live one, wait for all within `timeout` together (their teardowns overlap),
    then SIGKILL the ones still running; returns those killed."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed = []
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            killed.append(proc)
    return killed


def _boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id") as fh:
        return fh.read().strip()


def _start_ticks(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, starttime: the command may hold spaces and ')'


def identity(pid: int | None = None) -> str:
    """A process as `boot id/pid/start time`: a pid alone is reused, and a reboot forgets all pids."""
    pid = os.getpid() if pid is None else pid
    return f"{_boot_id()}/{pid}/{_start_ticks(pid)}"


def alive(ident: str) -> bool:
    """Whether the process `identity` named still runs (same boot, same pid, same start time)."""
    try:
        boot, pid, ticks = ident.split("/")
        return boot == _boot_id() and _start_ticks(int(pid)) == ticks
    except ValueError:
        raise ValueError(f"not a process identity: {ident!r}") from None
