"""The newCWV baseline's window at burst start (docs/reproduction-newcwv.md, "The baseline at 0.25 s
idle"): the kernel's two shrinks of an unused window as benchmarks/cwnd_trace.py reads them, on
values worked out by hand from net/ipv4/tcp_output.c, and on real kernel TCP through the tracer.

The idle periods in the kernel test are the experiment, not waits for readiness."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from benchmarks import cwnd_trace as ct
from tests.conftest import need_root


def test_restart_halves_once_per_rto_the_idle_exceeds():
    # HZ 250: RTO 404 ms = 101 jiffies. The Fig. 7 cells: the sender idles the client's idle plus one
    # RTT (the last segment's way out and the request's way back): 0.25 s -> 0.45 s = 113 jiffies.
    assert ct.restart_value(57, 113, 101, 3) == 28        # 113 - 101 > 0 once: one halving
    assert ct.restart_value(57, 101, 101, 3) == 57        # idle = RTO: the kernel restarts only above it,
    assert ct.restart_value(57, 202, 101, 3) == 28        # and 202 - 2 x 101 = 0 is not a second halving
    assert ct.restart_value(57, 300, 101, 3) == 14        # 1 s idle (1.2 s at the sender): twice
    assert ct.restart_value(57, 800, 101, 3) == 3         # 3 s idle: down to the IW floor
    assert ct.restart_value(2, 800, 101, 3) == 2          # never raised to IW
    assert ct.restart_value(113, 113, 101, 3) == 56


def test_application_limited_decay_is_halfway_to_the_window_used():
    assert ct.decay_value(100, 30, 3) == 65
    assert ct.decay_value(100, 1, 10) == 55                # used below IW counts as IW
    assert ct.decay_value(20, 30, 3) == 20                 # a window fully used is kept


def _ev(kind: str, t: float, cwnd: int, **kw) -> dict:
    base = {"t_ns": int(t * 1e9), "netns": 7, "kind": kind, "sport": 18070, "dport": 40000, "len": 0, "cwnd": cwnd,
            "ssthresh": 2147483647, "packets_out": 0, "max_packets_out": 0, "snd_una": 0, "snd_nxt": 0, "rcv_nxt": 0,
            "srtt_us": 200000, "rto_j": 101, "lsnd_age_j": 0, "stamp_age_j": 0, "cwnd_used": 0, "ca_state": 0,
            "cwnd_limited": 0, "cc": "reno"}
    base.update(kw)
    return base


def test_bursts_reads_requests_first_flights_and_the_shrink():
    """A 29-segment burst after a 0.45 s idle from cwnd 45: the restart halves to 22, the first flight
    is 22 segments, the rest goes after the first ACK; the next burst, after a short idle with the
    window unused for an RTO, starts from the decayed window."""
    evs = [_ev("rcv", 0.0, 45, len=10, lsnd_age_j=113, stamp_age_j=63)]
    evs += [_ev("xmit", 0.001 + i * 1e-5, 22, len=1514) for i in range(22)]
    evs += [_ev("rcv", 0.2, 22, packets_out=22)]
    evs += [_ev("xmit", 0.2001 + i * 1e-5, 24, len=1514) for i in range(7)]
    evs += [_ev("rcv", 0.3, 50, len=10, lsnd_age_j=25, stamp_age_j=101, cwnd_used=29)]
    evs += [_ev("xmit", 0.301, 39, len=1514), _ev("xmit", 0.3011, 39, len=66)]
    per = ct.bursts(evs, hz_=250, iw=3)
    [(key, bs)] = per.items()
    assert key == (7, 40000, "reno") and len(bs) == 2
    b = bs[0]
    assert (b.idle_s, b.rto_s, b.cwnd_before, b.cwnd_start) == (0.452, 0.404, 45, 22)
    assert (b.start_change, b.first_flight, b.segments, b.decays) == ("restart", 22, 29, [])
    assert (bs[1].cwnd_start, bs[1].start_change, bs[1].segments) == (39, "decay", 1)  # (50 + 29) / 2
    # a drop that matches neither rule is not explained away
    evs[-2]["cwnd"] = 30
    assert ct.bursts(evs, hz_=250, iw=3)[key][1].start_change == "?"


# One connection in a namespace of its own (unshare --net: it goes with the process), a 1500-byte MTU
# on its loopback; the server answers each request line "N" with N bytes. Requests: 300000 bytes to
# grow cwnd, then an idle of IDLE seconds (several RTOs: the RTO is about 0.2 s on loopback), then
# 3000 bytes. argv: tcp_slow_start_after_idle, port, idle.
PAIR = r"""
import socket, subprocess, sys, threading, time
subprocess.run(["ip", "link", "set", "lo", "up", "mtu", "1500"], check=True)
open("/proc/sys/net/ipv4/tcp_slow_start_after_idle", "w").write(sys.argv[1])
port, idle = int(sys.argv[2]), float(sys.argv[3])
ls = socket.socket()
ls.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"reno")
ls.bind(("127.0.0.1", port))
ls.listen(1)
def serve():
    a, _ = ls.accept()
    for line in a.makefile("rb"):
        a.sendall(b"x" * int(line))
    a.close()
