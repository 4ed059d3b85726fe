"""Bursts after idle on one persistent connection: the HTTP workload of the newCWV paper
(sections 4.2-4.6; docs/reproduction-newcwv.md), after the authors' tmix client.

    python -m catnip.workloads.burst server ADDRESS PORT [--nagle] [--stats STATS.jsonl]
    python -m catnip.workloads.burst client CONFIG.json OUT.jsonl

Runs inside the hosts' network namespaces. The server answers each request line "B ID\\n" (or
"B\\n") on a connection with B bytes, as many times as asked, and prints READY once it listens.
ID is the client's number of the burst (its `seq`; the warm-up is -1), echoed in the server's
statistics so they join the client's records exactly. It sets TCP_NODELAY (as the tmix server
does), so a burst's last partial segment is not held back by Nagle; `--nagle` keeps Nagle's
algorithm.

With `--stats`, the server writes the sender's side of every burst, one JSON line each, flushed
at once (the file is emptied when the server starts):

* {"kind": "request", "peer": "IP:PORT" (the connection), "client": IP, "id": ID or null, "n"
  (the request's number on the connection, from 0), "size", "t" (time.monotonic() just after the
  burst's first send() call), "cwnd", "ssthresh" (segments; ssthresh 2147483647 is the kernel's
  initial infinity), "total_retrans", "rtt_us", "rto_us", "mss", "ca_state"}: TCP_INFO read just
  after the first send() of the burst, so cwnd and ssthresh are those the burst starts with,
  after the kernel's restart after idle (RFC 2861, net.ipv4.tcp_slow_start_after_idle), which
  acts while that first send() queues the burst's first segment (tcp_skb_entail ->
  tcp_slow_start_after_idle_check). On a path whose RTT is longer than the call (every emulated
  path here) no ACK of the burst can have grown cwnd yet.
* {"kind": "close", "peer", "client", "t", "requests", "total_retrans"} when the connection
  ends (the client closed it, or sending failed): the final reading. The retransmissions of
  burst k of a connection are total_retrans at request k + 1 minus at request k, the last
  burst's the close record's minus its own (workloads/apps/burst.py computes them).

struct tcp_info is read with the offsets of the Linux UAPI header <linux/tcp.h> (TCP_INFO_FIELDS:
bytes 0-103, through tcpi_total_retrans). The kernel copies as many bytes as asked for, up to
its own struct's size, and new fields are only ever appended, so the offsets do not move.

The client opens one connection at `start_at` (time.monotonic(), one clock for every
namespace), optionally fetches a `warmup` burst, then for each (size, idle) of its `plan`: stays
idle `idle` seconds (counted from the previous burst's last byte, or from the connection), writes
the request and times the burst from the request write to the last byte received. The idle of
a plan entry is thus the idle that PRECEDES its burst: the quantity newCWV's gain depends on.

Each burst is one JSON line {"kind": "burst", "seq", "size", "idle", "conn", "t" (the request
write), "time" (s), "received", "error"} (the warm-up: kind "warmup"). A failed burst is recorded
with its error and the connection closed; the next burst opens a new connection (a new `conn`).
Before them, {"kind": "woke", "offset": 0, "mono"}: when the client woke at `start_at`
(hostprog.Output.wait_for_first; the runner checks it). The last line is {"kind": "end", "count",
"errors", "reason"}; a client without it ended early.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import sys
import time
from typing import Any, TextIO

from catnip.workloads import hostprog

MAX_SIZE = 1 << 30
CHUNK = b"x" * 65536
REQUIRED = {"plan"}  # besides hostprog.CONFIG_KEYS
OPTIONAL = {"warmup"}


# struct tcp_info of the Linux UAPI header include/uapi/linux/tcp.h: name -> (byte offset, struct
# format). Eight __u8 fields (state, ca_state, retransmits, probes, backoff, options, the two
# wscale nibbles, app_limited/fastopen bits) fill bytes 0-7; then __u32 fields from byte 8: rto 8,
# ato 12, snd_mss 16, rcv_mss 20, unacked 24, sacked 28, lost 32, retrans 36, fackets 40,
# last_data_sent 44, last_ack_sent 48, last_data_recv 52, last_ack_recv 56, pmtu 60,
# rcv_ssthresh 64, rtt 68, rttvar 72, snd_ssthresh 76, snd_cwnd 80, advmss 84, reordering 88,
# rcv_rtt 92, rcv_space 96, total_retrans 100 (then __u64 pacing_rate at 104).
TCP_INFO_FIELDS = {"state": (0, "B"), "ca_state": (1, "B"), "rto_us": (8, "I"), "mss": (16, "I"),
                   "unacked": (24, "I"), "lost": (32, "I"), "retrans": (36, "I"), "rtt_us": (68, "I"),
                   "ssthresh": (76, "I"), "cwnd": (80, "I"), "total_retrans": (100, "I")}
TCP_INFO_LEN = 104  # through tcpi_total_retrans
TCP_ESTABLISHED = 1
INFINITE_SSTHRESH = 0x7FFFFFFF  # TCP_INFINITE_SSTHRESH: no loss yet


def tcp_info(sock: socket.socket) -> dict[str, int]:
    """The fields of TCP_INFO_FIELDS of a TCP socket (cwnd and ssthresh in segments, times in
    microseconds). Raises OSError if the kernel gives less than TCP_INFO_LEN bytes."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    if len(raw) < TCP_INFO_LEN:
        raise OSError(f"TCP_INFO gave {len(raw)} bytes, fewer than the {TCP_INFO_LEN} needed")
    return {name: struct.unpack_from("=" + fmt, raw, offset)[0] for name, (offset, fmt) in TCP_INFO_FIELDS.items()}


