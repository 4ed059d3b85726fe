"""Topologies as data: routers, host groups and links, each link direction with its rate,
one-way delay, buffer, queue policy, random loss and edge functions. Routing follows from the
graph (fewest hops). Library topologies (topologies/) expand into a `Graph`; a scenario may
also describe one itself (`topology: {kind: graph, ...}`).

Direction names: a router link `a`-`b` has `forward` (a -> b) and `reverse` (b -> a); a host
group's access link has `down` (router -> host) and `up` (host -> router). Fields given on the
link apply to both directions; a direction's own block overrides them.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from catnip.spec import units
from catnip.spec.edge import EdgeSpec
from catnip.spec.policy import PolicySpec

NAME = r"^[a-z][a-z0-9]{0,5}$"  # node names: 'ctp' + name + '-ethN' must fit IFNAMSIZ (15)
MAX_RATE = 100 * 10**9          # 100 Gbit/s: far above what one machine emulates
MAX_DELAY = 10.0                # seconds, one way
MAX_HOSTS = 1000
SOURCE_QUEUE = "source_scheduler"  # the one policy of a host's uplink (Nouredine-Tobagi 6.2, Fig. 11)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _rate(v: Any, info: Any = None) -> int:
    bps = units.parse_rate(v, bare=not units.from_input(info))
    if bps > MAX_RATE:
        raise ValueError(f"{v!r}: above {units.format_rate(MAX_RATE)}, more than any link this testbed can emulate")
    return bps


def _delay(v: Any, info: Any = None) -> float:
    s = units.parse_duration(v, bare=not units.from_input(info))
    if s > MAX_DELAY:
        raise ValueError(f"{v!r}: a one-way delay above {MAX_DELAY:g} s is not a network path")
    return s


class LossSpec(_Strict):
    """Random loss before the queue: p for every packet, p_high for AF11 packets (default p)."""
    p: float = Field(ge=0, lt=1)
    p_high: float | None = Field(default=None, ge=0, lt=1)

    def engine_config(self) -> dict[str, float]:
        return {"p": self.p, "p_high": self.p if self.p_high is None else self.p_high}


class Direction(_Strict):
    """One direction's overrides of its link's fields."""
    rate: int | None = None
    delay: float | None = None
    buffer: dict[str, int] | None = None
    policy: PolicySpec | None = None
    loss: LossSpec | None = None
    edge: list[EdgeSpec] | None = None

    _r = field_validator("rate", mode="before")(lambda cls, v, info: None if v is None else _rate(v, info))
    _d = field_validator("delay", mode="before")(lambda cls, v, info: None if v is None else _delay(v, info))
    _b = field_validator("buffer", mode="before")(lambda cls, v: None if v is None else units.parse_buffer(v))


class LinkSpec(_Strict):
    """An emulated link: rate, one-way propagation delay and the buffer of its egress queue."""
    rate: int = Field(description="bit/s; written like '10Mbit'")
    delay: float = Field(description="one-way propagation delay in seconds; written like '5ms'")
    buffer: dict[str, int] = Field(description="{'packets': N} or {'bytes': N}; written '50p' or '64KB'")
    policy: PolicySpec | None = Field(default=None, description="queue policy (default: the scenario's router.policy)")
    loss: LossSpec | None = None
    edge: list[EdgeSpec] = Field(default_factory=list, description="edge functions, applied in order")

    _r = field_validator("rate", mode="before")(lambda cls, v, info: _rate(v, info))
    _d = field_validator("delay", mode="before")(lambda cls, v, info: _delay(v, info))
    _b = field_validator("buffer", mode="before")(lambda cls, v: units.parse_buffer(v))


class AccessLinkSpec(LinkSpec):
    down: Direction | None = Field(default=None, description="router -> host")
    up: Direction | None = Field(default=None, description="host -> router (the host's own qdisc serializes it,"
                                                           " the router adds delay and edge functions)")

    @model_validator(mode="after")
    def _up_has_no_queue(self):
        if self.up and self.up.policy is not None and self.up.policy.kind == SOURCE_QUEUE:
            return self  # the engine serializes the uplink: the sending host's own queues (testbed/network.py)
        if self.up and (self.up.buffer is not None or self.up.policy is not None):
            raise ValueError("up: buffer and policy do not apply: the host's own queue serializes its uplink"
                             f" (put a queue policy on the router's egress links instead; only '{SOURCE_QUEUE}',"
                             " the sending host's scheduler, goes here)")
        return self

    def source_queue(self) -> bool:
        """Whether the engine serializes the uplink with a source scheduler instead of the host's htb."""
        return bool(self.up and self.up.policy is not None and self.up.policy.kind == SOURCE_QUEUE)