threading.Thread(target=serve, daemon=True).start()
c = socket.create_connection(("127.0.0.1", port))
def fetch(n):
    c.sendall(b"%d\n" % n)
    got = 0
    while got < n:
        got += len(c.recv(1 << 20))
fetch(300000)
time.sleep(idle)
fetch(3000)
c.close()
print("done", flush=True)
"""


@pytest.mark.parametrize("ssai", [1, 0])
def test_the_tracer_sees_the_kernels_restart_after_idle(ssai):
    """Real kernel TCP (reno) through the tracer: after an idle of 0.7 s the second response's first
    segment leaves with cwnd = tcp_cwnd_restart's value (halved once per RTO the idle exceeds) when
    tcp_slow_start_after_idle is 1, and with the window unchanged when it is 0."""
    need_root()
    if not shutil.which("unshare") or not shutil.which("clang"):
        pytest.skip("needs unshare(1) and clang")
    port = 18097
    with ct.Tracer(port) as tracer:
        out = subprocess.run(["unshare", "--net", sys.executable, "-c", PAIR, str(ssai), str(port), "0.7"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr
        evs = tracer.events()
    per = ct.bursts(evs, iw=10)
    assert len(per) == 1, per.keys()
    [bs] = per.values()
    assert len(bs) == 2
    first, second = bs
    assert first.cwnd_start == 10 and second.cwnd_before > 30  # IW 10, grown by the 300000 bytes
    assert second.idle_s > 3 * second.rto_s  # the idle the kernel measured, against its own RTO
    if ssai:
        want = ct.restart_value(second.cwnd_before, round(second.idle_s * ct.hz()), round(second.rto_s * ct.hz()), 10)
        assert want < second.cwnd_before // 4
        assert (second.cwnd_start, second.start_change) == (want, "restart")
    else:
        assert (second.cwnd_start, second.start_change) == (second.cwnd_before, "")


def test_cell_summary_leaves_out_each_cells_first_burst():
    """A cell's first burst follows another cell's (its window comes from there): the summary's
    ranges are over the rest, which is what docs/reproduction-newcwv.md's table quotes."""
    def burst(n, cell, before, start, change):
        return ct.Burst(n=n, t=float(n), idle_s=0.452, rto_s=0.404, stamp_age_s=0.25, cwnd_before=before,
                        cwnd_used=0, cwnd_start=start, start_change=change, first_flight=start, segments=29,
                        cell=cell)
    bs = [burst(0, "warm-up", 3, 3, ""), burst(1, "40960B/0.25s", 7, 3, "restart"),
          burst(2, "40960B/0.25s", 32, 16, "restart"), burst(3, "40960B/0.25s", 56, 28, "restart"),
          burst(4, "40960B/1s", 56, 14, "restart")]
    rows = {r["cell"]: r for r in ct.cell_summary({(1, 2, "reno"): bs})}
    assert set(rows) == {"40960B/0.25s", "40960B/1s"}  # no warm-up row
    r = rows["40960B/0.25s"]
    assert (r["bursts"], r["cwnd_before"], r["cwnd_start"], r["start_change"]) == (3, [32, 56], [16, 28], ["restart"])
    assert rows["40960B/1s"]["cwnd_start"] == [14, 14]  # a cell of one burst keeps it
