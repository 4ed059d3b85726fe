"""W_max at the sender: bpf/cwnd_clamp.bpf.c (sock_ops) clamps the congestion window of every
connection made or accepted by processes in a cgroup. Pinned under /sys/fs/bpf/catnip/clamp-*, so
`catnip clean` removes what a killed run left; detached when its cgroup goes."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from catnip.testbed import paths, spm

OBJECT = paths.REPO / "bpf" / "build" / "cwnd_clamp.bpf.o"


class CwndClamp:
    def __init__(self, segments: int, name: str | None = None):
        if not 1 <= segments <= 65535:
            raise ValueError(f"cwnd clamp {segments}: must be 1-65535 segments")
        self.segments = segments
        self.pin = spm.PIN_ROOT / f"clamp-{name or uuid.uuid4().hex[:8]}"

    def load(self) -> None:
        if not OBJECT.exists():
            spm.run_tool(["make", "-s", "-C", str(paths.REPO / "bpf")], "building the BPF objects")
        spm.ensure_bpffs()
        (self.pin / "maps").mkdir(parents=True, exist_ok=True)
        spm.run_tool(["bpftool", "prog", "load", str(OBJECT), str(self.pin / "prog"), "type", "sockops",
                  "pinmaps", str(self.pin / "maps")], "loading bpf/cwnd_clamp.bpf.o (verifier)")
        spm.run_tool(["bpftool", "map", "update", "pinned", str(self.pin / "maps" / "cwnd_clamp_cfg"), "key", "0", "0",
                  "0", "0", "value", *map(str, self.segments.to_bytes(4, "little"))], "setting the cwnd clamp")

    def attach(self, cgroup: Path) -> None:
        spm.run_tool(["bpftool", "cgroup", "attach", str(cgroup), "sock_ops", "pinned", str(self.pin / "prog")],
                 "attaching the cwnd clamp")

    def unload(self) -> None:
        """Unpin (the attachment goes with the cgroup, the program when nothing holds it)."""
        shutil.rmtree(self.pin, ignore_errors=True)
