"""TCP-state marking (Nouredine and Tobagi 2002, section 6.1) at every sending host: load, attach,
read and remove bpf/tcpds.bpf.o.

One load per point, pinned under /sys/fs/bpf/catnip/tcpds-ID with its own config, counters and
map of received priorities; `tcpds_mark` goes on the egress and `tcpds_record` on the ingress of
each host's interface (clsact, inside the host's namespace), so data is marked by its sender's
window and pure ACKs by the data they acknowledge. `unload` undoes it, also after a failure; the
cleanup module removes the pins a killed run left (testbed/cleanup.py removes the catnip pin
directory's entries), and the filters go with the namespaces.
"""

from __future__ import annotations

import ipaddress
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from catnip.testbed import paths, spm

OBJECT = paths.REPO / "bpf" / "build" / "tcpds.bpf.o"
COUNTERS = ("data_high", "data_med", "data_low", "ack_high", "ack_med", "ack_low", "ack_unknown", "syn",
            "recovery", "always_high", "random_up", "no_socket", "recorded")
OWN_MAPS = ("catnip_ds_cfg", "catnip_ds_count", "catnip_ds_recv", "catnip_ds_host")
MAX_PORT_RANGES = 8  # struct tcpds_config's high_ports


@dataclass(frozen=True)
class TcpdsRules:
    """Algorithm 1's parameters (section 6.3: HIGH_thresh 4, MED_thresh 8 segments)."""

    high_thresh: int = 4
    med_thresh: int = 8
    randomized: bool = False
    always_high: tuple[tuple[int, int], ...] = field(default_factory=tuple)  # port ranges (Telnet: section 6.1.2)

    def map_value(self) -> list[int]:
        """The bytes of `struct tcpds_config`, little-endian."""
        if len(self.always_high) > MAX_PORT_RANGES:
            raise ValueError(f"always_high: at most {MAX_PORT_RANGES} port ranges")
        out = [1, int(self.randomized), len(self.always_high), 0]
        out += list(self.high_thresh.to_bytes(4, "little")) + list(self.med_thresh.to_bytes(4, "little"))
        ranges = list(self.always_high) + [(0, 0)] * (MAX_PORT_RANGES - len(self.always_high))
        for lo, hi in ranges:
            out += list(lo.to_bytes(2, "little")) + list(hi.to_bytes(2, "little"))
        return out


def build() -> Path:
    if not OBJECT.exists():
        spm.run_tool(["make", "-s", "-C", str(paths.REPO / "bpf")], "building the BPF objects")
    return OBJECT


class TcpStateMarker:
    def __init__(self, rules: TcpdsRules, name: str | None = None):
        self.rules = rules
        self.pin = spm.PIN_ROOT / f"tcpds-{name or uuid.uuid4().hex[:8]}"
        self.attached: list[tuple[list[str], str]] = []

    def load(self) -> None:
        spm.load_object(build(), self.pin, OWN_MAPS)
        spm.run_tool(["bpftool", "map", "update", "pinned", str(self.pin / "catnip_ds_cfg"), "key", "0", "0", "0", "0",
                  "value", *map(str, self.rules.map_value())], "configuring the TCP-state marker")

    def set_host(self, address: str, high_thresh: int, med_thresh: int) -> None:
        """Thresholds of their own for the segments a host sends (Fig. 16: one connection's HIGH_thresh
        swept while the others' stay fixed); `address` is the host's IPv4 address."""
        if not 1 <= high_thresh <= med_thresh:
            raise ValueError(f"{address}: thresholds {high_thresh}/{med_thresh}: need 1 <= high <= med")
        key = list(ipaddress.IPv4Address(address).packed)  # the map key is the address as on the wire
        value = list(high_thresh.to_bytes(4, "little")) + list(med_thresh.to_bytes(4, "little"))
        spm.run_tool(["bpftool", "map", "update", "pinned", str(self.pin / "catnip_ds_host"),
                      "key", *map(str, key), "value", *map(str, value)], f"setting {address}'s TCP-DS thresholds")

    def attach(self, intf: str, ns_prefix: list[str]) -> None:
        """Mark at egress and record at ingress of `intf`; `ns_prefix` enters its namespace."""
        spm.run_tool([*ns_prefix, "tc", "qdisc", "replace", "dev", intf, "clsact"], f"clsact on {intf}")
        self.attached.append((ns_prefix, intf))
        for hook, prog in (("egress", "tcpds_mark"), ("ingress", "tcpds_record")):
            spm.run_tool([*ns_prefix, "tc", "filter", "replace", "dev", intf, hook, "pref", "1", "handle", "1", "bpf",
                      "direct-action", "object-pinned", str(self.pin / "progs" / prog)],
                     f"attaching {prog} to {intf}")

    def counters(self) -> dict[str, int]:
        return spm.read_counters(self.pin / "catnip_ds_count", COUNTERS, "the TCP-state marker's counters")

    def unload(self) -> list[str]:
        """Detach and remove everything; returns the problems met (teardown goes on past them)."""
        problems = spm.detach_clsact(self.attached) + spm.unpin(self.pin)
        try:
            spm.PIN_ROOT.rmdir()  # only when no other marker's pins are left
        except OSError:
            pass
        return problems
