"""Web sessions as an application: one real Apache per server host (workloads/apache.py) and one
session client per client host (workloads/client.py), each client served by its server's block
of clients (section IV-A: 10 clients per server).

Page sets (`page_set`): CATNIP's ten pages (section IV-B, Fig. 4; workloads/pages.py), Nouredine
and Tobagi's fixed probe page or their pool of random pages (section 2.2.1; workloads/pages.py,
workloads/pagepool.py). A session makes `rounds` passes over its pages, or keeps making them for
`duration` seconds after the common start. The application writes its page set's files into the
document root before Apache starts.

Records: objects and pages (the tables CATNIP's reports read; a page record also says its
`page_set`) and a `page_time` sample per page.
"""

from __future__ import annotations

from collections import Counter

import random
import subprocess
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from catnip.spec import units
from catnip.spec.apps import AppSpec
from catnip.workloads.apps.base import Application, AppError, AppResult, Proc, read_jsonl, register
from catnip.workloads.apps.common import Duration
from catnip.workloads.pagepool import PagePoolModel, pool_pages
from catnip.workloads.pages import Page, catnip_pages, probe_pages

CATNIP_PAGES = list(range(1, 11))
MAH1997_SHORTEST_MAX = 2.0  # s: 8% of Mah's think times are at most 2 s, so a capped draw needs few redraws


class ThinkTimeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    model: Literal["zero", "fixed", "exponential", "uniform", "empirical", "mah1997"] = "zero"
    mean: float | None = Field(default=None, description="seconds: the fixed value, or the exponential or"
                               " uniform mean (uniform on [0, 2 mean])")
    cdf: str | None = Field(default=None, description="empirical: a CDF file in ns-2's format (docs/workload.md)")
    max: float | None = Field(default=None, description="mah1997: draws longer than this are drawn again")

    @field_validator("mean", "max", mode="before")
    @classmethod
    def _mean(cls, v: Any) -> float | None:
        return None if v is None else units.parse_duration(v)

    @model_validator(mode="after")
    def _needs_mean(self) -> "ThinkTimeSpec":
        if self.model in ("fixed", "exponential", "uniform") and self.mean is None:
            raise ValueError(f"think time model '{self.model}' needs 'mean' (a duration such as '2s')")
        if self.model == "empirical":
            if not self.cdf:
                raise ValueError("think time model 'empirical' needs 'cdf': a CDF file in ns-2's format")
            from catnip.workloads.thinktime import ThinkTimeError, load_cdf
            try:
                load_cdf(self.cdf)
            except ThinkTimeError as exc:
                raise ValueError(str(exc)) from None
        if self.max is not None:
            if self.model != "mah1997":
                raise ValueError(f"think time 'max' is for model 'mah1997', not '{self.model}'")
            if self.max < MAH1997_SHORTEST_MAX:
                raise ValueError(f"think time max {self.max:g} s: at least {MAH1997_SHORTEST_MAX:g} s (8% of Mah's"
                                 " think times are that short; the shortest is 1.005 s)")
        return self


