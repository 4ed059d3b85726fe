"""Per-sample metrics of any application (the `samples` table, results/store.py), whatever the
metric: echo delays of Telnet, goodput of bulk flows, burst times after idle, FTP file times, page
times. Summaries (mean with a Student-t 95% interval, spread, percentiles), the exact empirical
CCDF, per-flow time series and the coefficient of variation across flows of a per-flow mean.

A sample counts in the statistics when it has a value and no error; a sample with an error (or
no value) is counted in `errors` and never averaged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from results.store import Store

# Two-sided 95% Student t quantiles t(0.975, df) for df = 1..30.
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
_Z975 = 1.959963984540054


def t975(df: int) -> float:
    """t(0.975, df): a table to 30 degrees of freedom, then the Cornish-Fisher expansion in 1/df
    (within 1e-4 of the exact quantile there), tending to the normal 1.96."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    g = ((z ** 3 + z) / 4, (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
         (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
         (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160)
    return z + sum(gi / df ** (i + 1) for i, gi in enumerate(g))


def ci95(sdev: float, n: int) -> float | None:
    """Half-width of the 95% confidence interval of the mean of n independent samples with sample
    standard deviation `sdev` (Student t, so right for small n); None below two samples."""
    return t975(n - 1) * sdev / math.sqrt(n) if n > 1 else None


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of sorted values, linear between order statistics (the usual
    'type 7': position q (n - 1) counted from 0)."""
    if not ordered:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 1:
        raise ValueError(f"quantile {q} outside [0, 1]")
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class MetricSummary:
    """One metric of one application (and one tag, or all tags pooled: tag None). n counts the
    samples with a value; errors those that failed. mean, ci95 (half-width, Student t), sdev
    (sample standard deviation), percentiles and extremes are in `unit`; None without samples
    (ci95 and sdev also with a single one)."""
    app: str
    metric: str
    unit: str | None
    tag: str | None
    n: int
    errors: int
    mean: float | None
    ci95: float | None
    sdev: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    min: float | None
    max: float | None


def summarize(app: str, metric: str, unit: str | None, tag: str | None, values: Iterable[float],
              errors: int = 0) -> MetricSummary:
    """The summary of given values (what `summaries` does per group)."""
    v = sorted(values)
    n = len(v)
    if not n:
        return MetricSummary(app, metric, unit, tag, 0, errors, *([None] * 8))
    sdev = statistics.stdev(v) if n > 1 else None
    return MetricSummary(app, metric, unit, tag, n, errors, mean=statistics.fmean(v),
                         ci95=None if sdev is None else ci95(sdev, n), sdev=sdev,
                         p50=percentile(v, 0.5), p90=percentile(v, 0.9), p99=percentile(v, 0.99),
                         min=v[0], max=v[-1])


def _ok(row) -> bool:
    return row["error"] is None and row["value"] is not None


def _key(value: str | None) -> tuple[bool, str]:
    return (value is not None, value or "")  # None first, then by name


def summaries(store: Store, run_id: str, point: int, by_tag: bool = False) -> list[MetricSummary]:
    """A summary per application and metric of a point (per tag too with `by_tag`; else tags are
    pooled and `tag` is None), sorted by app, metric, tag. Samples of one metric stored in
    different units are summarised apart, one summary per unit, never mixed."""
    groups: dict[tuple, tuple[list[float], list[int]]] = {}
    for r in store.samples(run_id, point):
        key = (r["app"], r["metric"], r["tag"] if by_tag else None, r["unit"])
        values, errors = groups.setdefault(key, ([], [0]))
        if _ok(r):
            values.append(r["value"])
        else:
            errors[0] += 1
    return [summarize(app, metric, unit, tag, values, errors[0])
            for (app, metric, tag, unit), (values, errors) in
            sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], _key(kv[0][2]), _key(kv[0][3])))]


def ccdf(values: Iterable[float]) -> list[tuple[float, float]]:
    """The empirical complementary CDF, exact on the sample: for each distinct value x in
    increasing order, (x, fraction of the values strictly greater than x); the last is (max, 0)."""
    v = sorted(values)
    n = len(v)
    out: list[tuple[float, float]] = []
    for i, x in enumerate(v):
        if i + 1 < n and v[i + 1] == x:
            continue
        out.append((x, (n - i - 1) / n))
    return out


def _values(store: Store, run_id: str, point: int, app: str, metric: str, tag: str | None) -> list:
    return [r for r in store.samples(run_id, point, app, metric) if _ok(r) and (tag is None or r["tag"] == tag)]


def ccdf_for(store: Store, run_id: str, point: int, app: str, metric: str,
             tag: str | None = None) -> list[tuple[float, float]]:
    """`ccdf` of a point's samples of one metric (of one tag, if given), errors left out."""
    return ccdf(r["value"] for r in _values(store, run_id, point, app, metric, tag))


def timeseries(store: Store, run_id: str, point: int, app: str, metric: str,
               tag: str | None = None) -> dict[str | None, list[tuple[float, float]]]:
    """Per flow (the samples' `flow`; None for samples without one), the (t, value) pairs sorted by
    t, e.g. the goodput of each bulk flow per interval. Samples without t, or with an error, are
    left out. Flows in order of their ids, None first."""
    out: dict[str | None, list[tuple[float, float]]] = {}
    for r in _values(store, run_id, point, app, metric, tag):
        if r["t"] is not None:
            out.setdefault(r["flow"], []).append((r["t"], r["value"]))
    return {flow: sorted(out[flow]) for flow in sorted(out, key=_key)}


def per_flow_means(store: Store, run_id: str, point: int, app: str, metric: str,
                   tag: str | None = None) -> dict[str | None, float]:
    """Each flow's mean of the metric (e.g. its goodput), flows in order of their ids, None first."""
    flows: dict[str | None, list[float]] = {}
    for r in _values(store, run_id, point, app, metric, tag):
        flows.setdefault(r["flow"], []).append(r["value"])
    return {flow: statistics.fmean(flows[flow]) for flow in sorted(flows, key=_key)}


def cov(values: Iterable[float], sample: bool = False) -> float | None:
    """Coefficient of variation, standard deviation over mean: of the population of the given
    values (divisor n), or with `sample` the sample standard deviation (n - 1). None for fewer
    than two values or a zero mean."""
    v = list(values)
    if len(v) < 2:
        return None
    mean = statistics.fmean(v)
    if mean == 0:
        return None
    return (statistics.stdev(v) if sample else statistics.pstdev(v)) / abs(mean)


def cov_across_flows(store: Store, run_id: str, point: int, app: str, metric: str, tag: str | None = None,
                     sample: bool = False) -> float | None:
    """How unevenly flows fared: the coefficient of variation across flows of each flow's mean of
    the metric (the TCP-friendly paper's C.O.V. of per-flow goodput; 0 when all flows got the
    same). Over the flows present, so the population standard deviation unless `sample`. None
    with fewer than two flows."""
    return cov(per_flow_means(store, run_id, point, app, metric, tag).values(), sample)
