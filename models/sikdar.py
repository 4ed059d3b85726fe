"""The Sikdar model (Sikdar, Kalyanaraman and Vastola, 2001), as the hysteresis paper describes it
(section 2): the latency is split into a no-loss case, a single-loss case and a multiple-loss case,
and slow start grows by eq. 1, packets(n) = floor(2^((n-1)/2) + 2^((n-2)/2)) in round n (delayed
ACKs), instead of eq. 2's 1.5^n.

The original paper is not part of this project's specification, so the three cases are our
reconstruction from that description (docs/models.md):
- no loss, probability (1-p)^N: the rounds eq. 1 needs for N packets, capped at W_max;
- one loss, probability N p (1-p)^(N-1), at a packet k uniform over 1..N: the rounds up to k's
  round, then a fast retransmit (one RTT) when k's window was at least 4 and 3 packets followed
  it, otherwise a timeout (T0); then the rest from cwnd w/2 (fast retransmit, congestion avoidance)
  or from 1 in slow start up to ssthresh w/2 (timeout);
- two or more losses: slow start up to the first loss (eq. 3's E[d_ss] packets), its expected cost
  (timeout with Padhye's Q, else an RTT) and the rest at Padhye's steady-state throughput;
and the delayed-ACK cost once, as in Cardwell-00.
"""

from __future__ import annotations

import math

from catnip.models import hysteresis as h
from catnip.models.cardwell import padhye_throughput
from catnip.models.params import Path


def packets_in_round(n: int) -> int:
    """Eq. 1: packets sent in slow-start round n (n >= 1) with delayed ACKs."""
    return math.floor(2 ** ((n - 1) / 2) + 2 ** ((n - 2) / 2))


def _rounds(d: float, w: float, ssthresh: float, wmax: int) -> int:
    """Rounds to send d packets from window w: eq. 1's growth below ssthresh, then one packet
    per two rounds (congestion avoidance with delayed ACKs), never above W_max."""
    if d <= 0:
        return 0
    n = 1
    while packets_in_round(n) < w:  # enter eq. 1's sequence at the window we start from
        n += 1
    rounds, sent, cwnd = 0, 0.0, float(min(w, wmax))
    while sent < d - 1e-9:
        sent += math.floor(cwnd) or 1
        rounds += 1
        if cwnd < ssthresh:
            n += 1
            cwnd = float(min(packets_in_round(n), ssthresh, wmax))
        else:
            cwnd = min(cwnd + 0.5, wmax)
    return rounds


def _round_of(k: int, wmax: int) -> tuple[int, int]:
    """(round, window) in which packet k (1-based) leaves in an initial slow start."""
    sent, n = 0, 0
    while True:
        n += 1
        w = min(packets_in_round(n), wmax)
        if sent + w >= k:
            return n, w
        sent += w


def _single_loss(n: int, k: int, path: Path) -> float:
    r, w = _round_of(k, path.wmax)
    sent_through_round = sum(min(packets_in_round(i), path.wmax) for i in range(1, r + 1))
    if w >= 4 and n - k >= 3:
        cost, rest = path.rtt, _rounds(n - sent_through_round, max(1.0, w / 2), w / 2, path.wmax)
    else:
        cost, rest = path.t0, _rounds(n - k + 1, 1.0, max(2.0, w / 2), path.wmax)
    return r * path.rtt + cost + rest * path.rtt


def latency(path: Path) -> float:
    """Expected transfer latency (s)."""
    n, p = path.packets, path.p
    no_loss = _rounds(n, 1.0, math.inf, path.wmax) * path.rtt
    if p == 0:
        return no_loss + path.delack
    p0 = (1 - p) ** n
    p1 = n * p * (1 - p) ** (n - 1)
    one_loss = sum(_single_loss(n, k, path) for k in range(1, n + 1)) / n
    e_dss = h.expected_sent_before_loss(n, p)
    w = min(h.window_at_end(e_dss, 1.0), path.wmax)
    first = _rounds(e_dss, 1.0, math.inf, path.wmax) * path.rtt
    q = h.q_timeout(p, w)
    loss_cost = q * h.timeout_cost(p, path.t0) + (1 - q) * path.rtt
    rest = n - e_dss
    many = first + loss_cost + rest / padhye_throughput(p, path.rtt, path.t0, path.wmax)
    pm = max(0.0, 1 - p0 - p1)
    return p0 * no_loss + p1 * one_loss + pm * many + path.delack
