"""Captures of a live run turned into `catnip-engine replay` traces, and FATES.csv read in every
format version (docs/engine.md "Replay").

Which capture gives what. A capture on the interface a link's packets leave by (run.capture: the
bottleneck's egress) sees them after the engine: marks applied, dropped packets absent. A replay
needs the arrivals, so the trace is built from captures of the interfaces the packets *enter* the
router by: the data from the interface facing its senders, the ACKs from the one facing its
receivers. The kernel stamps a packet once, on receipt, and both tcpdump and the engine
(nfq_loop.rs `arrival_time`) read that one stamp, so the trace's times are the live engine's
arrival times (to the microsecond the engine's release marks keep). The live marks are read back
from the egress capture, packet by packet (`released`).
"""

from __future__ import annotations

import csv
import ipaddress
import socket
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Iterable, Iterator

import dpkt

TRACE_COLUMNS = ["time_us", "size", "dscp", "flow", "proto", "src", "dst", "sport", "dport", "dir", "flags", "seq",
                 "ack", "payload"]


class TraceError(ValueError):
    pass


@dataclass(frozen=True)
class Packet:
    """One IPv4 packet of a capture, as the engine's PacketInfo::parse reads it."""

    time_ns: int
    size: int          # the IP total length (the engine's packet length)
    dscp: int
    flow: int          # the engine's flow hash
    proto: int
    src: str
    dst: str
    sport: int | None
    dport: int | None
    ip_id: int
    tcp: tuple[int, int, int, int] | None  # flags, seq, ack, payload

    def key(self) -> tuple:
        """What finds this packet again in another capture of the same router: addresses, ports,
        IP id and TCP sequence (a retransmission gets a new IP id)."""
        return (self.src, self.dst, self.proto, self.sport, self.dport, self.ip_id,
                self.tcp[1] if self.tcp else None)


