"""Helpers shared by the applications that run a server program and a client program of their
own (bulk, telnet, burst, ftp): size and duration fields, per-host seeds, sample rows, waiting for
listening ports, checking a plan fits the time limit, and `ClientServerApp`, the base of those
plug-ins. The plug-in interface itself is workloads/apps/base.py.
"""

from __future__ import annotations

import hashlib
import select
import time
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator

from catnip.spec import units
from catnip.spec.apps import AppSpec
from catnip.spec.units import parse_duration
from catnip.workloads.apps.base import (
    AppContext,
    AppError,
    Application,
    AppResult,
    Host,
    Proc,
    read_jsonl,
    tail,
    wait_for_line,
)


def parse_size(value: object) -> int:
    """Bytes: a whole number of bytes (what a validated spec dumps), or a size with its unit,
    read by spec.units.parse_size ('40KB', '1.5MB'; 1 KB = 1024 bytes)."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"{value!r} is not a size; write e.g. '40KB' or a whole number of bytes")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != int(value) or value < 1:
            raise ValueError(f"{value!r}: a size in bytes is a whole number of at least 1 (or '40KB')")
        return int(value)
    return units.parse_size(value)


Duration = Annotated[float, BeforeValidator(parse_duration)]   # seconds; '200ms', '2s', 0.5
Size = Annotated[int, BeforeValidator(parse_size)]              # bytes; '40KB', 1500


def host_seed(seed: int, host: Host, role: str) -> int:
    """A host's own seed, derived from the application's: the same for the same run and host."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{host.name}/{role}".encode()).digest()[:8], "big")


def sample(app: str, metric: str, host: Host, peer: Host | None, flow: str | None, t: float | None,
           value: float | None, unit: str, error: str | None = None, tag: str | None = None) -> dict:
    """One row of the samples table; tag defaults to the measuring host's tag."""
    return {"app": app, "metric": metric, "host": host.name, "peer": peer.name if peer else None, "flow": flow,
            "tag": host.tag if tag is None else tag, "t": t, "value": value, "unit": unit, "error": error}


def need_servers(spec: AppSpec) -> AppSpec:
    if not spec.servers:
        raise ValueError(f"servers: the {spec.kind} application needs a server host group")
    return spec


def wait_ports(app: Application, wanted: list[tuple[Host, int, Proc]], deadline: float) -> None:
    """Wait until every (host, port) listens: one `ss` per host per round, not one per port."""
    left = list(wanted)
    while left:
        for host, port, proc in left:
            if proc.popen.poll() is not None:
                raise AppError(f"{app.spec.instance}: server on {host.name} exited ({proc.popen.returncode})"
                               f" before listening on {port}; log {proc.log}: {tail(proc.log)}")
        listening: dict[str, set[int]] = {}
        for host in {h.name: h for h, _, _ in left}.values():
            ports = set()
            for line in host.node.cmd("ss -Hltn").splitlines():
                fields = line.split()
                if len(fields) >= 4 and fields[3].rpartition(":")[2].isdigit():
                    ports.add(int(fields[3].rpartition(":")[2]))
            listening[host.name] = ports
        left = [(h, p, proc) for h, p, proc in left if p not in listening[h.name]]
        if not left:
            return
        if time.monotonic() > deadline:
            raise AppError(f"{app.spec.instance}: nothing listens on " +
                           ", ".join(f"{h.name}:{p}" for h, p, _ in left[:5]) + " in time")
        select.select([], [], [], 0.05)


def check_fits(spec: AppSpec, ctx: AppContext, field: str, seconds: float) -> None:
    """The planned work must end within the point's time limit."""
    if seconds > ctx.time_limit:
        raise AppError(f"{spec.instance}: {field}: the planned {seconds:g} s do not fit in the point's time limit"
                       f" of {ctx.time_limit:g} s")


