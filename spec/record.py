"""The resolved record of a point: what it ran, once, read by everything after the run.

A scenario says what to build with defaults and short forms (a link's fields shared by its two
directions, `router.policy` for links without a policy of their own, `tcp.groups` over `tcp`).
The record says what was built: every emulated link direction with its resolved rate, delay,
buffer, queue policy, random loss and edge functions in order (the engine's own configuration of
that direction), every host's TCP settings as applied, every application's parameters and hosts,
and where the routers ran. The network is built from it (testbed/plan.py writes it,
testbed/network.py builds its directions from it), the store keeps it with the point
(`points.record`), and reports, layouts, labels and the dashboard read it instead of
re-deriving what ran from the scenario.

Versioned (RECORD_VERSION) with the database: a reader refuses a record newer than it knows.
Points recorded before records existed get one planned from their stored scenario by the same
planner (`derived: true`), so old runs read the same way.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RECORD_VERSION = 2  # 2: a host uplink's rate (DirectionRecord.host_rate_bps)


class RecordError(ValueError):
    """A record this code cannot read (newer, or not a record)."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DirectionRecord(_Record):
    """One emulated link direction exactly as its engine (or tc) was configured."""

    name: str                    # "ctprs>ctprc": owner>next hop (the engine's link name)
    where: str                   # the scenario field it comes from: "links.0 (rs-rc).forward", "groups.clients.link.down"
    role: str                    # "bottleneck-data", "access-client", "ingress-delay", "source-senders", ...
    router: str                  # the short name of the router owning it
    host: str | None = None      # the host of an access direction (short name)
    hook: Literal["egress", "ingress"]
    interface: str
    rate_bps: int                # 0: serialized elsewhere (the host's own qdisc, at host_rate_bps)
    host_rate_bps: int | None = None  # an uplink the host's own htb serializes: at this rate (None: the engine does)
    delay_s: float
    buffer: dict[str, int] | None
    policy: dict[str, Any]       # the engine's policy block, defaults applied
    loss: dict[str, float] | None = None
    edge: list[dict[str, Any]] = Field(default_factory=list)  # the engine's edge functions, in order
    match_dst: str | None = None
    match_src: str | None = None
    point_to_point: bool = False  # a router-router interface: the kernel backend can own its root qdisc
    backend: Literal["engine", "kernel"] = "engine"

    def engine_config(self, queue_num: int) -> dict[str, Any]:
        """This direction's block of the engine's configuration file (engine/src/config.rs)."""
        block: dict[str, Any] = {"name": self.name, "queue_num": queue_num, "rate_bps": self.rate_bps,
                                 "delay_us": int(round(self.delay_s * 1e6)), "buffer": self.buffer,
                                 "policy": self.policy}
        if self.loss:
            block["loss"] = self.loss
        if self.edge:
            block["edge"] = self.edge
        return block

    def edge_kinds(self) -> list[str]:
        return [e.get("kind", "?") for e in self.edge]


class HostRecord(_Record):
    name: str                    # short name (c1)
    group: str
    role: str | None = None
    router: str
    ip: str
    tag: str = ""                # its delay class
    tcp: dict[str, Any]          # spec.scenario.HostTcp.record(): its TCP settings, resolved
    sysctls: dict[str, Any]      # every sysctl its namespace was given, as written


class AppRecord(_Record):
    instance: str                # the name in the results (the kind unless named)
    kind: str
    clients: list[str]           # short host names
    servers: list[str]
    params: dict[str, Any]       # the application's spec with its defaults


class RunPlacement(_Record):
    link_backend: str                         # run.link_backend: who carries the router links
    cpus: str = "shared"                      # run.placement of the engines and the rest
    switch_kind: str | None = None            # filled when the network is built
    machine_of: dict[str, str] = Field(default_factory=dict)  # router -> the label of the machine running it (run.machines)


class PointRecord(_Record):
    version: int = RECORD_VERSION
    derived: bool = False        # planned afterwards from the stored scenario (a point older than records)
    seed: int
    topology: dict[str, Any]     # kind, mss, mtu, routers, groups (name, router, role, count), links (a, b, role)
    tcp_profile: str | None = None  # tcp.profile: the name of the period TCP set its hosts' settings come from
    links: list[DirectionRecord]
    hosts: list[HostRecord]
    applications: list[AppRecord]
    marking: dict[str, Any]
    placement: RunPlacement

    # --- what readers ask -------------------------------------------------------------------
    def directions(self, role_prefix: str = "") -> list[DirectionRecord]:
        return [d for d in self.links if d.role.startswith(role_prefix)]

    def direction(self, role: str) -> DirectionRecord | None:
        """The first direction with exactly this role (a dumbbell has one 'bottleneck-data')."""
        return next((d for d in self.links if d.role == role), None)

    def host(self, name: str) -> HostRecord | None:
        return next((h for h in self.hosts if h.name == name), None)

    def hosts_of(self, group_or_role: str) -> list[HostRecord]:
        named = [h for h in self.hosts if h.group == group_or_role]
        return named or [h for h in self.hosts if h.role == group_or_role]

    def apps(self, kind: str | None = None) -> list[AppRecord]:
        return [a for a in self.applications if kind is None or a.kind == kind]

    def app(self, instance: str) -> AppRecord | None:
        return next((a for a in self.applications if a.instance == instance), None)

    def group_tcp(self, group: str) -> dict[str, Any] | None:
        """The TCP settings of a group's (or role's) first host."""
        hosts = self.hosts_of(group)
        return hosts[0].tcp if hosts else None

    def group_sysctl(self, group: str, key: str) -> Any:
        """A sysctl as a group's (or role's) first host got it; None if it was not set."""
        hosts = self.hosts_of(group)
        return hosts[0].sysctls.get(key) if hosts else None


def parse(data: str | dict | None) -> PointRecord | None:
    """A stored record (JSON text or dict); None where a point has none. RecordError if it is
    newer than this code or not a record."""
    import json
    if data is None or data == "":
        return None
    try:
        raw = json.loads(data) if isinstance(data, str) else data
    except ValueError as exc:
        raise RecordError(f"the point's record is not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise RecordError("the point's record is not an object")
    version = raw.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RecordError(f"the point's record has no version (got {str(version)[:40]!r})")
    if version > RECORD_VERSION:
        raise RecordError(f"the point's record is version {version}; this code reads up to {RECORD_VERSION}:"
                          " update the testbed")
    try:
        return PointRecord.model_validate(raw)
    except ValueError as exc:
        raise RecordError(f"the point's record does not match version {version}: {str(exc)[:200]}") from None
