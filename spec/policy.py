"""Queue policies of a link direction: one schema class per policy, the Python half of the typed
contract whose other half is the engine's tagged enum (docs/engine.md).

Each class checks its own parameters and writes its own engine block (`engine_config`), every
parameter the engine's kind takes, defaults applied: the engine has none of its own, so a
parameter's default is declared here once (tests/test_kinds_match.py holds each block to the
parameters `catnip-engine kinds` lists). Adding a
policy is one class here, registered (`register`), and one Rust file in engine/src/policy/ with
its variant in the engine's config enum (tests/test_plugins.py adds a toy one).

Thresholds (RED family) are a packet count (10), a share of the queue's buffer ('20%', CATNIP's
choice, section V-D) or a size ('50KB': the engine then averages the queue in bytes, as the
TCP-friendly marking paper's Table 1 gives its RIO thresholds).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SerializeAsAny, field_validator, model_validator

from catnip.spec import units
from catnip.spec.bounded import short
from catnip.spec.edge import parse_ports


class _Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str

    def engine_config(self, buffer: dict[str, int] | None) -> dict[str, Any]:
        """The engine's `policy` block for a queue with this buffer."""
        return {"kind": self.kind}


class DropTail(_Policy):
    """Tail drop: the arrival is refused when the buffer is full."""
    kind: Literal["droptail"] = "droptail"


class CatnipGood(_Policy):
    """CATNIP-Good (CATNIP section III-C): a high-priority arrival at a full buffer pushes out a
    random low-priority packet."""
    kind: Literal["catnip_good"] = "catnip_good"


class CatnipBad(_Policy):
    """CATNIP-Bad (section III-C): the opposite rule, low pushes out high."""
    kind: Literal["catnip_bad"] = "catnip_bad"


def _threshold(v: Any) -> Any:
    """A packet count, a share of the buffer ('20%') or a size ('50KB')."""
    if isinstance(v, bool):
        raise ValueError(f"{short(v)} is not a threshold")
    if isinstance(v, (int, float)):
        if v >= 0 and v == v and v != float("inf"):
            return float(v)
        raise ValueError(f"{short(v)} is not a threshold; a packet count must be a finite number >= 0")
    if isinstance(v, str):
        text = v.strip()
        if text.endswith("%"):
            try:
                pct = float(text[:-1])
            except ValueError:
                pct = -1
            if 0 <= pct <= 100:
                return f"{pct:g}%"
        else:
            try:
                size = units.parse_buffer(text)
            except ValueError:
                size = None
            if size and "bytes" in size:
                return {"bytes": size["bytes"]}
    raise ValueError(f"{short(v)} is not a threshold; use a packet count (10), a share of the buffer ('20%')"
                     " or a size ('50KB')")


Threshold = Annotated[Any, Field(description="packets (10), share of the buffer ('20%') or size ('50KB')")]


def _unit(th: Any) -> str:
    return "bytes" if isinstance(th, dict) else "share" if isinstance(th, str) else "packets"


def _check_order(min_th: Any, max_th: Any) -> None:
    if _unit(min_th) != _unit(max_th):
        if "bytes" in (_unit(min_th), _unit(max_th)):
            raise ValueError(f"min_th ({_show(min_th)}) and max_th ({_show(max_th)}) must both be sizes or neither")
        return  # a count and a share: compared once the buffer is known (engine_config)
    lo, hi = (_value(t) for t in (min_th, max_th))
    if not lo < hi:
        raise ValueError(f"min_th ({_show(min_th)}) must be below max_th ({_show(max_th)})")


def _value(th: Any) -> float:
    return float(th["bytes"]) if isinstance(th, dict) else float(str(th).rstrip("%"))


def _show(th: Any) -> str:
    return f"{th['bytes']}B" if isinstance(th, dict) else str(th)


class _RedFamily(_Policy):
    """Shared by the RED policies: averaging weight and the packet size used for idle decay and
    for shares of a byte buffer."""
    w_q: float = Field(gt=0, le=1, description="weight of the moving average")
    mean_pkt_bytes: int = Field(default=1000, ge=40, le=9000,
                                description="bytes per packet, for idle decay and shares of byte buffers")

    def _resolve(self, th: Any, buffer: dict[str, int] | None) -> Any:
        """A threshold as the engine takes it: packets (a number) or {"bytes": N}."""
        if isinstance(th, dict):
            return dict(th)
        if isinstance(th, str):
            if buffer is None:
                raise ValueError(f"{self.kind}: thresholds given as a share need a buffer limit")
            capacity = buffer.get("packets") or buffer["bytes"] / self.mean_pkt_bytes
            return float(th[:-1]) / 100 * capacity
        return float(th)

    def _pair(self, min_th: Any, max_th: Any, buffer: dict[str, int] | None) -> tuple[Any, Any]:
        lo, hi = self._resolve(min_th, buffer), self._resolve(max_th, buffer)
        lv = lo["bytes"] if isinstance(lo, dict) else lo
        hv = hi["bytes"] if isinstance(hi, dict) else hi
        if not lv < hv:
            raise ValueError(f"{self.kind} needs min_th < max_th (got {lv:g} and {hv:g})")
        return lo, hi


