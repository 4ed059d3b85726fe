"""Cardwell-00 (N. Cardwell, S. Savage, T. Anderson, "Modeling TCP Latency", IEEE INFOCOM 2000),
by its own formulas, which the hysteresis paper (section 2) summarises: the initial slow start,
the expected cost of the first loss, the rest of the data at Padhye's steady-state throughput,
and the delayed-ACK cost added once. Connection establishment is left out, as in the hysteresis
paper's validation (latency from the first data segment).

- E[d_ss] = (1 - (1-p)^d)(1-p)/p + 1 (Cardwell eq. 5: the hysteresis paper's eq. 3 plus the lost
  packet itself), at most d: with nothing left to send after d packets the "+1" has no packet to
  count (for p -> 0 the formula tends to d + 1).
- E[W_ss], E[T_ss]: Cardwell eqs. 11 and 15 (the hysteresis paper's eqs. 5 and 6).
- l_ss = 1 - (1-p)^d (eq. 16); the first loss costs Q E[Z_TO] + (1 - Q) RTT, Q their eq. 17 (the
  hysteresis paper's eq. 8) at the window E[W_ss] capped at W_max, E[Z_TO] as eqs. 9-10 here.
- E[d_ca] = d - E[d_ss] (eq. 21) at Padhye's throughput: the full model of J. Padhye, V. Firoiu,
  D. Towsley, J. Kurose, "Modeling TCP Throughput: A Simple Model and its Empirical Validation",
  ACM SIGCOMM 1998, eq. 31 (W(p) its eq. 13, f(p) its eq. 28), with b = 2 packets acknowledged
  per ACK (delayed ACKs; gamma = 1 + 1/b = 1.5).
"""

from __future__ import annotations

import math

from models import hysteresis as h
from models.params import Path

B = 2  # packets per ACK (delayed ACKs)


def expected_sent_in_slow_start(d: float, p: float) -> float:
    """Cardwell eq. 5: E[d_ss] with the lost packet counted, capped at the d packets there are."""
    if p == 0:
        return d
    return min(d, h.expected_sent_before_loss(d, p) + 1)


def _unconstrained_window(p: float) -> float:
    """Padhye eq. 13: E[W] when the receiver's window does not limit it."""
    a = (2 + B) / (3 * B)
    return a + math.sqrt(8 * (1 - p) / (3 * B * p) + a * a)


def padhye_throughput(p: float, rtt: float, t0: float, wmax: int) -> float:
    """Steady-state throughput, packets per second (Padhye et al. 1998, full model, eq. 31)."""
    if p == 0:
        return wmax / rtt
    timeouts = h.f(p) * t0 / (1 - p)  # E[Z_TO] per timeout sequence (with Q, below)
    w = _unconstrained_window(p)
    if w < wmax:
        q = h.q_timeout(p, w)
        return ((1 - p) / p + w + q / (1 - p)) / (rtt * (B / 2 * w + 1) + q * timeouts)
    q = h.q_timeout(p, wmax)
    return ((1 - p) / p + wmax + q / (1 - p)) / (rtt * (B / 8 * wmax + (1 - p) / (p * wmax) + 2) + q * timeouts)


def latency(path: Path) -> float:
    """Expected transfer latency (s): E[T_ss] + E[T_loss] + E[T_ca] + E[T_delack]."""
    n, p = path.packets, path.p
    e_dss = expected_sent_in_slow_start(n, p)
    t_ss = h.slow_start_time(e_dss, 1.0, path.wmax, path.rtt)
    w = min(h.window_at_end(e_dss, 1.0), path.wmax)
    l_ss = h.p_loss_in_slow_start(n, p)
    q = h.q_timeout(p, w) if p > 0 else 0.0
    t_loss = l_ss * (q * h.timeout_cost(p, path.t0) + (1 - q) * path.rtt)
    rest = n - e_dss
    t_ca = rest / padhye_throughput(p, path.rtt, path.t0, path.wmax) if rest > 0 else 0.0
    return t_ss + t_loss + t_ca + path.delack