class ClientServerApp(Application):
    """One server per server host, `python -m workloads.<module> server IP PORT ...`, ready once it
    prints READY; one client per client host, `python -m workloads.<module> client CONFIG OUT`,
    writing one JSON line per unit of work (`unit` records) and an `end` line when it is done."""

    module: ClassVar[str]       # workloads.<module>
    unit: ClassVar[str]         # the kind of the records that are units of work
    unit_name: ClassVar[str]    # their name in messages, plural

    def __init__(self, spec, ctx: AppContext, clients: list[Host], servers: list[Host]):
        super().__init__(spec, ctx, clients, servers)
        self.outputs: list[tuple[Host, Host, Path, Proc]] = []
        planned = spec.planned_seconds()
        if planned is not None:
            check_fits(spec, ctx, planned[0], planned[1])

    # hooks
    def server_args(self) -> list[Any]:
        return []

    def client_config(self, client: Host, server: Host) -> dict[str, Any]:
        raise NotImplementedError

    def expected(self, client: Host) -> int | None:
        """Units of work a client must record (None when it runs for a duration)."""
        return None

    def samples_of(self, rec: dict, client: Host, server: Host) -> list[dict]:
        raise NotImplementedError

    # the steps
    def start_servers(self) -> None:
        for host in {s.name: s for _, s in self.pairs()}.values():
            self.spawn(host, "server", [self.ctx.python, "-m", f"catnip.workloads.{self.module}", "server", host.ip,
                                        self.spec.port, *self.server_args()],
                       f"{self.kind}-server-{host.name}", stdout_pipe=True)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for p in self.procs:
            if p.role == "server":
                wait_for_line(p, "READY", deadline)

    def launch_clients(self) -> None:
        for client, server in self.pairs():
            name = f"{self.kind}-{client.name}"
            out = self.ctx.workdir / f"{name}.jsonl"
            proc = self.spawn(client, "client", [self.ctx.python, "-m", f"catnip.workloads.{self.module}", "client",
                                                 self.ctx.workdir / f"{name}.json", out, "--gate"],
                              name, out=out, gated=True)
            self.outputs.append((client, server, out, proc))

    def start_clients(self) -> None:
        for client, server, _, proc in self.outputs:
            cfg = {"client": client.name, "server": server.ip, "port": self.spec.port,
                   "seed": host_seed(self.ctx.seed, client, self.kind), "start_at": self.ctx.start_at,
                   "deadline": self.ctx.start_at + self.ctx.time_limit, **self.client_config(client, server)}
            self.release(proc, self.write_config(f"{self.kind}-{client.name}", cfg))

    def progress(self) -> tuple[int, int]:
        done = 0
        for _, _, out, _ in self.outputs:
            try:
                with open(out, "rb") as fh:
                    done += fh.read().count(f'"kind": "{self.unit}"'.encode())
            except FileNotFoundError:
                pass
        wanted = [self.expected(c) for c, _ in self.pairs()]
        return done, 0 if None in wanted else sum(wanted)

    def collect(self) -> AppResult:
        res = AppResult()
        app = self.spec.instance
        for client, server, out, proc in self.outputs:
            recs = read_jsonl(out)
            units = [r for r in recs if r.get("kind") == self.unit]
            for rec in units:
                res.samples.extend(self.samples_of(rec, client, server))
            # A unit that failed on the network (a timeout under congestion) is a measurement: it is
            # recorded as a sample with its error, not counted as missing data.
            end = next((r for r in recs if r.get("kind") == "end"), None)
            ready = next((r for r in recs if r.get("kind") == "ready"), None)
            if ready is not None:
                res.ready_after_start[client.name] = ready["mono"] - self.ctx.start_at
            # Its first unit (each stream's): when it woke for it, against the common start the
            # runner holds plus the unit's planned offset (hostprog.Output.wait_for_first).
            woke = [r["mono"] - (self.ctx.start_at + r["offset"]) for r in recs if r.get("kind") == "woke"]
            if woke:
                res.first_unit_after_due[client.name] = max(woke)
            wanted = self.expected(client)
            if end is None:
                res.missing.append(f"{app}: the client on {client.name} ended early after {len(units)}"
                                   f" {self.unit_name} (exit {proc.popen.poll()}); log {proc.log}: {tail(proc.log)}")
            elif end.get("reason") != "done":
                res.missing.append(f"{app}: the client on {client.name} stopped ({end.get('reason')}) after"
                                   f" {len(units)} {self.unit_name}")
            elif wanted is not None and len(units) < wanted:
                res.missing.append(f"{app}: {client.name} recorded {len(units)} of {wanted} {self.unit_name}")
        return res
