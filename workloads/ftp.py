"""FTPshort of Nouredine & Tobagi (section 2.2.3; reading notes 3.2): files of Pareto sizes
separated by exponential gaps, each file on a new TCP connection.

    python -m catnip.workloads.ftp server ADDRESS PORT
    python -m catnip.workloads.ftp client CONFIG.json OUT.jsonl

Runs inside the hosts' network namespaces. A connection carries one request line, then the file:
"GET SIZE\\n" and the server sends SIZE bytes (download), or "PUT SIZE\\n" followed by SIZE bytes
from the client (upload), after which the server answers "OK T\\n", T its time.monotonic() when the
last byte arrived (CLOCK_MONOTONIC is one clock for every namespace of the machine; with the
server on another machine both ends run on the controller's clock, workloads/onclock.py, and the
time carries the offset's uncertainty and drift, docs/cluster.md). The server prints READY once it
listens.

The client runs one stream per direction (`directions`: ["down"], ["up"] or both, concurrently),
each with its own sizes and gaps drawn from the seed: it waits a gap after `start_at`, transfers
a file, waits a gap after that file's end, and so on, for `files` files per stream or until
`duration` seconds after start_at (no file starts later; the one under way ends). Sizes are
Pareto (`shape`, `mean`, capped at `max_size`: a draw above the cap becomes the cap, which
lowers the mean) or fixed (`size`, the paper's 200 KB probes); gaps exponential or fixed.

Each file is one JSON line {"kind": "file", "dir", "seq", "size", "t" (connection start: just
before connect), "time" (t to the last byte at the receiver, s), "received" (bytes the receiver
got; None when unknown: an upload that failed), "error"}. Before each stream's first file,
{"kind": "woke", "offset" (its first gap), "stream" (the direction), "mono"}: when the stream
woke for it (hostprog.Output.wait_for_first; the runner checks it). The last line is {"kind":
"end", "count", "errors", "reason"}; a client without it ended early.
"""

from __future__ import annotations

import random
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

from catnip.workloads import hostprog

MAX_SIZE = 1 << 34
CHUNK = b"x" * 65536
REQUIRED = {"directions", "sizes", "gaps"}  # besides hostprog.CONFIG_KEYS
OPTIONAL = {"files", "duration"}


# --- the samplers ------------------------------------------------------------------------------

def pareto_scale(mean: float, shape: float) -> float:
    """The minimum x_m of a Pareto distribution with this mean (shape > 1): mean (a - 1) / a."""
    return mean * (shape - 1) / shape


def sizes(spec: dict[str, Any], seed: Any) -> Iterator[int]:
    """File sizes in bytes: {"model": "fixed", "size"} or {"model": "pareto", "mean", "shape",
    "max_size" (or None)}; Pareto by inversion, x_m / U^(1/a) with U in (0, 1]."""
    rng = random.Random(seed)
    if spec["model"] == "fixed":
        while True:
            yield int(spec["size"])
    xm, shape, cap = pareto_scale(spec["mean"], spec["shape"]), spec["shape"], spec.get("max_size")
    while True:
        size = max(1, round(xm / (1.0 - rng.random()) ** (1.0 / shape)))
        yield min(size, cap) if cap else size


def gaps(spec: dict[str, Any], seed: Any) -> Iterator[float]:
    """Gaps in seconds: {"model": "exponential" | "fixed", "mean"}."""
    rng = random.Random(seed)
    while True:
        mean = float(spec["mean"])
        yield rng.expovariate(1.0 / mean) if spec["model"] == "exponential" and mean > 0 else mean


# --- the server --------------------------------------------------------------------------------

class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(self.server.timeout_s)  # type: ignore[attr-defined]
        try:
            buf = b""
            while b"\n" not in buf:
                part = conn.recv(64)
                if not part or len(buf) > 64:
                    return
                buf += part
            line, _, rest = buf.partition(b"\n")
            verb, _, arg = line.decode("ascii", "replace").partition(" ")
            size = int(arg) if arg.isdigit() else 0
            if verb not in ("GET", "PUT") or not 0 < size <= MAX_SIZE:
                return
            if verb == "GET":
                left = size
                while left:
                    left -= conn.send(CHUNK[:min(left, len(CHUNK))])
            else:
                got = len(rest)
                sink = bytearray(1 << 18)
                while got < size:
                    n = conn.recv_into(sink, min(len(sink), size - got))
                    if not n:
                        return
                    got += n
                conn.sendall(b"OK %.9f\n" % time.monotonic())
            # The client closes first, once it has everything (as in workloads/transfers.py).
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(4096):
                pass
        except OSError:
            return


