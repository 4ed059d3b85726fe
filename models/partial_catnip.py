"""The Partial CATNIP TCP model (hysteresis paper, section 5): the first 3 and last 3 packets are
lost with probability p', the others with p. Three steps, each by the hysteresis model:

1. the first 3 packets, at p';
2. N - 6 packets at p, counted in eq. 3 as N - 3 remaining (so slow start is not cut short);
3. the last 3 packets at p', starting from w1 = E[W_ss] * gamma of step 2's last round, at most
   W_max and at least 2 (the paper's rules).

Choices the text leaves open (docs/models.md): step 2 starts from the window step 1 ended with,
by the same rule as step 3; a transfer of 6 packets or fewer is all high priority (p' only).
"""

from __future__ import annotations

import random

from catnip.models import hysteresis
from catnip.models.params import Path


def _next_w1(w_end: float, wmax: int) -> float:
    """Section 5: w1 = E[W_ss] * gamma; if w1 >= W_max, w1 = W_max; if w1 < 2.0, w1 = 2.0."""
    return max(2.0, min(w_end * hysteresis.GAMMA, wmax))


def sample(path: Path, rng: random.Random) -> float:
    n = path.packets
    p_high = path.p if path.p_high is None else path.p_high
    if n <= 6:
        return hysteresis.transfer(n, n, p_high, 1.0, path, rng).time
    first = hysteresis.transfer(3, 3, p_high, 1.0, path, rng)
    w1 = _next_w1(first.w_end, path.wmax)
    middle = hysteresis.transfer(n - 3, n - 6, path.p, w1, path, rng)
    w1 = _next_w1(middle.w_end, path.wmax)
    last = hysteresis.transfer(3, 3, p_high, w1, path, rng)
    return first.time + middle.time + last.time
