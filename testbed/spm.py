"""Selective Packet Marking at the web servers: load, attach, read and remove bpf/spm.bpf.o.

One load per run: the two programs and their maps are pinned under /sys/fs/bpf/catnip/spm-ID;
`catnip_mark` is attached at tc egress (clsact) of each server's interface, inside the server's
network namespace; `catnip_doc` is attached to a cgroup-v2 group that the Apache servers run in,
so only their setsockopt calls reach it. `unload` undoes all of it, also after a failure; the
cleanup module removes what a killed run left (pins, cgroup).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from catnip.testbed import kernel_fs, paths
from catnip.testbed.kernel_fs import BPFFS, cgroup2_root

OBJECT = paths.REPO / "bpf" / "build" / "spm.bpf.o"
MOD_CATNIP = paths.REPO / "apache" / "build" / "mod_catnip.so"
PIN_ROOT = BPFFS / "catnip"
CGROUP_NAME = "catnip-servers"
COUNTERS = ("data_high", "data_low", "data_high_bytes", "data_low_bytes", "control_high", "control_low",
            "control_unmarked", "retransmissions", "documents", "no_socket")
OWN_MAPS = ("catnip_cfg", "catnip_counters")
SCOPES = {"document": 0, "connection": 1}
CONTROL = {"high": 0, "low": 1, "unmarked": 2}
RETRANS = {"position": 0, "high": 1, "low": 2}


class SpmError(RuntimeError):
    pass


@dataclass(frozen=True)
class SpmRules:
    """Which segments are high priority (CATNIP III-B); `last=False` is the paper's partial SPM (V-G)."""

    enabled: bool = True  # False: only the document-size program (for ECA/RBPLW), no marking
    first: bool = True
    last: bool = True
    small_cwnd: bool = True
    scope: str = "document"
    control: str = "high"
    retransmissions: str = "position"
    segments: int = 3
    small_cwnd_limit: int = 4

    def map_value(self) -> list[int]:
        """The bytes of `struct spm_config` (bpf/spm.bpf.c), little-endian."""
        head = [int(self.enabled), int(self.first), int(self.last), int(self.small_cwnd), SCOPES[self.scope], CONTROL[self.control],
                RETRANS[self.retransmissions], 0]
        return head + list(self.segments.to_bytes(4, "little")) + list(self.small_cwnd_limit.to_bytes(4, "little"))


def run_tool(argv: list[str], what: str) -> str:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise SpmError(f"{what} failed: {' '.join(argv)}: {(res.stderr or res.stdout).strip()}")
    return res.stdout


def build() -> Path:
    """Compile the object and the Apache module if missing (set-up normally did it)."""
    if not OBJECT.exists():
        run_tool(["make", "-s", "-C", str(paths.REPO / "bpf")], "building the BPF objects")
    if not MOD_CATNIP.exists():
        run_tool(["make", "-s", "-C", str(paths.REPO / "apache")], "building mod_catnip")
    return OBJECT


def joiner(cgroup: Path | None):
    """A preexec_fn that moves the new process into `cgroup` (its children follow)."""
    def join() -> None:
        with open(cgroup / "cgroup.procs", "w") as fh:
            fh.write(str(os.getpid()))
    return join


def ensure_bpffs() -> None:
    """bpffs mounted (testbed/kernel_fs.py); a failure is an SpmError."""
    try:
        kernel_fs.ensure_bpffs()
    except kernel_fs.MountError as exc:
        raise SpmError(str(exc)) from None