def serve(address: str, port: int, timeout: float) -> None:
    hostprog.serve(address, port, _Handler, timeout_s=timeout)  # not `timeout`: BaseServer has one


# --- the client --------------------------------------------------------------------------------

def load_config(path: str) -> dict[str, Any]:
    cfg = hostprog.read_config(path, REQUIRED, OPTIONAL)
    if (cfg.get("files") is None) == (cfg.get("duration") is None):
        raise ValueError(f"{path}: give exactly one of files and duration")
    if not cfg["directions"] or set(cfg["directions"]) - {"down", "up"}:
        raise ValueError(f"{path}: directions must be a non-empty list of 'down' and 'up'")
    return cfg


class Client:
    def __init__(self, cfg: dict[str, Any], out: TextIO):
        self.cfg, self.out = cfg, hostprog.Output(out)
        self.lock = threading.Lock()
        self.count = self.errors = 0
        self.reason = "done"

    def transfer(self, direction: str, seq: int, size: int) -> dict[str, Any]:
        cfg = self.cfg
        rec: dict[str, Any] = {"kind": "file", "dir": direction, "seq": seq, "size": size, "t": time.monotonic(),
                               "time": None, "received": 0 if direction == "down" else None, "error": None}
        t0 = rec["t"]
        end_by = min(t0 + cfg["timeout"], cfg["deadline"])

        def left() -> float:
            remaining = end_by - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("file timeout")
            return remaining

        try:
            with hostprog.connect(cfg["server"], cfg["port"], left()) as s:
                if direction == "down":
                    s.sendall(b"GET %d\n" % size)
                    buf = bytearray(1 << 18)
                    while rec["received"] < size:
                        s.settimeout(left())
                        n = s.recv_into(buf, min(len(buf), size - rec["received"]))
                        if not n:
                            raise ConnectionError(f"connection closed after {rec['received']} of {size} bytes")
                        rec["received"] += n
                    rec["time"] = time.monotonic() - t0
                else:
                    s.sendall(b"PUT %d\n" % size)
                    sent = 0
                    while sent < size:
                        s.settimeout(left())
                        sent += s.send(CHUNK[:min(size - sent, len(CHUNK))])
                    reply = b""
                    while not reply.endswith(b"\n"):
                        s.settimeout(left())
                        part = s.recv(64)
                        if not part or len(reply) > 64:
                            raise ConnectionError(f"no acknowledgement from the server after {sent} bytes")
                        reply += part
                    verb, _, stamp = reply.decode("ascii", "replace").strip().partition(" ")
                    if verb != "OK":
                        raise ConnectionError(f"unexpected reply {reply[:40]!r}")
                    rec["received"], rec["time"] = size, float(stamp) - t0
        except (OSError, ConnectionError, ValueError) as exc:
            rec["error"] = hostprog.error_text(exc)
        return rec

    def stream(self, direction: str) -> None:
        cfg = self.cfg
        size_of = sizes(cfg["sizes"], f"{cfg['seed']}/{direction}/size")
        gap_of = gaps(cfg["gaps"], f"{cfg['seed']}/{direction}/gap")
        stop_at = cfg["start_at"] + cfg["duration"] if cfg.get("duration") is not None else None
        first_gap = next(gap_of)
        wake = cfg["start_at"] + first_gap
        seq = 0
        while cfg.get("files") is None or seq < cfg["files"]:
            if stop_at is not None and wake >= stop_at:
                break
            if wake >= cfg["deadline"]:
                self.reason = "deadline"
                break
            if seq == 0:
                self.out.wait_for_first(cfg["start_at"], first_gap, direction)
            else:
                hostprog.sleep_until(wake)
            rec = self.transfer(direction, seq, next(size_of))
            self.out.emit(rec)
            with self.lock:
                self.count += 1
                self.errors += rec["error"] is not None
            seq += 1
            wake = time.monotonic() + next(gap_of)

    def run(self) -> int:
        threads = [threading.Thread(target=self.stream, args=(d,), daemon=True) for d in self.cfg["directions"]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.out.end(self.count, self.errors, self.reason)
        return 0


def main(argv: list[str] | None = None) -> int:
    return hostprog.main(argv, "catnip.workloads.ftp", __doc__, serve, load_config, Client,
                         server_options={"--timeout": {"type": float, "default": 600.0,
                                                       "help": "seconds a connection may stay silent"}})


if __name__ == "__main__":
    sys.exit(main())
