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

import socket
import socketserver
import sys
import time
from typing import Any, TextIO

from workloads import hostprog

MAX_SIZE = 1 << 30
CHUNK = b"x" * 65536
REQUIRED = {"plan"}  # besides hostprog.CONFIG_KEYS
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


def serve(address: str, port: int, nagle: bool) -> None:
    hostprog.serve(address, port, _Handler, nagle=nagle)


def load_config(path: str) -> dict[str, Any]:
    cfg = hostprog.read_config(path, REQUIRED, OPTIONAL)
    for entry in cfg["plan"]:
        if (not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], int)
                or not 0 < entry[0] <= MAX_SIZE or entry[1] < 0):
            raise ValueError(f"{path}: plan entry {entry!r} is not [size in bytes, idle in seconds]")
    return cfg


class Client:
    def __init__(self, cfg: dict[str, Any], out: TextIO):
        self.cfg, self.out = cfg, hostprog.Output(out)
        self.sock: socket.socket | None = None
        self.conn = 0
        self.buf = bytearray(1 << 18)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def connect(self) -> socket.socket:
        if self.sock is None:
            self.conn += 1
            self.sock = hostprog.connect(self.cfg["server"], self.cfg["port"], hostprog.unit_timeout(self.cfg))
        return self.sock

    def burst(self, kind: str, seq: int, size: int, idle: float | None) -> dict[str, Any]:
        rec: dict[str, Any] = {"kind": kind, "seq": seq, "size": size, "idle": idle, "conn": None, "t": None,
                               "time": None, "received": 0, "error": None}
        try:
            s = self.connect()
            rec["conn"] = self.conn
            timeout = hostprog.unit_timeout(self.cfg)
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
            rec["error"] = hostprog.error_text(exc)
            rec["t"] = rec["t"] or time.monotonic()
            self.close()
        return rec

    def run(self) -> int:
        cfg = self.cfg
        hostprog.sleep_until(cfg["start_at"])
        count = errors = 0
        reason = "done"
        try:
            self.connect()
        except OSError:
            self.close()  # the first burst tries again and records the failure
        if cfg.get("warmup"):
            self.out.emit(self.burst("warmup", -1, cfg["warmup"], None))
        for seq, (size, idle) in enumerate(cfg["plan"]):
            wake = time.monotonic() + idle
            if wake >= cfg["deadline"]:
                reason = "deadline"
                break
            hostprog.sleep_until(wake)
            rec = self.burst("burst", seq, size, idle)
            self.out.emit(rec)
            count += 1
            errors += rec["error"] is not None
        self.close()
        self.out.end(count, errors, reason)
        return 0


def main(argv: list[str] | None = None) -> int:
    return hostprog.main(argv, "workloads.burst", __doc__, serve, load_config, Client,
                         server_options={"--nagle": {"action": "store_true",
                                                     "help": "keep Nagle's algorithm (default: TCP_NODELAY)"}})


if __name__ == "__main__":
    sys.exit(main())