class CoreLinkSpec(LinkSpec):
    forward: Direction | None = Field(default=None, description="a -> b")
    reverse: Direction | None = Field(default=None, description="b -> a")

    def between(self, a: str, b: str, role: str | None, data: str = "forward") -> "RouterLink":
        """This link's parameters placed between routers a and b."""
        return RouterLink(a=a, b=b, role=role, data=data, **{k: getattr(self, k) for k in CoreLinkSpec.model_fields})


class DelayClass(_Strict):
    delay: float = Field(description="one-way delay of the host's access link")
    tag: str = Field(pattern=r"^[A-Za-z0-9_.=-]{1,24}$", description="label copied to the host's samples")

    _d = field_validator("delay", mode="before")(lambda cls, v, info: _delay(v, info))


class HostGroup(_Strict):
    """`count` hosts, each with a dedicated access link to `router`."""
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,15}$")
    count: int = Field(ge=1, le=MAX_HOSTS)
    router: str
    prefix: str = Field(pattern=r"^[a-z][a-z]{0,3}$", description="host names: prefix + number (c1, c2, ...)")
    first: int = Field(default=1, ge=1, description="number of the group's first host (groups may share a prefix)")
    role: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{0,15}$",
                             description="a name several groups share (applications may name it instead of a group)")
    link: AccessLinkSpec
    delay_classes: list[DelayClass] | None = Field(
        default=None, min_length=1, description="host i gets class i mod n: its access delay and tag")

    def host_names(self) -> list[str]:
        return [f"{self.prefix}{self.first + i}" for i in range(self.count)]

    def delay_class(self, index: int) -> DelayClass | None:
        return self.delay_classes[index % len(self.delay_classes)] if self.delay_classes else None


class RouterLink(CoreLinkSpec):
    a: str
    b: str
    role: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]{0,31}$",
                             description="label of the link in the results; 'bottleneck' links are watched live")
    data: Literal["forward", "reverse"] = Field(
        default="forward", description="the direction carrying the measured data (role-data; the other is role-ack)")


