"""Synthetic TCP traces seen by an edge marker: both directions of the marked link, for the TCPF
reference (tcpf_ref.py) and the engine's replay of the same packets.

A small Reno-like sender per flow (slow start, congestion avoidance, fast retransmit on three
duplicate ACKs, a retransmission timeout that doubles, go-back-N after it: RFC 5681, RFC 6298),
an immediate cumulative ACK per segment, and losses decided by a script *downstream of the
marker*: the marker sees every segment sent, lost or not, and only the ACKs that come back.
It is a trace generator, not a TCP model to measure anything with.
"""

from __future__ import annotations

import csv
import heapq
import random
from dataclasses import dataclass, field

from tests.reference.tcpf_ref import ACK, FIN, RST, SYN, Pkt

HDR = 40          # IPv4 + TCP headers without options
MSS = 1460


@dataclass
class Sender:
    """One TCP connection's data direction. `lose(n, k)`: is the k-th transmission (0 = first) of
    segment n lost after the marker? `app`: None for a bulk sender, else the times (us) at which
    the application hands one segment each (tiny, application-limited flows)."""
    name: int
    start_us: int
    segments: int
    rtt_us: int
    lose: object = None
    app: list | None = None
    max_cwnd: int = 20
    gap_us: int = 1200            # serialization of one 1500-byte segment at 10 Mbit/s
    isn: int = 1000
    handshake: bool = True
    close: str = "fin"            # "fin", "rst" or "" (just stops)
    min_rto_us: int = 1_000_000   # RFC 6298 (2.4): RTO at least 1 s
    src: str = "10.0.1.1"
    dst: str = "10.0.2.1"
    sport: int = 40000
    dport: int = 5201


def _seq(s: Sender, n: int) -> int:
    """Sequence number of segment n (the SYN takes one, RFC 793)."""
    return (s.isn + (1 if s.handshake else 0) + n * MSS) % (1 << 32)


