"""Applications as plug-ins: what every application of a scenario provides to the runner.

An application is one class: its schema (`Spec`, a pydantic model with a unique `kind`), the
processes it starts in the hosts of two host groups (servers first, then clients), how it knows
they are ready (never a sleep: a READY line or a listening socket), its progress, and the
samples it measured (`Sample`, one row of the results' `samples` table). The runner drives every
application of a scenario through the same steps:

    start_servers -> wait_ready -> launch_clients -> wait_clients_ready -> (the common start is set)
    -> start_clients -> (progress, check) until done -> collect -> stop

(launch_clients starts the programs that load before the start is known and wait for it,
workloads/gate.py; start_clients releases them and starts the rest.)

`stop` runs on every exit path and must be safe to call twice. Plug-ins do not import the
testbed (web's Apache and its configuration are workloads/apache.py): hosts come as `Host` objects whose `node` can `popen(argv, ...)` and `cmd(text)` in the
host's namespace (a Mininet node), so a toy application fits in a few lines (tests/test_plugins.py).
"""

from __future__ import annotations

import json
import os
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from catnip.workloads.readable import readable
from catnip.spec import apps as spec_apps
from catnip.spec.apps import AppSpec
from catnip.workloads import gate
from catnip.workloads.apps import elsewhere


class AppError(RuntimeError):
    """An application that cannot go on: a server died, a client failed, data went missing."""


@dataclass
class Host:
    """One emulated host as an application sees it."""

    name: str
    ip: str
    group: str
    index: int            # position in its group, from 0
    tag: str = ""         # the host's delay class (e.g. "rtt80ms"), copied to its samples
    node: Any = None      # Mininet node: popen(argv, **kw), cmd(text)


@dataclass
class AppContext:
    """What the run gives every application."""

    workdir: Path         # this application's own directory (configs, logs, outputs)
    seed: int             # this application's seed (derived from the point's seed and its position)
    time_limit: float     # seconds the point may run
    python: str           # the interpreter for `python -m workloads....`
    repo: Path            # working directory of those processes
    start_at: float       # time.monotonic() at which clients should begin (a common clock)
    docroot: Path | None = None
    server_preexec: Any = None        # run in a server process before exec (e.g. join the SPM marker's cgroup)
    catnip_module: Path | None = None  # mod_catnip.so when the servers announce document sizes (SPM)
    # Another machine's CLOCK_MONOTONIC less ours, by its name (testbed/machines.Machine.clock_offset):
    # the programs on its hosts run on our clock (workloads/apps/elsewhere.py).
    clock_offsets: dict[str, float] = field(default_factory=dict)


@dataclass
class Proc:
    host: Host
    role: str             # "server" or "client"
    popen: subprocess.Popen
    log: Path
    out: Path | None = None
    machine: Any = None   # the other machine it runs on (None: this one; popen is then elsewhere.RemoteProcess)
    gated: bool = False   # a client that says READY once loaded and waits for GO (workloads/gate.py)

    @property
    def awaiting_ready(self) -> bool:
        """A gated client whose READY pipe is still open: READY not read yet."""
        return self.gated and self.popen.stdout is not None and not self.popen.stdout.closed


@dataclass
class AppResult:
    samples: list[dict] = field(default_factory=list)   # rows for the samples table
    missing: list[str] = field(default_factory=list)    # data expected but not measured: fails the point
    records: dict[str, list[dict]] = field(default_factory=dict)  # application-specific tables (web: objects, pages)
    # Each client program (or flow): when it was ready, in seconds after the instant it was due
    # (the common start, or a flow's launch); above 0 it started late and the workload was not the
    # scenario's (controller/fidelity.client_start).
    ready_after_start: dict[str, float] = field(default_factory=dict)
    # Each client's first unit of work (web: its first page's start; Telnet, FTP, burst: the wake
    # for the first keystroke, each stream's first file, the first burst): in seconds after the
    # instant the runner holds for it. A client ready in time can still be woken late for it (a
    # CPU busy with 100 others waking at once); above the same limit it fails real time too.
    first_unit_after_due: dict[str, float] = field(default_factory=dict)


