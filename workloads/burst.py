"""Bursts after idle on one persistent connection: the HTTP workload of the newCWV paper
(sections 4.2-4.6; reading notes 1.1-1.2), after the authors' tmix client.

    python -m workloads.burst server ADDRESS PORT [--nagle]
    python -m workloads.burst client CONFIG.json OUT.jsonl

Runs inside the hosts' network namespaces. The server answers each request line "B\\n" on a
connection with B bytes, as many times as asked, and prints READY once it listens. It sets
TCP_NODELAY (as the tmix server does), so a burst's last partial segment is not held back by
Nagle; `--nagle` keeps Nagle's algorithm.

The client opens one connection at `start_at` (time.monotonic(), one clock for every
namespace), optionally fetches a `warmup` burst, then for each (size, idle) of its `plan`: stays
idle `idle` seconds (counted from the previous burst's last byte, or from the connection), writes
the request and times the burst from the request write to the last byte received. The idle of
a plan entry is thus the idle that PRECEDES its burst: the quantity newCWV's gain depends on.

Each burst is one JSON line {"kind": "burst", "seq", "size", "idle", "conn", "t" (the request
write), "time" (s), "received", "error"} (the warm-up: kind "warmup"). A failed burst is recorded
with its error and the connection closed; the next burst opens a new connection (a new `conn`).
The last line is {"kind": "end", "count", "errors", "reason"}; a client without it ended early.
"""

from __future__ import annotations

import argparse
import json
import socket
import socketserver
import sys
import time
from typing import Any, TextIO

MAX_SIZE = 1 << 30
CHUNK = b"x" * 65536
REQUIRED = {"client", "server", "port", "plan", "seed", "start_at", "deadline", "timeout"}
OPTIONAL = {"warmup"}


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        if not self.server.nagle:  # type: ignore[attr-defined]
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        try:
            while True:
                while b"\n" not in buf:
                    part = conn.recv(64)
                    if not part or len(buf) > 64:
                        return
                    buf += part
                line, _, buf = buf.partition(b"\n")
                try:
                    size = int(line)
                except ValueError:
                    return
                if not 0 < size <= MAX_SIZE:
                    return
                left = size
                while left:
                    left -= conn.send(CHUNK[:min(left, len(CHUNK))])
        except OSError:
            return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def serve(address: str, port: int, nagle: bool) -> None:
    with _Server((address, port), _Handler) as srv:
        srv.nagle = nagle  # type: ignore[attr-defined]
        print("READY", flush=True)
        srv.serve_forever()


def load_config(path: str) -> dict[str, Any]:
    with open(path) as fh:
        cfg = json.load(fh)
    missing, unknown = REQUIRED - cfg.keys(), cfg.keys() - REQUIRED - OPTIONAL
    if missing or unknown:
        raise ValueError(f"{path}: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}")
    for entry in cfg["plan"]:
        if (not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], int)
                or not 0 < entry[0] <= MAX_SIZE or entry[1] < 0):
            raise ValueError(f"{path}: plan entry {entry!r} is not [size in bytes, idle in seconds]")
    return cfg


def _error(exc: BaseException) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout"
    return f"{type(exc).__name__}: {exc}"


class Client:
    def __init__(self, cfg: dict[str, Any], out: TextIO):
        self.cfg, self.out = cfg, out
        self.sock: socket.socket | None = None
        self.conn = 0
        self.buf = bytearray(1 << 18)

    def emit(self, rec: dict[str, Any]) -> None:
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _timeout(self) -> float:
        return max(0.01, min(self.cfg["timeout"], self.cfg["deadline"] - time.monotonic()))

    def connect(self) -> socket.socket:
        if self.sock is None:
            self.conn += 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.settimeout(self._timeout())
                s.connect((self.cfg["server"], self.cfg["port"]))
            except BaseException:
                s.close()
                raise
            self.sock = s
        return self.sock

    def burst(self, kind: str, seq: int, size: int, idle: float | None) -> dict[str, Any]:
        rec: dict[str, Any] = {"kind": kind, "seq": seq, "size": size, "idle": idle, "conn": None, "t": None,
                               "time": None, "received": 0, "error": None}
        try:
            s = self.connect()
            rec["conn"] = self.conn
            timeout = self._timeout()
            t0 = time.monotonic()
            rec["t"] = t0
            s.settimeout(timeout)
            s.sendall(b"%d\n" % size)
            view = memoryview(self.buf)
            while rec["received"] < size:
                s.settimeout(max(0.01, t0 + timeout - time.monotonic()))
                n = s.recv_into(view[:min(len(self.buf), size - rec["received"])])
                if not n:
                    raise ConnectionError(f"connection closed after {rec['received']} of {size} bytes")
                rec["received"] += n
            rec["time"] = time.monotonic() - t0
        except (OSError, ConnectionError) as exc:
            rec["error"] = _error(exc)
            rec["t"] = rec["t"] or time.monotonic()
            self.close()
        return rec

    def run(self) -> int:
        cfg = self.cfg
        time.sleep(max(0.0, cfg["start_at"] - time.monotonic()))
        count = errors = 0
        reason = "done"
        try:
            self.connect()
        except OSError:
            self.close()  # the first burst tries again and records the failure
        if cfg.get("warmup"):
            self.emit(self.burst("warmup", -1, cfg["warmup"], None))
        for seq, (size, idle) in enumerate(cfg["plan"]):
            wake = time.monotonic() + idle
            if wake >= cfg["deadline"]:
                reason = "deadline"
                break
            time.sleep(max(0.0, wake - time.monotonic()))
            rec = self.burst("burst", seq, size, idle)
            self.emit(rec)
            count += 1
            errors += rec["error"] is not None
        self.close()
        self.emit({"kind": "end", "count": count, "errors": errors, "reason": reason, "mono": time.monotonic()})
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("address")
    s.add_argument("port", type=int)
    s.add_argument("--nagle", action="store_true", help="keep Nagle's algorithm (default: TCP_NODELAY)")
    c = sub.add_parser("client")
    c.add_argument("config")
    c.add_argument("out")
    args = ap.parse_args(argv)
    if args.role == "server":
        serve(args.address, args.port, args.nagle)
        return 0
    try:
        cfg = load_config(args.config)
    except (OSError, ValueError) as exc:
        print(f"workloads.burst: {exc}", file=sys.stderr)
        return 2
    with open(args.out, "w") as out:
        return Client(cfg, out).run()


if __name__ == "__main__":
    sys.exit(main())
