"""`burst`: newCWV's bursts after idle on one persistent TCP connection per client (reading notes
1.1-1.2; the paper's Figs 7-8 and Tables 2-3 are gain grids over burst size x idle period).

One burst server per server host and one client per client host (workloads/burst.py):

    python -m workloads.burst server SERVER_IP PORT [--nagle]
    python -m workloads.burst client WORKDIR/burst-CLIENT.json WORKDIR/burst-CLIENT.jsonl

The cells are the grid `bursts` x `idles` or an explicit list `cells` of [size, idle] pairs. The
client's plan holds every cell `repeat` times, in rounds: each round has every cell once, in the
given order (`order: fixed`; the grid in row order, sizes outer) or shuffled per round by the
client's seed (`order: shuffled`). For each entry the client stays idle I seconds, then times
the burst of B bytes from its request write to the last byte (the idle PRECEDES its burst: the
idle the gain of the cell (B, I) depends on; the idle is counted from the previous burst's last
byte or, for the first, from the connection). An optional `warmup` burst is fetched first so
that no measured burst runs on a connection that never carried data.

Samples (host = the client, peer = its server, flow = "CLIENT/N", N the connection number:
it changes only when a failed burst closed the connection):

* `burst_time` (s), t = the request write, tag = "SIZEB/IDLEs", e.g. "40960B/2s" (size in bytes,
  idle in seconds formatted with %g), prefixed "HOSTTAG/" when the client host has a tag, e.g.
  "rtt200ms/40960B/2s": `tag.rsplit("/", 2)` gives (host tag, size, idle). A cell's bursts are
  paired across runs by their order in time (reading notes 1.1.c item 9).
* `warmup_time` (s) for the warm-up burst, tag = the client host's tag.
A failed burst is a sample with `error` (a measurement, not missing data).
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import Field, model_validator

from workloads.apps.base import AppResult, AppSpec, Host, read_jsonl, register
from workloads.apps.common import (
    ClientServerApp,
    Duration,
    Size,
    host_seed,
    need_servers,
    sample,
)

MAX_BURST = 1 << 30


class BurstSpec(AppSpec):
    kind: Literal["burst"] = "burst"
    bursts: list[Size] | None = Field(default=None, min_length=1, max_length=100,
                                      description="burst sizes of the grid, e.g. [5KB, 10KB, 20KB, 40KB, 80KB]")
    idles: list[Duration] | None = Field(default=None, min_length=1, max_length=100,
                                         description="idle periods of the grid, e.g. [1s, 2s, 4s]")
    cells: list[tuple[Size, Duration]] | None = Field(default=None, min_length=1, max_length=10_000,
                                                      description="explicit [size, idle] pairs instead of the grid")
    repeat: int = Field(default=1, ge=1, le=100_000, description="bursts per cell")
    order: Literal["fixed", "shuffled"] = Field(default="shuffled", description="order of the cells within"
                                                " each round: as given, or shuffled by the seed")
    warmup: Size | None = Field(default=None, description="bytes of a first burst outside the cells (its"
                              " sample is warmup_time)")
    timeout: Duration = Field(default=60.0, gt=0, description="a burst longer than this fails")
    nagle: bool = Field(default=False, description="keep Nagle's algorithm at the server (default TCP_NODELAY)")
    port: int = Field(default=8070, ge=1, le=65535, description="TCP port of the burst servers")

    @model_validator(mode="after")
    def _check(self) -> BurstSpec:
        need_servers(self)
        grid = self.bursts is not None or self.idles is not None
        if grid == (self.cells is not None):
            raise ValueError("bursts, idles, cells: give the grid (bursts and idles) or cells, not both")
        if grid and (self.bursts is None or self.idles is None):
            raise ValueError(f"{'idles' if self.idles is None else 'bursts'}: the grid needs both bursts and idles")
        for size, _ in self.cell_list():
            if size > MAX_BURST:
                raise ValueError(f"{'cells' if self.cells else 'bursts'}: {size} bytes is above the 1 GB limit")
        if self.warmup is not None and self.warmup > MAX_BURST:
            raise ValueError("warmup: above the 1 GB limit")
        return self

    def cell_list(self) -> list[tuple[int, float]]:
        if self.cells is not None:
            return [(int(b), float(i)) for b, i in self.cells]
        return [(b, i) for b in self.bursts or [] for i in self.idles or []]

    def planned_seconds(self):
        return "idles", self.repeat * sum(i for _, i in self.cell_list())


def plan(spec: BurstSpec, seed: int) -> list[tuple[int, float]]:
    """The (size, idle) sequence of one client: `repeat` rounds of every cell."""
    rng = random.Random(seed)
    out: list[tuple[int, float]] = []
    for _ in range(spec.repeat):
        cells = spec.cell_list()
        if spec.order == "shuffled":
            rng.shuffle(cells)
        out.extend(cells)
    return out


def cell_tag(host_tag: str, size: int, idle: float) -> str:
    cell = f"{size}B/{idle:g}s"
    return f"{host_tag}/{cell}" if host_tag else cell


@register
class Burst(ClientServerApp):
    kind = "burst"
    Spec = BurstSpec
    progress_unit = "bursts"
    module, unit, unit_name = "burst", "burst", "bursts"


    def server_args(self) -> list:
        return ["--nagle"] if self.spec.nagle else []

    def client_config(self, client: Host, server: Host) -> dict:
        return {"plan": [list(e) for e in plan(self.spec, host_seed(self.ctx.seed, client, "burst-order"))],
                "warmup": self.spec.warmup, "timeout": self.spec.timeout}

    def expected(self, client: Host) -> int:
        return self.spec.repeat * len(self.spec.cell_list())

    def samples_of(self, rec: dict, client: Host, server: Host) -> list[dict]:
        flow = f"{client.name}/{rec.get('conn')}"
        return [sample(self.spec.instance, "burst_time", client, server, flow, rec.get("t"), rec.get("time"), "s",
                       rec.get("error"), tag=cell_tag(client.tag, rec["size"], rec["idle"]))]

    def collect(self) -> AppResult:
        res = super().collect()
        for client, server, out, _ in self.outputs:
            for rec in read_jsonl(out):
                if rec.get("kind") == "warmup":
                    res.samples.append(sample(self.spec.instance, "warmup_time", client, server,
                                              f"{client.name}/{rec.get('conn')}", rec.get("t"), rec.get("time"),
                                              "s", rec.get("error")))
                    if rec.get("error"):
                        res.missing.append(f"{self.spec.instance}: the warm-up burst of {client.name} failed:"
                                           f" {rec['error']}")
        return res
