"""Scenario files: schema, loading, overrides and sweep expansion.

A scenario YAML file plus a seed fully determines a run. Loading goes
raw YAML -> `--set` overrides applied to the raw mapping -> validation -> one resolved
`Scenario` per sweep point. Every validation error names the field, the bad value and what
is allowed (`ScenarioError`).
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator,
                      model_validator)

from spec import units


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message is meant for the user, one problem a line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LinkSpec(_Strict):
    """One emulated link: rate, one-way propagation delay, and the buffer of its egress queue."""

    rate: int = Field(description="bit/s; written like '10Mbit'")
    delay: float = Field(description="one-way propagation delay in seconds; written like '5ms'")
    buffer: dict[str, int] = Field(description="{'packets': N} or {'bytes': N}; written '50p' or '64KB'")

    @field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, v: Any) -> int:
        return units.parse_rate(v)

    @field_validator("delay", mode="before")
    @classmethod
    def _delay(cls, v: Any) -> float:
        return units.parse_duration(v)

    @field_validator("buffer", mode="before")
    @classmethod
    def _buffer(cls, v: Any) -> dict[str, int]:
        return units.parse_buffer(v)


class TopologySpec(_Strict):
    """The dumbbell of CATNIP Fig. 3 (section IV-A)."""

    kind: Literal["dumbbell"] = "dumbbell"
    clients: int = Field(ge=1, le=250)
    servers: int = Field(ge=1, le=50)
    client_link: LinkSpec
    server_link: LinkSpec
    bottleneck: LinkSpec
    mss: int | None = Field(default=None, ge=88, le=8960,
                            description="TCP MSS in bytes; interfaces get MTU = mss + 40. None: Linux default (MTU 1500)")
    access_switch: Literal["auto", "ovs", "linuxbridge"] = "auto"
    ovs_datapath: Literal["auto", "kernel", "user"] = "auto"

    @model_validator(mode="after")
    def _clients_per_server(self) -> "TopologySpec":
        if self.clients < self.servers:
            raise ValueError(f"clients ({self.clients}) must be at least servers ({self.servers}): "
                             "each server serves its own set of clients (section IV-A)")
        return self


def _parse_threshold(v: Any) -> Any:
    """A RED threshold: packets (a number) or a share of the buffer ('20%')."""
    if v is None or isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0:
        return v
    if isinstance(v, str) and v.strip().endswith("%"):
        try:
            pct = float(v.strip()[:-1])
        except ValueError:
            pct = -1
        if 0 <= pct <= 100:
            return f"{pct:g}%"
    raise ValueError(f"{v!r} is not a threshold; use a packet count (10) or a share of the buffer ('20%')")


def _check_order(min_th: Any, max_th: Any) -> None:
    if isinstance(min_th, str) == isinstance(max_th, str):
        lo, hi = (float(str(t).rstrip("%")) for t in (min_th, max_th))
        if not lo < hi:
            raise ValueError(f"min_th ({min_th}) must be below max_th ({max_th})")


class LevelSpec(_Strict):
    """One drop precedence of RIO or 3-level RED."""

    min_th: float | str
    max_th: float | str
    max_p: float = Field(default=0.1, gt=0, le=1)

    @field_validator("min_th", "max_th", mode="before")
    @classmethod
    def _threshold(cls, v: Any) -> Any:
        return _parse_threshold(v)

    @model_validator(mode="after")
    def _order(self) -> "LevelSpec":
        _check_order(self.min_th, self.max_th)
        return self


class PolicySpec(_Strict):
    """Drop policy of the router queues (CATNIP section III-C; RED: Floyd and Jacobson 1993).

    RED thresholds are a fraction of each queue's buffer ('20%', CATNIP's choice) or a packet
    count (10); CATNIP used min 20%, max 60%, weight 0.01 and does not give max_p: the default
    0.1 is ns-2's (linterm 10). FRED and FRIO: TCP-friendly marking paper, section 5; WRR:
    service-differentiation paper, section 5.
    """

    kind: Literal["droptail", "catnip_good", "catnip_bad", "red", "catnip_red", "rio", "red3", "fred", "frio",
                  "wrr", "bernoulli", "catnip_loss"] = "droptail"
    min_th: float | str | None = None
    max_th: float | str | None = None
    w_q: float | None = Field(default=None, gt=0, le=1)
    max_p: float = Field(default=0.1, gt=0, le=1)
    mean_pkt_bytes: int = Field(default=1000, ge=40, le=9000,
                                description="RED: bytes per packet, for idle decay and byte buffers")
    levels: list[LevelSpec] | None = Field(default=None,
                                           description="rio and frio (IN, OUT), red3 (HIGH, MED, LOW)")
    min_q: float | None = Field(default=None, ge=0,
                                description="fred, frio: packets a flow may queue without a random drop (engine: 2)")
    weights: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None, description="wrr: packets per round of each queue: 2 (AF11, rest) or 3 (AF11, AF12, AF13+rest)")
    loss_p: float | None = Field(default=None, ge=0, lt=1,
                                 description="bernoulli: loss probability; catnip_loss: p for non-AF11 packets")
    loss_p_high: float | None = Field(default=None, ge=0, lt=1,
                                      description="catnip_loss: p' for AF11 packets (hysteresis paper, section 4)")

    RED_KINDS: ClassVar[tuple[str, ...]] = ("red", "catnip_red", "fred")
    LEVEL_KINDS: ClassVar[dict[str, int]] = {"rio": 2, "red3": 3, "frio": 2}  # kind: number of levels

    @field_validator("min_th", "max_th", mode="before")
    @classmethod
    def _threshold(cls, v: Any) -> Any:
        return _parse_threshold(v)

    @model_validator(mode="after")
    def _red_needs_parameters(self) -> "PolicySpec":
        if self.kind in self.RED_KINDS:
            missing = [k for k in ("min_th", "max_th", "w_q") if getattr(self, k) is None]
            if missing:
                hint = " (CATNIP used min_th '20%', max_th '60%', w_q 0.01)" if self.kind != "fred" else ""
                raise ValueError(f"policy '{self.kind}' needs {', '.join(missing)}{hint}")
            _check_order(self.min_th, self.max_th)
        elif self.min_th is not None or self.max_th is not None:
            raise ValueError(f"min_th and max_th apply to red, catnip_red and fred, not '{self.kind}'"
                             " (rio, red3 and frio take them per level)")
        elif self.w_q is not None and self.kind not in self.LEVEL_KINDS:
            raise ValueError(f"w_q applies to red, catnip_red, fred, rio, red3 and frio, not '{self.kind}'")
        if self.kind in self.LEVEL_KINDS:
            want = self.LEVEL_KINDS[self.kind]
            if self.w_q is None or not self.levels or len(self.levels) != want:
                raise ValueError(f"policy '{self.kind}' needs w_q and levels: {want} of {{min_th, max_th, max_p}},"
                                 " highest precedence first")
        elif self.levels is not None:
            raise ValueError(f"levels apply to rio, red3 and frio, not '{self.kind}'")
        if self.min_q is not None and self.kind not in ("fred", "frio"):
            raise ValueError(f"min_q applies to fred and frio, not '{self.kind}'")
        if self.kind == "wrr":
            if self.weights is None or len(self.weights) not in (2, 3):
                raise ValueError("policy 'wrr' needs weights: packets per round of 2 queues (AF11, the rest)"
                                 " or 3 (AF11, AF12, AF13 and unmarked), e.g. [1, 4]")
        elif self.weights is not None:
            raise ValueError(f"weights apply to wrr, not '{self.kind}'")
        needs = {"bernoulli": ["loss_p"], "catnip_loss": ["loss_p", "loss_p_high"]}.get(self.kind, [])
        missing = [k for k in needs if getattr(self, k) is None]
        if missing:
            raise ValueError(f"policy '{self.kind}' needs {', '.join(missing)}")
        extra = [k for k in ("loss_p", "loss_p_high") if getattr(self, k) is not None and k not in needs]
        if extra:
            raise ValueError(f"{', '.join(extra)} does not apply to policy '{self.kind}'")
        return self

    def engine_config(self, buffer: dict[str, int] | None) -> dict[str, Any]:
        """The engine's policy block for one queue: thresholds resolved to packets."""
        if self.kind in ("bernoulli", "catnip_loss"):
            return {"kind": self.kind, "loss_p": self.loss_p,
                    **({"loss_p_high": self.loss_p_high} if self.kind == "catnip_loss" else {})}
        if self.kind == "wrr":
            assert self.weights is not None
            total = sum(self.weights)
            for unit, size in (buffer or {}).items():
                for i, w in enumerate(self.weights):
                    if size * w // total == 0:
                        raise ValueError(f"wrr: queue {i}'s share of the buffer ({w}/{total} of {size} {unit}) is"
                                         " empty; enlarge the buffer or raise its weight")
            return {"kind": "wrr", "weights": list(self.weights)}
        if self.kind not in (*self.RED_KINDS, *self.LEVEL_KINDS):
            return {"kind": self.kind}
        if buffer is None:
            capacity = None
        else:
            capacity = buffer.get("packets") or buffer["bytes"] / self.mean_pkt_bytes

        def packets(th: float | str) -> float:
            if isinstance(th, str):
                if capacity is None:
                    raise ValueError("RED thresholds given as a share need a buffer limit")
                return float(th[:-1]) / 100 * capacity
            return float(th)
        def ordered(lo: float, hi: float) -> tuple[float, float]:
            if not lo < hi:
                raise ValueError(f"RED needs min_th < max_th (got {lo:g} and {hi:g} packets)")
            return lo, hi
        min_q = {} if self.min_q is None else {"min_q": self.min_q}
        if self.levels:
            levels = []
            for level in self.levels:
                lo, hi = ordered(packets(level.min_th), packets(level.max_th))
                levels.append({"min_th": lo, "max_th": hi, "max_p": level.max_p})
            return {"kind": self.kind, "levels": levels, "w_q": self.w_q, "mean_pkt_bytes": self.mean_pkt_bytes,
                    **min_q}
        lo, hi = ordered(packets(self.min_th), packets(self.max_th))
        return {"kind": self.kind, "min_th": lo, "max_th": hi, "w_q": self.w_q, "max_p": self.max_p,
                "mean_pkt_bytes": self.mean_pkt_bytes, **min_q}