class Application:
    """Base class of every application plug-in."""

    kind: ClassVar[str]
    Spec: ClassVar[type[AppSpec]]
    progress_unit: ClassVar[str] = "samples"

    def __init__(self, spec: AppSpec, ctx: AppContext, clients: list[Host], servers: list[Host]):
        self.spec, self.ctx, self.clients, self.servers = spec, ctx, clients, servers
        self.procs: list[Proc] = []
        self.agents: dict[str, elsewhere.Agent] = {}  # another machine's name -> this application's agent there
        ctx.workdir.mkdir(parents=True, exist_ok=True)

    # --- the steps the runner calls -------------------------------------------------------
    def start_servers(self) -> None:
        """Start the server processes (none by default)."""

    def wait_ready(self, timeout: float) -> None:
        """Return once every server accepts work; raise AppError otherwise."""

    def launch_clients(self) -> None:
        """Start the client programs that load before the common start is known, each with
        `spawn(..., gated=True)` (workloads/gate.py); start_clients then writes their configs and
        releases them. None by default: start_clients starts every client."""

    def wait_clients_ready(self, deadline: float, between: Callable[[], None] = lambda: None) -> None:
        """Return once every gated client has said READY; AppError naming one that did not by
        `deadline` (time.monotonic()) or ended first. `between` is called about every 0.5 s of
        waiting (the runner checks for a cancel and its engines there)."""
        for p in self.procs:
            if p.awaiting_ready:
                wait_for_line(p, gate.READY, deadline, between)
                p.popen.stdout.close()  # its only line: after GO it writes to its log

    def gated_clients(self) -> list[Proc]:
        return [p for p in self.procs if p.gated]

    def launches(self) -> int:
        """How many programs start_clients starts (not counting gated ones it only releases): the
        runner allows each LAUNCH_S_PER_CLIENT before the common start (controller/point.py)."""
        return 0 if self.gated_clients() else len(self.clients)

    def start_clients(self) -> None:
        """At ctx.start_at's setting: release the launched clients (`release`), start the others."""
        raise NotImplementedError

    def progress(self) -> tuple[int, int]:
        """(units done, units expected; 0 when open-ended)."""
        return 0, 0

    def done(self) -> bool:
        """Every client process has exited."""
        return all(p.popen.poll() is not None for p in self.procs if p.role == "client")

    def check(self) -> None:
        """Raise AppError when a process this application needs died before its work was done."""
        for p in self.procs:
            code = p.popen.poll()
            if code is None:
                continue
            if p.role == "server":
                raise AppError(f"{self.spec.instance}: server on {p.host.name} exited ({code}) while the"
                               f" workload ran; log {p.log}: {tail(p.log)}")
            if code != 0:
                raise AppError(f"{self.spec.instance}: client on {p.host.name} failed (exit {code});"
                               f" log {p.log}: {tail(p.log)}")

    def collect(self) -> AppResult:
        raise NotImplementedError

    def measured_window(self) -> tuple[float, float] | None:
        """The (start, end) time.monotonic() instants of the window this application measures its
        metrics over, when it has one: the runner then records the bottleneck's counters over the
        same window as samples of this application (metric `window_link`)."""
        return None

    def sync_files(self) -> None:
        """Bring the files the programs on other machines wrote into this machine's copy of the
        folder (the runner calls it before `collect`)."""
        for agent in self.agents.values():
            agent.sync()

    def stop(self) -> None:
        """Terminate every process still running (clients first), then complete the files of those
        on other machines; safe to call twice."""
        for role in ("client", "server"):
            group = [p for p in self.procs if p.role == role and p.popen.poll() is None]
            for p in group:
                try:
                    p.popen.terminate()
                except elsewhere.AgentError:
                    pass  # its agent is gone, and the program with it
            deadline = time.monotonic() + 5
            for p in group:
                try:
                    p.popen.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    try:
                        p.popen.kill()
                        p.popen.wait(10)
                    except (elsewhere.AgentError, subprocess.TimeoutExpired) as exc:
                        # On another machine: its agent's end below kills it there.
                        print(f"{self.spec.instance}: {p.host.name}'s {p.role} did not end: {exc}", file=sys.stderr)
        for p in self.procs:  # a gated client's READY pipe, unread when the point failed before it
            if p.awaiting_ready:
                p.popen.stdout.close()
        agents, self.agents = self.agents, {}
        for agent in agents.values():
            try:
                agent.close()
            except elsewhere.AgentError as exc:  # its files stay incomplete: collect finds them missing
                print(f"{self.spec.instance}: {exc}", file=sys.stderr)

    # --- helpers for plug-ins -------------------------------------------------------------
    def pairs(self) -> list[tuple[Host, Host]]:
        """Each client with its server: one to one when the groups are as large, otherwise each
        server takes a contiguous block of clients (CATNIP section IV-A: 10 clients per server)."""
        if not self.servers:
            raise AppError(f"{self.spec.instance}: needs a server group")
        per = len(self.clients) / len(self.servers)
        return [(c, self.servers[min(int(i / per), len(self.servers) - 1)]) for i, c in enumerate(self.clients)]

    def spawn(self, host: Host, role: str, argv: list[str], name: str, out: Path | None = None,
              stdout_pipe: bool = False, gated: bool = False) -> Proc:
        """Start a process in a host's namespace, its output in a log of its own. A gated one's
        output is piped here for its READY (wait_clients_ready); after GO it writes to the log."""
        stdout_pipe = stdout_pipe or gated
        machine = getattr(host.node, "machine", None)
        log = self.ctx.workdir / f"{name}.log"
        if machine is not None:
            popen = self._there(machine, host, argv, log, stdout_pipe, name)
        else:
            with open(log, "w") as fh:
                popen = host.node.popen([str(a) for a in argv], stdout=subprocess.PIPE if stdout_pipe else fh,
                                        stderr=fh if stdout_pipe else subprocess.STDOUT, cwd=str(self.ctx.repo),
                                        text=stdout_pipe)
        proc = Proc(host, role, popen, log, out, machine, gated)
        self.procs.append(proc)
        return proc

    def release(self, proc: Proc, config: Path) -> None:
        """GO for a gated client, its config written first (and sent to its machine: the agent
        writes it before it passes the signal on, its frames being taken in order)."""
        if not proc.gated or proc.awaiting_ready or proc.popen.stdout is None:
            # GO before READY would kill it (SIGUSR1's default action, before it blocks the signal).
            raise AppError(f"{self.spec.instance}: {proc.host.name}'s client released before it said READY"
                           " (launch_clients, then wait_clients_ready, then start_clients)")
        if proc.machine is not None:
            try:
                self.agents[proc.machine.name].ship(config)
            except elsewhere.AgentError as exc:
                raise AppError(f"{self.spec.instance}: {exc}") from None
        proc.popen.send_signal(gate.GO)

    def _there(self, machine: Any, host: Host, argv: list[Any], log: Path, pipe: bool,
               name: str) -> elsewhere.RemoteProcess:
        """A program on another machine's host, through this application's agent there: its files
        sent first, in the host's namespaces, on our clock."""
        if machine.name not in self.ctx.clock_offsets:
            raise AppError(f"{self.spec.instance}: machine {machine.name}'s clock offset was not measured")
        agent = self.agents.get(machine.name)
        if agent is None:
            agent = self.agents[machine.name] = elsewhere.Agent(
                machine, self.ctx.workdir, self.ctx.python, self.ctx.repo,
                self.ctx.workdir / f"agent-{machine.name}.log")
        try:
            for a in argv:
                if isinstance(a, Path) and a.parent == self.ctx.workdir and a.is_file():
                    agent.ship(a)  # written there before the program starts: the agent takes frames in order
            command = elsewhere.on_clock([str(a) for a in argv], self.ctx.python, self.ctx.clock_offsets[machine.name])
            return agent.run(["mnexec", "-a", str(host.node.pid), *command], self.ctx.repo, log, pipe, pipe, name)
        except elsewhere.AgentError as exc:
            raise AppError(f"{self.spec.instance}: {exc}") from None

    def write_config(self, name: str, cfg: dict) -> Path:
        path = self.ctx.workdir / f"{name}.json"
        path.write_text(json.dumps(cfg, indent=1))
        return path