class Graph(_Strict):
    routers: list[str] = Field(min_length=1)
    groups: list[HostGroup] = Field(min_length=1)
    links: list[RouterLink] = Field(default_factory=list)

    @field_validator("routers")
    @classmethod
    def _router_names(cls, v: list[str]) -> list[str]:
        import re
        for name in v:
            if not re.match(NAME, name):
                raise ValueError(f"router name {name!r}: 1-6 lower-case letters and digits, a letter first")
        dup = sorted({n for n in v if v.count(n) > 1})
        if dup:
            raise ValueError(f"router names must be unique: {', '.join(dup)} repeated")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Graph":
        routers = set(self.routers)
        names = [g.name for g in self.groups]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"groups: names must be unique: {', '.join(dup)} repeated")
        if len(self.groups) > 254:
            raise ValueError(f"groups: {len(self.groups)} host groups; at most 254 (group g is addressed 10.(g+1).0.0/16)")
        hosts: dict[str, str] = {}
        for g in self.groups:
            for d in ("down", "up"):
                if g.delay_classes and getattr(g.link, d) is not None and getattr(g.link, d).delay is not None:
                    raise ValueError(f"groups.{g.name}.link.{d}.delay: the group's delay_classes set its hosts' access"
                                     " delays; a direction's own delay would override them")
            if g.router not in routers:
                raise ValueError(f"groups.{g.name}.router: unknown router {g.router!r} (routers: {', '.join(self.routers)})")
            last = g.host_names()[-1]
            if len(last) > 7:
                raise ValueError(f"groups.{g.name}: host name {last!r} is too long (prefix + number at most 7"
                                 " characters: interface names are limited to 15)")
            for h in g.host_names():
                if h in hosts or h in routers:
                    raise ValueError(f"groups.{g.name}: host name {h!r} also used by "
                                     f"{'group ' + hosts[h] if h in hosts else 'a router'}; choose another prefix")
                hosts[h] = g.name
        if len(hosts) > MAX_HOSTS:
            raise ValueError(f"{len(hosts)} hosts: at most {MAX_HOSTS}")
        seen = set()
        for i, link in enumerate(self.links):
            for end in (link.a, link.b):
                if end not in routers:
                    raise ValueError(f"links.{i}: unknown router {end!r} (routers: {', '.join(self.routers)})")
            if link.a == link.b:
                raise ValueError(f"links.{i}: a link joins two different routers (both ends are {link.a!r})")
            pair = frozenset((link.a, link.b))
            if pair in seen:
                raise ValueError(f"links.{i}: {link.a} and {link.b} are already linked")
            seen.add(pair)
        unreached = set(self.routers) - self._reachable(self.routers[0])
        if unreached:
            raise ValueError(f"the graph is not connected: no path from {self.routers[0]} to "
                             f"{', '.join(sorted(unreached))}")
        no_hosts = routers - {g.router for g in self.groups} - {e for l in self.links for e in (l.a, l.b)}
        if no_hosts:
            raise ValueError(f"routers {', '.join(sorted(no_hosts))} have neither hosts nor links")
        self._check_source_queues()
        self._check_tcpf_placement()
        return self

    def _check_source_queues(self) -> None:
        """A source scheduler is the sending host's own set of queues: only a host's uplink has one."""
        def named(link: LinkSpec, d: Direction | None) -> bool:
            return any(p is not None and p.kind == SOURCE_QUEUE for p in (link.policy, d.policy if d else None))
        for g in self.groups:
            down = g.link.down.policy if g.link.down else None
            if any(p is not None and p.kind == SOURCE_QUEUE for p in (g.link.policy, down)):
                raise ValueError(f"groups.{g.name}.link: {SOURCE_QUEUE} models the sending host's queues; put it"
                                 f" on the uplink only (groups.{g.name}.link.up.policy)")
        for i, link in enumerate(self.links):
            for d in ("forward", "reverse"):
                if named(link, getattr(link, d)):
                    raise ValueError(f"links.{i} ({link.a}-{link.b}): {SOURCE_QUEUE} models a sending host's"
                                     " queues; it goes on a host group's link.up.policy, not on a router link")

    def _check_tcpf_placement(self) -> None:
        """A `tcpf` marker keeps one pool for the flows of its direction and must see their ACKs:
        the engine shows it every packet crossing its router (docs/tcpf-markers.md). So it goes on
        a router link's data direction, and the ACKs of what crosses that link must come back
        through the same router."""
        def tcpf_in(link: LinkSpec, d: Direction | None) -> bool:
            edge = d.edge if d is not None and d.edge is not None else link.edge
            return any(e.kind == "tcpf" for e in edge)
        for g in self.groups:
            for d in ("down", "up"):
                if tcpf_in(g.link, getattr(g.link, d)):
                    raise ValueError(f"groups.{g.name}.link.{d}.edge: a tcpf marker on an access link would be one"
                                     " per host, each with its own pool; put it on the data direction of a router"
                                     " link (e.g. bottleneck.forward.edge)")
        with_hosts = [r for r in self.routers if any(g.router == r for g in self.groups)]
        for i, link in enumerate(self.links):
            for d, (src, dst) in (("forward", (link.a, link.b)), ("reverse", (link.b, link.a))):
                if not tcpf_in(link, getattr(link, d)):
                    continue
                where = f"links.{i} ({link.a}-{link.b}).{d}.edge"
                if d != link.data:
                    raise ValueError(f"{where}: a tcpf marker on {src} -> {dst} would mark the ACKs, not the data;"
                                     f" put it on {link.data}, the data direction (a link's own `edge` applies to"
                                     " both directions)")
                for a in with_hosts:
                    for b in with_hosts:
                        there = self.path(a, b)
                        if any(there[k:k + 2] == [src, dst] for k in range(len(there) - 1)) \
                                and src not in self.path(b, a):
                            raise ValueError(f"{where}: the tcpf marker on {src} cannot see the ACKs of traffic from"
                                             f" {a} to {b}: they return by {' -> '.join(self.path(b, a))}")

    def path(self, a: str, b: str) -> list[str]:
        """The routers from a to b, both included, along the routes (next_hops)."""
        out = [a]
        while out[-1] != b:
            out.append(self.next_hops(out[-1])[b])
        return out

    def neighbours(self, router: str) -> list[str]:
        out = []
        for link in self.links:
            if link.a == router:
                out.append(link.b)
            elif link.b == router:
                out.append(link.a)
        return out

    def _reachable(self, start: str) -> set[str]:
        seen, todo = {start}, deque([start])
        while todo:
            for n in self.neighbours(todo.popleft()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    def next_hops(self, router: str) -> dict[str, str]:
        """For every other router, the neighbour of `router` on a path with the fewest hops
        (ties broken by the order of `links`, so routing is deterministic)."""
        first: dict[str, str] = {}
        seen, todo = {router}, deque()
        for n in self.neighbours(router):
            if n not in seen:
                seen.add(n)
                first[n] = n
                todo.append(n)
        while todo:
            cur = todo.popleft()
            for n in self.neighbours(cur):
                if n not in seen:
                    seen.add(n)
                    first[n] = first[cur]
                    todo.append(n)
        return first

    def groups_named(self, name: str) -> list[HostGroup]:
        """The groups an application means by `name`: the group of that name, or every group of that role."""
        by_name = [g for g in self.groups if g.name == name]
        return by_name or [g for g in self.groups if g.role == name]

    def hosts_selected(self, selector: str) -> list[str]:
        """Host names a selector means: a group's, a role's, or those of a delay class by its tag (rtt200ms)."""
        groups = self.groups_named(selector)
        if groups:
            return [h for g in groups for h in g.host_names()]
        return [h for g in self.groups for i, h in enumerate(g.host_names())
                if (cls := g.delay_class(i)) is not None and cls.tag == selector]

    def selectors(self) -> list[str]:
        """Every name hosts_selected understands, for error messages."""
        tags = {c.tag for g in self.groups for c in g.delay_classes or ()}
        return sorted({g.name for g in self.groups} | {g.role for g in self.groups if g.role} | tags)

    def subnets(self) -> dict[str, str]:
        """Addressing follows from the graph: group g (in order) is 10.(g+1).0.0/16 (CATNIP's
        dumbbell: clients 10.1/16, servers 10.2/16)."""
        return {g.name: f"10.{i + 1}.0.0/16" for i, g in enumerate(self.groups)}

    def directions(self, default_policy: Any) -> list[tuple[str, "ResolvedDirection"]]:
        """Every emulated link direction with its defaults applied, named for error messages:
        per host its down and up direction, per router link forward and reverse."""
        out = []
        for g in self.groups:
            for i in range(g.count):
                cls = g.delay_class(i)
                delay = cls.delay if cls else None
                out.append((f"groups.{g.name}.link.down", resolve(g.link, g.link.down, default_policy, delay)))
                out.append((f"groups.{g.name}.link.up", resolve(g.link, g.link.up, default_policy, delay)))
                if not g.delay_classes:
                    break  # the other hosts of the group are alike
        for i, link in enumerate(self.links):
            out.append((f"links.{i} ({link.a}-{link.b}).forward", resolve(link, link.forward, default_policy)))
            out.append((f"links.{i} ({link.a}-{link.b}).reverse", resolve(link, link.reverse, default_policy)))
        return out

    def group_names(self) -> list[str]:
        return [g.name for g in self.groups] + sorted({g.role for g in self.groups if g.role})


class ResolvedDirection(_Strict):
    """Everything one emulated link direction needs, defaults applied."""
    rate: int
    delay: float
    buffer: dict[str, int] | None
    policy: PolicySpec
    loss: LossSpec | None = None
    edge: list[EdgeSpec] = Field(default_factory=list)


def kernel_problem(d: ResolvedDirection) -> str | None:
    """Why the kernel backend cannot carry this router-link direction (None: it can): it has
    droptail (pfifo/bfifo) and red in packets, without edge functions or random loss."""
    kind = d.policy.kind
    if kind not in ("droptail", "red") or d.edge or d.loss:
        return (f"run.link_backend 'kernel' has droptail and red without edge functions or loss (this direction"
                f" has {kind}{', edge functions' if d.edge else ''}{', loss' if d.loss else ''})")
    if kind == "red" and any(isinstance(getattr(d.policy, t), dict) for t in ("min_th", "max_th")):
        return "run.link_backend 'kernel': kernel red takes thresholds in packets or shares, not sizes"
    return None


def kernel_qdiscs(d: ResolvedDirection) -> set[str]:
    """The qdiscs the kernel backend needs for this direction."""
    leaf = "red" if d.policy.kind == "red" else "bfifo" if d.buffer and "bytes" in d.buffer else "pfifo"
    return {"htb", leaf} | ({"netem"} if d.delay else set())


def resolve(link: LinkSpec, direction: Direction | None, default_policy: Any,
            delay: float | None = None) -> ResolvedDirection:
    d = direction or Direction()
    return ResolvedDirection(
        rate=d.rate if d.rate is not None else link.rate,
        delay=d.delay if d.delay is not None else delay if delay is not None else link.delay,
        buffer=d.buffer if d.buffer is not None else link.buffer,
        policy=d.policy or link.policy or default_policy,
        loss=d.loss or link.loss,
        edge=list(d.edge if d.edge is not None else link.edge))
