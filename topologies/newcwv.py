"""The newCWV paper's dumbbell (Fig. 6, section 4): the measured pair (client c1 <-> server v1)
and an FTP cross-traffic pair (x1 <-> w1) through one bottleneck. "The bottleneck router
imposed a fixed bandwidth and delay" (section 4.1); the access links are not described, so they
are parameters (fast and short by default in the scenarios)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from catnip.spec.graph import AccessLinkSpec, CoreLinkSpec, Graph, HostGroup
from catnip.topologies.base import TopologyBase


class TwoPairDumbbell(TopologyBase):
    kind: Literal["two_pair_dumbbell"] = "two_pair_dumbbell"
    pairs: int = Field(default=1, ge=1, le=50, description="measured client-server pairs")
    cross_pairs: int = Field(default=1, ge=0, le=50, description="cross-traffic pairs")
    access_link: AccessLinkSpec
    bottleneck: CoreLinkSpec

    def graph(self) -> Graph:
        b = self.bottleneck
        groups = [HostGroup(name="clients", count=self.pairs, router="rc", prefix="c", role="client", link=self.access_link),
                  HostGroup(name="servers", count=self.pairs, router="rs", prefix="v", role="server", link=self.access_link)]
        if self.cross_pairs:
            groups += [HostGroup(name="cross_clients", count=self.cross_pairs, router="rc", prefix="x",
                                 link=self.access_link),
                       HostGroup(name="cross_servers", count=self.cross_pairs, router="rs", prefix="w",
                                 link=self.access_link)]
        return Graph(routers=["rc", "rs"], groups=groups, links=[
            b.between("rc", "rs", "bottleneck", data="reverse")])
