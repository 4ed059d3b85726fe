"""Cardwell-00 (N. Cardwell, S. Savage, T. Anderson, "Modeling TCP Latency", IEEE INFOCOM 2000),
by its own formulas, which the hysteresis paper (section 2) summarises: the initial slow start,
the expected cost of the first loss, the rest of the data at a steady-state throughput taken from
Padhye et al., and the delayed-ACK cost added once. Connection establishment is left out, as in
the hysteresis paper's validation (latency from the first data segment).

- E[d_ss] = (1 - (1-p)^d)(1-p)/p + 1 (Cardwell eq. 5: the hysteresis paper's eq. 3 plus the lost
  packet itself), at most d: with nothing left to send after d packets the "+1" has no packet to
  count (for p -> 0 the formula tends to d + 1).
- E[W_ss], E[T_ss]: Cardwell eqs. 11 and 15 (the hysteresis paper's eqs. 5 and 6).
- l_ss = 1 - (1-p)^d (eq. 16); the first loss costs Q E[Z_TO] + (1 - Q) RTT, Q their eq. 17 (the
  hysteresis paper's eq. 8) at the window E[W_ss] capped at W_max, E[Z_TO] as eqs. 9-10 here.
- E[d_ca] = d - E[d_ss] (eq. 21), sent at the rate R of Cardwell's eq. 22 (W(p) their eq. 23,
  b = 2 packets per ACK), E[T_ca] = E[d_ca] / R:

      R = ((1-p)/p + W(p)/2 + Q(p, W(p)))
          / (RTT (b/2 W(p) + 1) + Q(p, W(p)) G(p) T0 / (1-p))                    W(p) < W_max
      R = ((1-p)/p + W_max/2 + Q(p, W_max))
          / (RTT (b/8 W_max + (1-p)/(p W_max) + 2) + Q(p, W_max) G(p) T0 / (1-p))  otherwise

  This is not Padhye et al.'s own full model (SIGCOMM 1998, eq. 31), whose numerator is
  (1-p)/p + W + Q/(1-p): Cardwell's eq. 22 counts half a window and Q (not Q/(1-p)) packets, so
  Padhye's rate is higher than R by 5.8% at p = 1%, 18% at 10%, 27% at 20% (RTT 200 ms, T0 1 s,
  W_max 24).
  Until this was settled the model used Padhye's numerator (docs/models.md, "Cardwell-00").
  Padhye's full model stays here as `padhye_throughput`, for the Sikdar-like model, which takes
  Padhye's rate itself.
"""

from __future__ import annotations

import math

from catnip.models import hysteresis as h
from catnip.models.params import Path

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


def cardwell_throughput(p: float, rtt: float, t0: float, wmax: int) -> float:
    """Cardwell eq. 22: R, packets per second, for the data left after the first loss."""
    if p == 0:
        return wmax / rtt
    timeouts = h.f(p) * t0 / (1 - p)  # G(p) T0 / (1-p), Cardwell eqs. 18-19
    w = _unconstrained_window(p)  # eq. 23
    if w < wmax:
        q = h.q_timeout(p, w)
        return ((1 - p) / p + w / 2 + q) / (rtt * (B / 2 * w + 1) + q * timeouts)
    q = h.q_timeout(p, wmax)
    return ((1 - p) / p + wmax / 2 + q) / (rtt * (B / 8 * wmax + (1 - p) / (p * wmax) + 2) + q * timeouts)


def padhye_throughput(p: float, rtt: float, t0: float, wmax: int) -> float:
    """Steady-state throughput, packets per second (Padhye et al. 1998, full model, eq. 31); the
    Sikdar-like model's rate. Cardwell-00 uses its own eq. 22 (`cardwell_throughput`)."""
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
    t_ca = rest / cardwell_throughput(p, path.rtt, path.t0, path.wmax) if rest > 0 else 0.0  # eq. 24
    return t_ss + t_loss + t_ca + path.delack
