"""`bulk`: long-lived TCP flows measured with iperf3 (FTP cross traffic of newCWV section 4.4,
the 50/100 long flows of TCP-friendly marking, Nouredine-Tobagi's FTPlong).

Each flow has its own one-off iperf3 server (`iperf3 -s -1 --json`, ports counted up from `port`
on each server host) and its own client, launched at `start_at + start + U(0, stagger)`:

    iperf3 -s -1 -p PORT -B SERVER_IP -i INTERVAL --json --logfile WORKDIR/bulk-server-HOST-PORT.json
    PYTHON -c LAUNCH T iperf3 -c SERVER_IP -p PORT --json --get-server-output
        --logfile WORKDIR/bulk-CLIENT-K.json -i INTERVAL --connect-timeout 10000
        (-t DURATION | -n BYTES) [-R] [-C CC]

(LAUNCH sleeps until the monotonic instant T, then execs iperf3.)

`upload` sends client -> server, `download` server -> client (iperf3 -R). Samples (flow =
"CLIENT/K", K the client's flow number from 0):

* `start`    (s): at the client host, t = the flow's launch, value = seconds after start_at
  (the instant the launcher really exec'd iperf3: later than planned on an overloaded machine).
* `goodput`  (bit/s): one per iperf3 interval at the RECEIVER (host = receiver, peer = sender),
  t = launch + the interval's start. iperf3 counts its intervals from its test start, which
  follows the launch by the control exchange (about 2-3 RTTs), so t is early by that much. The
  last interval of a flow may be shorter than `interval`.
* `flow_goodput` (bit/s): the receiver's bytes over the receiver's time for the whole flow;
  for a flow that did not complete, value None and `error` set (and the flow in `missing`).
* `retransmits` (segments): the sender's count over the whole flow, where iperf3 reports it.

With a measured window (`measure_from`, `measure_for`: from start_at + measure_from, for
measure_for seconds; every flow must be running through it), also (TCP-friendly marking section 6.1):

* `window_goodput` (bit/s): per flow, at the RECEIVER, t = the window's start: the bytes the
  receiving TCP delivered in order over the window (the kernel's tcpi_bytes_received, read by
  `ss -tin` in the receiver's namespace at the window's two ends), over its seconds. Each byte
  counts once, so this is the paper's "throughput minus retransmissions". A flow whose data
  connection was not yet open at the window's start (its connection set-up lost and retried)
  received nothing before it: it counts from 0. Not iperf3's intervals: they are timed from each
  test's own start, which follows the launch by seconds when SYNs are lost (measured: 29 s).
* `window_nstat` per sending host: the increase over the window of the TCP counters in
  WINDOW_COUNTERS, one sample per counter (flow = the counter's name, e.g. TcpExtTCPTimeouts), read by
  `nstat -asz` in the host's namespace at the window's two ends (a process per host that sleeps
  until each instant, as the flows' launcher does).
* `window_probe_late` (s) per probing host (flow "ss" or "nstat"): how far, at worst, its probe
  read from the window's ends (each read is stamped at the middle of its ss/nstat call).

The iperf3 client exits 0 even when its test fails (3.12), so a flow counts as complete only when
its JSON holds no `error` and the receiver's totals (and, with `bytes`, all the bytes).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from catnip.spec.apps import AppSpec
from catnip.workloads.apps.base import (
    AppError,
    Application,
    AppResult,
    Host,
    Proc,
    read_jsonl,
    register,
    tail,
)
from catnip.workloads.apps.common import (
    Duration,
    Size,
    check_fits,
    host_seed,
    need_servers,
    sample,
    wait_ports,
)

# --- the bulk application ----------------------------------------------------------------------


class BulkSpec(AppSpec):
    kind: Literal["bulk"] = "bulk"
    flows_per_client: int = Field(default=1, ge=1, le=1000, description="parallel flows each client host opens")
    direction: Literal["upload", "download"] = Field(
        default="download", description="'upload': data from client to server; 'download': server to client (iperf3 -R)")
    duration: Duration | None = Field(default=None, description="seconds each flow sends (iperf3 -t, whole"
                                      " seconds); exactly one of duration and bytes")
    bytes: Size | None = Field(default=None, description="bytes each flow sends (iperf3 -n), e.g. '1MB';"
                               " exactly one of duration and bytes")
    start: Duration = Field(default=0.0, description="delay of every flow's launch after the common start")
    stagger: Duration = Field(default=0.0, description="each flow launches at start + U(0, stagger), drawn"
                              " from the seed")
    interval: Duration = Field(default=1.0, ge=0.1, le=60.0, description="goodput sampling interval"
                               " (iperf3 -i), 0.1 s to 60 s")
    congestion_control: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{0,15}$",
                                           description="TCP congestion control of the flows (iperf3 -C)")
    measure_from: Duration | None = Field(default=None, description="start of the measured window, after the"
                                          " common start (all flows launched and warmed up by then)")
    measure_for: Duration | None = Field(default=None, description="length of the measured window")
    port: int = Field(default=5201, ge=1024, le=65535, description="first TCP port of the iperf3 servers;"
                      " each server host counts up from it, one port per flow")

    @model_validator(mode="after")
    def _check(self) -> BulkSpec:
        need_servers(self)
        if (self.duration is None) == (self.bytes is None):
            raise ValueError("duration, bytes: give exactly one (a duration for unlimited flows, bytes for finite ones)")
        if self.duration is not None and (self.duration < 1 or not float(self.duration).is_integer()):
            raise ValueError(f"duration: iperf3 runs whole seconds, at least 1 (got {self.duration:g} s)")
        if (self.measure_from is None) != (self.measure_for is None):
            raise ValueError("measure_from, measure_for: give both (the measured window) or neither")
        if self.measure_for is not None:
            if self.duration is None:
                raise ValueError("measure_from: a measured window needs flows of a duration, not of bytes")
            if self.measure_for < 2 * self.interval:
                raise ValueError(f"measure_for: {self.measure_for:g} s holds fewer than two iperf3 intervals"
                                 f" of {self.interval:g} s")
            if self.measure_from < self.start + self.stagger:
                raise ValueError(f"measure_from: the window starts at {self.measure_from:g} s, before the last flow"
                                 f" may launch (start + stagger = {self.start + self.stagger:g} s)")
            if self.start + self.duration < self.measure_from + self.measure_for:
                raise ValueError(f"duration: the flows end by start + duration = {self.start + self.duration:g} s,"
                                 f" before the window does ({self.measure_from + self.measure_for:g} s)")
        return self

    def window(self) -> tuple[float, float] | None:
        """The measured window, seconds after the common start."""
        return None if self.measure_from is None else (self.measure_from, self.measure_from + self.measure_for)

    def planned_seconds(self):
        return ("duration", self.start + self.stagger + self.duration) if self.duration is not None else None


# Notes when it is ready (READY), sleeps until a time.monotonic() instant, notes the instant it
# really launches (LAUNCH), both on stderr (the log), then becomes the program: one process, so a
# terminate while it waits ends it (a shell's `sleep` child would outlive it).
LAUNCH = ("import os, sys, time; print('READY %.6f' % time.monotonic(), file=sys.stderr, flush=True);"
          " time.sleep(max(0.0, float(sys.argv[1]) - time.monotonic()));"
          " print('LAUNCH %.6f' % time.monotonic(), file=sys.stderr, flush=True);"
          " os.execvp(sys.argv[2], sys.argv[2:])")


# In a sending host's namespace: at each time.monotonic() instant given, one JSON line with every
# kernel SNMP counter (nstat -asz --json: absolute, no history file touched), stamped like SS_AT's.
NSTAT_AT = ("import json, subprocess, sys, time\n"
            "for at in sys.argv[1:]:\n"
            "    time.sleep(max(0.0, float(at) - time.monotonic()))\n"
            "    now = time.monotonic()\n"
            "    out = subprocess.run(['nstat', '-asz', '--json'], capture_output=True, text=True).stdout\n"
            "    done = time.monotonic()\n"
            "    data = json.loads(out[out.find('{'):])\n"
            "    print(json.dumps({'t': (now + done) / 2, 'spread': done - now, 'counters': data.get('kernel', data)}),"
            " flush=True)\n")


# In a receiving host's namespace: at each time.monotonic() instant given, one JSON line with every
# established TCP connection's local and peer address and bytes received in order (ss -tin: the
# socket line, then its info line holding bytes_received), stamped with the middle of the ss call
# and its length ('spread': on a loaded machine ss may start a second late, and the bytes it reads
# are those of when it ran, not of the instant asked for).
SS_AT = ("import json, re, subprocess, sys, time\n"
         "for at in sys.argv[1:]:\n"
         "    time.sleep(max(0.0, float(at) - time.monotonic()))\n"
         "    now = time.monotonic()\n"
         "    out = subprocess.run(['ss', '-tinH', 'state', 'established'], capture_output=True, text=True).stdout\n"
         "    conns, sock = [], None\n"
         "    for line in out.splitlines():\n"
         "        if not line[:1].isspace():\n"
         "            f = line.split()\n"
         "            sock = (f[-2], f[-1]) if len(f) >= 4 else None\n"
         "        elif sock:\n"
         "            m = re.search(r'bytes_received:(\\d+)', line)\n"
         "            conns.append([sock[0], sock[1], int(m.group(1)) if m else 0])\n"
         "            sock = None\n"
         "    done = time.monotonic()\n"
         "    print(json.dumps({'t': (now + done) / 2, 'spread': done - now, 'conns': conns}), flush=True)\n")


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def delivered(lines: list[dict], port: int, peer_ip: str) -> tuple[float, int] | None:
    """(seconds, bytes) a flow's receiver got in order between its two `ss` lines: the flow is the
    connection with its peer's address and the flow's server port at either end that received the
    most by the second line (iperf3's control connection shares the port but carries a few bytes);
    absent at the first line, it had received nothing. None without both lines or that connection."""
    if len(lines) < 2:
        return None
    def mine(line):
        return {(c[0], c[1]): c[2] for c in line["conns"]
                if c[1].rsplit(":", 1)[0].strip("[]") == peer_ip and port in (_port(c[0]), _port(c[1]))}
    first, last = mine(lines[0]), mine(lines[-1])
    if not last:
        return None
    key = max(last, key=last.get)
    return lines[-1]["t"] - lines[0]["t"], last[key] - first.get(key, 0)


# The kernel counters a window records: RTOs (the paper's timeouts), retransmissions and how they
# were triggered, segments sent.
WINDOW_COUNTERS = ("TcpExtTCPTimeouts", "TcpRetransSegs", "TcpOutSegs", "TcpExtTCPLossProbes",
                   "TcpExtTCPSpuriousRTOs", "TcpExtTCPSackRecovery", "TcpExtTCPRenoRecovery", "TcpExtTCPFastRetrans",
                   "TcpExtTCPSlowStartRetrans", "TcpExtTCPLostRetransmit")


def window_counters(lines: list[dict]) -> dict[str, int] | None:
    """The increase of each of WINDOW_COUNTERS between a host's two nstat lines (a counter the
    kernel does not list counts 0); None without both lines."""
    if len(lines) < 2:
        return None
    first, last = lines[0]["counters"], lines[-1]["counters"]
    return {k: int(last.get(k, 0)) - int(first.get(k, 0)) for k in WINDOW_COUNTERS}


def launched_at(log: Path, what: str = "LAUNCH") -> float | None:
    """The instant LAUNCH wrote in a client's log as `what` (LAUNCH: the launch; READY: when the
    launcher was ready to wait for it)."""
    try:
        with open(log) as fh:
            for line in fh:
                if line.startswith(what + " "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


class Flow:
    def __init__(self, fid: str, client: Host, server: Host, port: int, index: int):
        self.id, self.client, self.server, self.port, self.index = fid, client, server, port, index
        self.server_proc: Proc | None = None
        self.client_proc: Proc | None = None
        self.launch: float | None = None
        self.offset: float = 0.0
        self.client_out: Path | None = None
        self.server_out: Path | None = None


def _load_json(path: Path | None) -> dict | None:
    try:
        return json.loads(path.read_text()) if path else None
    except (OSError, json.JSONDecodeError):
        return None


def parse_flow(client_json: dict | None, server_json: dict | None, direction: str,
               want_bytes: int | None = None) -> dict[str, Any]:
    """What one flow's iperf3 outputs say: receiver intervals [(start, bit/s, seconds)], the
    receiver's total (bytes, seconds, bit/s), the sender's retransmits, and the error if any
    (also when fewer than `want_bytes` arrived)."""
    out: dict[str, Any] = {"intervals": [], "received": None, "retransmits": None, "error": None}
    if client_json is None:
        out["error"] = "no iperf3 client output"
        return out
    server = client_json.get("server_output_json") or server_json or {}
    receiver, sender = (server, client_json) if direction == "upload" else (client_json, server)
    for side in (client_json, server):  # the receiver's intervals are the ones with sender False
        ivs = [iv.get("sum", {}) for iv in side.get("intervals", [])]
        if ivs and all(s.get("sender") is False for s in ivs):
            out["intervals"] = [(float(s["start"]), float(s["bits_per_second"]), float(s["seconds"])) for s in ivs]
            break
    end = client_json.get("end") or {}
    recv = end.get("sum_received") or (receiver.get("end") or {}).get("sum_received")
    if recv and recv.get("seconds", 0) > 0:
        out["received"] = {"bytes": int(recv["bytes"]), "seconds": float(recv["seconds"]),
                           "bps": float(recv["bits_per_second"])}
    sent = (sender.get("end") or {}).get("sum_sent") or end.get("sum_sent") or {}
    if "retransmits" in sent:
        out["retransmits"] = int(sent["retransmits"])
    if client_json.get("error"):
        out["error"] = f"iperf3: {client_json['error']}"
    elif out["received"] is None:
        out["error"] = "iperf3 reported no received total"
    elif want_bytes is not None and out["received"]["bytes"] < want_bytes:
        out["error"] = f"received {out['received']['bytes']} of {want_bytes} bytes"
    return out


@register
class Bulk(Application):
    kind = "bulk"
    Spec = BulkSpec
    progress_unit = "flows"

    def __init__(self, spec: BulkSpec, ctx, clients: list[Host], servers: list[Host]):
        super().__init__(spec, ctx, clients, servers)
        self.flows: list[Flow] = []
        self.counter_procs: dict[str, Proc] = {}  # sending host -> its nstat process (measured window)
        self.ss_procs: dict[str, Proc] = {}       # receiving host -> its ss process (measured window)
        next_port: dict[str, int] = {}
        for client, server in self.pairs():
            for k in range(spec.flows_per_client):
                port = next_port.get(server.name, spec.port)
                if port > 65535:
                    raise AppError(f"{spec.instance}: port: too many flows on {server.name} from port {spec.port}")
                next_port[server.name] = port + 1
                self.flows.append(Flow(f"{client.name}/{k}", client, server, port, k))
        planned = spec.planned_seconds()
        if planned is not None:
            check_fits(spec, ctx, *planned)

    def start_servers(self) -> None:
        for f in self.flows:
            f.server_out = self.ctx.workdir / f"bulk-server-{f.server.name}-{f.port}.json"
            f.server_out.unlink(missing_ok=True)  # iperf3 appends to its log file
            f.server_proc = self.spawn(f.server, "server", ["iperf3", "-s", "-1", "-p", f.port, "-B", f.server.ip,
                                                            "-i", f"{self.spec.interval:g}", "--json",
                                                            "--logfile", f.server_out],
                                       f"bulk-server-{f.server.name}-{f.port}", out=f.server_out)

    def wait_ready(self, timeout: float) -> None:
        wait_ports(self, [(f.server, f.port, f.server_proc) for f in self.flows], time.monotonic() + timeout)

    def client_argv(self, f: Flow) -> list[Any]:
        s = self.spec
        argv: list[Any] = ["iperf3", "-c", f.server.ip, "-p", f.port, "--json", "--get-server-output",
                           "--logfile", f.client_out, "-i", f"{s.interval:g}", "--connect-timeout", 10000]
        argv += ["-t", int(s.duration)] if s.duration is not None else ["-n", s.bytes]
        if s.direction == "download":
            argv.append("-R")
        if s.congestion_control:
            argv += ["-C", s.congestion_control]
        return argv

    def start_clients(self) -> None:
        rngs: dict[str, random.Random] = {}
        for f in self.flows:
            rng = rngs.setdefault(f.client.name, random.Random(host_seed(self.ctx.seed, f.client, "bulk")))
            f.offset = self.spec.start + (rng.uniform(0, self.spec.stagger) if self.spec.stagger else 0.0)
        for f in sorted(self.flows, key=lambda f: f.offset):
            f.client_out = self.ctx.workdir / f"bulk-{f.client.name}-{f.index}.json"
            f.client_out.unlink(missing_ok=True)
            f.launch = self.ctx.start_at + f.offset
            f.client_proc = self.spawn(f.client, "client", [self.ctx.python, "-c", LAUNCH, f"{f.launch:.6f}",
                                                            *self.client_argv(f)],
                                       f"bulk-{f.client.name}-{f.index}", out=f.client_out)
        window = self.spec.window()
        if window is not None:
            instants = [f"{self.ctx.start_at + w:.6f}" for w in window]
            for host in self.senders():
                self.counter_procs[host.name] = self.spawn(host, "client", [self.ctx.python, "-c", NSTAT_AT, *instants],
                                                           f"bulk-nstat-{host.name}")
            for host in self.receivers():
                self.ss_procs[host.name] = self.spawn(host, "client", [self.ctx.python, "-c", SS_AT, *instants],
                                                      f"bulk-ss-{host.name}")

    def launches(self) -> int:
        """A launcher per flow, and with a measured window an nstat and an ss program per sender
        and receiver host."""
        window = 0 if self.spec.window() is None else len(self.senders()) + len(self.receivers())
        return len(self.flows) + window

    def measured_window(self) -> tuple[float, float] | None:
        w = self.spec.window()
        return None if w is None else (self.ctx.start_at + w[0], self.ctx.start_at + w[1])

    def sender_of(self, f: Flow) -> Host:
        return f.client if self.spec.direction == "upload" else f.server

    def receiver_of(self, f: Flow) -> Host:
        return f.server if self.spec.direction == "upload" else f.client

    def senders(self) -> list[Host]:
        """The hosts whose TCP sends the data, once each."""
        return list({self.sender_of(f).name: self.sender_of(f) for f in self.flows}.values())

    def receivers(self) -> list[Host]:
        """The hosts whose TCP receives the data, once each."""
        return list({self.receiver_of(f).name: self.receiver_of(f) for f in self.flows}.values())

    def progress(self) -> tuple[int, int]:
        return sum(1 for f in self.flows if f.client_proc and f.client_proc.popen.poll() is not None), len(self.flows)

    def check(self) -> None:
        """A one-off server ends by itself (exit 0) once its flow is over: only a failed exit counts.
        Clients first: iperf3 3.12's server can crash (SIGSEGV) when its client is killed, and the
        client is then the cause to name."""
        for p in sorted(self.procs, key=lambda p: p.role != "client"):
            code = p.popen.poll()
            if code is None or code == 0:
                continue
            who = "server" if p.role == "server" else "client"
            raise AppError(f"{self.spec.instance}: {who} on {p.host.name} exited ({code}) while the workload ran;"
                           f" log {p.log}: {tail(p.log)}")

    def collect(self) -> AppResult:
        res = AppResult()
        app = self.spec.instance
        for f in self.flows:
            if f.launch is None:
                res.missing.append(f"{app}: flow {f.id} was never launched")
                continue
            rec, snd = (f.server, f.client) if self.spec.direction == "upload" else (f.client, f.server)
            launch = launched_at(f.client_proc.log) or f.launch  # late under load: the real instant
            ready = launched_at(f.client_proc.log, "READY")
            if ready is not None:  # none: stopped before it was ready, and the point failed already
                res.ready_after_start[f.id] = ready - f.launch
            res.samples.append(sample(app, "start", f.client, f.server, f.id, launch, launch - self.ctx.start_at, "s"))
            parsed = parse_flow(_load_json(f.client_out), _load_json(f.server_out), self.spec.direction,
                                self.spec.bytes)
            for start, bps, _ in parsed["intervals"]:
                res.samples.append(sample(app, "goodput", rec, snd, f.id, launch + start, bps, "bit/s"))
            error, got = parsed["error"], parsed["received"]
            if error is None and (f.client_proc is None or f.client_proc.popen.poll() is None):
                error = "iperf3 client still running"
            if error:
                if f.client_proc is not None and f.client_proc.popen.poll() not in (None, 0):
                    error += f" (client exit {f.client_proc.popen.returncode}: {tail(f.client_proc.log, 120)})"
                res.samples.append(sample(app, "flow_goodput", rec, snd, f.id, launch, None, "bit/s", error))
                res.missing.append(f"{app}: flow {f.id} ({f.client.name} - {f.server.name}:{f.port}) did not"
                                   f" complete: {error}")
            else:
                res.samples.append(sample(app, "flow_goodput", rec, snd, f.id, launch, got["bps"], "bit/s"))
            if parsed["retransmits"] is not None:
                res.samples.append(sample(app, "retransmits", snd, rec, f.id, launch, parsed["retransmits"],
                                          "segments"))
            if self.spec.window() is not None and not error:
                res.samples += self.window_samples(f, rec, snd, res.missing)
        if self.spec.window() is not None:
            res.samples += self.counter_samples(res.missing) + self.probe_samples()
        return res

    def probe_samples(self) -> list[dict]:
        """How far each host's window probe (flow "ss" or "nstat") read its counters from the
        instants asked for, at worst (s): the window each host measured is the one between its
        probe's stamps, so a late probe shifts it, and this says by how much."""
        asked = [self.ctx.start_at + w for w in self.spec.window()]
        out = []
        for what, procs in (("ss", self.ss_procs), ("nstat", self.counter_procs)):
            for proc in procs.values():
                lines = read_jsonl(proc.log)
                if len(lines) == len(asked):
                    late = max(abs(line["t"] - at) for line, at in zip(lines, asked))
                    out.append(sample(self.spec.instance, "window_probe_late", proc.host, None, what, asked[0], late,
                                      "s"))
        return out

    def window_samples(self, f: Flow, rec: Host, snd: Host, missing: list[str]) -> list[dict]:
        """A flow's goodput over the measured window (module docstring)."""
        app = self.spec.instance
        lo = self.ctx.start_at + self.spec.window()[0]
        proc = self.ss_procs.get(rec.name)
        got = delivered(read_jsonl(proc.log), f.port, snd.ip) if proc else None
        if got is None:
            missing.append(f"{app}: flow {f.id}: no connection from {snd.name} to port {f.port} in {rec.name}'s ss"
                           " at the measured window's end" + (f"; log {proc.log}: {tail(proc.log)}" if proc else ""))
            return []
        seconds, nbytes = got
        return [sample(app, "window_goodput", rec, snd, f.id, lo, 8 * nbytes / seconds, "bit/s"),
                sample(app, "window_seconds", rec, snd, f.id, lo, seconds, "s")]

    def counter_samples(self, missing: list[str]) -> list[dict]:
        """Each sending host's kernel counters' increase over the window, one sample per counter."""
        app, out = self.spec.instance, []
        lo = self.ctx.start_at + self.spec.window()[0]
        for host in self.senders():
            proc = self.counter_procs.get(host.name)
            diff = window_counters(read_jsonl(proc.log)) if proc else None
            if diff is None:
                missing.append(f"{app}: no nstat counters of {host.name} at both ends of the measured window"
                               + (f"; log {proc.log}: {tail(proc.log)}" if proc else ""))
                continue
            out += [sample(app, "window_nstat", host, None, name, lo, value, "count") for name, value in diff.items()]
        return out
