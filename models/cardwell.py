"""Cardwell-00 (Cardwell, Savage and Anderson, "Modeling TCP latency", 2000), as the hysteresis
paper describes it (section 2): the initial slow start (eqs. 3-6 of the hysteresis paper, which
follow it), the expected cost of the first loss, the rest of the data at Padhye's steady-state
throughput, and the delayed-ACK cost added once.

Padhye's throughput here is the approximate form of Padhye et al. (2000):
B(p) = min(W_max / RTT, 1 / (RTT sqrt(2bp/3) + T0 min(1, 3 sqrt(3bp/8)) p (1 + 32 p^2))) packets/s,
with b = 2 packets acknowledged per ACK (gamma = 1 + 1/b = 1.5). Using the approximation is our
choice (docs/models.md).
"""

from __future__ import annotations

import math

from models import hysteresis as h
from models.params import Path

B = 2  # packets per ACK (delayed ACKs)


def padhye_throughput(p: float, rtt: float, t0: float, wmax: int) -> float:
    """Steady-state throughput, packets per second (Padhye et al. 2000, approximate model)."""
    if p == 0:
        return wmax / rtt
    denom = rtt * math.sqrt(2 * B * p / 3) + t0 * min(1.0, 3 * math.sqrt(3 * B * p / 8)) * p * (1 + 32 * p**2)
    return min(wmax / rtt, 1 / denom)


def latency(path: Path) -> float:
    """Expected transfer latency (s): E[T_ss] + E[T_loss] + E[T_ca] + E[T_delack]."""
    n, p = path.packets, path.p
    e_dss = h.expected_sent_before_loss(n, p)
    t_ss = h.slow_start_time(e_dss, 1.0, path.wmax, path.rtt)
    w = min(h.window_at_end(e_dss, 1.0), path.wmax)
    l_ss = h.p_loss_in_slow_start(n, p)
    q = h.q_timeout(p, w) if p > 0 else 0.0
    t_loss = l_ss * (q * h.timeout_cost(p, path.t0) + (1 - q) * path.rtt)
    rest = n - e_dss
    t_ca = rest / padhye_throughput(p, path.rtt, path.t0, path.wmax) if rest > 0 else 0.0
    return t_ss + t_loss + t_ca + path.delack