class RouterSpec(_Strict):
    policy: PolicySpec = PolicySpec()


class TcpSpec(_Strict):
    """TCP settings applied in every host's namespace."""

    congestion_control: str = Field(default="cubic", pattern=r"^[a-z0-9_]{1,16}$")
    server_congestion_control: list[Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,15}$")]] | None = Field(
        default=None, min_length=1,
        description="per server (server i uses entry i mod length), e.g. [catnip_reno, catnip_eca]; "
                    "default: congestion_control")

    def server_cc(self, index: int) -> str:
        ccs = self.server_congestion_control
        return ccs[index % len(ccs)] if ccs else self.congestion_control

    def all_cc(self) -> set[str]:
        return {self.congestion_control, *(self.server_congestion_control or [])}
    sack: bool = True
    timestamps: bool = True
    initial_cwnd: int | None = Field(default=None, ge=1, le=100,
                                     description="route initcwnd; None keeps the Linux default (10)")


class MarkingSpec(_Strict):
    """Selective Packet Marking at the servers (CATNIP III-B), by eBPF (bpf/spm.bpf.c, docs/spm.md)."""

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

    @model_validator(mode="after")
    def _something_marked(self) -> "MarkingSpec":
        if self.spm and not (self.first or self.last or self.small_cwnd):
            raise ValueError("spm: true with first, last and small_cwnd all false would mark nothing high")
        return self


