"""Scenario files: schema, loading, overrides and sweep expansion.

A scenario YAML file plus a seed fully determines a run. Loading goes
raw YAML -> `--set` overrides applied to the raw mapping -> validation -> one resolved
`Scenario` per sweep point. Every validation error names the field, the bad value and what
is allowed (`ScenarioError`).
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, SerializeAsAny, StringConstraints,
                      ValidationError, field_validator, model_validator)

from catnip.spec import bounded, senders, units
from catnip.spec.graph import Graph, kernel_problem, kernel_qdiscs
from catnip.spec.policy import DropTail, PolicySpec
from catnip.spec import plugins
from catnip.spec.apps import AppSpec, parse_spec

# The topology library (topologies/) and any other package's, through their entry points: a union
# discriminated by each entry's `kind`.
LIBRARY: tuple = tuple(t for found in plugins.load(plugins.TOPOLOGIES)
                       for t in (found if isinstance(found, (tuple, list)) else (found,)))
TopologySpec = Annotated[Union[LIBRARY], Field(discriminator="kind")]


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message is meant for the user, one problem a line, at
    most bounded.MAX_LINES lines of bounded.MAX_LINE characters (a rejected value is shortened)."""

    def __init__(self, message: str):
        super().__init__(bounded.bound_message(message))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RouterSpec(_Strict):
    """The queue policy of every router egress queue whose link does not name its own."""
    policy: PolicySpec = DropTail()

    @field_validator("policy")
    @classmethod
    def _not_a_source_queue(cls, v: Any) -> Any:
        from catnip.spec.graph import SOURCE_QUEUE
        if v.kind == SOURCE_QUEUE:
            raise ValueError(f"{SOURCE_QUEUE} models a sending host's queues; it goes on a host group's"
                             " link.up.policy, not on the routers")
        return v


CC_NAME = r"^[a-z0-9_]{1,15}$"  # the kernel's TCP_CA_NAME_MAX is 16 with the terminating NUL
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


def known_congestion_controls() -> tuple[set[str], set[str]] | None:
    """(the kernel's, the project's) congestion controls a scenario may name, read when the
    scenario is checked: the project's BPF senders are registered only while a run lasts, so they
    count whether the kernel lists them now or not. None when the kernel's list cannot be read
    (then any well-formed name passes, and the run fails on it instead)."""
    try:
        kernel = set(AVAILABLE_CC.read_text().split())
    except OSError:
        return None
    return kernel - set(senders.NAMES), set(senders.NAMES)


def _known_cc(name: str | None) -> str | None:
    known = known_congestion_controls()
    if name is None or known is None or name in known[0] | known[1]:
        return name
    raise ValueError(f"{name!r} is not a congestion control of this machine (the kernel has"
                     f" {', '.join(sorted(known[0])) or 'none'}; the project adds {', '.join(senders.NAMES)})")


class NewcwvSpec(_Strict):
    """catnip_newcwv's parameters on a group's hosts (bpf/newcwv.bpf.c reads them per host namespace)."""

    nvp: float = Field(default=300.0, ge=0.001, le=86400.0,
                       description="the non-validated period (RFC 7661 section 4.3: 5 minutes); shorter for tests")
    bins: int = Field(default=4, ge=1, le=16, description="bins of the pipeACK max filter (RFC 7661 section"
                                                          " 4.2; the authors' module 4, the paper's Fig. 5 five)")
    trace: bool = Field(default=False, description="record cwnd, pipeACK and ssthresh per event as samples of"
                                                   " application 'sender' (controller/point.py)")
    filter: Literal["max", "none"] = Field(
        default="max", description="pipeACK: 'max', the max filter over `bins` bins (RFC 7661 section 4.2), or"
                                   " 'none', the latest round's sample (Hossain and Fairhurst, Fig. 5a)")

    _nvp = field_validator("nvp", mode="before")(lambda cls, v: units.parse_duration(v))

    @model_validator(mode="after")
    def _bins_need_the_filter(self):
        if self.filter == "none" and "bins" in self.model_fields_set:
            raise ValueError("bins: the max filter's bins mean nothing with filter: none (pipeACK is the latest"
                             " round's sample); leave bins out, or use filter: max")
        return self


class TcpGroupSpec(_Strict):
    """TCP settings of one host group's namespaces, over the `tcp` defaults."""

    congestion_control: str | None = Field(default=None, pattern=CC_NAME,
                                           description="default: tcp.congestion_control")
    slow_start_after_idle: bool | None = Field(
        default=None, description="net.ipv4.tcp_slow_start_after_idle (RFC 2861 restart after idle); default false"
                                  " for catnip_newcwv, which keeps cwnd over idle itself, true otherwise")
    pacing: Literal["off", "internal", "fq"] = Field(
        default="off", description="internal: TCP's own pacing, switched on by the sender (spec.senders.PACEABLE);"
                                   " fq: the fq qdisc on the host's interface, where the kernel has it")
    pacing_ratio: int = Field(default=200, ge=1, le=1000,
                              description="percent of cwnd/SRTT (tcp_pacing_ss_ratio and tcp_pacing_ca_ratio) when"
                                          " pacing: 200 was the rate of the paper's Linux 3.12 (section 4.5)")
    initial_cwnd: int | None = Field(default=None, ge=1, le=100, description="default: tcp.initial_cwnd")
    newcwv: NewcwvSpec | None = None

    _cc = field_validator("congestion_control")(lambda cls, v: _known_cc(v))

    @field_validator("pacing", mode="before")
    @classmethod
    def _off(cls, v: Any) -> Any:
        return "off" if v is False else v  # YAML reads a bare `off` as false

    @field_validator("pacing_ratio", mode="before")
    @classmethod
    def _percent(cls, v: Any) -> Any:
        return v.strip().removesuffix("%") if isinstance(v, str) else v


