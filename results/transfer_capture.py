"""Transfer latencies from a capture at the sender, as the hysteresis paper defines them (section 4):
"the time from when the sender sends the first packet until the time when the sender receives the
acknowledgement of the last data packet" (handshake and teardown excluded).

Reads a pcap (Ethernet, IPv4; headers are enough) taken on the server's interface and returns, per connection (keyed
by the client's port), the first data segment's time, the time of the first ACK covering the
last data byte, and the data segments sent and resent.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
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
    reused: bool = False          # a second connection on the same client port: not attributable

    def latency(self) -> float | None:
        if self.first_data is None or self.last_ack is None:
            return None
        return self.last_ack - self.first_data


def read(pcap: Path, server_ip: str, server_port: int, sizes: dict[int, int]) -> dict[int, Flow]:
    """sizes: client port -> bytes the server was asked for (to know which ACK is the last)."""
    server = socket.inet_aton(server_ip)
    flows: dict[int, Flow] = {}
    with open(pcap, "rb") as fh:
        for ts, buf in dpkt.pcap.Reader(fh):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if ip.src == server and tcp.sport == server_port:
                flow = flows.setdefault(tcp.dport, Flow(tcp.dport))
                if tcp.flags & dpkt.tcp.TH_SYN:
                    flow.reused |= flow.isn is not None and flow.isn != tcp.seq
                    flow.isn = tcp.seq
                    continue
                # From the IP header: the capture keeps only the headers of each packet.
                payload = ip.len - 4 * ip.hl - 4 * tcp.off
                if flow.isn is None or payload <= 0:
                    continue
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
                flow = flows.get(tcp.sport)
                if flow is None or flow.isn is None or flow.last_ack is not None:
                    continue
                acked = (tcp.ack - flow.isn - 1) % MOD
                size = sizes.get(tcp.sport)
                if size is not None and acked >= size and acked < MOD // 2:
                    flow.last_ack = ts
    return flows
