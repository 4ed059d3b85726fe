"""What every host program of an application needs (workloads/telnet.py, burst.py and ftp.py; run
by the plug-ins of workloads/apps/ as `python -m catnip.workloads.X server ADDRESS PORT ...` and
`python -m catnip.workloads.X client CONFIG.json OUT.jsonl`):

- the command line: `server ADDRESS PORT` with the program's own options, `client CONFIG OUT
  [--gate]` (with --gate the client loads, says READY and reads CONFIG after GO: workloads/gate.py);
- the server: a threading TCP server that prints READY once it listens (the plug-in waits for it);
- the client's JSON config, its keys checked against what the program knows;
- the client's connections to its server, each with a timeout;
- the client's output: one JSON object a line, flushed at once (the plug-in counts the units while
  the client runs), starting with a "ready" record (when the program was ready to begin, so the
  runner can check it was by the common start), then a "woke" record when it woke for its first
  unit of work (Output.wait_for_first), and ending in an "end" record; a client without the "end"
  record ended early;
- waiting on time.monotonic(), one clock for every namespace of the machine, for the common start.

workloads/transfers.py (the hysteresis transfer measurements) uses the server and the start of the
command line; its client's arguments and output are its own.
"""

from __future__ import annotations

import argparse
import json
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from catnip.workloads import gate

# The keys of every client's config: what workloads/apps/common.py writes for each client, and the
# timeout of one unit of work (a keystroke, a burst, a file).
CONFIG_KEYS = frozenset({"client", "server", "port", "seed", "start_at", "deadline", "timeout"})


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def serve(address: str, port: int, handler: type[socketserver.BaseRequestHandler], **settings: Any) -> None:
    """Listen on (address, port), print READY, serve each connection in a thread of its own until
    killed. `settings` become attributes of the server: a handler reads them as self.server.NAME."""
    with Server((address, port), handler) as srv:
        for name, value in settings.items():
            setattr(srv, name, value)
        print("READY", flush=True)
        srv.serve_forever()


def parser(doc: str) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """The command line (described by the first line of the program's docstring) with its two
    roles: (the parser, `server ADDRESS PORT`, `client`); the caller adds the rest."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = ap.add_subparsers(dest="role", required=True)
    server = sub.add_parser("server")
    server.add_argument("address")
    server.add_argument("port", type=int)
    return ap, server, sub.add_parser("client")


def main(argv: list[str] | None, prog: str, doc: str, serve: Callable[..., object],
         load_config: Callable[[str], dict[str, Any]], client: Callable[[dict[str, Any], TextIO], Any],
         server_options: dict[str, dict[str, Any]]) -> int:
    """An application's host program. `server ADDRESS PORT` and `server_options` (flag: keywords
    of add_argument): serve(address, port, OPTION=value, ...). `client CONFIG OUT`:
    load_config(CONFIG) (an OSError or ValueError is printed as "PROG: error", exit status 2),
    then client(config, OUT opened for writing).run(), its exit status."""
    ap, srv, cli = parser(doc)
    options = [srv.add_argument(flag, **kw).dest for flag, kw in server_options.items()]
    cli.add_argument("config")
    cli.add_argument("out")
    cli.add_argument("--gate", action="store_true", help="load, say READY, read CONFIG only after GO (workloads/gate.py)")
    args = ap.parse_args(argv)
    if args.role == "server":
        serve(args.address, args.port, **{name: getattr(args, name) for name in options})
        return 0
    if args.gate:
        gate.wait_for_go()
    try:
        cfg = load_config(args.config)
    except (OSError, ValueError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    with open(args.out, "w") as out:
        out.write(json.dumps({"kind": "ready", "mono": time.monotonic()}) + "\n")
        out.flush()
        return client(cfg, out).run()


def read_config(path: str, required: set[str] | frozenset[str], optional: set[str] | frozenset[str]) -> dict[str, Any]:
    """A client's JSON config: CONFIG_KEYS and `required` must be there, nothing beyond those and
    `optional` may be (ValueError naming the keys otherwise)."""
    with open(path) as fh:
        cfg = json.load(fh)
    required = CONFIG_KEYS | required
    missing, unknown = required - cfg.keys(), cfg.keys() - required - optional
    if missing or unknown:
        raise ValueError(f"{path}: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}")
    return cfg


class Output:
    """A client's records, one JSON line each, flushed at once; threads may share it."""

    def __init__(self, out: TextIO):
        self.out = out
        self.lock = threading.Lock()

    def emit(self, rec: dict[str, Any]) -> None:
        with self.lock:
            self.out.write(json.dumps(rec) + "\n")
            self.out.flush()

    def wait_for_first(self, start_at: float, offset: float = 0.0, stream: str | None = None) -> None:
        """Wait for the first unit's instant, `offset` seconds after the common start, and record
        when the program woke for it: {"kind": "woke", "offset", "mono"} (and "stream" when the
        client runs several). The runner holds the common start itself and checks the wake against
        it (workloads/apps/common.py), as it checks a web client's first page: a client ready in
        time can still be woken late on a busy machine."""
        sleep_until(start_at + offset)
        rec: dict[str, Any] = {"kind": "woke", "offset": offset, "mono": time.monotonic()}
        if stream is not None:
            rec["stream"] = stream
        self.emit(rec)

    def end(self, count: int, errors: int, reason: str) -> None:
        """The last line: units done, how many of them failed, why the client stopped ("done",
        "deadline"), and when (time.monotonic())."""
        self.emit({"kind": "end", "count": count, "errors": errors, "reason": reason, "mono": time.monotonic()})


def connect(address: str, port: int, timeout: float, nodelay: bool = False) -> socket.socket:
    """A TCP connection to (address, port) with this timeout (TCP_NODELAY set first if asked); the
    socket is closed if connecting fails."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if nodelay:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(timeout)
        s.connect((address, port))
    except BaseException:
        s.close()
        raise
    return s


def sleep_until(t: float) -> None:
    """Wait until time.monotonic() reaches t (at once if it has)."""
    time.sleep(max(0.0, t - time.monotonic()))


def unit_timeout(cfg: dict[str, Any]) -> float:
    """Seconds the next unit of work may take: its timeout, cut short by the client's deadline."""
    return max(0.01, min(cfg["timeout"], cfg["deadline"] - time.monotonic()))


def error_text(exc: BaseException, timeout: str = "timeout") -> str:
    """The "error" of a failed unit: `timeout` for a timeout, else the exception's type and text."""
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return timeout
    return f"{type(exc).__name__}: {exc}"