def load_object(obj: Path, pin: Path, own_maps: tuple[str, ...]) -> None:
    """Load `obj` with its programs pinned under `pin`/progs and its `own_maps` moved under `pin`.

    libbpf pins maps declared LIBBPF_PIN_BY_NAME in the bpffs root; between `loadall` and the move a
    loader running at the same time (a point beside this one) would reuse them, hence the lock. Each
    load gets fresh maps; maps not in `own_maps` stay shared by name (SPM's document map, which the
    sender congestion controls read)."""
    ensure_bpffs()
    pin.mkdir(parents=True, exist_ok=True)
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    with open(paths.state_dir() / "spm-load.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for stale in own_maps:
            (BPFFS / stale).unlink(missing_ok=True)
        run_tool(["bpftool", "prog", "loadall", str(obj), str(pin / "progs")], f"loading {obj.name} (verifier)")
        for name in own_maps:
            run_tool(["bpftool", "map", "pin", "pinned", str(BPFFS / name), str(pin / name)], f"pinning {name}")
            (BPFFS / name).unlink(missing_ok=True)


def read_counters(pinned: Path, names: tuple[str, ...], what: str) -> dict[str, int]:
    """A per-CPU array of counters, summed over the CPUs, by name."""
    out = json.loads(run_tool(["bpftool", "-j", "map", "dump", "pinned", str(pinned)], f"reading {what}"))
    totals = {}
    for entry in out:
        key = entry["formatted"]["key"]
        if key < len(names):
            f = entry["formatted"]  # a per-CPU array has "values", one per CPU; a plain array "value"
            totals[names[key]] = sum(v["value"] for v in f["values"]) if "values" in f else f["value"]
    return totals


class SpmMarker:
    def __init__(self, rules: SpmRules, name: str | None = None):
        self.rules = rules
        self.pin = PIN_ROOT / f"spm-{name or uuid.uuid4().hex[:8]}"
        self.cgroup: Path | None = None
        self.attached: list[tuple[list[str], str]] = []  # (namespace prefix, interface)

    @property
    def progs(self) -> Path:
        return self.pin / "progs"

    @property
    def maps(self) -> Path:
        return self.pin

    def load(self) -> None:
        load_object(build(), self.pin, OWN_MAPS)
        self.set_rules(self.rules)

    def set_rules(self, rules: SpmRules) -> None:
        self.rules = rules
        run_tool(["bpftool", "map", "update", "pinned", str(self.maps / "catnip_cfg"), "key", "0", "0", "0", "0",
              "value", *map(str, rules.map_value())], "configuring the marker")

    def attach_tc(self, intf: str, ns_prefix: list[str]) -> None:
        """Mark at egress of `intf`; `ns_prefix` runs a command in its namespace (e.g. nsenter)."""
        run_tool([*ns_prefix, "tc", "qdisc", "replace", "dev", intf, "clsact"], f"clsact on {intf}")
        self.attached.append((ns_prefix, intf))
        run_tool([*ns_prefix, "tc", "filter", "replace", "dev", intf, "egress", "pref", "1", "handle", "1", "bpf",
              "direct-action", "object-pinned", str(self.progs / "catnip_mark")], f"attaching the marker to {intf}")

    def make_cgroup(self) -> Path:
        """A cgroup for the servers, with the document-size program attached."""
        root = cgroup2_root()
        if root is None:
            raise SpmError("no cgroup-v2 hierarchy mounted: the document-size option needs one")
        # Inside the run's own group when there is one (testbed/run_cgroup.py), so the servers
        # stay among the processes the run is known to have started.
        from catnip.testbed import run_cgroup
        self.cgroup = (run_cgroup.current_run_group() or root) / f"{CGROUP_NAME}-{self.pin.name}"
        self.cgroup.mkdir(exist_ok=True)
        run_tool(["bpftool", "cgroup", "attach", str(self.cgroup), "setsockopt", "pinned", str(self.progs / "catnip_doc")],
             "attaching the document-size program")
        return self.cgroup

    def counters(self) -> dict[str, int]:
        return read_counters(self.maps / "catnip_counters", COUNTERS, "the marker's counters")

    def unload(self) -> list[str]:
        """Detach and remove everything; returns the problems met (teardown goes on past them)."""
        problems = detach_clsact(self.attached)
        if self.cgroup is not None:
            problems += remove_cgroup(self.cgroup)
            self.cgroup = None
        problems += unpin(self.pin)
        from catnip.testbed import sender
        if not sender.registered():
            sender.release_shared_map()
        try:
            PIN_ROOT.rmdir()  # only when no other run's pins are left
        except OSError:
            pass
        return problems


def detach_clsact(attached: list[tuple[list[str], str]]) -> list[str]:
    """Remove the clsact qdisc (and the filters on it) from each (namespace prefix, interface), and
    forget them; an interface whose namespace is gone already counts as done."""
    problems = []
    for prefix, intf in attached:
        res = subprocess.run([*prefix, "tc", "qdisc", "del", "dev", intf, "clsact"], capture_output=True,
                             text=True, timeout=30)
        if res.returncode != 0 and "Cannot find device" not in res.stderr and "No such" not in res.stderr:
            problems.append(f"tc on {intf}: {res.stderr.strip()}")
    attached.clear()
    return problems


def unpin(pin: Path) -> list[str]:
    """Remove a pin directory (programs and maps); the kernel frees them with their last user."""
    if pin.exists():
        shutil.rmtree(pin, ignore_errors=True)
        if pin.exists():
            return [f"could not unpin {pin}"]
    return []


def remove_cgroup(group: Path) -> list[str]:
    """Move any process left in our cgroup to the root, then remove the group (its BPF attachments
    go with it)."""
    problems = []
    try:
        pids = (group / "cgroup.procs").read_text().split()
    except FileNotFoundError:
        return problems
    for pid in pids:
        try:
            (group.parent / "cgroup.procs").write_text(pid)
        except OSError as exc:
            problems.append(f"moving {pid} out of {group}: {exc.strerror}")
    try:
        group.rmdir()
    except OSError as exc:
        problems.append(f"removing {group}: {exc.strerror}")
    return problems


def our_cgroups() -> list[Path]:
    root = cgroup2_root()
    return sorted([*root.glob(f"{CGROUP_NAME}-*"), *root.glob(f"catnip-run-*/{CGROUP_NAME}-*")]) if root else []
