"""Transfer latencies from a capture at the sender, as the hysteresis paper defines them (section 4):
"the time from when the sender sends the first packet until the time when the sender receives the
acknowledgement of the last data packet" (handshake and teardown excluded).

Reads a pcap (Ethernet, IPv4; headers are enough) taken on the server's interface and returns, per connection (keyed
by the client's port), the first data segment's time, the time of the first ACK covering the
last data byte, and the data segments sent and resent.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

import dpkt

MOD = 2**32


@dataclass
class Flow:
    client_port: int
    isn: int | None = None
    first_data: float | None = None
    last_ack: float | None = None
    highest_ack: int = 0          # relative to isn + 1
    data_segments: int = 0
    retransmissions: int = 0
    high_end: int = 0             # highest relative sequence end sent
    dscp_high: int = 0            # data segments marked AF11 (DSCP 10)
    size: int | None = None       # bytes asked for: set by `complete`
    acks: list = field(default_factory=list)  # (time, bytes acknowledged) as they came

    def latency(self) -> float | None:
        if self.first_data is None or self.last_ack is None:
            return None
        return self.last_ack - self.first_data


def read(pcap: Path, server_ip: str, server_port: int) -> dict[int, list[Flow]]:
    """Connections per client port, oldest first. A connection is complete once `complete()`
    is given its size (the ACK of the last byte is found from the ACKs recorded here)."""
    server = socket.inet_aton(server_ip)
    flows: dict[int, list[Flow]] = {}
    acks: dict[int, list[list[tuple[float, int]]]] = {}  # per port, per connection: (time, acked)
    with open(pcap, "rb") as fh:
        for ts, buf in dpkt.pcap.Reader(fh):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if ip.src == server and tcp.sport == server_port:
                if tcp.flags & dpkt.tcp.TH_SYN:
                    conns = flows.setdefault(tcp.dport, [])
                    if not conns or conns[-1].isn != tcp.seq:  # a SYN-ACK sent again keeps its ISN
                        conns.append(Flow(tcp.dport, isn=tcp.seq))
                        acks.setdefault(tcp.dport, []).append([])
                    continue
                conns = flows.get(tcp.dport)  # None: a connection that opened before the capture
                # From the IP header: the capture keeps only the headers of each packet.
                payload = ip.len - 4 * ip.hl - 4 * tcp.off
                if not conns or payload <= 0:
                    continue
                flow = conns[-1]
                start = (tcp.seq - flow.isn - 1) % MOD
                end = start + payload
                flow.data_segments += 1
                flow.dscp_high += (ip.tos >> 2) == 10
                if flow.first_data is None:
                    flow.first_data = ts
                if end <= flow.high_end:
                    flow.retransmissions += 1
                flow.high_end = max(flow.high_end, end)
            elif ip.dst == server and tcp.dport == server_port and tcp.flags & dpkt.tcp.TH_ACK:
                conns = flows.get(tcp.sport)
                if conns:
                    acked = (tcp.ack - conns[-1].isn - 1) % MOD
                    if acked < MOD // 2:
                        acks[tcp.sport][-1].append((ts, acked))
    for port, conns in flows.items():
        for flow, seen in zip(conns, acks[port]):
            flow.acks = seen
    return flows


def complete(flow: Flow, size: int) -> Flow:
    """Set the transfer's size and find the first ACK covering its last byte."""
    flow.size = size
    flow.last_ack = next((t for t, acked in flow.acks if acked >= size), None)
    return flow


def match(flows: dict[int, list[Flow]], trials: list[dict]) -> dict[tuple[int, int], Flow | str]:
    """(size, trial) -> its connection, or why it has none. `trials`: the client's records
    ({trial, port, size, t_start}); a port's trials in start order meet its connections in order."""
    by_port: dict[int, list[dict]] = {}
    for t in trials:
        if t.get("port"):
            by_port.setdefault(t["port"], []).append(t)
    out: dict[tuple[int, int], Flow | str] = {}
    for port, mine in by_port.items():
        mine.sort(key=lambda t: t["t_start"])
        conns = flows.get(port, [])
        if len(conns) != len(mine):
            for t in mine:
                out[(t["size"], t["trial"])] = f"port {port}: the client opened {len(mine)} connections, the capture shows {len(conns)}"
            continue
        for t, flow in zip(mine, conns):
            out[(t["size"], t["trial"])] = complete(flow, t["size"])
    return out
