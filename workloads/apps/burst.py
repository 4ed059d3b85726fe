"""`burst`: newCWV's bursts after idle on one persistent TCP connection per client
(docs/reproduction-newcwv.md; the paper's Figs 7-8 and Tables 2-3 are gain grids over burst size x idle period).

One burst server per server host and one client per client host (workloads/burst.py):

    python -m catnip.workloads.burst server SERVER_IP PORT [--nagle] --stats WORKDIR/burst-server-SERVER.stats.jsonl
    python -m catnip.workloads.burst client WORKDIR/burst-CLIENT.json WORKDIR/burst-CLIENT.jsonl

The cells are the grid `bursts` x `idles` or an explicit list `cells` of [size, idle] pairs. The
client's plan holds every cell `repeat` times, in rounds: each round has every cell once, in the
given order (`order: fixed`; the grid in row order, sizes outer) or shuffled per round by the
client's seed (`order: shuffled`); or cell by cell (`order: blocked`): the cells in the given
order, each one's `repeat` bursts one after another, so a burst follows bursts of its own cell
(the way a cell is one experiment of its own, as the newCWV paper's grids appear to have been
measured; interleaved cells start a burst with the cwnd another cell left). For each entry the client stays idle I seconds, then times
the burst of B bytes from its request write to the last byte (the idle PRECEDES its burst: the
idle the gain of the cell (B, I) depends on; the idle is counted from the previous burst's last
byte or, for the first, from the connection). An optional `warmup` burst is fetched first so
that no measured burst runs on a connection that never carried data.

Samples (host = the client, peer = its server, flow = "CLIENT/N", N the connection number:
it changes only when a failed burst closed the connection):

* `burst_time` (s), t = the request write, tag = "SIZEB/IDLEs", e.g. "40960B/2s" (size in bytes,
  idle in seconds formatted with %g), prefixed "HOSTTAG/" when the client host has a tag, e.g.
  "rtt200ms/40960B/2s": `tag.rsplit("/", 2)` gives (host tag, size, idle). A cell's bursts are
  paired across runs by their order in time (docs/reproduction-newcwv.md, gap 9).
* `warmup_time` (s) for the warm-up burst, tag = the client host's tag.
A failed burst is a sample with `error` (a measurement, not missing data).

The sender's side of each burst, from the server's TCP_INFO (its `--stats` log; workloads/burst.py
documents the readings), joined to the client's burst by (client address, the burst's number,
which the request line carries):

* `burst_cwnd` (segments): cwnd at the burst's start, after the kernel's restart after idle;
* `burst_ssthresh` (segments): ssthresh then (no sample while it is still the kernel's initial
  infinity, i.e. before the connection's first loss);
* `burst_retrans` (segments): segments retransmitted from this burst's start to the next
  request on the connection (tcpi_total_retrans there minus here), the last burst of a
  connection up to the connection's close.

They are the server's measurements: host = the server, peer = the client. Everything else is the
burst's own so a burst's samples join: flow = the client's "CLIENT/N", tag = the cell, t = the
client's request write (the burst_time sample's t; the server's own instant is in its log).
A burst the server never saw (the request was lost with its connection) has none of them, and
that is not an error of the server; a connection still open when the results are collected (its
FIN still on the way after waiting CLOSE_WAIT_S) leaves its last burst without `burst_retrans`.
"""

from __future__ import annotations

import random
import select
import time
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from catnip.spec.apps import AppSpec

from catnip.workloads.apps.base import AppResult, Host, read_jsonl, register
from catnip.workloads.apps.common import (
    ClientServerApp,
    Duration,
    Size,
    host_seed,
    need_servers,
    sample,
)

MAX_BURST = 1 << 30
INFINITE_SSTHRESH = 0x7FFFFFFF  # TCP_INFINITE_SSTHRESH: the kernel's ssthresh before any loss
# Collecting waits this long at most for the servers to log each connection's close (the last
# burst's retransmissions): the client's FIN crosses the path once (a few hundred ms here).
CLOSE_WAIT_S = 5.0


class BurstSpec(AppSpec):
    kind: Literal["burst"] = "burst"
    bursts: list[Size] | None = Field(default=None, min_length=1, max_length=100,
                                      description="burst sizes of the grid, e.g. [5KB, 10KB, 20KB, 40KB, 80KB]")
    idles: list[Duration] | None = Field(default=None, min_length=1, max_length=100,
                                         description="idle periods of the grid, e.g. [1s, 2s, 4s]")
    cells: list[tuple[Size, Duration]] | None = Field(default=None, min_length=1, max_length=10_000,
                                                      description="explicit [size, idle] pairs instead of the grid")
    repeat: int = Field(default=1, ge=1, le=100_000, description="bursts per cell")
    order: Literal["fixed", "shuffled", "blocked"] = Field(
        default="shuffled", description="rounds of every cell, as given or shuffled by the seed; or"
        " 'blocked': each cell's repeats one after another")
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
    """The (size, idle) sequence of one client: `repeat` rounds of every cell, or (blocked) every
    cell `repeat` times in a row."""
    if spec.order == "blocked":
        return [cell for cell in spec.cell_list() for _ in range(spec.repeat)]
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