def _fnv(data: bytes) -> int:
    """FNV-1a 64 (engine/src/packet.rs Fnv): the engine's flow id."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _ip_of(buf: bytes, linktype: int) -> bytes | None:
    if linktype == dpkt.pcap.DLT_EN10MB:
        eth = dpkt.ethernet.Ethernet(buf)
        return bytes(eth.data) if eth.type == dpkt.ethernet.ETH_TYPE_IP else None
    if linktype == dpkt.pcap.DLT_LINUX_SLL:
        sll = dpkt.sll.SLL(buf)
        return bytes(sll.data) if sll.ethtype == dpkt.ethernet.ETH_TYPE_IP else None
    if linktype in (dpkt.pcap.DLT_RAW, 101):
        return buf if buf and buf[0] >> 4 == 4 else None
    raise TraceError(f"capture link type {linktype}: not read (allowed: Ethernet, Linux cooked, raw IP)")


def read_pcap(path: Path | str) -> Iterator[Packet]:
    """The IPv4 packets of a capture (headers are enough: the lengths come from the IP header)."""
    with open(path, "rb") as fh:
        try:
            reader = dpkt.pcap.Reader(fh)
        except ValueError as exc:
            raise TraceError(f"{path}: not a pcap file ({exc})") from exc
        linktype = reader.datalink()
        for ts, buf in reader:
            b = _ip_of(buf, linktype)
            if b is None or len(b) < 20 or b[0] >> 4 != 4:
                continue
            # dpkt gives a nanosecond capture's stamps as exact Decimals, a microsecond one's as floats.
            yield _packet(int((Decimal(ts) * 1_000_000_000).to_integral_value()), b)


def _packet(time_ns: int, b: bytes) -> Packet:
    ihl = (b[0] & 0x0F) * 4
    total = int.from_bytes(b[2:4], "big")
    proto = b[9]
    first = int.from_bytes(b[6:8], "big") & 0x1FFF == 0
    l4 = proto in (6, 17) and len(b) >= ihl + 4
    flow = _fnv(b[12:20] + bytes([proto]) + (b[ihl:ihl + 4] if l4 else b""))
    ports = (int.from_bytes(b[ihl:ihl + 2], "big"), int.from_bytes(b[ihl + 2:ihl + 4], "big")) if l4 and first \
        else (None, None)
    tcp = None
    if proto == 6 and first and len(b) >= ihl + 14:
        headers = ihl + (b[ihl + 12] >> 4) * 4
        tcp = (b[ihl + 13], int.from_bytes(b[ihl + 4:ihl + 8], "big"), int.from_bytes(b[ihl + 8:ihl + 12], "big"),
               max(total - headers, 0))
    return Packet(time_ns, total, b[1] >> 2, flow, proto, socket.inet_ntoa(b[12:16]), socket.inet_ntoa(b[16:20]),
                  ports[0], ports[1], int.from_bytes(b[4:6], "big"), tcp)


def _nets(hosts: Iterable[str], what: str) -> list:
    try:
        nets = [ipaddress.ip_network(h, strict=False) for h in hosts]
    except ValueError as exc:
        raise TraceError(f"{what}: {exc} (allowed: IPv4 addresses or networks)") from exc
    if not nets:
        raise TraceError(f"{what}: empty (name the hosts on that side of the link)")
    return nets


def _within(addr: str, nets: list) -> bool:
    a = ipaddress.ip_address(addr)
    return any(a in n for n in nets)


def arrivals(data_in: Path | str, acks_in: Path | str, senders: Iterable[str], receivers: Iterable[str]
             ) -> list[tuple[Packet, bool]]:
    """The link's arrivals in time order, each with `reverse`: from `data_in` (the capture of the
    interface the link's packets enter the router by) the packets from `senders` to `receivers`,
    and from `acks_in` those coming back (receivers to senders), which the replay shows to the ACK
    observers only. Other traffic on those interfaces is left out."""
    snd, rcv = _nets(senders, "senders"), _nets(receivers, "receivers")
    fwd = [(p, False) for p in read_pcap(data_in) if _within(p.src, snd) and _within(p.dst, rcv)]
    rev = [(p, True) for p in read_pcap(acks_in) if _within(p.src, rcv) and _within(p.dst, snd)]
    if not fwd:
        raise TraceError(f"{data_in}: no packet from {list(senders)} to {list(receivers)}")
    # Stable: at one stamp the data first, as in the captures' own order.
    return sorted(fwd + rev, key=lambda pr: pr[0].time_ns)


def write_trace(packets: list[tuple[Packet, bool]], path: Path | str) -> None:
    """TRACE.csv with the TCP columns, times from the first packet (microseconds, 3 decimals)."""
    t0 = packets[0][0].time_ns if packets else 0
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(TRACE_COLUMNS)
        for p, reverse in packets:
            ports = ["", ""] if p.sport is None else [p.sport, p.dport]
            tcp = list(p.tcp) if p.tcp else ["", "", "", ""]
            w.writerow([f"{(p.time_ns - t0) / 1000:.3f}", p.size, p.dscp, p.flow, p.proto, p.src, p.dst, *ports,
                        "rev" if reverse else "fwd", *tcp])


def from_arrival_log(log: Path | str, link: str, path: Path | str) -> int:
    """The trace of `link` from an engine's arrival log (run.arrival_log; engine/src/arrival_log.rs):
    its rows as `fwd`, every other link's as `rev` (the live engine shows them all to the ACK
    observers), in the log's order, times from the log's first row. The number of `fwd` rows.
    Unlike a trace built from captures, the order is the one the live engine took: a packet
    released by one link reaches the next a verdict round trip after its release, and an ACK
    crossing another link in that time was seen first."""
    with open(log, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or header[:1] != ["link"] or header[1:] != TRACE_COLUMNS:
            raise TraceError(f"{log}: not an engine arrival log (its header is {header})")
        rows = list(reader)
    names = sorted({r[0] for r in rows})
    if link not in names:
        raise TraceError(f"{log}: no arrival on link {link!r} (links seen: {', '.join(names) or 'none'})")
    t0 = min(_ns(r[1]) for r in rows)
    own = 0
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(TRACE_COLUMNS)
        for r in rows:
            mine = r[0] == link
            own += mine
            t = _ns(r[1]) - t0
            w.writerow([f"{t // 1000}.{t % 1000:03d}", *r[2:10], "fwd" if mine else "rev", *r[11:]])
    return own


def _ns(time_us: str) -> int:
    """Exact nanoseconds of a `time_us` cell with up to 3 decimals (no float rounding)."""
    return int(Decimal(time_us) * 1000)


def released(data_out: Path | str, senders: Iterable[str], receivers: Iterable[str]) -> dict[tuple, int]:
    """The DSCP each packet from `senders` to `receivers` left the router with, by Packet.key(),
    from a capture of the interface they leave by (a packet the engine dropped is absent)."""
    snd, rcv = _nets(senders, "senders"), _nets(receivers, "receivers")
    return {p.key(): p.dscp for p in read_pcap(data_out) if _within(p.src, snd) and _within(p.dst, rcv)}


# --- FATES.csv ---------------------------------------------------------------------------------


def read_fates(path: Path | str) -> tuple[int, list[dict[str, str]]]:
    """(format version, rows) of a FATES.csv in any version (docs/engine.md "Replay"): 3 names
    itself in `fates_version`; a file without it is 2 if it has `dscp_out` (`by` may then be
    `loss`, `police`, `shape`), else 1 (`by` only an evicting id)."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
        fields = rows[0].keys() if rows else []
    if not fields:
        with open(path) as fh:
            fields = fh.readline().strip().split(",")
    if "fates_version" in fields:
        versions = {r["fates_version"] for r in rows}
        if len(versions) > 1 or not versions <= {"3"}:
            raise TraceError(f"{path}: fates_version {sorted(versions)} (this reader knows 1-3)")
        return 3, rows
    return (2 if "dscp_out" in fields else 1), rows
