"""The hysteresis model of short TCP transfers (Li et al., "hysteresis" paper, section 3).

The transfer is a sequence of cycles; each is a slow-start phase (eqs. 3-6, after Cardwell et al.
2000, with gamma = 1.5) followed, except in the last cycle, by a loss phase whose kind is drawn at
random: a timeout with probability Q(p, w) (eq. 8, from Padhye et al.) costing p_ss * E[Z_TO]
(eqs. 7, 9, 10), or a fast retransmit costing p_ss * RTT. State carries over: the next cycle starts
from cwnd 1 after a timeout or from half the window reached after a fast retransmit (eq. 11: the
window reached is E[W_ss] capped at W_max, since the sender never exceeds the receiver's window),
and a cycle that starts from cwnd 1 pays the delayed-ACK cost. Eq. 12 sums the cycles; sampling it many times gives
the expectation and the distribution.

Choices the text leaves open (docs/models.md): eq. 3 never sends all d packets when p > 0, so
the transfer ends with the cycle after whose slow start less than one packet remains; that cycle
still pays its (sampled) loss phase, weighted by p_ss as every cycle's is, and a cycle that sends
everything expected has none. Q(p, w) = 1 for w <= 3 (Padhye's definition); p = 0 takes eq. 3's
limit E[d_ss] = d.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from catnip.models.params import Path

GAMMA = 1.5


def expected_sent_before_loss(d: float, p: float) -> float:
    """Eq. 3: E[d_ss], packets sent in slow start before a loss, of d remaining."""
    if p == 0:
        return d
    return (1 - (1 - p) ** d) * (1 - p) / p


def window_at_end(e_dss: float, w1: float) -> float:
    """Eq. 5: E[W_ss], the window at the end of slow start (W_max ignored)."""
    return (GAMMA - 1) / GAMMA * e_dss + w1 / GAMMA


def slow_start_time(e_dss: float, w1: float, wmax: float, rtt: float) -> float:
    """Eq. 6: E[T_ss], the time to send E[d_ss] packets in slow start from window w1."""
    if e_dss <= 0:
        return 0.0
    if window_at_end(e_dss, w1) > wmax:
        return rtt * (math.log(wmax / w1, GAMMA) + 1 + (e_dss - (GAMMA * wmax - w1) / (GAMMA - 1)) / wmax)
    return rtt * math.log(e_dss * (GAMMA - 1) / w1 + 1, GAMMA)


def p_loss_in_slow_start(d: float, p: float) -> float:
    """Eq. 7: p_ss, the probability that slow start ends with a loss."""
    return 1 - (1 - p) ** d


def q_timeout(p: float, w: float) -> float:
    """Eq. 8: Q(p, w), the probability that a loss in window w is detected by a timeout."""
    if w <= 3 or p == 0:
        return 1.0
    q = (1 - (1 - p) ** 3) / (1 - (1 - p) ** w) * (1 + (1 - p) ** 3 * (1 - (1 - p) ** (w - 3)))
    return min(1.0, q)


def f(p: float) -> float:
    """Eq. 10."""
    return 1 + p + 2 * p**2 + 4 * p**3 + 8 * p**4 + 16 * p**5 + 32 * p**6


def timeout_cost(p: float, t0: float) -> float:
    """Eq. 9: E[Z_TO], the expected cost of a timeout sequence."""
    return f(p) / (1 - p) * t0


@dataclass
class PhaseEnd:
    time: float
    w_end: float   # E[W_ss] of the last slow-start round (for the next phase's w1)
    w1: float      # the window the next cycle would start from


def transfer(d_total: float, to_send: float, p: float, w1: float, path: Path, rng: random.Random) -> PhaseEnd:
    """Cycles of eqs. 3-11 until `to_send` packets are sent, eq. 3 counting `d_total` remaining
    (the Partial CATNIP extension sends fewer than it counts; plain transfers send all)."""
    d, sent, t, w_end = d_total, 0.0, 0.0, w1
    while to_send - sent >= 1 - 1e-9:
        e_dss = min(expected_sent_before_loss(d, p), to_send - sent)
        if w1 <= 1:
            t += path.delack  # a cycle from cwnd 1: the receiver's delayed ACK for a lone packet
        t += slow_start_time(e_dss, w1, path.wmax, path.rtt)
        w_end = min(window_at_end(e_dss, w1), path.wmax)
        sent += e_dss
        d -= e_dss
        if to_send - sent < 1e-9 or p == 0:
            break  # everything expected was sent: the last cycle has no loss phase
        p_ss = p_loss_in_slow_start(d + e_dss, p)
        last = to_send - sent < 1 - 1e-9  # less than a packet left: its expected loss ends the transfer
        if rng.random() <= q_timeout(p, w_end):
            t += p_ss * timeout_cost(p, path.t0)
            w1 = 1.0
        else:
            t += p_ss * path.rtt
            w1 = max(1.0, w_end / 2)  # eq. 11, from the window reached (capped at W_max)
        if last:
            break
    return PhaseEnd(t, w_end, w1)


def sample(path: Path, rng: random.Random) -> float:
    """One draw of eq. 12: the latency of a transfer of path.packets packets."""
    n = path.packets
    return transfer(n, n, path.p, 1.0, path, rng).time


def latencies(path: Path, samples: int = 1000, seed: int = 1, draw=sample) -> list[float]:
    rng = random.Random(seed)
    return [draw(path, rng) for _ in range(samples)]
