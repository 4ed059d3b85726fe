"""CATNIP's dumbbell (Fig. 3, section IV-A):

    clients --- rc ===bottleneck=== rs --- servers

Every client and server has a dedicated access link to its router (each client its own 10 Mbps
link in Fig. 3). Groups: `clients` (hosts c1..cN at rc), `servers` (v1..vM at rs).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from catnip.spec.graph import AccessLinkSpec, CoreLinkSpec, Direction, Graph, HostGroup
from catnip.topologies.base import TopologyBase


class Dumbbell(TopologyBase):
    kind: Literal["dumbbell"] = "dumbbell"
    clients: int = Field(ge=1, le=250)
    servers: int = Field(ge=1, le=50)
    client_link: AccessLinkSpec
    server_link: AccessLinkSpec
    bottleneck: CoreLinkSpec

    @model_validator(mode="after")
    def _clients_per_server(self) -> "Dumbbell":
        if self.clients < self.servers:
            raise ValueError(f"clients ({self.clients}) must be at least servers ({self.servers}): "
                             "each server serves its own set of clients (section IV-A)")
        return self

    def graph(self) -> Graph:
        b = self.bottleneck
        link = b.between("rc", "rs", "bottleneck", data="reverse")
        return Graph(routers=["rc", "rs"], links=[link], groups=[
            HostGroup(name="clients", count=self.clients, router="rc", prefix="c", role="client", link=self.client_link),
            HostGroup(name="servers", count=self.servers, router="rs", prefix="v", role="server", link=self.server_link)])


_ = Direction  # re-exported for library authors