def parse_request(line: bytes) -> tuple[int, int | None] | None:
    """(size, id) of a request line "SIZE" or "SIZE ID"; None if it is not one."""
    parts = line.split()
    if not 1 <= len(parts) <= 2:
        return None
    try:
        size, rid = int(parts[0]), (int(parts[1]) if len(parts) == 2 else None)
    except ValueError:
        return None
    return (size, rid) if 0 < size <= MAX_SIZE else None


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        stats: hostprog.Output | None = self.server.stats  # type: ignore[attr-defined]
        if not self.server.nagle:  # type: ignore[attr-defined]
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            ip, port = conn.getpeername()[:2]
        except OSError:  # reset before we got to it
            return
        peer = f"{ip}:{port}"
        buf = b""
        n = 0
        try:
            while True:
                while b"\n" not in buf:
                    part = conn.recv(64)
                    if not part or len(buf) > 64:
                        return
                    buf += part
                line, _, buf = buf.partition(b"\n")
                req = parse_request(line)
                if req is None:
                    return
                size, rid = req
                left = size
                first = True
                while left:
                    left -= conn.send(CHUNK[:min(left, len(CHUNK))])
                    if first and stats is not None:
                        first = False
                        # The burst's start: the restart after idle has acted on this first send().
                        stats.emit({"kind": "request", "peer": peer, "client": ip, "id": rid, "n": n, "size": size,
                                    "t": time.monotonic(), **_reading(conn)})
                n += 1
        except OSError:
            return
        finally:
            if stats is not None:
                stats.emit({"kind": "close", "peer": peer, "client": ip, "t": time.monotonic(), "requests": n,
                            "total_retrans": _reading(conn).get("total_retrans")})


def _reading(conn: socket.socket) -> dict[str, int | None]:
    """What a stats record keeps of TCP_INFO; None values if the socket cannot be read."""
    keys = ("cwnd", "ssthresh", "total_retrans", "rtt_us", "rto_us", "mss", "ca_state")
    try:
        info = tcp_info(conn)
    except OSError:
        return dict.fromkeys(keys)
    return {k: info[k] for k in keys}


def serve(address: str, port: int, nagle: bool, stats: str | None = None) -> None:
    out = hostprog.Output(open(stats, "w")) if stats else None  # noqa: SIM115 - open while the server runs
    hostprog.serve(address, port, _Handler, nagle=nagle, stats=out)


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
            s.sendall(b"%d %d\n" % (size, seq))
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
        self.out.wait_for_first(cfg["start_at"])
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
    return hostprog.main(argv, "catnip.workloads.burst", __doc__, serve, load_config, Client,
                         server_options={"--nagle": {"action": "store_true",
                                                     "help": "keep Nagle's algorithm (default: TCP_NODELAY)"},
                                         "--stats": {"metavar": "STATS.jsonl", "default": None,
                                                     "help": "write each burst's TCP_INFO (cwnd, ssthresh,"
                                                             " retransmissions) here, one JSON line each"}})


if __name__ == "__main__":
    sys.exit(main())
