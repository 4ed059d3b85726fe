"""Scenario files for transfer measurements (`kind: transfers`, in scenarios/transfers/): single TCP
transfers over a lossy path, to validate the latency models (hysteresis paper, section 4, Table 1).
A file, its overrides (`--set key=value`) and its seed fully determine a measurement.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from catnip.spec import units
from catnip.spec.scenario import (ScenarioError, _format_errors, _set_path, _Strict, parse_override, read_mapping,
                                  refuse_booleans)

# TCP settings of a measurement (controller/transfers.py applies them; docs/models.md explains them).
PROFILES = ("linux", "reno2004")


class TransferPath(_Strict):
    """The emulated path (hysteresis paper, section 4: MSS 1433 B, 200 ms RTT, W_max 24, minimum RTO 1 s)."""

    rtt: float = Field(0.2, description="round-trip propagation delay, split evenly over both directions")
    mss: int = Field(1433, ge=536, le=8960, description="data bytes per segment")
    wmax: int = Field(24, ge=1, le=1000, description="the receiver's window, in segments")
    min_rto: float = Field(1.0, description="minimum retransmission timeout (route option rto_min)")
    rate: int = Field(0, ge=0, description="bit/s of the lossy link; 0 = no serialization (the model's fast link)")

    @field_validator("rtt", "min_rto", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float:
        return units.parse_duration(v)

    @field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, v: Any, info: Any) -> int:
        return 0 if v in (0, "0") else units.parse_rate(v, bare=not units.from_input(info))

    @model_validator(mode="after")
    def _positive(self) -> "TransferPath":
        if self.rtt <= 0:
            raise ValueError(f"rtt: {self.rtt} s: must be above 0")
        if not 0.001 <= self.min_rto <= 60:
            raise ValueError(f"min_rto: {self.min_rto} s: must be between 1ms and 60s")
        return self


class LossPoint(_Strict):
    """Bernoulli loss p, or with p_high the CATNIP error model (p for unmarked, p' for AF11 packets)."""

    p: float = Field(ge=0, lt=1)
    p_high: float | None = Field(None, ge=0, lt=1)

    def label(self) -> str:
        return f"p={self.p:g}" + (f", p'={self.p_high:g}" if self.p_high is not None else "")

    def policy(self) -> dict[str, Any]:
        """The queue engine's loss policy for the data direction."""
        if self.p_high is None:
            return {"kind": "bernoulli", "loss_p": self.p}
        return {"kind": "catnip_loss", "loss_p": self.p, "loss_p_high": self.p_high}


class TransferScenario(_Strict):
    kind: Literal["transfers"]
    name: str
    description: str = ""
    paper: str = ""
    seed: int = Field(1, ge=0, le=2**31 - 1)
    sizes_kb: list[int] = Field(min_length=1, description="transfer sizes in KB (1 KB = 1024 bytes, Table 1)")
    loss: list[LossPoint] = Field(min_length=1)
    profiles: list[Literal["linux", "reno2004"]] = Field(default=["reno2004"], min_length=1)
    trials: int = Field(200, ge=1, le=100_000, description="transfers per size at each loss point")
    concurrency: int = Field(50, ge=1, le=500, description="transfers in flight at once")
    marking: Literal["partial", "full"] = Field(
        "partial", description="SPM rules for p_high points: partial = first 3 and last 3 segments (section 5)")
    transfer_timeout: float = Field(600.0, description="seconds before a transfer counts as failed")
    path: TransferPath = TransferPath()

    @field_validator("sizes_kb")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        bad = [s for s in v if s <= 0 or s > 65536]
        if bad:
            raise ValueError(f"{bad}: sizes must be 1-65536 KB")
        if len(set(v)) != len(v):
            raise ValueError("sizes repeat")
        return v

    @field_validator("transfer_timeout", mode="before")
    @classmethod
    def _timeout(cls, v: Any) -> float:
        return units.parse_duration(v)

    def points(self) -> list[tuple[str, LossPoint]]:
        """(profile, loss) in the order they run: one engine and one capture each."""
        return [(profile, loss) for profile in self.profiles for loss in self.loss]


def load(path: str | Path, overrides: list[str] = (), seed: int | None = None) -> TransferScenario:
    path = Path(path)
    raw = copy.deepcopy(read_mapping(path))
    raw.setdefault("name", path.stem)
    for text in overrides:
        key, value = parse_override(text)
        _set_path(raw, key, value)
    if seed is not None:
        raw["seed"] = seed
    try:
        sc = TransferScenario.model_validate(raw, context={units.INPUT: True})
    except ValidationError as exc:
        raise ScenarioError(_format_errors(exc)) from None
    refuse_booleans(sc, raw)
    return sc
