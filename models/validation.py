"""Models against transfers measured on the testbed (hysteresis paper, section 4): per-size means
with confidence intervals, the error measure of eq. 13 per model and loss rate (the layout of
Tables 2 and 3), Partial CATNIP against Reno (section 5), and the curves of Figs. 3, 4 and 6.

Eq. 13: V(p) = sum over transfer sizes of (T_predicted(p) - T_measured(p))^2 / number of sizes,
in s^2, with T_measured the mean latency of the trials of that size. Short flows are the sizes up
to 50 KB and long flows those from 50 KB (Table 1's split; 50 KB is in both).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from catnip.models import cardwell, hysteresis, partial_catnip, sikdar
from catnip.models.params import Path
from catnip.results.samples import ci95

SHORT_MAX_KB, LONG_MIN_KB = 50, 50
# Tables 2 and 3 of the paper (ns-2), for the side-by-side.
PAPER_TABLE2 = {"Sikdar": (0.15, 0.41, 0.51, 1.06), "Cardwell-00": (0.17, 0.44, 0.10, 0.15),
                "Hysteresis": (0.03, 0.05, 0.05, 0.08)}
PAPER_TABLE3 = {"Sikdar": (0.78, 1.82, 4.75, 16.12), "Cardwell-00": (0.22, 0.47, 4.20, 22.24),
                "Hysteresis": (0.02, 0.09, 2.20, 8.66)}
PAPER_P = (0.01, 0.03, 0.08, 0.10)
MODELS = ("Sikdar", "Cardwell-00", "Hysteresis")


@dataclass
class Cell:
    """Measured latencies of one (profile, p, p', size)."""

    profile: str
    p: float
    p_high: float | None
    size: int
    values: list[float]
    failed: int

    @property
    def kb(self) -> float:
        return self.size / 1024

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def ci95(self) -> float:
        """Half-width of the 95% confidence interval of the mean (Student t); 0 for one value."""
        n = len(self.values)
        return ci95(statistics.stdev(self.values), n) if n > 1 else 0.0


def cells(rows, excluded_points: set[int] = frozenset()) -> list[Cell]:
    """Group transfer_trials rows (dicts or sqlite rows) into cells; failed transfers are counted."""
    groups: dict[tuple, Cell] = {}
    for r in rows:
        if r["point"] in excluded_points:
            continue
        key = (r["profile"], r["p"], r["p_high"], r["size"])
        cell = groups.setdefault(key, Cell(*key, [], 0))
        if r["error"] or r["latency"] is None:
            cell.failed += 1
        else:
            cell.values.append(r["latency"])
    return sorted((c for c in groups.values() if c.values),
                  key=lambda c: (c.profile, c.p, -1 if c.p_high is None else c.p_high, c.size))


def measured_loss(fidelity: dict) -> dict[str, float | None]:
    """Loss of data segments on the loss link per class ("high", "low"): drops / arrivals, None if
    none arrived. Records written before data_arrived existed hold departures as data_sent; on that
    link (no rate, nothing left queued at the end) arrivals are departures plus drops."""
    dropped = fidelity.get("data_dropped", {})
    if "data_arrived" in fidelity:
        arrived = fidelity["data_arrived"]
    else:
        arrived = {k: v + dropped.get(k, 0) for k, v in fidelity.get("data_sent", {}).items()}
    return {cls: (dropped.get(cls, 0) / arrived[cls] if arrived.get(cls) else None) for cls in ("high", "low")}


def predict(model: str, path: Path, samples: int = 2000, seed: int = 1) -> float:
    if model == "Hysteresis":
        return statistics.fmean(hysteresis.latencies(path, samples, seed))
    if model == "Partial CATNIP":
        return statistics.fmean(hysteresis.latencies(path, samples, seed, draw=partial_catnip.sample))
    if model == "Cardwell-00":
        return cardwell.latency(path)
    if model == "Sikdar":
        return sikdar.latency(path)
    raise ValueError(f"unknown model {model!r}")


def path_for(cell: Cell, mss: int, rtt: float, wmax: int, t0: float, delack: float) -> Path:
    return Path(size=cell.size, p=cell.p, mss=mss, rtt=rtt, wmax=wmax, t0=t0, delack=delack, p_high=cell.p_high)


def eq13(pairs: list[tuple[float, float]]) -> float:
    """Eq. 13 over (predicted, measured) pairs."""
    return sum((a - b) ** 2 for a, b in pairs) / len(pairs)


def error_table(all_cells: list[Cell], profile: str, sizes: tuple[float, float], predictions: dict) -> dict:
    """{model: {p: V(p)}} over the Bernoulli cells of `profile` with sizes in [lo, hi] KB."""
    lo, hi = sizes
    out: dict[str, dict[float, float]] = {}
    for model in MODELS:
        by_p: dict[float, list[tuple[float, float]]] = {}
        for c in all_cells:
            if c.profile == profile and c.p_high is None and lo <= c.kb <= hi:
                by_p.setdefault(c.p, []).append((predictions[(model, c.profile, c.p, c.p_high, c.size)], c.mean))
        out[model] = {p: eq13(pairs) for p, pairs in sorted(by_p.items())}
    return out


def catnip_gain(all_cells: list[Cell], profile: str) -> list[tuple[float, float, float, float, float]]:
    """(p, KB, Reno mean, CATNIP mean, % faster) where both p (Bernoulli) and (p, p') were measured."""
    reno = {(c.p, c.size): c for c in all_cells if c.profile == profile and c.p_high is None}
    out = []
    for c in all_cells:
        if c.profile == profile and c.p_high is not None and (c.p, c.size) in reno:
            base = reno[(c.p, c.size)].mean
            out.append((c.p, c.kb, base, c.mean, 100 * (base - c.mean) / base))
    return out
