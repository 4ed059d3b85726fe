"""Interactive Telnet of Nouredine & Tobagi (section 2.2.2): keystrokes echoed by a server.

    python -m workloads.telnet server ADDRESS PORT [--nodelay]
    python -m workloads.telnet client CONFIG.json OUT.jsonl

Runs inside the hosts' network namespaces. The server echoes whatever it receives, on one
persistent connection per client, and prints READY once it listens. The client opens its
connection at `start_at` (time.monotonic(), one clock for every namespace), then repeats: write
one segment of `payload` bytes, wait for its echo (all `payload` bytes back), wait a gap (the
`model`: exponential with mean `mean`, or fixed at `mean`), for `keystrokes` keystrokes or until
`duration` seconds after start_at have passed (no keystroke starts later; the one under way ends).

Sockets keep Nagle's algorithm (the paper's client is "regulated by Nagle's algorithm": one
segment outstanding at a time) unless `nodelay` is set. With one keystroke in flight and the
next written only after its echo, Nagle never holds a segment back here.

Each keystroke is one JSON line {"kind": "echo", "seq", "conn", "t" (the write), "delay" (write to
the echo's last byte, seconds), "error"}. A keystroke that fails (timeout, reset) is recorded
with its error, the connection closed, and the next keystroke opens a new one. The last line is
{"kind": "end", "count", "errors", "reason"}; a client without it ended early.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import socketserver
import sys
import time
from typing import Any, TextIO

REQUIRED = {"client", "server", "port", "payload", "model", "mean", "seed", "start_at", "deadline", "timeout"}
OPTIONAL = {"duration", "keystrokes", "nodelay"}


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        if self.server.nodelay:  # type: ignore[attr-defined]
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                conn.sendall(data)
        except OSError:
            return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def serve(address: str, port: int, nodelay: bool) -> None:
    with _Server((address, port), _Echo) as srv:
        srv.nodelay = nodelay  # type: ignore[attr-defined]
        print("READY", flush=True)
        srv.serve_forever()


def load_config(path: str) -> dict[str, Any]:
    with open(path) as fh:
        cfg = json.load(fh)
    missing, unknown = REQUIRED - cfg.keys(), cfg.keys() - REQUIRED - OPTIONAL
    if missing or unknown:
        raise ValueError(f"{path}: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}")
    if (cfg.get("duration") is None) == (cfg.get("keystrokes") is None):
        raise ValueError(f"{path}: give exactly one of duration and keystrokes")
    if cfg["model"] not in ("exponential", "fixed"):
        raise ValueError(f"{path}: model {cfg['model']!r} not allowed: 'exponential' or 'fixed'")
    if not isinstance(cfg["payload"], int) or cfg["payload"] < 1:
        raise ValueError(f"{path}: payload must be a whole number of bytes, at least 1")
    return cfg


def gaps(model: str, mean: float, seed: int):
    """Successive gaps (s) between an echo and the next keystroke."""
    rng = random.Random(seed)
    while True:
        yield rng.expovariate(1.0 / mean) if model == "exponential" and mean > 0 else float(mean)


def _error(exc: BaseException) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout: no echo in time"
    return f"{type(exc).__name__}: {exc}"


class Client:
    def __init__(self, cfg: dict[str, Any], out: TextIO):
        self.cfg, self.out = cfg, out
        self.sock: socket.socket | None = None
        self.conn = 0

    def emit(self, rec: dict[str, Any]) -> None:
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def connect(self, timeout: float) -> socket.socket:
        if self.sock is None:
            self.conn += 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                if self.cfg.get("nodelay"):
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.settimeout(timeout)
                s.connect((self.cfg["server"], self.cfg["port"]))
            except BaseException:
                s.close()
                raise
            self.sock = s
        return self.sock

    def keystroke(self, seq: int, data: bytes) -> dict[str, Any]:
        cfg = self.cfg
        rec: dict[str, Any] = {"kind": "echo", "seq": seq, "conn": None, "t": None, "delay": None, "error": None}
        timeout = max(0.01, min(cfg["timeout"], cfg["deadline"] - time.monotonic()))
        try:
            s = self.connect(timeout)
            rec["conn"] = self.conn
            s.settimeout(timeout)
            t0 = time.monotonic()
            rec["t"] = t0
            s.sendall(data)
            got = 0
            while got < len(data):
                s.settimeout(max(0.01, t0 + timeout - time.monotonic()))
                part = s.recv(len(data) - got)
                if not part:
                    raise ConnectionError(f"connection closed after {got} of {len(data)} echoed bytes")
                got += len(part)
            rec["delay"] = time.monotonic() - t0
        except (OSError, ConnectionError) as exc:
            rec["error"] = _error(exc)
            rec["t"] = rec["t"] or time.monotonic()
            self.close()  # the stream is out of step: the next keystroke opens a new connection
        return rec

    def run(self) -> int:
        cfg = self.cfg
        time.sleep(max(0.0, cfg["start_at"] - time.monotonic()))
        stop_at = cfg["start_at"] + cfg["duration"] if cfg.get("duration") is not None else None
        data = bytes((ord("a") + i % 26) for i in range(cfg["payload"]))
        gap = gaps(cfg["model"], cfg["mean"], cfg["seed"])
        count = errors = 0
        reason = "done"
        try:
            self.connect(max(0.01, min(cfg["timeout"], cfg["deadline"] - time.monotonic())))
        except OSError:
            self.close()  # recorded with the first keystroke, which tries again
        while True:
            if cfg.get("keystrokes") is not None and count >= cfg["keystrokes"]:
                break
            rec = self.keystroke(count, data)
            self.emit(rec)
            count += 1
            errors += rec["error"] is not None
            if cfg.get("keystrokes") is not None and count >= cfg["keystrokes"]:
                break
            wake = time.monotonic() + next(gap)
            if stop_at is not None and wake >= stop_at:
                break
            if wake >= cfg["deadline"]:
                reason = "deadline"
                break
            time.sleep(max(0.0, wake - time.monotonic()))
        self.close()
        self.emit({"kind": "end", "count": count, "errors": errors, "reason": reason, "mono": time.monotonic()})
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("address")
    s.add_argument("port", type=int)
    s.add_argument("--nodelay", action="store_true", help="TCP_NODELAY on the echo side too")
    c = sub.add_parser("client")
    c.add_argument("config")
    c.add_argument("out")
    args = ap.parse_args(argv)
    if args.role == "server":
        serve(args.address, args.port, args.nodelay)
        return 0
    try:
        cfg = load_config(args.config)
    except (OSError, ValueError) as exc:
        print(f"workloads.telnet: {exc}", file=sys.stderr)
        return 2
    with open(args.out, "w") as out:
        return Client(cfg, out).run()


if __name__ == "__main__":
    sys.exit(main())
