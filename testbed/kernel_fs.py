"""Where the kernel's file systems the testbed needs are: the cgroup-v2 hierarchy and bpffs.
Below every module that uses them (the SPM marker, the senders, the capability checks), and
importing none of the project's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BPFFS = Path("/sys/fs/bpf")


class MountError(RuntimeError):
    """bpffs is not mounted and mounting it failed."""


def cgroup2_root() -> Path | None:
    """Where the cgroup-v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid)."""
    with open("/proc/self/mounts") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return Path(parts[1])
    return None


def ensure_bpffs() -> None:
    """Mount bpffs at /sys/fs/bpf unless it is mounted (a fresh machine may not have it)."""
    if not os.path.ismount(BPFFS):
        BPFFS.mkdir(parents=True, exist_ok=True)
        argv = ["mount", "-t", "bpf", "bpf", str(BPFFS)]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if res.returncode != 0:
            raise MountError(f"mounting bpffs failed: {' '.join(argv)}: {(res.stderr or res.stdout).strip()}")