def simulate(senders: list[Sender], until_us: int) -> list[Pkt]:
    """Every packet the marker sees, in time order (ties in creation order)."""
    out: list[tuple[int, int, Pkt]] = []
    events: list = []
    order = [0]

    def emit(t, p):
        out.append((t, order[0], p))
        order[0] += 1

    def push(t, what, s, *args):
        heapq.heappush(events, (t, order[0], what, s.name, args))
        order[0] += 1

    state = {}
    by_name = {s.name: s for s in senders}
    for s in senders:
        st = state[s.name] = {"una": 0, "nxt": 0, "cwnd": 2.0, "ssthresh": 1e9, "dup": 0, "tx": {},
                              "rto": s.min_rto_us, "timer": None, "recover": -1, "avail": 0,
                              "rcv": set(), "rcv_next": 0, "last_send": 0, "done": False}
        if s.app is None:
            st["avail"] = s.segments
        else:
            for t in s.app:
                push(t, "app", s)
        if s.handshake:
            emit(s.start_us, _pkt(s, s.start_us, "fwd", SYN, s.isn, 0, 0))
            emit(s.start_us + s.rtt_us // 2, _pkt(s, s.start_us + s.rtt_us // 2, "rev", SYN | ACK, 7, s.isn + 1, 0))
            push(s.start_us + s.rtt_us, "send", s)
        else:
            push(s.start_us, "send", s)

    def arm(s, st, t):
        st["timer"] = t + st["rto"]
        push(st["timer"], "rto", s, st["timer"])

    def transmit(s, st, n, t):
        k = st["tx"].get(n, 0)
        st["tx"][n] = k + 1
        t = max(t, st["last_send"] + s.gap_us)
        st["last_send"] = t
        if t > until_us:
            return
        emit(t, _pkt(s, t, "fwd", ACK, _seq(s, n), 8, MSS))
        if st["timer"] is None:
            arm(s, st, t)
        if s.lose is None or not s.lose(n, k):
            push(t + s.rtt_us // 2, "arrive", s, n)

    def send_window(s, st, t):
        while st["nxt"] < st["avail"] and st["nxt"] - st["una"] < min(int(st["cwnd"]), s.max_cwnd):
            transmit(s, st, st["nxt"], t)
            st["nxt"] += 1
        if st["una"] >= s.segments and not st["done"]:
            st["done"] = True
            if s.close == "fin":
                tt = st["last_send"] + s.gap_us
                if tt <= until_us:
                    emit(tt, _pkt(s, tt, "fwd", FIN | ACK, _seq(s, s.segments), 8, 0))
                    ta = tt + s.rtt_us
                    if ta <= until_us:
                        emit(ta, _pkt(s, ta, "rev", FIN | ACK, 8, (_seq(s, s.segments) + 1) % (1 << 32), 0))
            elif s.close == "rst":
                tt = st["last_send"] + s.gap_us
                if tt <= until_us:
                    emit(tt, _pkt(s, tt, "fwd", RST | ACK, _seq(s, s.segments), 8, 0))

    while events:
        t, _, what, name, args = heapq.heappop(events)
        if t > until_us:
            break
        s = by_name[name]
        st = state[name]
        if st["done"]:
            continue
        if what == "send":
            send_window(s, st, t)
        elif what == "app":
            st["avail"] = min(s.segments, st["avail"] + 1)
            send_window(s, st, t)
        elif what == "arrive":
            # The receiver: cumulative ACK of what it holds in order, one per segment.
            n = args[0]
            st["rcv"].add(n)
            while st["rcv_next"] in st["rcv"]:
                st["rcv_next"] += 1
            push(t + s.rtt_us // 2, "ack", s, st["rcv_next"])
            emit(t + s.rtt_us // 2, _pkt(s, t + s.rtt_us // 2, "rev", ACK, 8, _seq(s, st["rcv_next"]), 0))
        elif what == "ack":
            a = args[0]
            if a > st["una"]:
                st["una"] = a
                st["dup"] = 0
                st["rto"] = s.min_rto_us
                if st["recover"] >= 0 and a <= st["recover"]:
                    transmit(s, st, a, t)          # NewReno partial ACK: the next hole
                else:
                    st["recover"] = -1
                    st["cwnd"] += 1.0 if st["cwnd"] < st["ssthresh"] else 1.0 / st["cwnd"]
                st["nxt"] = max(st["nxt"], st["una"])
                st["timer"] = None
                if st["una"] < st["nxt"]:
                    arm(s, st, t)
                send_window(s, st, t)
            elif a == st["una"] and st["una"] < st["nxt"]:
                st["dup"] += 1
                if st["dup"] == 3 and st["recover"] < 0:
                    st["ssthresh"] = max(2.0, (st["nxt"] - st["una"]) / 2)
                    st["cwnd"] = st["ssthresh"]
                    st["recover"] = st["nxt"] - 1
                    transmit(s, st, st["una"], t)
        elif what == "rto":
            if st["timer"] != args[0] or st["una"] >= st["nxt"]:
                continue
            # RFC 6298 (5.4-5.6): resend the first unacknowledged segment, back the timer off;
            # RFC 5681 (3.1): cwnd to one segment, then go-back-N from there.
            st["ssthresh"] = max(2.0, (st["nxt"] - st["una"]) / 2)
            st["cwnd"] = 1.0
            st["recover"] = -1
            st["dup"] = 0
            st["nxt"] = st["una"]
            st["rto"] = min(st["rto"] * 2, 120_000_000)
            st["timer"] = None
            transmit(s, st, st["una"], t)
            st["nxt"] = st["una"] + 1
    out.sort(key=lambda x: (x[0], x[1]))
    return [p for _, _, p in out]


def _pkt(s: Sender, t: int, d: str, flags: int, seq: int, ack: int, payload: int) -> Pkt:
    src, dst, sp, dp = (s.src, s.dst, s.sport, s.dport) if d == "fwd" else (s.dst, s.src, s.dport, s.sport)
    return Pkt(time_us=t, dir=d, src=src, dst=dst, sport=sp, dport=dp, flags=flags, seq=seq % (1 << 32),
               ack=ack % (1 << 32), payload=payload, size=HDR + payload)


@dataclass
class IssueTrace:
    """The trace of issue 44: what each flow is, for figures per kind."""
    packets: list
    kinds: dict = field(default_factory=dict)   # flow key -> "bulk", "loss", "short", "tiny"
    timeout_flow: tuple = ()


def issue_trace(seed: int = 1, until_us: int = 8_800_000) -> IssueTrace:
    """4 bulk flows, one with fast retransmits and a timeout backed off 1 s then 2 s followed by
    go-back-N, 16 short flows of 1-4 segments, 2 long-lived tiny flows; RTT 60 ms (issue 44)."""
    rng = random.Random(seed)
    rtt = 60_000
    senders, kinds = [], {}
    port = iter(range(40000, 41000))

    def add(kind, **kw):
        s = Sender(name=len(senders), sport=next(port), rtt_us=rtt, isn=rng.randrange(1 << 32), **kw)
        senders.append(s)
        kinds[(s.src, s.dst, s.sport, s.dport)] = kind
        return s

    for i in range(3):
        add("bulk", start_us=rng.randrange(0, 200_000), segments=100_000, close="")
    # The lossy bulk flow (window up to 7): two single losses recovered by fast retransmit, then
    # a whole window lost and its first retransmission too: RTO 1 s, backed off to 2 s, then
    # go-back-N over the other 6.
    def lossy(n, k):
        if n in (150, 260) and k == 0:
            return True
        if 300 <= n < 307:
            return k == 0 or (n == 300 and k == 1)
        return False
    lf = add("loss", start_us=50_000, segments=100_000, close="", lose=lossy, max_cwnd=7)
    for i in range(16):
        add("short", start_us=rng.randrange(100_000, until_us - 1_000_000), segments=rng.randint(1, 4))
    for i in range(2):
        t, app = rng.randrange(0, 100_000), []
        while t < until_us:
            app.append(t)
            t += rng.randrange(60_000, 400_000)    # irregular: 1-6 RTTs apart
        add("tiny", start_us=0, segments=len(app), app=app, close="")
    return IssueTrace(packets=simulate(senders, until_us), kinds=kinds,
                      timeout_flow=(lf.src, lf.dst, lf.sport, lf.dport))


COLUMNS = ["time_us", "size", "dscp", "flow", "proto", "src", "dst", "sport", "dport", "dir", "flags", "seq",
           "ack", "payload"]


def write_trace(path, trace: list[Pkt]):
    """The engine's replay trace (engine/src/replay.rs) with the TCP columns."""
    flows = {}
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for p in trace:
            fid = flows.setdefault(p.key, len(flows) + 1)
            tcp = [p.flags, p.seq, p.ack, p.payload] if p.proto == 6 else ["", "", "", ""]
            w.writerow([p.time_us, p.size, 0, fid, p.proto, p.src, p.dst, p.sport, p.dport, p.dir, *tcp])


def random_trace(rng: random.Random, flows: int = 8, until_us: int = 6_000_000, interval_us: int = 400_000,
                 loss: float = 0.02) -> list[Pkt]:
    """A mix of the kinds above with random parameters: bulk flows with random losses (so fast
    retransmits, timeouts and go-back-N), short flows, application-limited flows whose segments
    come at irregular gaps, some exactly on the allocation boundaries, some after an idle longer
    than the maximum RTO, sequence numbers near the 2^32 wrap, flows closed by FIN, RST or not."""
    senders = []
    for i in range(flows):
        kind = rng.choice(["bulk", "short", "app", "boundary", "restart"])
        rtt = rng.choice([10_000, 60_000, 200_000])
        isn = rng.choice([rng.randrange(1 << 32), (1 << 32) - rng.randrange(1, 50_000)])
        lost = {}

        def lose(n, k, p=rng.random() * loss, r=random.Random(rng.random())):
            return lost.setdefault((n, k), r.random() < p)
        common = dict(name=i, rtt_us=rtt, isn=isn, sport=30000 + i, src=f"10.0.{1 + i % 3}.1",
                      handshake=rng.random() < 0.7, close=rng.choice(["fin", "rst", ""]), lose=lose,
                      max_cwnd=rng.choice([3, 8, 30]))
        start = rng.randrange(0, until_us // 2)
        if kind == "bulk":
            senders.append(Sender(start_us=start, segments=rng.randrange(50, 2000), **common))
        elif kind == "short":
            senders.append(Sender(start_us=start, segments=rng.randint(1, 4), **common))
        else:
            if kind == "app":
                app, t = [], start
                while t < until_us:
                    app.append(t)
                    t += rng.randrange(1_000, 500_000)
            elif kind == "boundary":
                # On the allocation boundaries (counted from the trace's first packet, time 0 here).
                app = sorted({interval_us * rng.randrange(1, until_us // interval_us) for _ in range(8)})
            else:
                app = [start, start + 5_000, start + 130_000_000, start + 130_010_000]
            senders.append(Sender(start_us=app[0], segments=len(app), app=app, **common))
    end = max([until_us] + [s.app[-1] + 1_000_000 for s in senders if s.app])
    trace = simulate(senders, end)
    # A packet at time 0 so the boundaries are where the "boundary" flows expect them.
    first = Pkt(time_us=0, dir="fwd", src="10.9.9.9", dst="10.0.2.1", sport=1, dport=2, flags=ACK, seq=0, ack=0,
                payload=0, size=40)
    return [first] + trace


def chaos_trace(rng: random.Random, n: int = 300) -> list[Pkt]:
    """Packets that no TCP would send: random flags, sequence and ACK numbers around the wrap,
    either direction, a few 4-tuples, non-TCP packets, bursts at one instant and long gaps."""
    tuples = [("10.0.1.1", "10.0.2.1", 40000 + i, 80) for i in range(4)]
    base = rng.randrange(1 << 32)
    t, out = 0, []
    for _ in range(n):
        t += rng.choice([0, 0, 1, 399_999, 400_000, rng.randrange(1_000_000), 130_000_000 * (rng.random() < 0.01)])
        src, dst, sp, dp = rng.choice(tuples)
        d = rng.choice(["fwd", "fwd", "rev"])
        if d == "rev":
            src, dst, sp, dp = dst, src, dp, sp
        payload = rng.choice([0, 0, 1, 536, 1460])
        out.append(Pkt(time_us=t, dir=d, src=src, dst=dst, sport=sp, dport=dp,
                       flags=rng.choice([ACK, ACK, ACK, SYN, SYN | ACK, FIN | ACK, RST, RST | ACK, 0, FIN | SYN]),
                       seq=(base + rng.randrange(-20_000, 200_000)) % (1 << 32),
                       ack=(base + rng.randrange(-20_000, 200_000)) % (1 << 32), payload=payload,
                       size=40 + payload, proto=rng.choice([6, 6, 6, 6, 17])))
    return out
