"""Which of the CATNIP paper's setups a point of ours is: the sender as the paper names it, the
bottleneck's queue policy and buffer, read from the point's resolved record (issue 43: what the
bottleneck's data direction and the web servers ran, never re-derived from the scenario), so the
dashboard's views and the docs' layouts put the same paper table beside it. C. Williamson, Q. Wu,
"A Case for Context-Aware TCP/IP", ACM SIGMETRICS Performance Evaluation Review 29(4), 2002."""

from __future__ import annotations

from typing import Any

from catnip.papers.catnip import published as pub
from catnip.spec.record import PointRecord

# The senders as the paper names them (spec/senders.py's CATNIP senders; Linux's own Reno too).
PAPER_SENDERS = {"reno": "Reno", "catnip_reno": "Reno", "catnip_ns2reno": "Reno", "catnip_eca": "ECA",
                 "catnip_rbplw": "Reno+RBPLW", "catnip_ecarbplw": "ECA+RBPLW"}


# The least bottleneck buffer in bytes taken for the WAN emulation's (Table XI: 64-512 KB). Section IV's
# simulation queue is 10 packets, which scenarios/catnip-sim-routers-period.yaml counts as 5,520 bytes:
# anything under 32 KB is that queue in bytes, not a WAN buffer.
WAN_BYTES = 32 * 1024


def point_setup(record: PointRecord) -> dict[str, Any]:
    """A point's sender (as the paper names it, None for another), router policy kind, whether its
    bottleneck buffer is the WAN setup's (in bytes, section V-G) and, where it is one of Table XI's,
    that buffer in KB: all from the point's resolved record (issue 43: what the bottleneck's data
    direction ran and what the web servers' TCP was, not what the scenario's defaults say)."""
    web = record.apps("web")
    server = record.host(web[0].servers[0]) if web and web[0].servers else None
    tcp = server.tcp if server is not None else (record.group_tcp("servers") or {})
    bottleneck = record.direction("bottleneck-data")
    policy = bottleneck.policy.get("kind") if bottleneck is not None else None
    buffer = bottleneck.buffer if bottleneck is not None else None
    kb = pub.buffer_kb(buffer) if buffer is not None else None
    size = buffer.get("bytes") if isinstance(buffer, dict) else None
    return {"sender": PAPER_SENDERS.get(str(tcp.get("congestion_control"))), "cc": tcp.get("congestion_control"),
            "policy": policy, "buffer_kb": kb,
            # a buffer of WAN_BYTES or more is the WAN emulation's (section V-G: 64-512 KB); the simulation's
            # 10-packet queue counts packets, or bytes where the period set counts it so (10 x 552 = 5,520)
            "wan": f"{size / 1024:g} KB" if isinstance(size, int) and size >= WAN_BYTES else None}
