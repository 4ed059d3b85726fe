"""Think times between a client's pages, drawn from a seeded generator.

Models: zero (the WAN experiment, section V-G), fixed, exponential, `uniform` on [0, 2 x mean]
(Nouredine and Tobagi section 2.2.1: "Short, uniformly distributed user 'think time' (2.5 s
average)"), and `empirical`: a CDF file in ns-2's format (lines `value count
cumulative-probability`), sampled by inverting the CDF with linear interpolation; and `mah1997`:
Mah's measured think times (B. A. Mah, "An Empirical Model of HTTP Network Traffic", IEEE INFOCOM
1997) as ns-2 ships them (`tcl/http/data/HttpThinkTime.cdf`, kept here as data with that citation
in workloads/data/mah1997-think-time.cdf) and sampled as ns-2 does (a table value, no
interpolation), which the CATNIP simulations used (section IV-B, reference [20]). Its mean is
about 30 minutes; `max` redraws anything longer (docs/workload.md).
"""

from __future__ import annotations

import bisect
import random
from pathlib import Path
from typing import Callable

from catnip.spec import bounded

MAH1997 = Path(__file__).parent / "data" / "mah1997-think-time.cdf"
MAX_REDRAWS = 10_000  # `max` is checked to keep a fair share of the table: this never runs out in practice


class ThinkTimeError(ValueError):
    pass


def load_cdf(path: str | Path) -> tuple[list[float], list[float]]:
    """(values, cumulative probabilities), validated: both non-decreasing, ending at 1."""
    values, probs = [], []
    try:  # read when the scenario is checked, as root: a regular file of bounded size only
        lines = bounded.read_text(path, "think-time CDF", bounded.MAX_DATA_FILE_BYTES).splitlines()
    except bounded.InputError as exc:
        raise ThinkTimeError(str(exc)) from None
    for n, line in enumerate(lines, 1):
        fields = line.split()
        if not fields or line.lstrip().startswith("#"):
            continue
        try:
            value, prob = float(fields[0]), float(fields[-1])
        except ValueError:
            raise ThinkTimeError(f"think-time CDF {path} line {n}: expected 'value count probability'") from None
        if value < 0 or not 0 <= prob <= 1 or (values and (value < values[-1] or prob < probs[-1])):
            raise ThinkTimeError(f"think-time CDF {path} line {n}: values and probabilities must not decrease")
        values.append(value)
        probs.append(prob)
    if not values or abs(probs[-1] - 1.0) > 1e-6:
        raise ThinkTimeError(f"think-time CDF {path}: the last cumulative probability must be 1")
    return values, probs


def sampler(spec: dict, seed: int) -> Callable[[], float]:
    """A function returning successive think times (seconds) for one client."""
    rng = random.Random(seed)
    model = spec.get("model", "zero")
    mean = spec.get("mean")
    if model == "zero":
        return lambda: 0.0
    if model == "fixed":
        return lambda: float(mean)
    if model == "exponential":
        return lambda: rng.expovariate(1.0 / mean) if mean > 0 else 0.0
    if model == "uniform":
        # The paper gives the mean only; [0, 2 x mean] is the widest uniform range with that mean.
        return lambda: rng.uniform(0.0, 2.0 * mean)
    if model == "empirical":
        values, probs = load_cdf(spec["cdf"])

        def draw() -> float:
            u = rng.random()
            i = bisect.bisect_left(probs, u)
            if i == 0:
                return values[0]
            if i >= len(values):
                return values[-1]
            p0, p1 = probs[i - 1], probs[i]
            frac = 0.0 if p1 == p0 else (u - p0) / (p1 - p0)
            return values[i - 1] + frac * (values[i] - values[i - 1])
        return draw
    if model == "mah1997":
        values, probs = load_cdf(MAH1997)
        limit = spec.get("max")

        def step() -> float:
            # ns-2's RandomVariable/Empirical with interpolation_ 0: the first value whose CDF reaches u.
            return values[min(bisect.bisect_left(probs, rng.random()), len(values) - 1)]

        def capped() -> float:
            for _ in range(MAX_REDRAWS):
                v = step()
                if v <= limit:
                    return v
            raise ThinkTimeError(f"mah1997: no draw at or below max ({limit:g} s) in {MAX_REDRAWS} tries")
        return step if limit is None else capped
    raise ThinkTimeError(f"unknown think-time model {model!r}")
