"""Edge functions on a link direction, applied in order to every packet before the drop policy:
classify/mark -> meter/police or shape (design: mark -> meter/police or shape -> drop -> schedule).

These run in the queue engine, which rewrites the DS field of a packet it releases (with a
correct checksum; docs/engine.md). The TCP-friendly marking paper's token markers (`tcpf`,
`token_marker`; docs/tcpf-markers.md) run there too, reading the TCP headers of both directions.
Markers that need the sender's own TCP state (SPM, TCP-state marking) run as tc BPF programs on
the hosts instead (`marking` in the scenario; docs/spm.md).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from catnip.spec import units
from catnip.spec.bounded import short

DSCP_NAMES = {"be": 0, "af11": 10, "af12": 12, "af13": 14, "af21": 18, "af22": 20, "af23": 22, "af31": 26,
              "af32": 28, "af33": 30, "af41": 34, "af42": 36, "af43": 38, "ef": 46}


def parse_dscp(v: Any) -> int:
    """A DSCP as a number 0-63 or a name (AF11, AF12, AF13, EF, BE, ...)."""
    if isinstance(v, str) and v.strip().lower() in DSCP_NAMES:
        return DSCP_NAMES[v.strip().lower()]
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 63:
        return v
    raise ValueError(f"{short(v)} is not a DSCP; use 0-63 or a name ({', '.join(n.upper() for n in DSCP_NAMES)})")


def parse_ports(v: Any) -> list[int] | None:
    """A port (80), a range ('5000-5099') or [lo, hi]."""
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        lo = hi = v
    elif isinstance(v, str) and "-" in v:
        a, _, b = v.partition("-")
        try:
            lo, hi = int(a), int(b)
        except ValueError:
            raise ValueError(f"{short(v)} is not a port range; use 80, '5000-5099' or [5000, 5099]") from None
    elif isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        lo, hi = v
    else:
        raise ValueError(f"{short(v)} is not a port range; use 80, '5000-5099' or [5000, 5099]")
    if not 0 <= lo <= hi <= 65535:
        raise ValueError(f"{short(v)}: ports run 0-65535, low end first")
    return [lo, hi]


class _Edge(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str

    def engine_config(self, subnets: dict[str, str]) -> dict[str, Any]:
        raise NotImplementedError


class MarkRule(BaseModel):
    """Packets matching every given field get `dscp`."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    proto: Literal["tcp", "udp"] | None = None
    src: str | None = Field(default=None, description="an address block (10.1.0.0/16) or a host group's name")
    dst: str | None = Field(default=None, description="an address block or a host group's name")
    sport: Any = Field(default=None, description="a port, 'lo-hi' or [lo, hi]")
    dport: Any = Field(default=None, description="a port, 'lo-hi' or [lo, hi]")
    dscp: int

    _dscp = field_validator("dscp", mode="before")(lambda cls, v: parse_dscp(v))
    _ports = field_validator("sport", "dport", mode="before")(lambda cls, v: parse_ports(v))

    @field_validator("src", "dst")
    @classmethod
    def _block(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError(f"{short(v)} is neither an address block (10.1.0.0/16) nor a host group name")
        if v is None or "/" not in v and not any(c.isdigit() for c in v.split(".")[0][:1]):
            return v  # a group name, resolved once the graph is known
        try:
            return str(ipaddress.ip_network(v, strict=False))
        except ValueError:
            raise ValueError(f"{short(v)} is neither an address block (10.1.0.0/16) nor a host group name") from None

    def engine_rule(self, subnets: dict[str, str]) -> dict[str, Any]:
        def block(v: str | None) -> str | None:
            if v is None or v[0].isdigit():
                return v
            if v not in subnets:
                raise ValueError(f"mark rule names host group {short(v)}, which the topology does not have"
                                 f" (groups: {', '.join(sorted(subnets))})")
            return subnets[v]
        return {"proto": {"tcp": 6, "udp": 17}.get(self.proto or "", None), "src": block(self.src),
                "dst": block(self.dst), "sport": self.sport, "dport": self.dport, "dscp": self.dscp}


class Mark(_Edge):
    """Set the DSCP by address, protocol and port (e.g. Nouredine-Tobagi's application-based
    marking, section 5: Telnet AF11, HTTP AF12, FTP AF13). The first matching rule wins."""
    kind: Literal["mark"] = "mark"
    rules: list[MarkRule] = Field(min_length=1)
    default: int | None = Field(default=None, description="DSCP of packets no rule matches (none: unchanged)")

    _default = field_validator("default", mode="before")(lambda cls, v: None if v is None else parse_dscp(v))

    def engine_config(self, subnets):
        return {"kind": "mark", "rules": [r.engine_rule(subnets) for r in self.rules], "default": self.default}


class Police(_Edge):
    """A token-bucket meter: packets beyond `rate` with bursts of `bucket` are dropped or remarked
    (Nouredine-Tobagi's edge policer and ER-TBM, section 6.3)."""
    kind: Literal["police"] = "police"
    rate: int = Field(description="token rate, e.g. '250kbit'")
    bucket: int = Field(description="bucket depth in bytes, e.g. '6000B'")
    dscp: list[int] | None = Field(default=None, description="the packets metered (default: all)")
    per: Literal["link", "src", "flow"] = Field(default="link", description="one bucket per link, source or flow")
    exceed: Any = Field(default={"action": "drop"}, description="'drop' or {remark: DSCP}")

    _rate = field_validator("rate", mode="before")(
        lambda cls, v, info: units.parse_rate(v, bare=not units.from_input(info)))
    _bucket = field_validator("bucket", mode="before")(
        lambda cls, v, info: units.parse_bucket(v, bare=not units.from_input(info)))

    @field_validator("dscp", mode="before")
    @classmethod
    def _dscps(cls, v):
        return None if v is None else [parse_dscp(x) for x in (v if isinstance(v, list) else [v])]

    @field_validator("exceed", mode="before")
    @classmethod
    def _exceed(cls, v):
        if v == "drop" or v == {"action": "drop"}:
            return {"action": "drop"}
        if isinstance(v, dict) and v.get("action") == "remark" and set(v) == {"action", "dscp"}:
            return {"action": "remark", "dscp": parse_dscp(v["dscp"])}
        if isinstance(v, dict) and set(v) == {"remark"}:
            return {"action": "remark", "dscp": parse_dscp(v["remark"])}
        raise ValueError(f"{short(v)}: exceed is 'drop' or {{remark: DSCP}}")

    def engine_config(self, subnets):
        return {"kind": "police", "rate_bps": self.rate, "bucket_bytes": self.bucket, "dscp": self.dscp,
                "per": self.per, "exceed": dict(self.exceed)}


class Shape(_Edge):
    """A token-bucket shaper that holds packets in a buffer of its own before the link's queue."""
    kind: Literal["shape"] = "shape"
    rate: int
    bucket: int
    buffer: dict[str, int] | None = None

    _rate = field_validator("rate", mode="before")(
        lambda cls, v, info: units.parse_rate(v, bare=not units.from_input(info)))
    _bucket = field_validator("bucket", mode="before")(
        lambda cls, v, info: units.parse_bucket(v, bare=not units.from_input(info)))
    _buffer = field_validator("buffer", mode="before")(lambda cls, v: None if v is None else units.parse_buffer(v))

    def engine_config(self, subnets):
        return {"kind": "shape", "rate_bps": self.rate, "bucket_bytes": self.bucket, "buffer": self.buffer}


def _positive_size(v: Any, most: int = units.MAX_SIZE_BYTES) -> int:
    size = v if type(v) is int else units.parse_size(v)
    if size <= 0:
        raise ValueError(f"{short(v)}: must be above 0 bytes")
    if size > most:
        raise ValueError(f"{short(v)}: at most {most} bytes")
    return size


MAX_MSS = 65535  # bytes: no TCP segment is larger (an IPv4 packet's length field)
MAX_MARKER_INTERVAL = 3600.0  # seconds: the paper's T is 400 ms (section 4); the engine counts microseconds
MIN_FLOW_IDLE = 120.0  # seconds: Linux's TCP_RTO_MAX (RFC 6298 (2.5): a cap of no less than 60 s); the engine's MIN_MEMORY_US


class _TokenPool(_Edge):
    """What the TCP-friendly marking paper's markers share (section 6.1): a pool of `pool` bytes
    of tokens for every `interval`; packets with a token leave `in_dscp`, the others `out_dscp`."""
    interval: float = Field(default=0.4, description="the marking interval T (section 4: 400 ms)")
    pool: int = Field(default=300 * 1024, description="tokens per interval, M (section 6.1: 300 KB, 60% of"
                                                      " the 500 KB bottleneck buffer)")
    in_dscp: int = Field(default=10, description="DSCP of IN packets (AF11: RIO's and FRIO's IN)")
    out_dscp: int = Field(default=12, description="DSCP of OUT packets (AF12)")

    _interval = field_validator("interval", mode="before")(
        lambda cls, v: units.parse_micros(v, what="the interval", most=MAX_MARKER_INTERVAL))
    _pool = field_validator("pool", mode="before")(lambda cls, v: _positive_size(v))
    _dscps = field_validator("in_dscp", "out_dscp", mode="before")(lambda cls, v: parse_dscp(v))

    @model_validator(mode="after")
    def _distinct(self):
        if self.in_dscp == self.out_dscp:
            raise ValueError(f"out_dscp: must differ from in_dscp (both {self.in_dscp})")
        return self

    def _pool_config(self) -> dict[str, Any]:
        return {"kind": self.kind, "interval_us": int(round(self.interval * 1e6)), "pool_bytes": self.pool,
                "in_dscp": self.in_dscp, "out_dscp": self.out_dscp}


class Tcpf(_TokenPool):
    """The TCP-friendly marker (Algorithms 1 and 2): tiny flows first, max-min shares for the
    rest, IN packets spaced through each flow's window, retransmissions IN. TCPF(O) is
    `protect_retransmissions: false`. It must see the ACKs of the flows it marks: place it on the
    data direction of a router link (docs/tcpf-markers.md)."""
    kind: Literal["tcpf"] = "tcpf"
    tiny_window: int = Field(default=4, ge=1, le=1000, description="K: a flow whose window estimate is below"
                                                                   " K * mss is tiny (Algorithm 1: 4)")
    mss: int = Field(default=1460, description="the MSS of K * MSS (Linux 2.2 on Ethernet: 1460 B)")
    protect_retransmissions: bool = Field(default=True, description="Algorithm 2 (b); false: TCPF(O)")
    retransmissions_use_tokens: bool = Field(default=True, description="a protected retransmission is charged"
                                             " to its flow's tokens when they cover it (it is IN in any case)")
    w_gain: float = Field(default=0.125, gt=0, le=1, description="EWMA gain of the window estimate W(i), per"
                                                                 " data packet")
    e_gain: float = Field(default=0.5, gt=0, le=1, description="EWMA gain of the rate estimate E(i), per"
                                                               " interval")
    flow_idle: float = Field(default=MIN_FLOW_IDLE, description="a flow unseen this long is forgotten: at least"
                             " TCP's maximum RTO (120 s), so a flow backing off is remembered")

    _mss = field_validator("mss", mode="before")(lambda cls, v: _positive_size(v, MAX_MSS))
    _idle = field_validator("flow_idle", mode="before")(
        lambda cls, v: units.parse_micros(v, what="flow_idle", most=2 * MAX_MARKER_INTERVAL))

    @model_validator(mode="after")
    def _idle_covers_an_interval(self):
        if self.flow_idle < MIN_FLOW_IDLE:
            raise ValueError(f"flow_idle: {self.flow_idle:g} s is shorter than TCP's maximum RTO ({MIN_FLOW_IDLE:g} s):"
                             " a flow backing off that long would be forgotten and its retransmission taken for a new"
                             " flow's (docs/tcpf-markers.md); give at least 120s")
        if self.flow_idle < self.interval:
            raise ValueError(f"flow_idle: {self.flow_idle:g} s is shorter than the interval ({self.interval:g} s):"
                             " every flow would be forgotten before its allocation")
        return self

    def engine_config(self, subnets):
        return {**self._pool_config(), "tiny_window": self.tiny_window, "mss_bytes": self.mss,
                "protect_retransmissions": self.protect_retransmissions,
                "retransmissions_use_tokens": self.retransmissions_use_tokens, "w_gain": self.w_gain,
                "e_gain": self.e_gain, "flow_idle_us": int(round(self.flow_idle * 1e6))}


class TokenMarker(_TokenPool):
    """The token-bucket marker TB (section 6.1): one pool for every packet of the direction,
    refilled to `pool` every `interval`, IN first come first served while it lasts. No TCP
    awareness."""
    kind: Literal["token_marker"] = "token_marker"

    def engine_config(self, subnets):
        return self._pool_config()


POOL_MARKERS = ("tcpf", "token_marker")  # one pool for the flows of a direction (spec/graph.py places them)

EdgeSpec = Annotated[Union[Mark, Police, Shape, Tcpf, TokenMarker], Field(discriminator="kind")]
