"""A cgroup-v2 group per run: the record of which processes a run started, kept by the kernel.

The runner moves itself into `catnip-run-PID` when it takes the machine lock, so everything it
starts (Mininet's host shells, engines, Apache, clients, side-by-side point workers) is born in the
group, whatever its command line or namespace. `catnip clean` then selects a killed run's processes
by that membership instead of by their command lines, and removes them all with `cgroup.kill`.
Groups nested inside (the SPM marker's cgroup for Apache, testbed/spm.py) go with it. A runner
killed by SIGKILL cannot do that itself: its watchdog (testbed/run_watchdog.py), born outside the
group, does it the moment the runner dies. A run joins its group through
testbed/run_watchdog.py's `joined`, which starts the watchdog first; this module knows groups only.

Without a cgroup-v2 hierarchy (or where the kernel refuses), runs go on without one and cleanup
falls back to the command-line markers (testbed/cleanup.py): said once on stderr.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

PREFIX = "catnip-run-"


def hierarchy() -> Path | None:
    """Where cgroup v2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid system)."""
    try:
        with open("/proc/self/mounts") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) > 2 and parts[2] == "cgroup2":
                    return Path(parts[1])
    except OSError:
        pass
    return None


def own_group(pid: int | str = "self") -> Path | None:
    """The cgroup-v2 group a process is in (the `0::` line of /proc/PID/cgroup), as a path."""
    root = hierarchy()
    if root is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return root / line[3:].lstrip("/")
    except OSError:
        pass
    return None


def current_run_group() -> Path | None:
    """The run group this process is in (a runner or anything it started), else None."""
    group = own_group()
    while group is not None and group != hierarchy() and group.parent != group:
        if group.name.startswith(PREFIX):
            return group
        group = group.parent
    return None


def run_groups() -> list[Path]:
    root = hierarchy()
    return sorted(root.glob(PREFIX + "*")) if root else []


def _subtree(group: Path) -> list[Path]:
    """The group and every group below it, deepest first (the order rmdir needs)."""
    found = [group] + [p for p in group.rglob("*") if p.is_dir()]
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def processes(group: Path) -> list[int]:
    pids = []
    for g in _subtree(group):
        try:
            pids += [int(p) for p in (g / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            continue
    return pids


def _populated(group: Path) -> bool:
    try:
        for line in (group / "cgroup.events").read_text().splitlines():
            if line.startswith("populated "):
                return line.split()[1] == "1"
    except OSError:
        return False
    return bool(processes(group))


def remove(group: Path, timeout: float = 10.0) -> list[str]:
    """Kill every process in the group and below (cgroup.kill, or SIGKILL one by one on kernels
    before 5.14), wait until the kernel says it is empty, then remove the groups. Returns problems."""
    problems = []
    kill = group / "cgroup.kill"
    if _populated(group):
        try:
            kill.write_text("1")
        except OSError:
            for pid in processes(group):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    deadline = time.monotonic() + timeout
    while _populated(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _populated(group):
        problems.append(f"{group}: processes {processes(group)} still there after {timeout:g} s")
    for g in _subtree(group):
        try:
            g.rmdir()
        except FileNotFoundError:
            pass
        except OSError as exc:
            problems.append(f"removing {g}: {exc.strerror}")
    return problems
