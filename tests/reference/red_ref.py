"""A reference multi-level RED (RIO, red3) in byte mode, written from the papers' text, not the engine.

Sources: Floyd-Jacobson RED (the TCP-friendly marking paper's [10]; its Fig. 2): the average
avg <- (1 - w_q) avg + w_q q on each arrival, or avg <- (1 - w_q)^m avg after an idle spell of m
small packets' time; below min_th accept; at or above max_th drop; between, p_b = max_p (avg -
min_th) / (max_th - min_th), p_a = p_b / (1 - count p_b), count the arrivals since the last drop
(-1 after a spell below min_th). RIO (Clark-Fang, the marking paper's [4], section 5: "a separate
set of parameters and queue measures are used for packets marked IN and for packets marked OUT"):
an IN arrival updates the IN average (IN bytes queued) and is judged by IN's thresholds; every
arrival updates the total average (all bytes), by which OUT arrivals are judged. red3
(Nouredine-Tobagi, section 4.2): "Three average queue sizes are computed, one for each drop
priority ... When computing the queue size for a certain priority, packets that are at this
priority level or higher are counted" -- RIO with three levels.

CHOICES where the texts are silent (stated, then compared with the engine):
- level k's average is updated on arrivals it counts (levels 0..k), as RIO's IN average is only
  updated on IN arrivals; every level keeps its own count;
- byte mode (the marking paper's Table 1 in bytes): q is bytes, p_b is not scaled by packet size
  (docs/engine.md: mean_pkt_bytes is for the idle decay only);
- q is the bytes waiting, not the packet being serialized (as Linux's qdisc backlog); a packet
  whose transmission starts at the arrival's instant has left; the idle spell starts when the
  last packet started transmission and m = idle time x rate / (8 mean_pkt_bytes), real-valued
  (Floyd-Jacobson's linear m);
- count p_b >= 1 drops for sure (p_a = 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Level:
    min_th: float
    max_th: float
    max_p: float


def level_of(dscp: int, nlevels: int) -> int:
    """AF11 is IN / HIGH; with three levels AF12 is MED; everything else is the last level."""
    if dscp == 10:
        return 0
    if dscp == 12 and nlevels == 3:
        return 1
    return nlevels - 1


class MultiRed:
    """The dropper's state; `decide` gives an arrival's drop probability, `record` its fate."""

    def __init__(self, levels: list[Level], w_q: float, rate_bps: int, mean_pkt_bytes: int):
        self.levels, self.w_q = levels, w_q
        self.rate_bps, self.mean = rate_bps, mean_pkt_bytes
        self.avg = [0.0] * len(levels)
        self.count = [-1] * len(levels)

    def decide(self, level: int, queued: list[int], idle_us: float | None) -> tuple[float, float]:
        """(avg, p_a) for an arrival at `level`; queued[k]: bytes waiting at level k; idle_us:
        how long the queue has been empty (None: not empty)."""
        for k in range(level, len(self.levels)):
            if idle_us is not None:
                m = idle_us * self.rate_bps / (8e6 * self.mean)
                self.avg[k] *= (1 - self.w_q) ** m
            else:
                q = sum(queued[: k + 1])
                self.avg[k] = (1 - self.w_q) * self.avg[k] + self.w_q * q
        lv, avg = self.levels[level], self.avg[level]
        if avg < lv.min_th:
            self.count[level] = -1
            return avg, 0.0
        if avg >= lv.max_th:
            return avg, 1.0
        self.count[level] += 1
        p_b = lv.max_p * (avg - lv.min_th) / (lv.max_th - lv.min_th)
        c = self.count[level]
        p_a = 1.0 if c * p_b >= 1 else p_b / (1 - c * p_b)
        return avg, min(1.0, p_a)

    def record(self, level: int, dropped: bool) -> None:
        if dropped:
            self.count[level] = 0


def tx_ns(size: int, rate_bps: int) -> int:
    """Serialization time in whole nanoseconds (rounded up): integer time, so that a packet
    starting exactly at an arrival's instant is seen to have started (floats drift by 1e-9)."""
    return -(-size * 8_000_000_000 // rate_bps)


def check(trace, fates, levels: list[Level], w_q: float, rate_bps: int, mean_pkt_bytes: int,
          margin: float = 0.0):
    """Walk the engine's fates (dicts of FATES.csv, delay 0, no buffer limit) through the
    reference. Returns (violations, n_random, sum_p, var_p, drops_random): violations are the
    deterministic disagreements (a drop where the reference's p is 0, an accept where it is 1, a
    departure off the reference's serialization by more than 1 us); the rest are the random
    decisions, for a binomial-style comparison (sum of p_a against the drops). `margin`: packets
    whose average is within this fraction of a threshold are not held to the deterministic rule
    (floating point and idle-decay rounding)."""
    red = MultiRed(levels, w_q, rate_bps, mean_pkt_bytes)
    n = len(levels)
    waiting = []            # (start_us, size, level) of accepted packets not yet started
    busy_until = 0           # ns: when the transmitter finishes the last accepted packet
    last_start = 0           # ns: when the last accepted packet started transmission
    violations, n_rand, sum_p, var_p, drops_rand = [], 0, 0.0, 0.0, 0
    for (t, size, dscp), f in zip(trace, fates):
        waiting = [w for w in waiting if w[0] > t * 1000]
        queued = [0] * n
        for _, s, k in waiting:
            queued[k] += s
        idle = None if waiting else max(0.0, (t * 1000 - last_start) / 1000)
        if not waiting and red.avg == [0.0] * n:
            idle = None     # nothing to decay; keeps the EWMA form for the very first packets
        k = level_of(dscp, n)
        avg, p = red.decide(k, queued, idle)
        dropped = f["fate"] == "dropped"
        lv = levels[k]
        sure = (avg < lv.min_th * (1 - margin)) or (avg >= lv.max_th * (1 + margin))
        if p == 0.0 and dropped and sure:
            violations.append(f"packet {f['id']} (level {k}, {size} B at {t} us): dropped, reference avg "
                              f"{avg:.1f} < min_th {lv.min_th}")
        elif p == 1.0 and not dropped and (sure or avg < lv.max_th):
            violations.append(f"packet {f['id']} (level {k}, {size} B at {t} us): accepted, reference "
                              f"avg {avg:.1f} (max_th {lv.max_th}, p_a 1)")
        elif 0.0 < p < 1.0:
            n_rand += 1
            sum_p += p
            var_p += p * (1 - p)
            drops_rand += dropped
        red.record(k, dropped)
        if not dropped:
            start = max(t * 1000, busy_until)
            busy_until = start + tx_ns(size, rate_bps)
            last_start = start
            waiting.append((start, size, k))
            if abs(busy_until - round(float(f["fate_us"]) * 1000)) > 1000:
                violations.append(f"packet {f['id']}: delivered at {f['fate_us']} us, reference "
                                  f"serialization ends at {busy_until / 1000:.3f} us")
    return violations, n_rand, sum_p, var_p, drops_rand


def z_score(sum_p: float, var_p: float, drops: int) -> float:
    return (drops - sum_p) / math.sqrt(max(var_p, 1.0))