class _Red(_RedFamily):
    min_th: Threshold
    max_th: Threshold
    max_p: float = Field(default=0.1, gt=0, le=1, description="drop probability at max_th (ns-2's default 0.1)")

    _th = field_validator("min_th", "max_th", mode="before")(lambda cls, v: _threshold(v))

    @model_validator(mode="after")
    def _order(self):
        _check_order(self.min_th, self.max_th)
        return self

    def engine_config(self, buffer):
        lo, hi = self._pair(self.min_th, self.max_th, buffer)
        return {"kind": self.kind, "min_th": lo, "max_th": hi, "w_q": self.w_q, "max_p": self.max_p,
                "mean_pkt_bytes": self.mean_pkt_bytes}


class Red(_Red):
    """RED (Floyd and Jacobson 1993). CATNIP used min 20%, max 60%, weight 0.01 (section V-D)."""
    kind: Literal["red"] = "red"


class CatnipRed(_Red):
    """CATNIP-RED (section III-C): RED that drops low-priority packets first."""
    kind: Literal["catnip_red"] = "catnip_red"


def _min_q(v: Any) -> Any:
    """FRED's min_q: a packet count, or a size ('3KB') when the thresholds are sizes."""
    if v is None or isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf"):
        return v  # the engine takes a finite number (JSON has no infinity)
    if isinstance(v, str):
        return {"bytes": units.parse_size(v)}
    raise ValueError(f"{short(v)}: min_q is a packet count (2) or a size ('3KB')")


# FRED's min_q when a scenario gives none: 2 packets, Lin and Morris's value for small buffers
# (D. Lin and R. Morris, "Dynamics of Random Early Detection", SIGCOMM 1997); with byte thresholds
# 2 mean_pkt_bytes. Was the engine's own default (engine/src/policy/fred.rs) until issue 43.
FRED_MIN_Q_PACKETS = 2


def _min_q_block(min_q: Any, byte_thresholds: bool, mean_pkt_bytes: int) -> dict:
    """The engine's `min_q`, always written (the engine has no defaults: docs/engine.md)."""
    if min_q is None:
        return {"min_q": {"bytes": FRED_MIN_Q_PACKETS * mean_pkt_bytes} if byte_thresholds else FRED_MIN_Q_PACKETS}
    if byte_thresholds != isinstance(min_q, dict):
        raise ValueError("min_q must be a size ('3KB') when the thresholds are sizes, and a packet count otherwise")
    return {"min_q": min_q}


class Fred(_Red):
    """FRED (Lin and Morris 1997; TCP-friendly marking paper, section 5)."""
    kind: Literal["fred"] = "fred"
    min_q: Any = Field(default=None, description="packets (or a size, with byte thresholds) a flow may queue"
                                                 " without a random drop (default 2 packets, or 2 mean_pkt_bytes"
                                                 " with byte thresholds)")

    _mq = field_validator("min_q", mode="before")(lambda cls, v: _min_q(v))

    def engine_config(self, buffer):
        return {**super().engine_config(buffer),
                **_min_q_block(self.min_q, isinstance(self.min_th, dict), self.mean_pkt_bytes)}


class Level(BaseModel):
    """One drop precedence of RIO, FRIO or 3-level RED."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    min_th: Threshold
    max_th: Threshold
    max_p: float = Field(default=0.1, gt=0, le=1)

    _th = field_validator("min_th", "max_th", mode="before")(lambda cls, v: _threshold(v))

    @model_validator(mode="after")
    def _order(self):
        _check_order(self.min_th, self.max_th)
        return self


class _Levels(_RedFamily):
    LEVELS: ClassVar[int] = 2
    levels: list[Level] = Field(description="highest precedence first")

    @model_validator(mode="after")
    def _count(self):
        if len(self.levels) != self.LEVELS:
            raise ValueError(f"policy '{self.kind}' needs levels: {self.LEVELS} of {{min_th, max_th, max_p}},"
                             f" highest precedence first (got {len(self.levels)})")
        units_used = {_unit(t) == "bytes" for lv in self.levels for t in (lv.min_th, lv.max_th)}
        if len(units_used) > 1:
            raise ValueError(f"policy '{self.kind}': every level's thresholds must be sizes, or none")
        return self

    def engine_config(self, buffer):
        levels = []
        for level in self.levels:
            lo, hi = self._pair(level.min_th, level.max_th, buffer)
            levels.append({"min_th": lo, "max_th": hi, "max_p": level.max_p})
        return {"kind": self.kind, "levels": levels, "w_q": self.w_q, "mean_pkt_bytes": self.mean_pkt_bytes}


class Rio(_Levels):
    """RIO (Clark and Fang 1998): IN (AF11) and OUT levels; the IN average counts IN packets only."""
    kind: Literal["rio"] = "rio"


class Red3(_Levels):
    """3-level RED (Nouredine and Tobagi, section 4.2): each level's average counts its level and higher."""
    kind: Literal["red3"] = "red3"
    LEVELS: ClassVar[int] = 3


