"""A graph written out in the scenario (`kind: graph`): routers, host groups, links."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from catnip.spec.graph import Graph, HostGroup, RouterLink
from catnip.topologies.base import TopologyBase


class ExplicitGraph(TopologyBase):
    kind: Literal["graph"] = "graph"
    routers: list[str] = Field(min_length=1)
    groups: list[HostGroup] = Field(min_length=1)
    links: list[RouterLink] = Field(default_factory=list)

    def graph(self) -> Graph:
        return Graph(routers=self.routers, groups=self.groups, links=self.links)