class ThinkTimeSpec(_Strict):
    model: Literal["zero", "fixed", "exponential", "empirical"] = "zero"
    mean: float | None = Field(default=None, description="seconds: the fixed value or the exponential mean")
    cdf: str | None = Field(default=None, description="empirical: a CDF file in ns-2's format (docs/workload.md)")

    @field_validator("mean", mode="before")
    @classmethod
    def _mean(cls, v: Any) -> float | None:
        return None if v is None else units.parse_duration(v)

    @model_validator(mode="after")
    def _needs_mean(self) -> "ThinkTimeSpec":
        if self.model in ("fixed", "exponential") and self.mean is None:
            raise ValueError(f"think time model '{self.model}' needs 'mean' (a duration such as '2s')")
        if self.model == "empirical":
            if not self.cdf:
                raise ValueError("think time model 'empirical' needs 'cdf': a CDF file in ns-2's format")
            from workloads.thinktime import ThinkTimeError, load_cdf
            try:
                load_cdf(self.cdf)
            except ThinkTimeError as exc:
                raise ValueError(str(exc)) from None
        return self


class WorkloadSpec(_Strict):
    """Ten-page web sessions of Fig. 4, replayed by one client per client host (section IV-B)."""

    http_version: Literal["1.0", "1.1"] = "1.0"
    parallel: int = Field(default=1, ge=1, le=16,
                          description="concurrent connections per client-server pair (simulation: 4, WAN: 1)")
    rounds: int = Field(default=1, ge=1, le=100, description="passes over the page set per client")
    pages: list[int] = Field(default_factory=lambda: list(range(1, 11)))
    think_time: ThinkTimeSpec = ThinkTimeSpec()
    start_stagger: float = Field(default=1.0, description="clients start uniformly spread over this many seconds")
    object_timeout: float = 60.0
    # Section V-F describes its HTTP/1.1 model twice: one connection "throughout the duration of a
    # user session", and "each Web page ... using a single TCP connection". Both readings run.
    persistent: Literal["session", "page"] = Field(
        default="session", description="HTTP/1.1: one connection for the whole session, or a new one per page")

    @field_validator("http_version", mode="before")
    @classmethod
    def _version(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) else v

    @field_validator("start_stagger", "object_timeout", mode="before")
    @classmethod
    def _durations(cls, v: Any) -> float:
        return units.parse_duration(v)

    @model_validator(mode="after")
    def _persistent_needs_http11(self) -> "WorkloadSpec":
        if self.persistent != "session" and self.http_version != "1.1":
            raise ValueError(f"persistent: {self.persistent!r} needs http_version '1.1' (HTTP/1.0 opens a"
                             " connection per object)")
        return self

    @field_validator("pages")
    @classmethod
    def _pages(cls, v: list[int]) -> list[int]:
        bad = [p for p in v if not 1 <= p <= 10]
        if bad or not v:
            raise ValueError(f"pages {bad or v} not allowed: pages are numbered 1 to 10 (Fig. 4)")
        return v