class Frio(_Levels):
    """FRIO (TCP-friendly marking paper, section 5): RIO with FRED's per-flow accounting."""
    kind: Literal["frio"] = "frio"
    min_q: Any = Field(default=None, description="as FRED's min_q")

    _mq = field_validator("min_q", mode="before")(lambda cls, v: _min_q(v))

    def engine_config(self, buffer):
        return {**super().engine_config(buffer),
                **_min_q_block(self.min_q, isinstance(self.levels[0].min_th, dict), self.mean_pkt_bytes)}


class Wrr(_Policy):
    """Weighted round robin over 2 queues (AF11, the rest) or 3 (AF11, AF12, AF13 and unmarked)
    (Nouredine and Tobagi, section 5); the buffer is split among the queues by weight."""
    kind: Literal["wrr"] = "wrr"
    weights: list[Annotated[int, Field(ge=1, le=MAX_WRR_WEIGHT)]] = Field(description="packets per round of each"
                                                                                     " queue")

    @field_validator("weights")
    @classmethod
    def _two_or_three(cls, v):
        if len(v) not in (2, 3):
            raise ValueError("policy 'wrr' needs weights: packets per round of 2 queues (AF11, the rest)"
                             " or 3 (AF11, AF12, AF13 and unmarked), e.g. [1, 4]")
        return v

    def engine_config(self, buffer):
        total = sum(self.weights)
        for unit, size in (buffer or {}).items():
            for i, w in enumerate(self.weights):
                if size * w // total == 0:
                    raise ValueError(f"wrr: queue {i}'s share of the buffer ({w}/{total} of {size} {unit}) is"
                                     " empty; enlarge the buffer or raise its weight")
        return {"kind": "wrr", "weights": list(self.weights)}


class Bernoulli(_Policy):
    """Random loss with probability loss_p, then tail drop (hysteresis paper, section 4). The same
    as droptail with `loss: {p: ...}` on the link."""
    kind: Literal["bernoulli"] = "bernoulli"
    loss_p: float = Field(ge=0, lt=1)

    def engine_config(self, buffer):
        return {"kind": "bernoulli", "loss_p": self.loss_p}


class CatnipLoss(_Policy):
    """The CATNIP error model (hysteresis paper, section 4): p for non-AF11 packets, p' for AF11."""
    kind: Literal["catnip_loss"] = "catnip_loss"
    loss_p: float = Field(ge=0, lt=1)
    loss_p_high: float = Field(ge=0, lt=1)

    def engine_config(self, buffer):
        return {"kind": "catnip_loss", "loss_p": self.loss_p, "loss_p_high": self.loss_p_high}


MIN_BUCKET_BYTES = units.MIN_BUCKET_BYTES  # the engine's smallest token bucket (engine/src/edge/bucket.rs)
MAX_WRR_WEIGHT = 10**6  # packets per round; the engine holds a weight in 32 bits


