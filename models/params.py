"""Inputs of the latency models, checked once for all of them."""

from __future__ import annotations

import math
from dataclasses import dataclass


class ModelInputError(ValueError):
    pass


@dataclass(frozen=True)
class Path:
    """A transfer of `size` bytes over a path (defaults: the hysteresis paper's section 4)."""

    size: int                 # bytes to transfer
    p: float                  # packet loss probability (low priority, or all packets)
    mss: int = 1433
    rtt: float = 0.2          # seconds
    wmax: int = 24            # receive window, packets
    t0: float = 1.0           # first timeout, seconds (minimum RTO 1 s)
    delack: float = 0.1       # expected delayed-ACK cost when a cycle starts from cwnd 1 (200 ms timer / 2)
    p_high: float | None = None  # p' for high-priority packets (CATNIP error model)

    def __post_init__(self) -> None:
        checks = [
            ("size", self.size, isinstance(self.size, int) and self.size > 0, "a whole number of bytes above 0"),
            ("p", self.p, 0 <= self.p < 1, "a probability in [0, 1)"),
            ("mss", self.mss, isinstance(self.mss, int) and self.mss > 0, "bytes above 0"),
            ("rtt", self.rtt, self.rtt > 0 and math.isfinite(self.rtt), "seconds above 0"),
            ("wmax", self.wmax, isinstance(self.wmax, int) and self.wmax >= 1, "packets, at least 1"),
            ("t0", self.t0, self.t0 > 0, "seconds above 0"),
            ("delack", self.delack, self.delack >= 0, "seconds, 0 or more"),
        ]
        if self.p_high is not None:
            checks.append(("p_high", self.p_high, 0 <= self.p_high < 1, "a probability in [0, 1)"))
        for name, value, ok, allowed in checks:
            if not ok:
                raise ModelInputError(f"{name} = {value!r}: must be {allowed}")

    @property
    def packets(self) -> int:
        """N: data packets of the transfer."""
        return math.ceil(self.size / self.mss)
