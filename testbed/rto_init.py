"""The initial retransmission timeout per host (`tcp.initial_rto`): load bpf/rto_init.bpf.o, attach it
to the run's cgroup, give it each host namespace's value, remove it.

One load per point, pinned under /sys/fs/bpf/catnip/rto-ID with its own map (network namespace
cookie -> ms). The sock_ops program is attached with BPF_F_ALLOW_MULTI to the run's cgroup
(testbed/run_cgroup.py), which holds every process of the run, Apache in its nested group included;
points side by side attach their own. A host's namespace is named by its cookie, read with
SO_NETNS_COOKIE from a socket opened inside it (testbed/netns.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from catnip.testbed import netns, paths, run_cgroup, spm

OBJECT = paths.REPO / "bpf" / "build" / "rto_init.bpf.o"
OWN_MAPS = ("catnip_rto_ms", "catnip_rto_n")


class RtoInitError(RuntimeError):
    pass


class InitialRto:
    def __init__(self, name: str | None = None):
        self.pin = spm.PIN_ROOT / f"rto-{name or uuid.uuid4().hex[:8]}"
        self.cgroup: Path | None = None

    @property
    def prog(self) -> Path:
        return self.pin / "progs" / "rto_init"

    def load(self) -> None:
        group = run_cgroup.current_run_group()
        if group is None:
            raise RtoInitError("tcp.initial_rto needs the run's cgroup (cgroup v2), which this run does not have")
        if not OBJECT.exists():
            spm.run_tool(["make", "-s", "-C", str(paths.REPO / "bpf")], "building the BPF objects")
        spm.load_object(OBJECT, self.pin, OWN_MAPS)
        spm.run_tool(["bpftool", "cgroup", "attach", str(group), "sock_ops", "pinned", str(self.prog), "multi"],
                 "attaching the initial-RTO program to the run's cgroup")
        self.cgroup = group

    def set(self, pid: int, seconds: float) -> None:
        """Connections opened in process `pid`'s network namespace start with this RTO."""
        cookie = netns.cookie(pid)
        ms = round(seconds * 1000)
        spm.run_tool(["bpftool", "map", "update", "pinned", str(self.pin / "catnip_rto_ms"),
                  "key", *map(str, cookie.to_bytes(8, "little")), "value", *map(str, ms.to_bytes(4, "little"))],
                 "setting a host's initial RTO")

    def answers(self) -> int:
        """How many times the kernel took our value (SYNs and SYN-ACKs of the point's hosts)."""
        return spm.read_counters(self.pin / "catnip_rto_n", ("answers",), "the initial-RTO counter").get("answers", 0)

    def unload(self) -> list[str]:
        problems = []
        if self.cgroup is not None and self.cgroup.exists():
            try:
                spm.run_tool(["bpftool", "cgroup", "detach", str(self.cgroup), "sock_ops", "pinned", str(self.prog)],
                         "detaching the initial-RTO program")
            except spm.SpmError as exc:
                problems.append(str(exc))
        self.cgroup = None
        problems += spm.unpin(self.pin)
        try:
            spm.PIN_ROOT.rmdir()
        except OSError:
            pass
        return problems
