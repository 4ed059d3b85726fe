"""Interactive Telnet of Nouredine & Tobagi (section 2.2.2): keystrokes echoed by a server.

    python -m catnip.workloads.telnet server ADDRESS PORT [--nodelay]
    python -m catnip.workloads.telnet client CONFIG.json OUT.jsonl

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
with its error, the connection closed, and the next keystroke opens a new one. Before them,
{"kind": "woke", "offset": 0, "mono"}: when the client woke at `start_at`
(hostprog.Output.wait_for_first; the runner checks it). The last line is {"kind": "end", "count",
"errors", "reason"}; a client without it ended early.
"""

from __future__ import annotations

import random
import socket
import socketserver
import sys
import time
from typing import Any, TextIO

from catnip.workloads import hostprog

REQUIRED = {"payload", "model", "mean"}  # besides hostprog.CONFIG_KEYS
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


def serve(address: str, port: int, nodelay: bool) -> None:
    hostprog.serve(address, port, _Echo, nodelay=nodelay)


def load_config(path: str) -> dict[str, Any]:
    cfg = hostprog.read_config(path, REQUIRED, OPTIONAL)
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


class Client:
    def __init__(self, cfg: dict[str, Any], out: TextIO):
        self.cfg, self.out = cfg, hostprog.Output(out)
        self.sock: socket.socket | None = None
        self.conn = 0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def connect(self, timeout: float) -> socket.socket:
        if self.sock is None:
            self.conn += 1
            self.sock = hostprog.connect(self.cfg["server"], self.cfg["port"], timeout, bool(self.cfg.get("nodelay")))
        return self.sock

    def keystroke(self, seq: int, data: bytes) -> dict[str, Any]:
        cfg = self.cfg
        rec: dict[str, Any] = {"kind": "echo", "seq": seq, "conn": None, "t": None, "delay": None, "error": None}
        timeout = hostprog.unit_timeout(cfg)
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
            rec["error"] = hostprog.error_text(exc, "timeout: no echo in time")
            rec["t"] = rec["t"] or time.monotonic()
            self.close()  # the stream is out of step: the next keystroke opens a new connection
        return rec

    def run(self) -> int:
        cfg = self.cfg
        self.out.wait_for_first(cfg["start_at"])
        stop_at = cfg["start_at"] + cfg["duration"] if cfg.get("duration") is not None else None
        data = bytes((ord("a") + i % 26) for i in range(cfg["payload"]))
        gap = gaps(cfg["model"], cfg["mean"], cfg["seed"])
        count = errors = 0
        reason = "done"
        try:
            self.connect(hostprog.unit_timeout(cfg))
        except OSError:
            self.close()  # recorded with the first keystroke, which tries again
        while True:
            if cfg.get("keystrokes") is not None and count >= cfg["keystrokes"]:
                break
            rec = self.keystroke(count, data)
            self.out.emit(rec)
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
            hostprog.sleep_until(wake)
        self.close()
        self.out.end(count, errors, reason)
        return 0


def main(argv: list[str] | None = None) -> int:
    return hostprog.main(argv, "catnip.workloads.telnet", __doc__, serve, load_config, Client,
                         server_options={"--nodelay": {"action": "store_true", "help": "TCP_NODELAY on the echo side too"}})


if __name__ == "__main__":
    sys.exit(main())
