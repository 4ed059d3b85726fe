"""The TCP-friendly marking paper's testbed (section 6.1, Fig. 1): senders -> 100 Mbps access ->
R1 -> 10 Mbps bottleneck -> R2 -> 100 Mbps -> destinations, the droppers on R1's interface
toward R2 (500 KB in all), markers at the entry to the senders' access links, and the 200 ms RTT
as "a delay on the destinations' outgoing interface" (give it as `receiver_link.up.delay`).
Groups: `senders` (s1..sN at r1), `receivers` (d1..dN at r2)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from catnip.spec.graph import AccessLinkSpec, CoreLinkSpec, Graph, HostGroup
from catnip.topologies.base import TopologyBase


class EdgeBottleneck(TopologyBase):
    kind: Literal["edge_bottleneck"] = "edge_bottleneck"
    senders: int = Field(ge=1, le=200)
    receivers: int | None = Field(default=None, ge=1, le=200, description="default: as many as senders")
    sender_link: AccessLinkSpec
    bottleneck: CoreLinkSpec
    receiver_link: AccessLinkSpec

    def graph(self) -> Graph:
        b = self.bottleneck
        return Graph(routers=["r1", "r2"], groups=[
            HostGroup(name="senders", count=self.senders, router="r1", prefix="s", role="client", link=self.sender_link),
            HostGroup(name="receivers", count=self.receivers or self.senders, router="r2", prefix="d", role="server",
                      link=self.receiver_link)],
            links=[b.between("r1", "r2", "bottleneck")])
