"""A reference TCP-friendly marker (TCPF and TCPF(O)), transcribed from the paper's text.

G. Lo Monaco, A. Feroz, S. Kalyanaraman, Y. Xia, "TCP-Friendly Marking for Scalable Best-Effort
Services on the Internet" (/work/shared/papers/tcp-friendly-marking.txt): section 3 (what the
marker is for), section 4 with Algorithm 1 (token allocation every T) and Algorithm 2 (packet
marking), section 6.1 (T = 400 ms, M = 300 KB, TCPF(O) = without retransmission protection).

Plain and slow on purpose: one dict of flows, every allocation run in turn at its boundary, no
lazy catch-up. It was written before reading engine/src/tcpf.rs; where the paper is silent the
choice is stated at the rule ("CHOICE") with the reason, and the engine was then made to agree.

Input: a list of `Pkt` in time order, both directions of the marked link ("fwd": the direction the
marker marks, "rev": the other, where the ACKs come back). Output: for each fwd packet, "IN" or
"OUT" (`mark()`), and per interval what the pool gave and what was spent (`Marker.intervals`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
SEQ_MOD = 1 << 32

# CHOICE (the paper is silent on how long a flow is remembered): as long as TCP can be silent and
# still resume. RFC 6298 (2.5) lets the RTO be capped at no less than 60 s; Linux caps it at
# TCP_RTO_MAX = 120 s. A flow silent in both directions for this long is forgotten; so is a flow
# reset (RST, either way) or whose FIN has been acknowledged (it can send no more data).
MAX_RTO_US = 120_000_000


@dataclass(frozen=True)
class Pkt:
    time_us: int
    dir: str              # "fwd" (marked) or "rev" (the ACK path)
    src: str
    dst: str
    sport: int
    dport: int
    flags: int
    seq: int
    ack: int
    payload: int
    size: int             # IP total length: what tokens are counted in (M is "in byte", Alg. 1)
    proto: int = 6

    @property
    def key(self):
        """The flow of a fwd packet; for a rev packet, the fwd flow it belongs to."""
        if self.dir == "fwd":
            return (self.src, self.dst, self.sport, self.dport)
        return (self.dst, self.src, self.dport, self.sport)

    @property
    def seq_len(self) -> int:
        """Sequence space taken: the payload, plus one each for SYN and FIN (RFC 793 3.3)."""
        return self.payload + (1 if self.flags & SYN else 0) + (1 if self.flags & FIN else 0)


def seq_before(a: int, b: int) -> bool:
    """a < b in sequence space (RFC 793 3.3, modulo 2^32)."""
    return (a - b) % SEQ_MOD >= SEQ_MOD // 2 and a != b


def seq_diff(a: int, b: int) -> int:
    """a - b in sequence space, 0 when a is not after b."""
    return 0 if seq_before(a, b) or a == b else (a - b) % SEQ_MOD


def max_min_alloc(pool: int, demands: dict) -> dict:
    """Max-min fair split of `pool` whole bytes over integer demands (water filling; Alg. 1's
    max_min_alloc): each round, the flows whose demand fits the equal share get their demand and
    leave; when none fits, the rest get the share, floor(pool / n) each (tokens are whole bytes)."""
    alloc = {}
    left = dict(demands)
    while left:
        share = pool // len(left)
        fits = {k: d for k, d in left.items() if d <= share}
        if not fits:
            for k in left:
                alloc[k] = share
            return alloc
        for k, d in fits.items():
            alloc[k] = d
            pool -= d
            del left[k]
    return alloc


@dataclass
class Flow:
    first_us: int
    snd_max: int                  # highest sequence sent + 1 (section 4: "the largest sequence number sent")
    snd_una: int                  # highest ACK seen in the other direction
    last_us: int                  # last packet either way (for forgetting)
    w: float | None = None        # W(i), Alg. 1
    e: float | None = None        # E(i), Alg. 1 (None: not allocated yet, a new flow)
    sent: int = 0                 # bytes sent in the current interval (what E(i) smooths)
    in_count: int = 0             # Alg. 1 in_count(i), tokens left this interval (may go below 0)
    alloc: int = 0                # what the last allocation gave
    spacing: float = 0.0          # Alg. 1 S(i)
    count: float = 0.0            # Alg. 2 count(i), "initialized to 0" once, per flow
    tiny: bool = True             # classed tiny at the last allocation
    protected_tiny: bool = True   # tiny with the pool covering the tiny flows (step (d)), or new
    fin_end: int | None = None    # the sequence number after our FIN


@dataclass
class Interval:
    start_us: int
    pool: int                     # M less the debt carried in
    allocated: int = 0            # sum of in_count(i) given
    spent: int = 0                # bytes charged to tokens (IN packets, and charged retransmissions)
    over: int = 0                 # of which beyond the flows' tokens (in_count(i) taken below 0)
    in_bytes: int = 0
    retrans_in_bytes: int = 0     # retransmissions IN without charge (Alg. 2 (b) returns)
    step: str = ""                # "c" or "d" (Alg. 1 step II)


@dataclass
class Marker:
    interval_us: int = 400_000        # T (section 4: "400ms in our experiments")
    pool: int = 300 * 1024            # M (section 6.1: "about 300KB")
    tiny_window: int = 4              # K (Alg. 1: "defaults to 4")
    mss: int = 1460                   # MSS of K * MSS (not given; Linux 2.2 on Ethernet)
    protect_retransmissions: bool = True  # Alg. 2 (b); False: TCPF(O) (section 6.1)
    retransmissions_use_tokens: bool = True
    w_gain: float = 0.125             # "running average" (Alg. 1), weight not given
    e_gain: float = 0.5               # "smoothed estimate" (Alg. 1), weight not given
    forget_us: int = MAX_RTO_US
    flows: dict = field(default_factory=dict)
    intervals: list = field(default_factory=list)
    debt: int = 0
    next_boundary: int | None = None
    retrans_seen: int = 0

    # -- Algorithm 1 ---------------------------------------------------------------------------

    def _allocate(self, now: int):
        # Token pool mismatches are "handled across the interval of the token allocation
        # process" (section 4). CHOICE: what tiny and new flows spent beyond their tokens, and
        # beyond the tokens nobody was given, is a debt taken from the next interval's M, so that
        # over time the pool stays M per T.
        last = self.intervals[-1]
        self.debt += max(0, last.over - (last.pool - last.allocated))
        m = self.pool - min(self.debt, self.pool)
        self.debt -= self.pool - m
        iv = Interval(start_us=now, pool=m)
        for f in self.flows.values():
            # E(i): "smoothed estimate of the number of bytes flow i sends in one marking
            # interval" (Alg. 1). CHOICE: an EWMA per interval; a new flow's first E is what it
            # sent before its first allocation.
            f.e = float(f.sent) if f.e is None else f.e + self.e_gain * (f.sent - f.e)
            f.sent = 0
        demand = {k: int(f.e) for k, f in self.flows.items()}
        # Step I (a)-(b): tiny flows are those with W(i) < K * MSS; they take E(i) first.
        # CHOICE: a flow whose W is not known yet (no data packet sampled) counts as tiny: TCP
        # starts with a window of at most 4 MSS (RFC 3390), below K * MSS for K = 4.
        tiny = {k for k, f in self.flows.items() if f.w is None or f.w < self.tiny_window * self.mss}
        available = m - sum(demand[k] for k in tiny)
        if available <= 0:
            # (c) no token left for non-tiny flows: the tiny flows share M max-min (c.1), the
            # others get nothing (c.2).
            iv.step = "c"
            alloc = max_min_alloc(m, {k: demand[k] for k in tiny})
            alloc.update({k: 0 for k in self.flows if k not in tiny})
        else:
            # (d) tiny flows get E(i) with S = 0 (d.1); the others share what is left (d.2).
            iv.step = "d"
            alloc = {k: demand[k] for k in tiny}
            alloc.update(max_min_alloc(available, {k: d for k, d in demand.items() if k not in tiny}))
        for k, f in self.flows.items():
            f.tiny = k in tiny
            f.protected_tiny = f.tiny and iv.step == "d"
            f.alloc = f.in_count = alloc[k]
            # S(i) = E(i) / in_count(i) - 1 (Alg. 1), a count of packets; real-valued so that
            # count(i) -= S(i) (Alg. 2 (c.1)) carries the remainder.
            f.spacing = demand[k] / alloc[k] - 1 if alloc[k] > 0 else 0.0
        iv.allocated = sum(alloc.values())
        self.intervals.append(iv)

    def _forget_stale(self, now: int):
        for k in [k for k, f in self.flows.items() if now - f.last_us >= self.forget_us]:
            del self.flows[k]

    def _advance(self, now: int):
        """Run every allocation due at or before `now`, each at its own boundary."""
        if self.next_boundary is None:
            # CHOICE: the first interval starts with the first packet the marker sees.
            self.next_boundary = now + self.interval_us
            self.intervals.append(Interval(start_us=now, pool=self.pool))
            return
        while now >= self.next_boundary:
            self._forget_stale(self.next_boundary)
            self._allocate(self.next_boundary)
            self.next_boundary += self.interval_us

    # -- Algorithm 2, and the ACK path ----------------------------------------------------------

    def packet(self, p: Pkt) -> str | None:
        """Show the marker one packet; the mark of a fwd packet, None for a rev one."""
        self._advance(p.time_us)
        self._forget_stale(p.time_us)
        if p.dir == "rev":
            f = self.flows.get(p.key) if p.proto == 6 else None
            if f is not None:
                f.last_us = p.time_us
                if p.flags & ACK and seq_before(f.snd_una, p.ack):
                    f.snd_una = p.ack
                if p.flags & RST or (f.fin_end is not None and not seq_before(f.snd_una, f.fin_end)):
                    del self.flows[p.key]
            return None
        if p.proto != 6:
            return "OUT"  # the marker reads TCP headers (section 4); anything else has no flow
        iv = self.intervals[-1]
        f = self.flows.get(p.key)
        if f is None:
            # (a) a new flow: nothing acknowledged yet, so its window is all it has sent.
            f = self.flows[p.key] = Flow(first_us=p.time_us, snd_max=p.seq, snd_una=p.seq, last_us=p.time_us)
        f.last_us = p.time_us
        carries = p.seq_len > 0
        # Section 4: "Retransmitted packets can be identified by comparing the sequence number of
        # the packet with the largest sequence number sent by that flow."
        retrans = carries and seq_before(p.seq, f.snd_max)
        end = (p.seq + p.seq_len) % SEQ_MOD
        if carries and seq_before(f.snd_max, end):
            f.snd_max = end
        if p.flags & FIN:
            f.fin_end = end
        if carries:
            # W(i): "running average of the difference between the packet sequence number in one
            # direction and the ack sequence number in the other" (Alg. 1). CHOICE: sampled on
            # each packet carrying data, as its end less the highest ACK; the first sample starts it.
            sample = seq_diff(end, f.snd_una)
            f.w = float(sample) if f.w is None else f.w + self.w_gain * (sample - f.w)
        f.sent += p.size
        if retrans:
            self.retrans_seen += 1
        mark = self._mark(f, p, retrans, iv)
        if p.flags & RST:
            del self.flows[p.key]
        return mark

    @staticmethod
    def _charge(f: Flow, size: int, iv: Interval):
        """Alg. 2 (c.1) "decrease in_count(i)": by the packet's length (tokens are bytes)."""
        iv.over += max(0, size - f.in_count) - max(0, -f.in_count)
        f.in_count -= size
        iv.spent += size

    def _mark(self, f: Flow, p: Pkt, retrans: bool, iv: Interval) -> str:
        if retrans and self.protect_retransmissions:
            # (b) "If it's retransmission, mark as IN then return". Retransmissions get
            # "absolute priority in the token pool" (section 4): CHOICE (a knob) charge them to
            # the flow's tokens when it has some, never block them.
            if self.retransmissions_use_tokens and f.in_count > 0:
                self._charge(f, p.size, iv)
            else:
                iv.retrans_in_bytes += p.size
            iv.in_bytes += p.size
            return "IN"
        tiny_now = f.w is None or f.w < self.tiny_window * self.mss
        if (f.e is None or f.protected_tiny) and tiny_now:
            # "Tiny flows get absolute priority to tokens" (section 4); a new flow is tiny
            # (TCP's first window is below K * MSS) and is "handled across the interval". CHOICE:
            # while the pool covers the tiny flows (step (d)) a flow that is still tiny is IN
            # even past E(i), its estimate: the excess is a debt on the next interval's pool.
            self._charge(f, p.size, iv)
            iv.in_bytes += p.size
            return "IN"
        if f.in_count > 0:
            # (c) "if tokens are available (in_count(i) > 0)": the literal test, so the last IN
            # packet of an interval may take the flow's tokens below 0 (a debt, as above).
            if f.count >= f.spacing:
                f.count -= f.spacing        # (c.1)
                self._charge(f, p.size, iv)
                iv.in_bytes += p.size
                return "IN"
            f.count += 1                    # (c.2)
            return "OUT"
        return "OUT"                        # (d)


def mark(trace, **params) -> list:
    """(trace index, "IN"/"OUT") for every fwd packet of `trace`."""
    m = Marker(**params)
    return [(i, r) for i, r in ((i, m.packet(p)) for i, p in enumerate(trace)) if r is not None]


def run(trace, **params) -> tuple[Marker, list]:
    m = Marker(**params)
    marks = [(i, r) for i, r in ((i, m.packet(p)) for i, p in enumerate(trace)) if r is not None]
    return m, marks
