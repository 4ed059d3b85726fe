"""A reference source scheduler/shaper, written from Nouredine and Tobagi's text (Computer Networks
40 (2002), section 6.2, Fig. 11, footnote 7), not from the engine.

WHAT THE PAPER FIXES (section 6.2 unless noted):
- "a set of queues, one per connection, and a scheduler that services them": a FIFO per
  connection, so a connection's packets leave in order and only heads are candidates.
- Tokens: the user's SLA is "a token bucket profile" per priority, HIGH and MED (section 4.3);
  "for such packets to be transmitted by the source, sufficient tokens must be present"
  (section 5); LOW packets need none (only the link limits them).
- The service discipline: "If any HIGH priority packet can be sent from a connection at Class 1,
  given the state of the shaper, it is dispatched to the network interface. Otherwise, MED
  priority packets, if any, are checked, followed by LOW priority packets. When all Class 1
  connections are examined, and no packet can be sent, Class 2 connections are similarly
  checked, followed by Class 3 connections." Classes first, levels within a class; within a class
  any head that can be sent at the level being checked goes (the turn among them below).
- The blocking rule: "If a packet is blocked waiting for a token of a certain marking priority at
  one class, no packet can be sent with the same marking priority at lower classes." (Lower
  classes only: the same class's other heads are covered by "if any ... can be sent".)
- "Within one class, connections are served in a weighted round-robin fashion"; section 6.3 uses
  equal weights ("a simple round robin scheduler would have been adequate").
- Downgrades: "the scheduler attempts to send the packet at the head of each queue at a lower
  priority (i.e., after remarking it) if this packet has been queued for a time longer than a
  certain threshold"; footnote 7: "200 ms before downgrading from HIGH to MED, and another 200 ms
  for downgrading from MED to LOW". The clock is the packet's time queued, i.e. since its
  arrival: a HIGH packet is MED from arrival + D and LOW from arrival + 2 D.

CHOICES WHERE THE PAPER IS SILENT (each named; the engine's documented choices, docs/engine.md):
- the turn within a class: one turn order per class and level, a connection joining its back
  when its head arrives at that level, is remarked to it, or becomes the head after a send; the
  first in that order whose head the tokens cover goes (one packet per turn), one that lacks
  them keeps its place. (A first version kept one order per class for all levels, joined when
  the connection's queue was created; the engine's per-level order is as much a round robin and
  was taken: docs/references.md.)
- a packet marked MED from the start is LOW from arrival + D (D at each level);
- a remark takes effect at the deadline itself (the text's "longer than" has no first instant),
  remarks due at one instant in class, level and turn order; a remarked packet is not restored
  and leaves with AF12 (MED) or AF13 (LOW); LOW and unmarked packets are never remarked; levels by DSCP as red3: AF11 HIGH, AF12 MED, anything else LOW;
- the buckets start full and fill continuously, exactly, on a nanosecond clock (the engine's
  virtual clock): a packet waiting for tokens starts at the first nanosecond they suffice; a
  packet larger than a bucket waits for a full bucket and leaves it in debt;
- a decision falling due at an arrival's instant (the link freeing, tokens, a remark) is taken
  before the arrival is queued; an arrival to an idle link that can be sent starts at once;
- classes by port (the paper's are by application): the first class one of whose ranges holds
  the source or destination port, else the last; connections by the trace's flow;
- the link's buffer bounds the packets (or bytes) waiting, not the one on the wire; an arrival
  that does not fit is dropped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

HIGH, MED, LOW = 0, 1, 2
SCALE = 8_000_000_000    # bytes -> bit-nanoseconds: a bucket of rate R bit/s gains R units a ns
REMARK = {MED: 12, LOW: 14}


def level_of(dscp: int) -> int:
    return HIGH if dscp == 10 else MED if dscp == 12 else LOW


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class Profile:
    rate_bps: int
    bucket_bytes: int


@dataclass
class Packet:
    idx: int
    t: int            # arrival, ns
    size: int
    dscp: int
    level0: int       # the level it arrived with


class Bucket:
    def __init__(self, p: Profile):
        self.rate, self.cap = p.rate_bps, p.bucket_bytes * SCALE
        self.tokens, self.t = self.cap, 0

    def at(self, t: int) -> None:
        if t > self.t:
            self.tokens = min(self.cap, self.tokens + (t - self.t) * self.rate)
            self.t = t

    def need(self, size: int) -> int:
        return min(size * SCALE, self.cap)

    def ready(self, size: int, now: int) -> int:
        """The first ns >= now at which the bucket covers a packet of `size`."""
        self.at(now)
        short = self.need(size) - self.tokens
        return now if short <= 0 else now + ceil_div(short, self.rate)


@dataclass
class Config:
    high: Profile
    med: Profile
    classes: list            # [[(lo, hi), ...], ...] in scheduling order
    downgrade_us: int = 200_000
    link_bps: int = 10_000_000
    buffer_packets: int | None = None
    buffer_bytes: int | None = None
    # the alternative readings of the two points where the engine once read the text otherwise
    # (docs/references.md): "head" counts the downgrade clock from when the packet became its
    # connection's head; "wait" lets the turn's head hold its class's other heads of its level.
    clock: str = "queued"
    within_class: str = "any"


def class_of(cfg: Config, sport, dport) -> int:
    for c, ranges in enumerate(cfg.classes):
        for lo, hi in ranges:
            if (sport is not None and lo <= sport <= hi) or (dport is not None and lo <= dport <= hi):
                return c
    return len(cfg.classes) - 1


def simulate(trace, cfg: Config):
    """trace: [(time_us, size, dscp, flow, sport, dport)] in time order (ports may be None).
    Returns per packet (fate, time_ns, dscp_out): ("sent", end of serialization, DSCP it left
    with) or ("dropped", arrival, its DSCP)."""
    D = cfg.downgrade_us * 1000
    buckets = {HIGH: Bucket(cfg.high), MED: Bucket(cfg.med)}
    conns: dict = {}                 # flow -> Conn, while it holds packets
    rings = [[[] for _ in range(3)] for _ in cfg.classes]   # [class][level]: flows, turn order
    out: list = [None] * len(trace)
    held_pkts = held_bytes = 0
    link_free = last_look = 0

    class Conn:
        def __init__(self, c):
            self.q, self.c, self.level, self.since = deque(), c, LOW, 0

    def head_arrives(conn: Conn, now: int) -> None:
        # the connection's next packet becomes its head: at the level its time queued gives
        p = conn.q[0]
        conn.level = p.level0
        if p.level0 != LOW and cfg.clock == "queued":
            conn.level = min(LOW, p.level0 + (now - p.t) // D)
        conn.since = now
        rings[conn.c][conn.level].append(flow_of[id(conn)])

    def deadline(conn: Conn) -> int | None:
        if conn.level == LOW:
            return None
        if cfg.clock == "queued":
            return conn.q[0].t + (conn.level - conn.q[0].level0 + 1) * D
        return conn.since + D

    def remark_until(now: int) -> None:
        # every remark due by `now`, each at its deadline, in deadline order (ties: class,
        # level, turn order); the connection joins the back of its new level's turn order
        while True:
            due = None
            for c, by_level in enumerate(rings):
                for lv in (HIGH, MED):
                    for flow in by_level[lv]:
                        d = deadline(conns[flow])
                        if d <= now and (due is None or d < due[0]):
                            due = (d, c, lv, flow)
            if due is None:
                return
            d, c, lv, flow = due
            rings[c][lv].remove(flow)
            conns[flow].level, conns[flow].since = lv + 1, d
            rings[c][lv + 1].append(flow)

    def serve(c: int, lv: int, k: int, now: int) -> None:
        nonlocal held_pkts, held_bytes, link_free
        flow = rings[c][lv].pop(k)
        conn = conns[flow]
        p = conn.q.popleft()
        held_pkts -= 1
        held_bytes -= p.size
        if lv in buckets:
            buckets[lv].at(now)
            buckets[lv].tokens -= p.size * SCALE
        link_free = now + ceil_div(p.size * SCALE, cfg.link_bps)
        out[p.idx] = ("sent", link_free, p.dscp if lv == p.level0 else REMARK[lv])
        if conn.q:
            head_arrives(conn, now)
        else:
            del conns[flow]

    def pick(now: int) -> None:
        remark_until(now)
        blocked: set = set()
        for c, by_level in enumerate(rings):
            for lv in (HIGH, MED, LOW):
                ring = by_level[lv]
                if not ring or lv in blocked:
                    continue
                if lv == LOW:
                    return serve(c, lv, 0, now)
                for k, flow in enumerate(ring):
                    if buckets[lv].ready(conns[flow].q[0].size, now) == now:
                        return serve(c, lv, k, now)
                    if cfg.within_class == "wait":
                        break
                blocked.add(lv)

    def wake(now: int) -> int:
        # the next instant the decision can change without an arrival: a remark, or tokens for a
        # head of the first class holding that level (the lower ones wait behind it)
        times = [deadline(conn) for conn in conns.values()]
        for lv in (HIGH, MED):
            ring = next((r[lv] for r in rings if r[lv]), [])
            if cfg.within_class == "wait":
                ring = ring[:1]
            times += [buckets[lv].ready(conns[f].q[0].size, now) for f in ring]
        later = [t for t in times if t is not None and t > now]
        assert later, "packets held and nothing can change"
        return min(later)

    def advance(limit: float) -> None:
        nonlocal last_look
        while held_pkts:
            d = link_free if link_free > last_look else wake(last_look)
            if d > limit:
                return
            last_look = d
            pick(d)

    flow_of: dict = {}
    for i, (t_us, size, dscp, flow, sport, dport) in enumerate(trace):
        t = t_us * 1000
        advance(t)
        remark_until(t)
        if (cfg.buffer_packets is not None and held_pkts + 1 > cfg.buffer_packets) or (
                cfg.buffer_bytes is not None and held_bytes + size > cfg.buffer_bytes):
            out[i] = ("dropped", t, dscp)
            continue
        held_pkts += 1
        held_bytes += size
        conn = conns.get(flow)
        if conn is None:
            conn = conns[flow] = Conn(class_of(cfg, sport, dport))
            flow_of[id(conn)] = flow
            conn.q.append(Packet(i, t, size, dscp, level_of(dscp)))
            head_arrives(conn, t)
        else:
            conn.q.append(Packet(i, t, size, dscp, level_of(dscp)))
        if link_free <= t:
            last_look = t
            pick(t)
    advance(float("inf"))
    return out
