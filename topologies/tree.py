"""Nouredine and Tobagi's aggregation tree (Fig. 1, section 2.1), scaled by parameters.

Per side: `users_per_l1` users per first-level router, `l1_per_l2` first-level routers per
second-level router, `l2_per_core` second-level routers per core router; the two sides' core
routers are joined by the bottleneck. The paper: 10 x 8 x 5 per side (400 pairs), links of 1.5,
10 and 45 Mbps with 64, 64 and 250 packet buffers, a 45-175 Mbps bottleneck with 500 packets,
and RTTs of 20, 40, 80, 120 and 200 ms. The per-link delays and how pairs map to RTT classes are
not given: here source i and destination i form a pair, pair i has RTT class i mod n, and the
whole difference between classes sits on the two users' access links (the other links keep
their given delays), so RTT = 2 x (2 x user delay + 2 x l1 delay + 2 x l2 delay + bottleneck delay).

Routers: core `sa`/`da`, second level `sm1..`/`dm1..`, first level `se1..`/`de1..`. Groups: one per
first-level router, `src1..` (role `sources`, hosts s1..) and `dst1..` (role `destinations`, d1..).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from catnip.spec import units
from catnip.spec.graph import AccessLinkSpec, CoreLinkSpec, DelayClass, Graph, HostGroup
from catnip.topologies.base import TopologyBase


class AggregationTree(TopologyBase):
    kind: Literal["tree"] = "tree"
    users_per_l1: int = Field(ge=1, le=100)
    l1_per_l2: int = Field(ge=1, le=50)
    l2_per_core: int = Field(ge=1, le=20)
    user_link: AccessLinkSpec = Field(description="user <-> first-level router (its delay is replaced per RTT class)")
    l1_link: CoreLinkSpec = Field(description="first-level <-> second-level router")
    l2_link: CoreLinkSpec = Field(description="second-level <-> core router")
    bottleneck: CoreLinkSpec
    rtt_classes: list[float] = Field(min_length=1, description="round-trip times of the pairs, e.g. [20ms, 80ms]")
    data_from: Literal["sources", "destinations"] = Field(
        default="sources", description="which side sends the measured data: the bottleneck direction it crosses is"
                                       " reported as bottleneck-data (web servers on the destinations: destinations)")

    @field_validator("rtt_classes", mode="before")
    @classmethod
    def _rtts(cls, v: Any) -> Any:
        return [units.parse_duration(x) for x in v] if isinstance(v, list) else v

    def user_delay(self, rtt: float) -> float:
        inner = 2 * self.l1_link.delay + 2 * self.l2_link.delay + self.bottleneck.delay
        return (rtt / 2 - inner) / 2

    def graph(self) -> Graph:
        classes = []
        for rtt in self.rtt_classes:
            d = self.user_delay(rtt)
            if d < 0:
                raise ValueError(f"rtt_classes: {rtt * 1000:g} ms is shorter than the path without the access links"
                                 f" ({2 * (rtt / 2 - 2 * d) * 1000:g} ms)")
            classes.append(DelayClass(delay=d, tag=f"rtt{rtt * 1000:g}ms"))
        routers, groups, links = [], [], []
        per_side = self.users_per_l1 * self.l1_per_l2 * self.l2_per_core
        for side, name, role, prefix in (("s", "src", "sources", "s"), ("d", "dst", "destinations", "d")):
            # Links point up the tree (l1 -> l2 -> core): data goes up on the sending side, down on the other.
            up = "forward" if (side == "s") == (self.data_from == "sources") else "reverse"
            core = f"{side}a"
            routers.append(core)
            for m in range(self.l2_per_core):
                l2 = f"{side}m{m + 1}"
                routers.append(l2)
                links.append(self.l2_link.between(l2, core, "aggregation2", data=up))
                for e in range(self.l1_per_l2):
                    n = m * self.l1_per_l2 + e
                    l1 = f"{side}e{n + 1}"
                    routers.append(l1)
                    links.append(self.l1_link.between(l1, l2, "aggregation1", data=up))
                    groups.append(HostGroup(name=f"{name}{n + 1}", count=self.users_per_l1, router=l1, prefix=prefix,
                                            first=n * self.users_per_l1 + 1, role=role, link=self.user_link,
                                            delay_classes=self._rotated(classes, n * self.users_per_l1)))
        links.append(self.bottleneck.between("sa", "da", "bottleneck",
                                             data="forward" if self.data_from == "sources" else "reverse"))
        assert per_side == sum(g.count for g in groups) // 2
        return Graph(routers=routers, groups=groups, links=links)

    @staticmethod
    def _rotated(classes: list[DelayClass], offset: int) -> list[DelayClass]:
        """Classes as host `offset + i` should get them: pair numbering runs across groups."""
        k = offset % len(classes)
        return classes[k:] + classes[:k]