class TokenBucket(BaseModel):
    """One token bucket of a user's profile: `rate` (e.g. '250kbit') with bursts of `bucket` ('6000B')."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    rate: int = Field(description="token rate, e.g. '250kbit'")
    bucket: int = Field(description="bucket depth, e.g. '6000B' (at least 64 bytes)")

    _rate = field_validator("rate", mode="before")(
        lambda cls, v, info: units.parse_rate(v, bare=not units.from_input(info)))
    _bucket = field_validator("bucket", mode="before")(
        lambda cls, v, info: units.parse_bucket(v, bare=not units.from_input(info)))

    def engine_config(self) -> dict[str, int]:
        return {"rate_bps": self.rate, "bucket_bytes": self.bucket}


def _port_range(v: Any) -> list[int]:
    if v is None:
        raise ValueError("None is not a port range; use 80, '5000-5099' or [5000, 5099]")
    return parse_ports(v)


def _class_ports(v: Any) -> Any:
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{short(v)} is not a class; a class is a list of ports, e.g. [80] or ['5000-5099', 8080]")
    if not v:
        raise ValueError("a class needs at least one port range: a port (80), 'lo-hi' or [lo, hi]")
    return v


MAX_DOWNGRADE_AFTER = 3600.0  # seconds (engine/src/policy/source_sched.rs: an hour)


def _downgrade_after(v: Any, info: Any) -> float:
    seconds = units.parse_duration(v, bare=not units.from_input(info))
    if not 1 <= round(seconds * 1e6) <= MAX_DOWNGRADE_AFTER * 1e6:  # the engine's bounds: 1 us to an hour
        raise ValueError(f"{short(v)}: must be at least 1us and at most 60min")
    return seconds


AppClass = Annotated[list[Annotated[list[int], BeforeValidator(_port_range)]], BeforeValidator(_class_ports)]


class SourceScheduler(_Policy):
    """The source scheduler/shaper of Nouredine and Tobagi (section 6.2, Fig. 11), for a user's
    uplink (host -> router, at the access rate): one queue per connection, connections in
    application classes by port served in order, HIGH (AF11) and MED (AF12) packets held to the
    user's token-bucket profile, LOW (the rest) limited by the link only; a head queued
    `downgrade_after` at HIGH is remarked MED, then LOW (footnote 7). docs/engine.md."""
    kind: Literal["source_scheduler"] = "source_scheduler"
    high: TokenBucket = Field(description="the HIGH (AF11) profile, e.g. {rate: 250kbit, bucket: 6000B}")
    med: TokenBucket = Field(description="the MED (AF12) profile, e.g. {rate: 110kbit, bucket: 6000B}")
    classes: list[AppClass] = Field(description="each class's ports (80, 'lo-hi' or [lo, hi]), highest"
                                                " scheduling priority first; a packet whose source or"
                                                " destination port no class has is in the last class")
    downgrade_after: float = Field(default=0.2, description="a head queued this long (since its arrival) at"
                                                            " HIGH is remarked MED, as long again at MED"
                                                            " LOW (footnote 7: 200 ms)")

    _downgrade = field_validator("downgrade_after", mode="before")(
        lambda cls, v, info: _downgrade_after(v, info))

    @field_validator("classes")
    @classmethod
    def _some_class(cls, v):
        if not v:
            raise ValueError("need at least one class, e.g. [[2323], [80], [2121]] (Telnet, HTTP, FTP)")
        return v

    def engine_config(self, buffer):
        return {"kind": "source_scheduler", "high": self.high.engine_config(), "med": self.med.engine_config(),
                "classes": [[list(r) for r in c] for c in self.classes],
                "downgrade_after_us": int(round(self.downgrade_after * 1e6))}


REGISTRY: dict[str, type[_Policy]] = {}


def register(cls: type[_Policy]) -> type[_Policy]:
    """Make a policy class available to scenarios under its `kind` (the engine must know the kind too)."""
    kind = cls.model_fields["kind"].default
    if not isinstance(kind, str) or REGISTRY.get(kind, cls) is not cls:
        raise TypeError(f"policy {cls.__name__}: kind {kind!r} missing or registered twice")
    REGISTRY[kind] = cls
    return cls


def unregister(kind: str) -> None:
    REGISTRY.pop(kind, None)


for _cls in (DropTail, CatnipGood, CatnipBad, Red, CatnipRed, Fred, Rio, Red3, Frio, Wrr, Bernoulli, CatnipLoss,
             SourceScheduler):
    register(_cls)
KINDS = tuple(REGISTRY)  # the built-in kinds


def parameters(kind: str) -> list[str]:
    """The parameters a policy takes (for error messages)."""
    cls = REGISTRY.get(kind)
    return [f for f in cls.model_fields if f != "kind"] if cls else []


def parse_policy(raw: Any) -> _Policy:
    """A policy block validated by its own class; errors name the field or list what is allowed."""
    if isinstance(raw, _Policy):
        return raw
    if not isinstance(raw, dict):
        raise ValueError(f"a policy is a mapping with a 'kind', e.g. {{kind: droptail}}; got {raw!r}")
    kind = raw.get("kind", "droptail")
    cls = REGISTRY.get(kind) if isinstance(kind, str) else None  # a list or mapping cannot be looked up
    if cls is None:
        raise ValueError(f"kind {kind!r} not allowed: {', '.join(REGISTRY)}")
    extra = sorted(set(raw) - set(cls.model_fields))
    if extra:
        takes = parameters(kind)
        raise ValueError(f"{', '.join(extra)}: not {'a parameter' if len(extra) == 1 else 'parameters'} of policy"
                         f" '{kind}' (it takes {', '.join(takes) if takes else 'none'})")
    return cls.model_validate(raw)


PolicySpec = Annotated[SerializeAsAny[_Policy], BeforeValidator(parse_policy)]
