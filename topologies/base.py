"""What every library topology shares: settings of the whole network, and its expansion."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from catnip.spec.graph import Graph


class TopologyBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str
    mss: int | None = Field(default=None, ge=88, le=8960,
                            description="TCP MSS in bytes; interfaces get MTU = mss + 40. None: Linux default (MTU 1500)")
    access_switch: Literal["auto", "ovs", "linuxbridge"] = "auto"
    ovs_datapath: Literal["auto", "kernel", "user"] = "auto"

    def graph(self) -> Graph:
        raise NotImplementedError

    @model_validator(mode="after")
    def _expands(self):
        """The parameters must give a valid graph; its errors are reported under `topology`."""
        try:
            self.graph()
        except ValidationError as exc:
            raise ValueError("; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'graph'}: "
                                       f"{e['msg'].removeprefix('Value error, ')}" for e in exc.errors())) from None
        return self