class WebSpec(AppSpec):
    """Web sessions: CATNIP's ten pages (section IV-B), or Nouredine and Tobagi's probe page or
    random pages (section 2.2.1), replayed by one client per client host."""

    kind: Literal["web"] = "web"
    http_version: Literal["1.0", "1.1"] = "1.0"
    parallel: int = Field(default=1, ge=1, le=16,
                          description="concurrent connections per client-server pair (simulation: 4, WAN: 1)")
    page_set: Literal["catnip", "probe", "random"] = Field(
        default="catnip", description="'catnip': the ten pages of Fig. 4 (`pages`); 'probe': Nouredine and"
        " Tobagi's fixed page (1 KB HTML + 8 images of 10 KB); 'random': their pool of random pages (`random_pages`)")
    random_pages: PagePoolModel | None = Field(
        default=None, description="page_set 'random' only: the pool's model (workloads/pagepool.py; every"
        " default is our assumption)")
    rounds: int = Field(default=1, ge=1, le=100, description="passes over the page set per client")
    duration: Duration | None = Field(default=None, gt=0, description="seconds after the common start during"
                                      " which pages start, instead of rounds")
    pages: list[int] = Field(default_factory=lambda: list(CATNIP_PAGES))
    think_time: ThinkTimeSpec = ThinkTimeSpec()
    start_stagger: float = Field(default=1.0, description="clients start uniformly spread over this many seconds")
    object_timeout: float = 60.0
    # Section V-F describes its HTTP/1.1 model twice: one connection "throughout the duration of a
    # user session", and "each Web page ... using a single TCP connection". Both readings run.
    persistent: Literal["session", "page"] = Field(
        default="session", description="HTTP/1.1: one connection for the whole session, or a new one per page")
    # Nouredine and Tobagi section 2.2.1: "all object requests are considered to be received
    # together and therefore all objects are sent without inter-object delay".
    pipeline: bool = Field(default=False, description="HTTP/1.1: every request of a page (the HTML's and its"
                           " images') written at once, the responses read in order")
    port: int = Field(default=80, ge=1, le=65535)

    @field_validator("http_version", mode="before")
    @classmethod
    def _version(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) else v

    @field_validator("start_stagger", "object_timeout", mode="before")
    @classmethod
    def _durations(cls, v: Any) -> float:
        return units.parse_duration(v)

    @model_validator(mode="before")
    @classmethod
    def _pool_model_recorded(cls, data: Any) -> Any:
        # The random pool's parameters go into the spec (and so into the results) even when
        # they are all defaults: a later change of a default cannot relabel an old run.
        if isinstance(data, dict) and data.get("page_set") == "random" and data.get("random_pages") is None:
            return {**data, "random_pages": {}}
        return data

    @model_validator(mode="after")
    def _check(self) -> "WebSpec":
        if self.persistent != "session" and self.http_version != "1.1":
            raise ValueError(f"persistent: {self.persistent!r} needs http_version '1.1' (HTTP/1.0 opens a"
                             " connection per object)")
        if self.pipeline and self.http_version != "1.1":
            raise ValueError("pipeline: true needs http_version '1.1' (HTTP/1.0 opens a connection per object)")
        if not self.servers:
            raise ValueError("servers: the web application needs a server group")
        # Compared with the defaults, not with the fields given: a dumped spec holds the defaults.
        if self.duration is not None and self.rounds != 1:
            raise ValueError(f"rounds: {self.rounds} passes and duration {self.duration:g} s exclude each other;"
                             " give one")
        if self.page_set != "catnip" and self.pages != CATNIP_PAGES:
            raise ValueError(f"pages: a choice of CATNIP's pages needs page_set 'catnip' (page_set"
                             f" {self.page_set!r} serves {'its one page' if self.page_set == 'probe' else 'its pool'})")
        if self.random_pages is not None and self.page_set != "random":
            raise ValueError(f"random_pages: the pool's model needs page_set 'random' (not {self.page_set!r})")
        return self

    @field_validator("pages")
    @classmethod
    def _pages(cls, v: list[int]) -> list[int]:
        bad = [p for p in v if not 1 <= p <= 10]
        if bad or not v:
            raise ValueError(f"pages {bad or v} not allowed: pages are numbered 1 to 10 (Fig. 4)")
        return v

    def planned_seconds(self):
        return ("duration", self.duration) if self.duration is not None else None

    def served_pages(self) -> tuple[Page, ...]:
        """Every page whose files the servers must have."""
        if self.page_set == "probe":
            return probe_pages()
        if self.page_set == "random":
            return pool_pages(self.random_pages)
        return catnip_pages()

    def session_pages(self) -> list[Page]:
        """The pages one pass of a session loads (in a seeded order of its own)."""
        if self.page_set == "catnip":
            by_number = {p.number: p for p in catnip_pages()}
            return [by_number[n] for n in self.pages]
        return list(self.served_pages())


