"""The CATNIP sender heuristics as BPF congestion controls (bpf/catnip_cc.bpf.c): register them for
a run, unregister after (also after a failure; `catnip clean` removes leftovers).

Congestion controls are global to the kernel (every namespace sees them), so a run registers all
four, uses the one its scenario names on the servers, and unregisters them at the end.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from testbed import paths

OBJECT = paths.REPO / "bpf" / "build" / "catnip_cc.bpf.o"
SHARED_MAP_PIN = Path("/sys/fs/bpf/catnip_docs")  # the document map, shared with the SPM object
NAMES = ("catnip_reno", "catnip_eca", "catnip_rbplw", "catnip_ecarbplw", "catnip_ns2reno")
# Which of them pace the last window: they need TCP's pacing ratios at 100% in the sender's namespace.
PACING = ("catnip_rbplw", "catnip_ecarbplw")
# ECA and RBPLW read the document's extent, which mod_catnip announces through the SPM object.
NEED_DOCUMENTS = ("catnip_eca", "catnip_rbplw", "catnip_ecarbplw")


class SenderError(RuntimeError):
    pass


def _struct_ops_names() -> list[str]:
    try:
        out = subprocess.run(["bpftool", "struct_ops", "show"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    names = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in NAMES:
            names.append(parts[1])
    return names


def _available() -> set[str] | None:
    try:
        return set(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split())
    except OSError:
        return None


def registered() -> list[str]:
    """Ours that sockets can still select."""
    available = _available()
    return [n for n in _struct_ops_names() if available is None or n in available]


def being_freed() -> list[str]:
    """Ours already unregistered whose struct_ops map the kernel keeps until the last socket using
    it closes (orphaned sockets of a cancelled run can take minutes); unregister answers EINPROGRESS."""
    available = _available()
    return [] if available is None else [n for n in _struct_ops_names() if n not in available]


def register() -> None:
    if not OBJECT.exists():
        res = subprocess.run(["make", "-s", "-C", str(paths.REPO / "bpf")], capture_output=True, text=True)
        if res.returncode != 0:
            raise SenderError(f"building bpf/catnip_cc.bpf.o failed: {res.stderr.strip()}")
    unregister()  # a killed run may have left them; names must be unique
    res = subprocess.run(["bpftool", "struct_ops", "register", str(OBJECT)], capture_output=True, text=True,
                         timeout=30)
    missing = set(NAMES) - set(registered())
    if res.returncode != 0 or missing:
        unregister()
        raise SenderError(f"registering the CATNIP congestion controls failed ({', '.join(sorted(missing))}): "
                          f"{(res.stderr or res.stdout).strip()}")


def unregister() -> list[str]:
    """Unregister every one still there; returns the names removed."""
    gone = []
    for name in registered():
        if subprocess.run(["bpftool", "struct_ops", "unregister", "name", name], capture_output=True,
                          timeout=10).returncode == 0:
            gone.append(name)
    return gone


def release_shared_map() -> None:
    """Unpin the shared document map once neither the marker nor the controls use it."""
    SHARED_MAP_PIN.unlink(missing_ok=True)