class TcpSpec(_Strict):
    """TCP settings applied in every host's namespace; `groups` overrides them per host group."""

    congestion_control: str = Field(default="cubic", pattern=CC_NAME)
    server_congestion_control: list[Annotated[str, StringConstraints(pattern=CC_NAME),
                                              AfterValidator(_known_cc)]] | None = Field(
        default=None, min_length=1,
        description="per server (server i uses entry i mod length), e.g. [catnip_reno, catnip_eca]; "
                    "default: congestion_control")

    def server_cc(self, index: int) -> str:
        ccs = self.server_congestion_control
        return ccs[index % len(ccs)] if ccs else self.congestion_control

    def all_cc(self) -> set[str]:
        """Every congestion control some host may use: what a run registers and allows."""
        return {self.congestion_control, *(self.server_congestion_control or []),
                *(g.congestion_control for g in self.groups.values() if g.congestion_control)}
    sack: bool = True
    timestamps: bool = True
    initial_cwnd: int | None = Field(default=None, ge=1, le=100,
                                     description="route initcwnd; None keeps the Linux default (10)")
    groups: dict[str, TcpGroupSpec] = Field(default_factory=dict,
                                            description="per host group of the topology: its own settings")
    # The period knobs of every host (spec/senders.py TCP_KNOB_SYSCTLS); None keeps the kernel's default.
    profile: Literal[tuple(senders.TCP_PROFILES)] | None = Field(
        default=None, description="a named set of the fields below (and congestion_control) for those not given:"
                                  " linux-2.2, linux-2.4, ns2-reno or modern (spec/senders.py TCP_PROFILES)")
    recovery: Literal["rack", "off"] | None = Field(default=None, description="net.ipv4.tcp_recovery: RACK loss"
                                                                               " detection (1) or off (0)")
    frto: bool | None = Field(default=None, description="net.ipv4.tcp_frto: F-RTO (2) or off (0)")
    early_retrans: bool | None = Field(default=None, description="net.ipv4.tcp_early_retrans: tail loss probe (3)"
                                                                 " or off (0)")
    dsack: bool | None = Field(default=None, description="net.ipv4.tcp_dsack")
    rto_min: float | None = Field(default=None, description="minimum RTO, the default route's rto_min, e.g. '200ms'")
    initial_rto: float | None = Field(
        default=None, description="RTO of the handshake and until the first RTT sample (Linux: 1 s; Nouredine-Tobagi"
                                  " section 3: 6 s), set per connection by BPF sock_ops (bpf/rto_init.bpf.c)")
    receive_buffer: int | None = Field(
        default=None, description="net.ipv4.tcp_rmem's default and maximum, e.g. '64KB' (Nouredine-Tobagi section 2:"
                                  " 64 KB); Linux advertises part of it as its window (tcp_adv_win_scale)")
    delayed_ack: bool | None = Field(
        default=None, description="false: every segment is acknowledged at once, like ns-2's TCPSink (the default"
                                  " route's quickack 1); None or true: Linux's delayed ACKs")

    _cc = field_validator("congestion_control")(lambda cls, v: _known_cc(v))

    @model_validator(mode="before")
    @classmethod
    def _profile(cls, raw: Any) -> Any:
        """A profile fills the fields the scenario leaves out; YAML reads a bare `off` as false."""
        if not isinstance(raw, dict):
            return raw
        name = raw.get("profile")
        out = {**senders.TCP_PROFILES.get(name, {}), **raw} if isinstance(name, str) else dict(raw)
        if out.get("recovery") is False:
            out["recovery"] = "off"
        return out

    @field_validator("rto_min", "initial_rto", mode="before")
    @classmethod
    def _rto(cls, v: Any, info: Any) -> float | None:
        if v is None:
            return None
        s = units.parse_duration(v)
        if not 0.001 <= s <= 120:
            what = "minimum" if info.field_name == "rto_min" else "initial"
            raise ValueError(f"{bounded.short(v)}: the {what} RTO must be between 1ms and 120s (Linux's maximum RTO)")
        return s

    @field_validator("receive_buffer", mode="before")
    @classmethod
    def _receive_buffer(cls, v: Any) -> int | None:
        if v is None:
            return None
        n = v if type(v) is int else units.parse_size(v)
        if not 4096 <= n <= 64 * 2**20:
            raise ValueError(f"{bounded.short(v)}: a receive buffer between 4KB and 64MB")
        return n

    def knob_sysctls(self) -> dict[str, int]:
        """The sysctls of the period knobs the scenario (or its profile) sets."""
        out = {}
        for knob, (key, on, off) in senders.TCP_KNOB_SYSCTLS.items():
            value = getattr(self, knob)
            if value is not None:
                out[key] = on if value in (True, "rack") else off
        return out



@dataclass(frozen=True)
class HostTcp:
    """What one host's namespace gets: the `tcp` defaults, the web servers' entry of
    `server_congestion_control` and its group's `tcp.groups` entry resolved (Scenario.host_tcp)."""

    group: str
    congestion_control: str
    slow_start_after_idle: bool
    pacing: str                 # off | internal | fq
    pacing_ratio: int | None    # tcp_pacing_ss_ratio = tcp_pacing_ca_ratio; None: the kernel's default
    initial_cwnd: int | None    # the default route's initcwnd; None: Linux's (10)
    newcwv: NewcwvSpec | None   # catnip_newcwv's parameters (its hosts only)
    knobs: dict[str, int] = field(default_factory=dict)  # the period knobs' sysctls (TcpSpec.knob_sysctls)
    rto_min: float | None = None  # the default route's rto_min (s); None: Linux's (200 ms)
    initial_rto: float | None = None  # by BPF sock_ops (testbed/rto_init.py); None: Linux's (1 s)
    receive_buffer: int | None = None  # tcp_rmem default and maximum (bytes); None: the kernel's
    quick_ack: bool = False  # the default route's quickack 1: no delayed ACKs (tcp.delayed_ack: false)

    def route_options(self) -> list[object]:
        """The default route's attributes: initcwnd, rto_min, quickack."""
        out: list[object] = ["initcwnd", self.initial_cwnd] if self.initial_cwnd else []
        out += ["rto_min", f"{round(self.rto_min * 1000)}ms"] if self.rto_min is not None else []
        return out + (["quickack", 1] if self.quick_ack else [])

    def sysctls(self) -> dict[str, object]:
        out: dict[str, object] = {"net.ipv4.tcp_congestion_control": self.congestion_control,
                                  "net.ipv4.tcp_slow_start_after_idle": int(self.slow_start_after_idle),
                                  **self.knobs}
        if self.receive_buffer is not None:
            out["net.ipv4.tcp_rmem"] = f"4096 {self.receive_buffer} {self.receive_buffer}"
        if self.pacing_ratio is not None:
            out.update({"net.ipv4.tcp_pacing_ss_ratio": self.pacing_ratio,
                        "net.ipv4.tcp_pacing_ca_ratio": self.pacing_ratio})
        return out

    @property
    def sender_params(self) -> dict[str, Any] | None:
        """The per-host parameters of a project sender that reads them (spec.senders.PACEABLE),
        as testbed.sender.HostParams' fields; None for other congestion controls."""
        if self.congestion_control not in senders.PACEABLE:
            return None
        nc = self.newcwv or NewcwvSpec()
        return {"pace": self.pacing == "internal", "nvp_s": nc.nvp, "bins": 1 if nc.filter == "none" else nc.bins,
                "trace": nc.trace, "filter": nc.filter}

    def record(self) -> dict[str, Any]:
        return {"group": self.group, "congestion_control": self.congestion_control,
                "slow_start_after_idle": self.slow_start_after_idle, "pacing": self.pacing,
                "pacing_ratio": self.pacing_ratio, "initial_cwnd": self.initial_cwnd,
                "sender_params": self.sender_params, "knobs": self.knobs, "rto_min": self.rto_min,
                "initial_rto": self.initial_rto, "receive_buffer": self.receive_buffer, "quick_ack": self.quick_ack}