@register
class Web(Application):
    kind = "web"
    Spec = WebSpec
    progress_unit = "pages"

    def __init__(self, spec, ctx, clients, servers):
        super().__init__(spec, ctx, clients, servers)
        self.apaches: list = []
        self.outputs: dict[str, tuple] = {}  # client name -> (Host, server Host, output file)
        self.due: dict[str, float] = {}  # client name -> its first page's instant
        self.launched: dict[str, Proc] = {}  # client name -> its gated program, waiting for GO

    def start_servers(self) -> None:
        from catnip.workloads import apache
        from catnip.workloads.docroot import write_docroot
        sp: WebSpec = self.spec
        if self.ctx.docroot is None:
            raise AppError(f"{sp.instance}: no document root to serve (AppContext.docroot)")
        # The run writes CATNIP's pages once (controller/runner.py); the other page sets are
        # written here, by every point that serves them (idempotent, safe side by side).
        write_docroot(sp.served_pages(), self.ctx.docroot)
        shipped: set[str] = set()
        served = Counter(server.name for _, server in self.pairs())
        for host in self.servers:
            machine = getattr(host.node, "machine", None)  # a host on another machine (testbed/remote.py)
            if machine is not None and machine.name not in shipped:  # the same documents, at the same path
                machine.copy_tree(self.ctx.docroot, self.ctx.docroot)
                shipped.add(machine.name)
            srv = apache.ApacheServer(workdir=self.ctx.workdir / host.name, docroot=self.ctx.docroot,
                                      listen_ip=host.ip, port=sp.port, http_version=sp.http_version,
                                      max_workers=apache.workers_for(served[host.name], sp.parallel),
                                      catnip_module=self.ctx.catnip_module, machine=machine)
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

    def launch_clients(self) -> None:
        for client, server in self.pairs():
            out = self.ctx.workdir / f"client-{client.name}.jsonl"
            self.launched[client.name] = self.spawn(
                client, "client", [self.ctx.python, "-m", "catnip.workloads.client",
                                   self.ctx.workdir / f"client-{client.name}.json", out, "--gate"],
                f"client-{client.name}", out=out, gated=True)
            self.outputs[client.name] = (client, server, out)

    def start_clients(self) -> None:
        sp: WebSpec = self.spec
        rng = random.Random(self.ctx.seed)
        pages = sp.session_pages()
        catalog = {str(p.number): p.objects for p in pages}
        for client, server in self.pairs():
            cfg = {
                "client": client.name, "server": server.ip, "port": sp.port, "server_name": server.name,
                "pages": [p.number for p in pages], "rounds": sp.rounds, "seed": rng.randrange(2**31),
                "think_time": sp.think_time.model_dump(), "parallel": sp.parallel,
                "http_version": sp.http_version, "persistent": sp.persistent, "object_timeout": sp.object_timeout,
                "session_timeout": self.ctx.time_limit,
                # Drawn in this place among the client's draws, so a seed's sessions stay as they were.
                "start_at": (due := self.ctx.start_at + rng.uniform(0, sp.start_stagger)),
                "page_set": sp.page_set, "catalog": catalog, "pipeline": sp.pipeline,
                "stop_at": None if sp.duration is None else self.ctx.start_at + sp.duration,
            }
            self.due[client.name] = due
            self.release(self.launched[client.name], self.write_config(f"client-{client.name}", cfg))

    def pages_per_client(self) -> int | None:
        """Pages each client must record; None when it runs for a duration."""
        sp: WebSpec = self.spec
        return None if sp.duration is not None else len(sp.session_pages()) * sp.rounds

    def expected(self) -> int:
        """Pages all clients must record (0: open-ended)."""
        per_client = self.pages_per_client()
        return 0 if per_client is None else len(self.clients) * per_client

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
        for host, srv in self.apaches:
            if srv.proc is not None and srv.proc.poll() is not None:
                raise AppError(f"web: Apache on {host.name} exited ({srv.proc.returncode}) while the workload ran;"
                               f" log {srv.error_log}")
            if srv.machine is None:  # another machine's log is read once, at the end (an ssh per tick
                self._check_restarts(host, srv)  # would cost its CPU and cross the tunnel's underlay)

    @staticmethod
    def _check_restarts(host, srv) -> None:
        restarts = srv.restarts()
        if restarts:
            raise AppError(f"web: Apache on {host.name} restarted while the workload ran (signalled from"
                           f" outside): {restarts[0]}; log {srv.error_log}")

    def collect(self) -> AppResult:
        # Another machine's servers: their restarts, read now, fail the point with its records kept.
        restarted = [f"web: Apache on {host.name} restarted while the workload ran (signalled from outside):"
                     f" {lines[0]}; log {srv.error_log} on machine {srv.machine.name}"
                     for host, srv in self.apaches if srv.machine is not None and (lines := srv.restarts())]
        objects, pages, samples = [], [], []
        ends: dict[str, dict] = {}
        ready: dict[str, float] = {}  # after its own first page's instant (the common start + its stagger)
        for client, server, out in self.outputs.values():
            for rec in read_jsonl(out):
                rec.setdefault("client", client.name)
                rec.setdefault("server", server.name)
                if rec.get("kind") == "start" and "mono" in rec:
                    ready[client.name] = rec["mono"] - self.due[client.name]
                elif rec.get("kind") == "end":
                    ends[client.name] = rec
                elif rec.get("kind") == "object":
                    objects.append(rec)
                elif rec.get("kind") == "page":
                    pages.append(rec)
                    samples.append({"app": self.spec.instance, "metric": "page_time", "host": client.name,
                                    "peer": server.name, "flow": f"page{rec.get('page')}/r{rec.get('round')}",
                                    "tag": client.tag, "t": rec.get("start"), "value": rec.get("duration"),
                                    "unit": "s", "error": rec.get("error")})
        per_client, first = {}, {}
        for p in pages:
            per_client[p["client"]] = per_client.get(p["client"], 0) + 1
            if p["client"] in self.due:
                first[p["client"]] = min(first.get(p["client"], p["start"]), p["start"])
        want = self.pages_per_client()
        if want is not None:
            missing = [f"web: {c.name} recorded {per_client.get(c.name, 0)} of {want} pages"
                       for c in self.clients if per_client.get(c.name, 0) < want]
        else:  # a duration: the session must have run to its end
            missing = [f"web: the client on {c.name} ended early after {per_client.get(c.name, 0)} pages"
                       if c.name not in ends else
                       f"web: the client on {c.name} stopped ({ends[c.name].get('reason')}) after"
                       f" {per_client.get(c.name, 0)} pages"
                       for c in self.clients if ends.get(c.name, {}).get("reason") != "done"]
        return AppResult(samples=samples, missing=restarted + missing, records={"objects": objects, "pages": pages},
                         ready_after_start=ready,
                         first_unit_after_due={c: t - self.due[c] for c, t in first.items()})

    def stop(self) -> None:
        super().stop()
        for _, srv in self.apaches:
            srv.stop()