def wait_for_line(proc: Proc, word: str, deadline: float, between: Callable[[], None] = lambda: None) -> None:
    """Wait until a process started with stdout_pipe prints a line starting with `word` (calling
    `between` after each 0.5 s without output). Its output is read from the pipe itself: a line
    buffered in the stream behind another would be unseen by select (two lines in one chunk, as
    from a program on another machine)."""
    fd, pending = proc.popen.stdout.fileno(), b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AppError(f"{proc.host.name}: no {word} line from {proc.role} within the time allowed;"
                           f" log {proc.log}: {tail(proc.log)}")
        ready = readable(fd, min(left, 0.5))
        if not ready:
            between()
            continue
        chunk = os.read(fd, 65536)
        if not chunk:  # the end of its output: it exited
            try:
                proc.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass
            raise AppError(f"{proc.host.name}: {proc.role} exited ({proc.popen.poll()}) before {word};"
                           f" log {proc.log}: {tail(proc.log)}")
        *lines, pending = (pending + chunk).split(b"\n")
        if any(line.decode(errors="replace").startswith(word) for line in lines):
            return


def wait_listening(host: Host, port: int, deadline: float, proc: Proc | None = None) -> None:
    """Wait until a TCP socket listens on `port` in the host's namespace (ss polled, not slept on)."""
    while time.monotonic() < deadline:
        if proc is not None and proc.popen.poll() is not None:
            raise AppError(f"{host.name}: server exited ({proc.popen.returncode}) before listening on {port};"
                           f" log {proc.log}: {tail(proc.log)}")
        if f":{port} " in host.node.cmd(f"ss -Hltn sport = :{int(port)}") + " ":
            return
        select.select([], [], [], 0.05)
    raise AppError(f"{host.name}: nothing listens on TCP port {port} in time")


