"""Single bulk transfers for the latency-model measurements (hysteresis paper, section 4: "a Reno
TCP agent on the server opens a connection and immediately begins sending the required amount of
data"). Runs inside the emulated hosts as separate processes:

    python -m catnip.workloads.transfers server ADDRESS PORT
    python -m catnip.workloads.transfers client ADDRESS PORT --plan plan.json --concurrency 50

The client opens one connection per trial and writes the size it wants as one line; the server
announces the transfer to the SPM marker (the CATNIP document-size option, bpf/catnip_sockopt.h)
and sends that many bytes. The latency itself is measured from a capture at the server
(controller/transfers.py): this program only reports which local port carried which trial.
"""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from catnip.workloads import hostprog

SOL_CATNIP, CATNIP_DOC, CATNIP_DOC_LAST = 0x43544E50, 1, 1
MAX_SIZE = 64 * 1024 * 1024
CHUNK = b"x" * 65536
LINGER_S = 0.5


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        line = b""
        while not line.endswith(b"\n") and len(line) < 32:
            part = conn.recv(32 - len(line))
            if not part:
                return
            line += part
        try:
            size = int(line)
        except ValueError:
            return
        if not 0 < size <= MAX_SIZE:
            return
        try:  # the marker's cgroup program stores the extent; without it there is nothing to tell
            conn.setsockopt(SOL_CATNIP, CATNIP_DOC, struct.pack("QII", 0, size, CATNIP_DOC_LAST))
        except OSError:
            pass
        left = size
        while left:
            left -= conn.send(CHUNK[:min(left, len(CHUNK))])
        # The client closes first, once it has everything: a FIN right behind the data would be
        # acknowledged at once and hide the delayed ACK of the last segment (ns-2 sends no FIN).
        while conn.recv(4096):
            pass


def serve(address: str, port: int) -> None:
    hostprog.serve(address, port, _Handler)


def _no_quickack(s: socket.socket) -> None:
    """Delayed ACKs from the first segment on, as ns-2's DelAck sink: Linux starts a connection
    acknowledging every segment ("quick ACK" mode); TCP_QUICKACK = 0 leaves that mode, and it
    must be set again after every read (tcp(7): the flag is not permanent)."""
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)


def _one(address: str, port: int, trial: dict, timeout: float, delayed_acks: bool) -> dict:
    out = {"trial": trial["trial"], "size": trial["size"], "port": None, "received": 0, "error": None,
           "t_start": time.time()}  # orders the trials that used one port (results/transfer_capture.py)
    t0 = time.monotonic()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect((address, port))
            out["port"] = s.getsockname()[1]
            if delayed_acks:
                _no_quickack(s)
            s.sendall(f"{trial['size']}\n".encode())
            while out["received"] < trial["size"]:
                s.settimeout(max(0.1, timeout - (time.monotonic() - t0)))
                data = s.recv(262144)
                if not data:
                    break
                if delayed_acks:
                    _no_quickack(s)
                out["received"] += len(data)
            if out["received"] < trial["size"]:
                out["error"] = f"connection closed after {out['received']} of {trial['size']} bytes"
            # Hold the connection past the longest delayed-ACK timer (200 ms) before closing: a
            # FIN sent at once would carry the ACK of the last segment early.
            time.sleep(LINGER_S)
            # Leaving the block closes the socket: the server's cue to close its side.
    except OSError as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["wall_s"] = time.monotonic() - t0
    return out


def run_client(address: str, port: int, plan: list[dict], concurrency: int, timeout: float,
               delayed_acks: bool = False) -> int:
    """One JSON line per finished trial on stdout; progress lines ("PROGRESS done total") on stderr."""
    lock, done = threading.Lock(), [0]

    def task(trial: dict) -> None:
        res = _one(address, port, trial, timeout, delayed_acks)
        with lock:
            done[0] += 1
            print(json.dumps(res), flush=True)
            print(f"PROGRESS {done[0]} {len(plan)}", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(task, plan))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap, _, c = hostprog.parser(__doc__)  # the server's arguments are those of every host program
    c.add_argument("address")
    c.add_argument("port", type=int)
    c.add_argument("--plan", required=True, help="JSON list of {trial, size}")
    c.add_argument("--concurrency", type=int, default=50)
    c.add_argument("--timeout", type=float, default=300.0, help="seconds per transfer")
    c.add_argument("--delayed-acks", action="store_true", help="no quick-ACK mode: delayed ACKs from the start")
    args = ap.parse_args(argv)
    if args.role == "server":
        serve(args.address, args.port)
        return 0
    with open(args.plan) as fh:
        plan = json.load(fh)
    return run_client(args.address, args.port, plan, args.concurrency, args.timeout, args.delayed_acks)


if __name__ == "__main__":
    sys.exit(main())
