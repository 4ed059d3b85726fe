"""CATNIP's web sessions (section IV-B, Fig. 4) as an application: one real Apache per server
host (testbed/apache.py) and one session client per client host (workloads/client.py), each
client served by its server's block of clients (section IV-A: 10 clients per server).

Records: objects and pages (the tables CATNIP's reports read) and a `page_time` sample per page.
"""

from __future__ import annotations

import random
import subprocess
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from spec import units
from workloads.apps.base import Application, AppResult, AppSpec, read_jsonl, register


class ThinkTimeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
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


class WebSpec(AppSpec):
    """Ten-page web sessions of Fig. 4, replayed by one client per client host (section IV-B)."""

    kind: Literal["web"] = "web"
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
    port: int = Field(default=80, ge=1, le=65535)

    @field_validator("http_version", mode="before")
    @classmethod
    def _version(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) else v

    @field_validator("start_stagger", "object_timeout", mode="before")
    @classmethod
    def _durations(cls, v: Any) -> float:
        return units.parse_duration(v)

    @model_validator(mode="after")
    def _persistent_needs_http11(self) -> "WebSpec":
        if self.persistent != "session" and self.http_version != "1.1":
            raise ValueError(f"persistent: {self.persistent!r} needs http_version '1.1' (HTTP/1.0 opens a"
                             " connection per object)")
        if not self.servers:
            raise ValueError("servers: the web application needs a server group")
        return self

    @field_validator("pages")
    @classmethod
    def _pages(cls, v: list[int]) -> list[int]:
        bad = [p for p in v if not 1 <= p <= 10]
        if bad or not v:
            raise ValueError(f"pages {bad or v} not allowed: pages are numbered 1 to 10 (Fig. 4)")
        return v


@register
class Web(Application):
    kind = "web"
    Spec = WebSpec
    progress_unit = "pages"

    def __init__(self, spec, ctx, clients, servers):
        super().__init__(spec, ctx, clients, servers)
        self.apaches: list = []
        self.outputs: dict[str, tuple] = {}  # client name -> (Host, server Host, output file)

    def start_servers(self) -> None:
        from testbed import apache
        sp: WebSpec = self.spec
        for host in self.servers:
            srv = apache.ApacheServer(workdir=self.ctx.workdir / host.name, docroot=self.ctx.docroot,
                                      listen_ip=host.ip, port=sp.port, http_version=sp.http_version,
                                      catnip_module=self.ctx.catnip_module)
            srv.prepare()
            console = open(srv.console_log, "w")
            # With SPM the server runs in the marker's cgroup, where its setsockopt reaches BPF.
            srv.proc = host.node.popen(srv.argv(), stdout=console, stderr=subprocess.STDOUT,
                                       preexec_fn=self.ctx.server_preexec)
            console.close()
            self.apaches.append((host, srv))

    def wait_ready(self, timeout: float) -> None:
        for host, srv in self.apaches:
            srv.wait_ready(host.node, timeout=timeout)

    def start_clients(self) -> None:
        sp: WebSpec = self.spec
        rng = random.Random(self.ctx.seed)
        for client, server in self.pairs():
            cfg = {
                "client": client.name, "server": server.ip, "port": sp.port, "server_name": server.name,
                "pages": sp.pages, "rounds": sp.rounds, "seed": rng.randrange(2**31),
                "think_time": sp.think_time.model_dump(), "parallel": sp.parallel,
                "http_version": sp.http_version, "persistent": sp.persistent, "object_timeout": sp.object_timeout,
                "session_timeout": self.ctx.time_limit,
                "start_delay": max(0.0, self.ctx.start_at - time.monotonic()) + rng.uniform(0, sp.start_stagger),
            }
            out = self.ctx.workdir / f"client-{client.name}.jsonl"
            path = self.write_config(f"client-{client.name}", cfg)
            self.spawn(client, "client", [self.ctx.python, "-m", "workloads.client", path, out],
                       f"client-{client.name}", out=out)
            self.outputs[client.name] = (client, server, out)

    def expected(self) -> int:
        return len(self.clients) * len(self.spec.pages) * self.spec.rounds

    def progress(self) -> tuple[int, int]:
        done = 0
        for _, _, out in self.outputs.values():
            try:
                with open(out, "rb") as fh:
                    done += fh.read().count(b'"kind": "page"')
            except FileNotFoundError:
                pass
        return done, self.expected()

    def check(self) -> None:
        super().check()
        from workloads.apps.base import AppError
        for host, srv in self.apaches:
            if srv.proc is not None and srv.proc.poll() is not None:
                raise AppError(f"web: Apache on {host.name} exited ({srv.proc.returncode}) while the workload ran;"
                               f" log {srv.error_log}")
            restarts = srv.restarts()
            if restarts:
                raise AppError(f"web: Apache on {host.name} restarted while the workload ran (signalled from"
                               f" outside): {restarts[0]}; log {srv.error_log}")

    def collect(self) -> AppResult:
        objects, pages, samples = [], [], []
        for client, server, out in self.outputs.values():
            for rec in read_jsonl(out):
                rec.setdefault("client", client.name)
                rec.setdefault("server", server.name)
                if rec.get("kind") == "object":
                    objects.append(rec)
                elif rec.get("kind") == "page":
                    pages.append(rec)
                    samples.append({"app": self.spec.instance, "metric": "page_time", "host": client.name,
                                    "peer": server.name, "flow": f"page{rec.get('page')}/r{rec.get('round')}",
                                    "tag": client.tag, "t": rec.get("start"), "value": rec.get("duration"),
                                    "unit": "s", "error": rec.get("error")})
        per_client = {}
        for p in pages:
            per_client[p["client"]] = per_client.get(p["client"], 0) + 1
        want = len(self.spec.pages) * self.spec.rounds
        missing = [f"web: {c.name} recorded {per_client.get(c.name, 0)} of {want} pages"
                   for c in self.clients if per_client.get(c.name, 0) < want]
        return AppResult(samples=samples, missing=missing, records={"objects": objects, "pages": pages})

    def stop(self) -> None:
        super().stop()
        for _, srv in self.apaches:
            srv.stop()