class RunSpec(_Strict):
    time_limit: float = Field(default=900.0, description="a sweep point still running after this is stopped")
    capture: bool = Field(default=False, description="tcpdump (headers only) at the bottleneck")
    late_threshold: float = Field(default=0.001, description="engine wake-ups later than this count as late")
    max_late_fraction: float = Field(default=0.001, ge=0, le=1,
                                     description="more late events than this fraction flags the run as not real time")
    repetitions: int = Field(default=1, ge=1, le=100)
    engine_spin: float = Field(default=0.0002, le=0.01,
                               description="the engine polls without sleeping this long before each event")

    @field_validator("time_limit", "late_threshold", "engine_spin", mode="before")
    @classmethod
    def _durations(cls, v: Any) -> float:
        return units.parse_duration(v)


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
    workload: WorkloadSpec = WorkloadSpec()
    run: RunSpec = RunSpec()


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
    keys = dotted.split(".")
    node = raw
    for i, key in enumerate(keys[:-1]):
        nxt = node.get(key)
        if nxt is None:
            nxt = node[key] = {}
        if not isinstance(nxt, dict):
            raise ScenarioError(f"{'.'.join(keys[:i + 1])}: is {nxt!r}, not a section, so '{dotted}' cannot be set")
        node = nxt
    node[keys[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """`key.path=value`, the value read as a YAML scalar or flow collection."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(f"--set {text!r}: expected key=value, e.g. topology.clients=20")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError as exc:
        raise ScenarioError(f"--set {text!r}: value is not valid YAML ({exc.problem})") from None
    return key.strip(), parsed


def _format_errors(exc: ValidationError, prefix: str = "") -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; see docs/scenarios.md for the fields)"
        elif err["type"] == "literal_error":
            msg = f"{err['input']!r} not allowed: {msg.removeprefix('Input should be ')}"
        elif "input" in err and err["type"] not in ("missing", "value_error"):
            msg = f"{err['input']!r}: {msg}"
        lines.append(f"{prefix}{loc or '(top level)'}: {msg}")
    return "\n".join(lines)


def validate(raw: dict[str, Any], context: str = "") -> Scenario:
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(_format_errors(exc, context)) from None


def load(path: str | Path, overrides: list[str] = (), seed: int | None = None) -> Sweep:
    """Read, override, validate and expand a scenario file. Raises ScenarioError."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ScenarioError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping of fields, got {type(raw).__name__}")
    raw = copy.deepcopy(raw)
    raw.setdefault("name", path.stem)
    for text_override in overrides:
        key, value = parse_override(text_override)
        if key.startswith("sweep."):
            # Sweep keys are dotted paths themselves: `--set sweep.topology.bottleneck.buffer=[64KB]`.
            sweep_map = raw.get("sweep") if isinstance(raw.get("sweep"), dict) else {}
            raw["sweep"] = {**sweep_map, key.removeprefix("sweep."): value}
        else:
            _set_path(raw, key, value)
    if seed is not None:
        raw["seed"] = seed
    sweep = raw.pop("sweep", None) or {}
    if not isinstance(sweep, dict) or not all(isinstance(v, list) and v for v in sweep.values()):
        raise ScenarioError("sweep: must map field paths to non-empty lists of values, "
                            "e.g. {topology.bottleneck.buffer: [64KB, 512KB]}")
    points = []
    keys = list(sweep)
    for combo in itertools.product(*(sweep[k] for k in keys)):
        point_raw = copy.deepcopy(raw)
        assignment = dict(zip(keys, combo))
        for key, value in assignment.items():
            _set_path(point_raw, key, value)
        label = point_label(assignment)
        points.append((assignment, validate(point_raw, f"[sweep {label}] " if label else "")))
    return Sweep(name=raw["name"], source=str(path), raw=raw, sweep=sweep, points=points)