def read_jsonl(path: Path | None) -> list[dict]:
    """The complete JSON lines of an output file (a line cut by a kill is skipped)."""
    if path is None:
        return []
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def tail(path: Path, chars: int = 300) -> str:
    try:
        return path.read_text()[-chars:].strip().replace("\n", " | ")
    except OSError:
        return "(no log)"


def quote(argv: list[object]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv)


# --- the registry ----------------------------------------------------------------------------
REGISTRY: dict[str, type[Application]] = {}


def register(cls: type[Application]) -> type[Application]:
    """Class decorator: make an application available to scenarios under `cls.kind`."""
    kind = cls.Spec.model_fields["kind"].default
    if not isinstance(kind, str) or kind != cls.kind:
        raise TypeError(f"{cls.__name__}.Spec must default `kind` to {cls.kind!r}")
    if kind in REGISTRY and REGISTRY[kind] is not cls:
        raise TypeError(f"application kind {kind!r} is registered twice")
    REGISTRY[kind] = cls
    spec_apps.register(cls.Spec)
    return cls


def unregister(kind: str) -> None:
    REGISTRY.pop(kind, None)
    spec_apps.unregister(kind)


def lookup(kind: Any) -> type[Application]:
    from catnip.workloads import apps  # noqa: F401 - registers the built-in applications
    if kind not in REGISTRY:
        raise ValueError(f"application kind {kind!r} not allowed: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[kind]


__all__ = ["AppContext", "AppError", "AppResult", "Application", "Host", "Proc", "REGISTRY",
           "lookup", "read_jsonl", "register", "tail", "unregister",
           "wait_for_line", "wait_listening"]