class _Thresholds(_Strict):
    """Algorithm 1's two thresholds (subclasses give the fields): MED covers the windows above HIGH's."""

    @model_validator(mode="after")
    def _med_above_high(self) -> "_Thresholds":
        if self.med_thresh < self.high_thresh:
            raise ValueError(f"med_thresh: {self.med_thresh} is below high_thresh ({self.high_thresh}); MED covers"
                             " the windows above HIGH's, so med_thresh >= high_thresh")
        return self


class TcpStateHostThresholds(_Thresholds):
    """Thresholds of their own for some hosts' segments: Fig. 16 sweeps the HIGH_thresh of the 200 ms
    connection, MED_thresh at twice it, while the other connections' stay fixed."""

    hosts: str = Field(pattern=r"^[A-Za-z0-9_.=-]{1,24}$",
                       description="a host group, a role (sources) or a delay-class tag (rtt200ms)")
    high_thresh: int = Field(ge=1, le=65535, description="segments: a window up to this is HIGH")
    med_thresh: int = Field(ge=1, le=65535,
                            description="segments: a window up to this is MED (default: twice high_thresh, Fig. 16)")

    @model_validator(mode="before")
    @classmethod
    def _med_default(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and raw.get("med_thresh") is None and isinstance(raw.get("high_thresh"), int):
            raw = {**raw, "med_thresh": min(2 * raw["high_thresh"], 65535)}
        return raw


class TcpStateMarkingSpec(_Thresholds):
    """TCP-state marking, TCP-DS (Nouredine and Tobagi 2002, section 6.1, Algorithm 1) at every host, by
    eBPF (bpf/tcpds.bpf.c): by the sending window, SYN and fast recovery HIGH; ACKs like their data."""

    high_thresh: int = Field(default=4, ge=1, le=65535, description="segments: a window up to this is HIGH (6.3: 4)")
    med_thresh: int = Field(default=8, ge=1, le=65535, description="segments: a window up to this is MED (6.3: 8)")
    randomized: bool = Field(default=False, description="Algorithm 1's randomized variant (its italic lines)")
    always_high: list[Any] = Field(default_factory=list, max_length=8,
                                   description="ports (80, '5000-5099' or [lo, hi]) whose connections are all HIGH:"
                                               " Telnet's thresholds are the maximum window (6.1.2)")
    per_host: list[TcpStateHostThresholds] = Field(
        default_factory=list, max_length=16,
        description="hosts with thresholds of their own, e.g. [{hosts: rtt200ms, high_thresh: 16}] (Fig. 16)")

    @field_validator("always_high", mode="before")
    @classmethod
    def _ports(cls, v: Any) -> Any:
        from catnip.spec.edge import parse_ports
        return [parse_ports(p) for p in v] if isinstance(v, list) else v


class MarkingSpec(_Strict):
    """Selective Packet Marking at the servers (CATNIP III-B), by eBPF (bpf/spm.bpf.c, docs/spm.md), or
    TCP-state marking at every host (`tcp_state`, bpf/tcpds.bpf.c)."""

    spm: bool = Field(default=False, description="mark the servers' TCP segments AF11 (high) / AF12 (low)")
    first: bool = Field(default=True, description="the first 3 segments of each document are high")
    last: bool = Field(default=True, description="the last 3 too; false is the paper's partial SPM (V-G)")
    small_cwnd: bool = Field(default=True, description="segments sent while cwnd < 4 are high")
    scope: Literal["document", "connection"] = Field(
        default="document", description="first/last segments of each document, or of the connection (V-F)")
    control: Literal["high", "low", "unmarked"] = Field(
        default="high", description="segments without payload (SYN-ACK, ACK, FIN)")
    retransmissions: Literal["position", "high", "low"] = Field(
        default="position", description="retransmitted segments: by the same rules as new ones, or always high/low")

    tcp_state: TcpStateMarkingSpec | None = Field(default=None, description="TCP-DS marking at every host")

    @model_validator(mode="after")
    def _something_marked(self) -> "MarkingSpec":
        if self.spm and self.tcp_state is not None:
            raise ValueError("spm and tcp_state both mark the same segments; choose one")
        if self.spm and not (self.first or self.last or self.small_cwnd):
            raise ValueError("spm: true with first, last and small_cwnd all false would mark nothing high")
        return self


MAX_TIME_LIMIT = 7 * 86400.0  # seconds


class MachineSpec(_Strict):
    """Another machine of a split topology (docs/cluster.md, "Topologies over several machines")."""

    routers: list[str] = Field(min_length=1, description="the routers it runs, each with its groups' hosts and switch")
    address: str = Field(description="`imitated`: a namespace with its own sshd on this machine (for trying a"
                                     " split here); else [user@]host that ssh reaches as root, its keys set up")

    clock_shift: int = Field(default=0, ge=0, le=86_400,
                             description="`imitated` only: whole seconds its monotonic clock runs ahead of this"
                                         " machine's (a time namespace), as a real machine's would; 0: none")

    @model_validator(mode="after")
    def _shift_imitated(self) -> "MachineSpec":
        if self.clock_shift and self.address != "imitated":
            raise ValueError("clock_shift: only an imitated machine's clock can be shifted; a real machine's offset"
                             " is measured at every point")
        return self

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        if not re.fullmatch(r"imitated|([A-Za-z0-9_][A-Za-z0-9_.-]{0,31}@)?[A-Za-z0-9][A-Za-z0-9.:-]{0,252}", v):
            raise ValueError(f"{v[:60]!r}: give `imitated` or [user@]host (letters, digits and .-: only)")
        return v


class RunSpec(_Strict):
    machines: dict[str, MachineSpec] = Field(
        default_factory=dict, description="other machines, by a label of 1-8 lower-case letters and digits: the"
                                          " routers each runs; the rest runs here (docs/cluster.md)")
    time_limit: float = Field(default=900.0, description="a sweep point still running after this is stopped")
    capture: bool = Field(default=False, description="tcpdump (headers only) at the bottleneck")
    arrival_log: bool = Field(
        default=False, description="each engine writes its arrivals, in the order taken and at the times used, to"
                                   " point<N>-<router>-arrivals.csv beside the run's captures: the exact input of an"
                                   " offline replay of any of its links (docs/engine.md \"Replay\")")
    late_threshold: float = Field(default=0.001, le=60.0,
                                  description="engine wake-ups later than this count as late")
    max_late_fraction: float = Field(default=0.001, ge=0, le=1,
                                     description="more late events than this fraction flags the run as not real time")
    repetitions: int = Field(default=1, ge=1, le=100)
    engine_spin: float = Field(default=0.0002, le=0.01,
                               description="the engine polls without sleeping this long before each event")
    placement: Literal["shared", "split"] = Field(
        default="shared", description="shared: the scheduler places the engines and the rest; split: the engines"
                                      " on the last CPU, everything else and the veths' receive processing on the"
                                      " others (testbed/placement.py, docs/fidelity.md)")
    # On by default since 2026-11-28: on this project's 2-vCPU VM, make run's scenario kept real time
    # in 0 of 7 runs without the loops and 12 of 13 with them, side by side on a quiet machine
    # (docs/fidelity.md, "The default run, run after run"); `run.keep_awake: false` turns them off.
    keep_awake: bool = Field(
        default=True, description="one SCHED_IDLE busy loop per CPU while a point runs, so an idle virtual CPU"
                                  " never halts and the engines' timers fire without the hypervisor's wake-up"
                                  " (testbed/keep_awake.py, docs/fidelity.md); false turns them off")
    link_backend: Literal["engine", "kernel"] = Field(
        default="engine", description="who emulates the router links: the queue engine, or the kernel's tc"
                                      " qdiscs where the kernel has them (netem, red; docs/architecture.md)")

    @field_validator("machines")
    @classmethod
    def _machine_labels(cls, v: dict[str, MachineSpec]) -> dict[str, MachineSpec]:
        for label in v:
            if not re.fullmatch(r"[a-z][a-z0-9]{0,7}", label):
                raise ValueError(f"{label!r}: a machine's label is 1-8 lower-case letters and digits, from a letter")
            if label == "local":  # testbed/machines.THIS
                raise ValueError("'local': that label names this machine; give the other machine another")
        return v

    @field_validator("time_limit", "late_threshold", "engine_spin", mode="before")
    @classmethod
    def _durations(cls, v: Any) -> float:
        return units.parse_duration(v)

    @field_validator("time_limit")
    @classmethod
    def _time_limit(cls, v: float) -> float:
        if not 0 < v <= MAX_TIME_LIMIT:  # 0 would stop every point at once; 1e300 s is not a limit
            raise ValueError(f"{v:g} s: a point's time limit is above 0 and at most {MAX_TIME_LIMIT / 86400:g} days")
        return v


class Scenario(_Strict):
    """One fully resolved configuration: what a single sweep point runs."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: str = ""
    paper: str = Field(default="", description="paper and section the scenario reproduces")
    seed: int = Field(default=1, ge=0, le=2**31 - 1)
    topology: TopologySpec
    router: RouterSpec = RouterSpec()
    tcp: TcpSpec = TcpSpec()
    marking: MarkingSpec = MarkingSpec()
    applications: list[SerializeAsAny[AppSpec]] = Field(min_length=1, max_length=32)
    run: RunSpec = RunSpec()

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, raw: Any) -> Any:
        return normalise(raw)[0]

    @field_validator("applications", mode="before")
    @classmethod
    def _applications(cls, v: Any) -> Any:
        if not isinstance(v, list):
            return v
        return [parse_spec(a) for a in v]

    @model_validator(mode="after")
    def _applications_fit_the_graph(self) -> "Scenario":
        graph = self.graph()
        names = graph.group_names()
        seen = set()
        for i, app in enumerate(self.applications):
            for field_name in ("clients", "servers"):
                group = getattr(app, field_name)
                if group is not None and not graph.groups_named(group):
                    raise ValueError(f"applications.{i}.{field_name}: no host group or role {group!r} in the"
                                     f" topology (it has: {', '.join(names)})")
            planned = app.planned_seconds()
            if planned and planned[1] > self.run.time_limit:
                raise ValueError(f"applications.{i}.{planned[0]}: the planned {planned[1]:g} s do not fit in"
                                 f" run.time_limit ({self.run.time_limit:g} s)")
            if app.instance in seen:
                raise ValueError(f"applications.{i}.name: {app.instance!r} is used twice; give each a name")
            seen.add(app.instance)
        # Every link direction must give the engine (or the kernel) a queue it can build: checked
        # here, so nothing is started for a scenario that would fail while its network is built.
        subnets = graph.subnets()
        for where, d in graph.directions(self.router.policy):
            try:
                d.policy.engine_config(d.buffer)
                for e in d.edge:
                    e.engine_config(subnets)
            except ValueError as exc:
                raise ValueError(f"topology.{where}: {exc}") from None
            problem = kernel_problem(d) if self.run.link_backend == "kernel" and where.startswith("links.") else None
            if problem:
                raise ValueError(f"topology.{where}: {problem}")
        if self.run.capture and not any(link.role == "bottleneck" for link in graph.links):
            raise ValueError("run.capture: the topology has no link with role 'bottleneck' to capture at")
        return self

    @model_validator(mode="after")
    def _scheduler_classes_have_applications(self) -> "Scenario":
        """Each class of a source scheduler (Nouredine-Tobagi 6.2: Telnet, HTTP, FTP) names the ports of
        some application of the scenario: a class no application uses is a typo that would leave the
        traffic it meant in the last class. The last class also takes what no class names."""
        ports = sorted({a.port for a in self.applications if isinstance(getattr(a, "port", None), int)})
        for g in self.graph().groups:
            if not g.link.source_queue():
                continue
            for i, cls in enumerate(g.link.up.policy.classes):
                if not any(lo <= p <= hi for lo, hi in cls for p in ports):
                    shown = ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in cls)
                    raise ValueError(f"topology: groups.{g.name}.link.up.policy.classes[{i}]: no application uses"
                                     f" port {shown} (the applications' ports: {', '.join(map(str, ports))})")
        return self

    @model_validator(mode="after")
    def _machines_fit(self) -> "Scenario":
        """Routers on other machines exist, each on one machine; what does not run on another machine
        yet (docs/cluster.md) is refused here, before anything starts."""
        if not self.run.machines:
            return self
        graph, owner = self.graph(), {}
        for label, m in self.run.machines.items():
            for r in m.routers:
                if r not in graph.routers:
                    raise ValueError(f"run.machines.{label}.routers: {r!r} is not a router of the topology (it has:"
                                     f" {', '.join(graph.routers)})")
                if r in owner:
                    raise ValueError(f"run.machines.{label}.routers: {r} is on machine {owner[r]} already")
                owner[r] = label
        if len(owner) == len(graph.routers):
            raise ValueError("run.machines: every router is on another machine; leave at least one here")
        for link in graph.links:
            a, b = owner.get(link.a), owner.get(link.b)
            if a and b and a != b:  # each tunnel has this machine at one end, where its route is known
                raise ValueError(f"run.machines: the link {link.a}-{link.b} joins machines {a} and {b}; a link between"
                                 " two other machines does not run yet (docs/cluster.md)")
        refused = [
            ("marking.spm", self.marking.spm),
            ("the project's BPF senders", bool(self.tcp.all_cc() & set(senders.NAMES))),
            ("run.placement: split", self.run.placement == "split"),
            ("run.link_backend: kernel", self.run.link_backend == "kernel"),
            ("an Open vSwitch access switch", self.topology.access_switch not in ("auto", "linuxbridge")),
        ]
        for what, used in refused:
            if used:
                raise ValueError(f"run.machines: {what} does not run with hosts on another machine yet (docs/cluster.md)")
        return self

    @model_validator(mode="after")
    def _tcp_state_hosts_exist(self) -> "Scenario":
        """Each `marking.tcp_state.per_host` entry selects hosts, and no host is selected twice."""
        if self.marking.tcp_state is None:
            return self
        graph = self.graph()
        owner: dict[str, int] = {}
        for i, entry in enumerate(self.marking.tcp_state.per_host):
            hosts = graph.hosts_selected(entry.hosts)
            if not hosts:
                raise ValueError(f"marking.tcp_state.per_host[{i}].hosts: no host group, role or delay-class tag"
                                 f" {entry.hosts!r} in the topology (it has: {', '.join(graph.selectors())})")
            for h in hosts:
                if h in owner:
                    raise ValueError(f"marking.tcp_state.per_host[{i}].hosts: {entry.hosts!r} selects {h}, which"
                                     f" per_host[{owner[h]}] already gives thresholds; a host has one set")
                owner[h] = i
        return self

    def tcp_state_thresholds(self) -> dict[str, tuple[int, int]]:
        """(HIGH_thresh, MED_thresh) of the hosts `marking.tcp_state.per_host` gives their own, by short name."""
        ts = self.marking.tcp_state
        if ts is None:
            return {}
        graph = self.graph()
        return {h: (e.high_thresh, e.med_thresh) for e in ts.per_host for h in graph.hosts_selected(e.hosts)}

    @model_validator(mode="after")
    def _tcp_fits(self) -> "Scenario":
        """`tcp.groups` names groups of the graph, asks each host's sender only for what it can do,
        and a burst application's newCWV servers are given idle periods to keep cwnd over."""
        graph = self.graph()
        names = [g.name for g in graph.groups]
        for name in self.tcp.groups:
            if name not in names:
                raise ValueError(f"tcp.groups.{name}: no host group {name!r} in the topology (its groups: "
                                 f"{', '.join(names)})")
        web = self.app("web")
        web_groups = {g.name for g in graph.groups_named(web.servers)} if web and web.servers else set()
        hosts = self.host_tcp()
        for name, spec in self.tcp.groups.items():
            ccs = sorted({hosts[h].congestion_control for h in graph.groups_named(name)[0].host_names()})
            where = f"tcp.groups.{name}"
            if spec.congestion_control and name in web_groups and self.tcp.server_congestion_control:
                raise ValueError(f"{where}.congestion_control: the group serves the web application, whose servers'"
                                 " congestion controls tcp.server_congestion_control sets; give one of the two")
            if spec.pacing == "internal" and set(ccs) - set(senders.PACEABLE):
                raise ValueError(f"{where}.pacing: 'internal' is switched on by the sender, and only"
                                 f" {' and '.join(senders.PACEABLE)} can (this group's is {', '.join(ccs)}); or"
                                 " pace with fq where the kernel has it")
            if spec.newcwv is not None and ccs != [senders.NEWCWV]:
                raise ValueError(f"{where}.newcwv: settings of {senders.NEWCWV}, but this group's congestion"
                                 f" control is {', '.join(ccs)}")
        for i, app in enumerate(self.applications):
            if app.kind != "burst" or not app.servers:
                continue
            idle0 = any(idle == 0 for _, idle in app.cell_list())
            newcwv = any(hosts[h].congestion_control == senders.NEWCWV
                         for g in graph.groups_named(app.servers) for h in g.host_names())
            if idle0 and newcwv:
                field = "cells" if app.cells is not None else "idles"
                raise ValueError(f"applications.{i}.{field}: an idle period of 0 s, but the servers' sender is"
                                 f" {senders.NEWCWV} (newcwv asked to idle): its gain is what it keeps over an"
                                 " idle period; give idle periods above 0")
        return self

    def host_tcp(self) -> dict[str, HostTcp]:
        """Each host's TCP settings, by short host name (c1, v1): its group's `tcp.groups` entry
        over the `tcp` defaults; a web server without a group congestion control takes its entry of
        `server_congestion_control` (server i, in graph order, entry i mod length)."""
        graph = self.graph()
        web = self.app("web")
        web_groups = {g.name for g in graph.groups_named(web.servers)} if web and web.servers else set()
        out: dict[str, HostTcp] = {}
        web_index = 0
        for g in graph.groups:
            spec = self.tcp.groups.get(g.name) or TcpGroupSpec()
            for host in g.host_names():
                cc = spec.congestion_control
                if g.name in web_groups:
                    cc = cc or self.tcp.server_cc(web_index)
                    web_index += 1
                cc = cc or self.tcp.congestion_control
                ratio = spec.pacing_ratio if spec.pacing != "off" else None
                if ratio is None and g.name in web_groups and cc in senders.PACING_LAST_WINDOW:
                    ratio = 100  # cwnd x MSS / RTT x 100%: the last window spread over one RTT (CATNIP III-B)
                out[host] = HostTcp(
                    group=g.name, congestion_control=cc,
                    slow_start_after_idle=(spec.slow_start_after_idle if spec.slow_start_after_idle is not None
                                           else cc not in senders.KEEP_CWND_OVER_IDLE),
                    pacing=spec.pacing, pacing_ratio=ratio,
                    initial_cwnd=spec.initial_cwnd or self.tcp.initial_cwnd,
                    newcwv=(spec.newcwv or NewcwvSpec()) if cc == senders.NEWCWV else None,
                    knobs=self.tcp.knob_sysctls(), rto_min=self.tcp.rto_min,
                    initial_rto=self.tcp.initial_rto, receive_buffer=self.tcp.receive_buffer,
                    quick_ack=self.tcp.delayed_ack is False)
        return out

    def host_qdiscs(self) -> dict[str, str]:
        """The qdiscs the hosts' settings need, by the field that asks: `tcp.groups.G.pacing: fq`.
        Checked against the machine before a run starts (runner.machine_problems), as the kernel
        backend's qdiscs are."""
        return {f"tcp.groups.{name}.pacing": "fq" for name, g in self.tcp.groups.items() if g.pacing == "fq"}

    def graph(self) -> Graph:
        return self.topology.graph()

    def kernel_qdiscs(self) -> set[str]:
        """The qdiscs `run.link_backend: kernel` needs for this scenario's router links."""
        return set().union(*(kernel_qdiscs(d) for where, d in self.graph().directions(self.router.policy)
                             if where.startswith("links.")))

    @property
    def workload(self) -> Any:
        """The web application (the `workload:` short form), or None."""
        return self.app("web")

    def app(self, kind: str) -> AppSpec | None:
        """The first application of a kind (CATNIP's reports read the web sessions)."""
        return next((a for a in self.applications if a.kind == kind), None)


class Sweep(BaseModel):
    """A scenario file after loading: its points (one per combination of swept values)."""

    model_config = ConfigDict(frozen=True)
    name: str
    source: str
    raw: dict[str, Any]
    sweep: dict[str, list[Any]]
    points: list[tuple[dict[str, Any], Scenario]]


def point_label(assignment: dict[str, Any], default: str = "") -> str:
    """How a sweep point is named everywhere: `topology.bottleneck.buffer=64KB, ...`."""
    return ", ".join(f"{k}={v}" for k, v in assignment.items()) or default


def _set_path(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Sets a dotted path in `raw`, copying the sections on the path (never the rest) so that
    sweep points share what they do not change without writing into each other."""
    keys = dotted.split(".")
    node = raw
    for i, key in enumerate(keys[:-1]):
        nxt = node.get(key)
        if nxt is None:
            nxt = {}
        if not isinstance(nxt, dict):
            raise ScenarioError(f"{'.'.join(keys[:i + 1])}: is {bounded.short(nxt)}, not a section, so"
                                f" '{dotted}' cannot be set")
        node[key] = nxt = dict(nxt)
        node = nxt
    node[keys[-1]] = value


SCHEME = "scheme"  # sweep key whose values are named sets of fields: {name: DT, set: {router.policy: ...}}


def _swept_paths(sweep: Any) -> list[str]:
    """Every field path a sweep sets: its keys, and the paths inside its schemes."""
    if not isinstance(sweep, dict):
        return []
    out = [k for k in sweep if k != SCHEME]
    schemes = sweep.get(SCHEME)
    # A malformed `scheme` (e.g. --set sweep.scheme=5) is refused by the sweep's own check later.
    for value in schemes if isinstance(schemes, list) else []:
        if isinstance(value, dict) and isinstance(value.get("set"), dict):
            out += [p for p in value["set"] if p not in out]
    return out


def _check_schemes(values: Any) -> None:
    """`sweep.scheme`: a list of {name, set}, names unique, `set` mapping field paths to values. The
    schemes of a comparison (e.g. DropTail, RED, application marking) differ in several fields at
    once, which a product of swept paths cannot say."""
    if not isinstance(values, list) or not values:
        raise ScenarioError("sweep.scheme: a non-empty list of {name: NAME, set: {field.path: value, ...}}")
    names = []
    for i, v in enumerate(values):
        if not isinstance(v, dict) or set(v) != {"name", "set"} or not isinstance(v["set"], dict) or not v["set"]:
            raise ScenarioError(f"sweep.scheme[{i}]: give name and set ({{name: DT, set: {{router.policy: ...}}}}),"
                                f" got {bounded.short(v)}")
        if not isinstance(v["name"], str) or not re.match(r"^[A-Za-z0-9_.+-]{1,32}$", v["name"]):
            raise ScenarioError(f"sweep.scheme[{i}].name: {bounded.short(v['name'])}: 1-32 letters, digits and _.+-")
        if v["name"] in names:
            raise ScenarioError(f"sweep.scheme[{i}].name: {v['name']!r} repeated; scheme names are unique")
        names.append(v["name"])
        for path in v["set"]:
            if not isinstance(path, str):
                raise ScenarioError(f"sweep.scheme[{i}].set: {bounded.short(path)} is not a field path")
            _check_key(f"sweep.scheme[{i}].set.{path[:60]}", path)
            if path.split(".")[0] in ("sweep", "name", "seed"):
                raise ScenarioError(f"sweep.scheme[{i}].set.{path}: a scheme sets fields of the scenario, not {path}")


def _check_key(text: str, key: str) -> None:
    """A field path of `--set` or `sweep`: dotted names, not deeper than a scenario can be."""
    parts = key.split(".")
    if len(parts) > bounded.MAX_DEPTH or not all(parts) or len(key) > 300:
        raise ScenarioError(f"{text}: {key[:60]!r}: a field path is up to {bounded.MAX_DEPTH} dotted names,"
                            " e.g. topology.bottleneck.rate")


def parse_override(text: str) -> tuple[str, Any]:
    """`key.path=value`, the value read as a YAML scalar or flow collection (within the bounds
    of spec/bounded.py, as files are)."""
    if len(text) > bounded.MAX_OVERRIDE_CHARS:
        raise ScenarioError(f"--set {text[:40]!r}...: {len(text)} characters; at most {bounded.MAX_OVERRIDE_CHARS}")
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(f"--set {bounded.shorten(repr(text), 80)}: expected key=value, e.g. topology.clients=20")
    _check_key(f"--set {key.strip()[:60]}", key.strip())
    try:
        parsed = bounded.load_yaml(value, f"--set {key.strip()}") if value.strip() else ""
    except bounded.InputError as exc:
        raise ScenarioError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"--set {key.strip()}: value is not valid YAML ({getattr(exc, 'problem', exc)})") from None
    return key.strip(), parsed


def _format_errors(exc: ValidationError, prefix: str = "") -> str:
    lines = []
    errors = exc.errors()
    more = len(errors) - bounded.MAX_LINES  # counted, not formatted (a list of 10,000 bad items)
    for err in errors[:bounded.MAX_LINES]:
        parts = []
        for i, p in enumerate(err["loc"]):
            # A tagged union puts the chosen tag in the location (`router.policy.red.min_th`): drop it.
            if isinstance(p, str) and i > 0 and str(err["loc"][i - 1]) == "topology" and (
                    p in {t.model_fields["kind"].default for t in LIBRARY}):

                continue
            if isinstance(p, str) and "[" in p:  # pydantic's name of a validator-wrapped union member
                continue
            edge_kind = p in ("mark", "police", "shape", "tcpf", "token_marker")
            if edge_kind and i > 1 and err["loc"][i - 2] == "edge":  # edge.0.mark.rules
                continue
            parts.append(str(p))
        loc = ".".join(parts)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "union_tag_invalid":
            loc = f"{loc}.kind" if loc else "kind"
            msg = f"{bounded.short(err['ctx']['tag'])} not allowed: {err['ctx']['expected_tags'].replace(chr(39), '')}"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; see docs/scenarios.md for the fields)"
        elif err["type"] == "literal_error":
            msg = f"{bounded.short(err['input'])} not allowed: {msg.removeprefix('Input should be ')}"
        elif type(err.get("input")) is bool and err["type"].startswith(("greater_than", "less_than", "int_", "float_")):
            msg = "a boolean (true/false) where a number is meant; write the number"
        elif "input" in err and err["type"] not in ("missing", "value_error"):
            msg = f"{bounded.short(err['input'])}: {msg}"
        if not loc and msg.split(":")[0].split(".")[0] in Scenario.model_fields:
            lines.append(f"{prefix}{msg}")  # a check of the whole scenario that names its field itself
        else:
            lines.append(f"{prefix}{loc or '(top level)'}: {msg}")
    if more > 0:
        lines.append(f"... and {more} more problems")
    return "\n".join(lines)


def normalise(raw: Any) -> tuple[Any, bool]:
    """The short forms of CATNIP's scenarios: `workload:` is the web application between the groups
    `clients` and `servers`, and `topology.kind` defaults to CATNIP's dumbbell. Returns the raw
    mapping with the long forms, and whether `workload:` was used."""
    if not isinstance(raw, dict):
        return raw, False
    raw = dict(raw)
    if isinstance(raw.get("topology"), dict) and "kind" not in raw["topology"]:
        raw["topology"] = {"kind": "dumbbell", **raw["topology"]}
    workload = raw.pop("workload", None)
    short = workload is not None or "applications" not in raw
    if short:
        if "applications" in raw:
            raise ScenarioError("workload and applications: give one (workload is the short form of"
                                " applications: [{kind: web, clients: clients, servers: servers, ...}])")
        if workload is not None and not isinstance(workload, dict):
            raise ScenarioError(f"workload: a mapping of the web application's fields, got {bounded.short(workload)}")
        raw["applications"] = [{"kind": "web", "clients": "clients", "servers": "servers", **(workload or {})}]
    return raw, short


def validate(raw: dict[str, Any], context: str = "") -> Scenario:
    raw, short = normalise(raw)
    written = raw
    # Each application is checked by its own plug-in's schema first, so errors name its fields.
    apps = raw.get("applications") if isinstance(raw, dict) else None
    if isinstance(apps, list):
        problems, parsed = [], []
        for i, app in enumerate(apps):
            where = "workload." if short else f"applications.{i}."
            if isinstance(app, dict) and not isinstance(app.get("kind", ""), str):  # unhashable: no lookup
                problems.append(f"{context}{where}kind: {bounded.short(app['kind'])} is not an application kind")
                continue
            try:
                parsed.append(parse_spec(app))
            except ValidationError as exc:
                problems.append(_format_errors(exc, context + where).replace(f"{where}(top level)", where.rstrip(".")))
            except ValueError as exc:
                problems.append(f"{context}{where.rstrip('.')}: {exc}")
        if problems:
            raise ScenarioError("\n".join(problems))
        raw = {**raw, "applications": parsed}
    try:
        # The context tells validators they read what a user wrote (units.from_input: no bare rates).
        sc = Scenario.model_validate(raw, context={units.INPUT: True})
    except ValidationError as exc:
        raise ScenarioError(_format_errors(exc, context)) from None
    refuse_booleans(sc, written, context, short)
    return sc


def refuse_booleans(model: BaseModel, written: Any, context: str = "", short: bool = False) -> None:
    """ScenarioError naming every field where a boolean was read as a number (`seed: true`)."""
    paths = bounded.coerced_booleans(model, written)
    if short:  # the `workload:` short form is applications[0]
        paths = [re.sub(r"^applications\.0(?=\.|$)", "workload", p) for p in paths]
    if paths:
        raise ScenarioError("\n".join(f"{context}{p}: a boolean (true/false) where a number is meant; write the"
                                      " number" for p in paths))


def _sweep_value_name(key: str, value: Any) -> str:
    """How `--only KEY=NAME` names a sweep value: a scheme by its name, a mapping by its `kind`
    (router.policy), anything else as written."""
    if key == SCHEME and isinstance(value, dict):
        return str(value.get("name"))
    if isinstance(value, dict) and "kind" in value:
        return str(value["kind"])
    return str(value)


def select_points(sweep: dict[str, list[Any]], only: list[str]) -> dict[str, list[Any]]:
    """The sweep narrowed to the values `only` names (`KEY=NAME`, repeatable: names of one key are
    alternatives, different keys all apply), so its points are a subset of the full sweep's with
    the same values and seeds; the narrowed sweep is what the run records."""
    chosen: dict[str, list[str]] = {}
    for item in only:
        key, sep, name = str(item).partition("=")
        key, name = key.strip(), name.strip()
        if not sep or not key or not name:
            raise ScenarioError(f"--only {bounded.shorten(str(item))}: give KEY=NAME, e.g. --only scheme=base-iw")
        if key not in sweep:
            raise ScenarioError(f"--only {bounded.shorten(key)}: not a sweep key of this scenario; its sweep keys are"
                                f" {', '.join(sweep) or '(none: one point)'}")
        chosen.setdefault(key, []).append(name)
    out = dict(sweep)
    for key, names in chosen.items():
        have = [_sweep_value_name(key, v) for v in sweep[key]]

        def named(value: Any, shown: str, name: str) -> bool:
            if shown == name:
                return True
            try:  # a plain value as --set reads it: `true`, `0.5`, `[20ms]`
                return not isinstance(value, dict) and yaml.safe_load(name) == value
            except yaml.YAMLError:
                return False
        unknown = [n for n in names if not any(named(v, h, n) for v, h in zip(sweep[key], have))]
        if unknown:
            raise ScenarioError(f"--only {key}={bounded.shorten(unknown[0])}: no such value of sweep.{key};"
                                f" it has {', '.join(have)}")
        out[key] = [v for v, h in zip(sweep[key], have) if any(named(v, h, n) for n in names)]
    return out


def _point(raw: dict[str, Any], values: dict[str, Any]) -> tuple[dict[str, Any], Scenario]:
    """One sweep point: the scenario with each swept path set to its value (a scheme's whole set),
    and its assignment (a scheme by its name)."""
    point_raw = dict(raw)  # _set_path copies the sections it changes: points share nothing they change
    assignment = dict(values)
    for key, value in values.items():
        if key == SCHEME:  # a named set of fields that change together
            for field_path, v in value["set"].items():
                _set_path(point_raw, field_path, v)
            assignment[key] = value["name"]
        else:
            _set_path(point_raw, key, value)
    label = point_label(assignment)
    return assignment, validate(point_raw, f"[sweep {bounded.shorten(label, 80)}] " if label else "")


def stored_point(raw: dict[str, Any], sweep: dict[str, list[Any]], assignment: dict[str, Any]) -> Scenario:
    """A point's scenario again from what a run stored (its scenario with the overrides, its sweep
    and the point's assignment): how the record of a point recorded before records is planned."""
    values = {}
    for key, value in assignment.items():
        if key == SCHEME:
            named = [v for v in sweep.get(SCHEME, []) if isinstance(v, dict) and v.get("name") == value]
            if not named:
                raise ScenarioError(f"{SCHEME}: the run's sweep has no scheme named {bounded.short(value)}")
            value = named[0]
        values[key] = value
    return _point(copy.deepcopy(raw), values)[1]


def read_mapping(path: Path) -> dict:
    """A scenario file's YAML mapping, read within spec/bounded.py's bounds (scenarios and transfer
    measurements alike); anything else a ScenarioError naming the file."""
    try:
        raw = bounded.load_yaml(bounded.read_text(path), str(path))
    except bounded.InputError as exc:
        raise ScenarioError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ScenarioError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping of fields, got {type(raw).__name__}")
    return raw


def load(path: str | Path, overrides: list[str] = (), seed: int | None = None, only: list[str] = ()) -> Sweep:
    """Read, override, validate and expand a scenario file; `only` narrows the sweep
    (select_points). Raises ScenarioError, within the bounds of spec/bounded.py (file size and
    type, UTF-8, YAML aliases, depth, sweep size)."""
    path = Path(path)
    raw = read_mapping(path)
    if len(overrides) > bounded.MAX_OVERRIDES:
        raise ScenarioError(f"--set: {len(overrides)} overrides; at most {bounded.MAX_OVERRIDES}")
    # Top-level `x-...` keys hold YAML anchors for the rest of the file (as in Compose files): dropped.
    raw = {k: v for k, v in copy.deepcopy(raw).items() if not (isinstance(k, str) and k.startswith("x-"))}
    raw.setdefault("name", path.stem)
    plain_keys = []
    for text_override in overrides:
        key, value = parse_override(text_override)
        if key.startswith("sweep."):
            # Sweep keys are dotted paths themselves: `--set sweep.topology.bottleneck.buffer=[64KB]`.
            sweep_map = raw.get("sweep") if isinstance(raw.get("sweep"), dict) else {}
            raw["sweep"] = {**sweep_map, key.removeprefix("sweep."): value}
        else:
            _set_path(raw, key, value)
            plain_keys.append(key)
    # A sweep sets its paths in every point after the overrides: an override at or under one would
    # be silently replaced.
    for key in plain_keys:
        for swept in _swept_paths(raw.get("sweep")):
            if key == swept or key.startswith(swept + "."):
                raise ScenarioError(f"--set {bounded.shorten(key)}: the sweep replaces {swept} in every point, so this"
                                    f" would never apply; change the sweep (--set sweep.{swept}=[...]) instead")
    if seed is not None:
        raw["seed"] = seed
    nodes = bounded.count_nodes(raw)
    if nodes > bounded.MAX_NODES:
        raise ScenarioError(f"{path}: more than {bounded.MAX_NODES} values with the overrides and aliases expanded")
    sweep = raw.pop("sweep", None) or {}
    if not isinstance(sweep, dict) or not all(isinstance(v, list) and v for v in sweep.values()):
        raise ScenarioError("sweep: must map field paths to non-empty lists of values, "
                            "e.g. {topology.bottleneck.buffer: [64KB, 512KB]}")
    if SCHEME in sweep:
        _check_schemes(sweep[SCHEME])
    if only:
        sweep = select_points(sweep, list(only))
    size = 1
    for key, values in sweep.items():
        if not isinstance(key, str):
            raise ScenarioError(f"sweep: {bounded.short(key)} is not a field path, e.g. topology.bottleneck.buffer")
        _check_key(f"sweep.{key[:60]}", key)
        size *= len(values)
        if size > bounded.MAX_SWEEP_POINTS:  # counted before anything is expanded
            shape = " x ".join(str(len(v)) for v in sweep.values())
            raise ScenarioError(f"sweep: more than {bounded.MAX_SWEEP_POINTS} points ({shape} values); split it into"
                                " several scenarios")
    points = []
    keys = list(sweep)
    for combo in itertools.product(*(sweep[k] for k in keys)):
        points.append(_point(raw, dict(zip(keys, combo))))
    runs = sum(s.run.repetitions for _, s in points)  # each point repeats as its own scenario says
    if runs > bounded.MAX_POINT_RUNS:
        raise ScenarioError(f"run.repetitions: {len(points)} points with their repetitions make {runs} point"
                            f" runs; at most {bounded.MAX_POINT_RUNS}")
    return Sweep(name=raw["name"], source=str(path), raw=raw, sweep=sweep, points=points)