def open_connections(recs: list[dict]) -> set[str]:
    """Connections of a server's statistics log with requests but no close record yet."""
    return ({r["peer"] for r in recs if r.get("kind") == "request"}
            - {r["peer"] for r in recs if r.get("kind") == "close"})


def server_stats(recs: list[dict]) -> dict[tuple[str, int], dict]:
    """A server's statistics log (workloads/burst.py --stats) per burst, by (client address,
    burst number): {"cwnd", "ssthresh", "retrans"}. The retransmissions of a connection's
    request k are its total_retrans at request k + 1 minus at request k; the last request's
    are counted to the close record (None without one)."""
    by_conn: dict[str, list[dict]] = {}
    closed: dict[str, dict] = {}
    for r in recs:
        if r.get("kind") == "request":
            by_conn.setdefault(r["peer"], []).append(r)
        elif r.get("kind") == "close":
            closed[r["peer"]] = r
    out: dict[tuple[str, int], dict] = {}
    for peer, reqs in by_conn.items():
        reqs.sort(key=lambda r: r["n"])
        ends = [r.get("total_retrans") for r in reqs[1:]] + [closed.get(peer, {}).get("total_retrans")]
        for r, end in zip(reqs, ends):
            if r.get("id") is None:
                continue
            start = r.get("total_retrans")
            retrans = end - start if end is not None and start is not None else None
            out[(r["client"], r["id"])] = {"size": r.get("size"), "cwnd": r.get("cwnd"), "ssthresh": r.get("ssthresh"),
                                           "retrans": retrans}
    return out


@register
class Burst(ClientServerApp):
    kind = "burst"
    Spec = BurstSpec
    progress_unit = "bursts"
    module, unit, unit_name = "burst", "burst", "bursts"

    def __init__(self, spec, ctx, clients, servers):
        super().__init__(spec, ctx, clients, servers)
        self.server_side: dict[tuple[str, int], dict] = {}  # read_server_stats

    def server_args(self) -> list:
        return ["--nagle"] if self.spec.nagle else []

    def stats_path(self, server: Host) -> Path:
        return self.ctx.workdir / f"burst-server-{server.name}.stats.jsonl"

    def start_servers(self) -> None:
        # As ClientServerApp's, with each server's own statistics log.
        for host in {s.name: s for _, s in self.pairs()}.values():
            self.spawn(host, "server", [self.ctx.python, "-m", "catnip.workloads.burst", "server", host.ip, self.spec.port,
                                        *self.server_args(), "--stats", self.stats_path(host)],
                       f"burst-server-{host.name}", stdout_pipe=True)

    def client_config(self, client: Host, server: Host) -> dict:
        return {"plan": [list(e) for e in plan(self.spec, host_seed(self.ctx.seed, client, "burst-order"))],
                "warmup": self.spec.warmup, "timeout": self.spec.timeout}

    def expected(self, client: Host) -> int:
        return self.spec.repeat * len(self.spec.cell_list())

    def samples_of(self, rec: dict, client: Host, server: Host) -> list[dict]:
        flow = f"{client.name}/{rec.get('conn')}"
        tag = cell_tag(client.tag, rec["size"], rec["idle"])
        out = [sample(self.spec.instance, "burst_time", client, server, flow, rec.get("t"), rec.get("time"), "s",
                      rec.get("error"), tag=tag)]
        seen = self.server_side.get((client.ip, rec.get("seq")))
        if seen is not None and seen["size"] == rec["size"]:
            for metric, value in (("burst_cwnd", seen["cwnd"]), ("burst_ssthresh", seen["ssthresh"]),
                                  ("burst_retrans", seen["retrans"])):
                if value is not None and not (metric == "burst_ssthresh" and value >= INFINITE_SSTHRESH):
                    out.append(sample(self.spec.instance, metric, server, client, flow, rec.get("t"), value,
                                      "segments", tag=tag))
        return out

    def read_server_stats(self) -> None:
        """Every server's statistics log, once each server logged the close of every connection
        it served (or it exited, or CLOSE_WAIT_S passed): `server_side` by (client address,
        burst number)."""
        self.server_side = {}
        deadline = time.monotonic() + CLOSE_WAIT_S
        for proc in (p for p in self.procs if p.role == "server"):
            path = self.stats_path(proc.host)
            while True:
                recs = read_jsonl(path)
                if (not open_connections(recs) or proc.popen.poll() is not None
                        or time.monotonic() > deadline):
                    break
                select.select([], [], [], 0.05)
            self.server_side.update(server_stats(recs))

    def collect(self) -> AppResult:
        self.read_server_stats()
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
