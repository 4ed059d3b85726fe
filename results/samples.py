"""Per-sample metrics of any application (the `samples` table, results/store.py), whatever the
metric: echo delays of Telnet, goodput of bulk flows, burst times after idle, FTP file times, page
times. Summaries (mean with a Student-t 95% interval, spread, percentiles), the exact empirical
CCDF, per-flow time series and the coefficient of variation across flows of a per-flow mean.
For heavy-tailed samples such as page times, `interval` gives the mean's 95% interval by the
percentile bootstrap, or a distribution-free 95% interval of the median, beside Student t.

A sample counts in the statistics when it has a value and no error; a sample with an error (or
no value) is counted in `errors` and never averaged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import inspect

import numpy as np
from scipy.stats import binom, bootstrap
from scipy.stats import t as student_t

from catnip.results.store import Store

def t975(df: float) -> float:
    """t(0.975, df), the two-sided 95% Student t quantile (scipy); df may be fractional (a
    Welch-Satterthwaite df) or infinite (the normal 1.96)."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be above 0, not {df}")
    return float(student_t.ppf(0.975, df))


def ci95(sdev: float, n: int) -> float | None:
    """Half-width of the 95% confidence interval of the mean of n independent samples with sample
    standard deviation `sdev` (Student t, so right for small n); None below two samples."""
    return t975(n - 1) * sdev / math.sqrt(n) if n > 1 else None


def welch_df(parts: Iterable[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates, given as
    (variance, its degrees of freedom); infinite when every variance is 0."""
    parts = list(parts)
    den = sum(v * v / df for v, df in parts)
    return sum(v for v, _ in parts) ** 2 / den if den > 0 else math.inf


def half_width(parts: Iterable[tuple[float, float]]) -> float:
    """Half-width of the 95% interval of an estimate whose variance is the sum of independent
    estimated parts (variance, degrees of freedom): Student t at the Welch-Satterthwaite df. With
    one part (sdev^2 / n, n - 1) it is `ci95`."""
    parts = list(parts)
    var = sum(v for v, _ in parts)
    return t975(welch_df(parts)) * math.sqrt(var) if var > 0 else 0.0


def ratio_ci95(ratio: float, rel_var_a: float, n_a: int, rel_var_b: float, n_b: int) -> float:
    """Half-width of the 95% interval of a ratio of two independent means, each of n samples with
    squared coefficient of variation of the mean rel_var (sdev^2 / (n mean^2)): delta method,
    variance ratio^2 (rel_var_a + rel_var_b), Student t at the Welch-Satterthwaite df."""
    return half_width(ratio_parts(ratio, rel_var_a, n_a, rel_var_b, n_b))


def ratio_parts(ratio: float, rel_var_a: float, n_a: int, rel_var_b: float, n_b: int) -> list[tuple[float, float]]:
    """The two variance parts of a ratio of means (delta method), for `half_width` (a mean of
    several ratios sums their parts)."""
    return [(ratio * ratio * rel_var_a, n_a - 1), (ratio * ratio * rel_var_b, n_b - 1)]


INTERVALS = {
    "t": "Student t 95% interval of the mean",
    "bootstrap": "percentile bootstrap 95% interval of the mean",
    "median": "distribution-free 95% interval of the median (order statistics, binomial)",
}
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0  # fixed: the same samples give the same interval in every report


@dataclass(frozen=True)
class Interval:
    """A 95% confidence interval: `kind` one of INTERVALS, of the `of` statistic ("mean" or
    "median"), its bounds, and its coverage (0.95, or the exact binomial coverage of the median's
    order statistics, at least 0.95)."""
    kind: str
    of: str
    low: float
    high: float
    coverage: float


def t_interval(values: Sequence[float]) -> Interval | None:
    """The mean +- `ci95`; None below two values."""
    n = len(values)
    if n < 2:
        return None
    mean = statistics.fmean(values)
    h = ci95(statistics.stdev(values), n)
    return Interval("t", "mean", mean - h, mean + h, 0.95)


def _rng_arg(seed: int) -> dict:
    # scipy renamed random_state to rng in 1.15; pyproject allows 1.10 on.
    key = "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"
    return {key: np.random.default_rng(seed)}


def bootstrap_interval(values: Sequence[float], seed: int = BOOTSTRAP_SEED,
                       resamples: int = BOOTSTRAP_RESAMPLES) -> Interval | None:
    """Percentile bootstrap 95% interval of the mean (scipy.stats.bootstrap), seeded so a report
    is reproducible; makes no assumption of normality, which a heavy right tail of page times
    breaks for Student t at small n. None below two values."""
    n = len(values)
    if n < 2:
        return None
    if min(values) == max(values):  # no spread: every resample has the same mean
        return Interval("bootstrap", "mean", values[0], values[0], 0.95)
    res = bootstrap((np.asarray(values, dtype=float),), np.mean, n_resamples=resamples, confidence_level=0.95,
                    method="percentile", vectorized=True, batch=max(1, 2_000_000 // n), **_rng_arg(seed))
    ci = res.confidence_interval
    return Interval("bootstrap", "mean", float(ci.low), float(ci.high), 0.95)


def median_ranks(n: int, level: float = 0.95) -> tuple[int, int, float] | None:
    """The order statistics (1-based ranks l, n + 1 - l) whose interval covers the median of any
    continuous distribution with probability at least `level`, and that probability: the largest
    l with P(B < l) <= (1 - level) / 2 for B ~ Binomial(n, 1/2). None when no such l exists (fewer
    than 6 values for 95%)."""
    if n < 1:
        return None
    tail = (1 - level) / 2
    # P(B <= l - 1) <= tail; binom.ppf(tail) is the least k with cdf(k) >= tail.
    k = int(binom.ppf(tail, n, 0.5))
    low = k if binom.cdf(k, n, 0.5) > tail else k + 1  # largest l with cdf(l - 1) <= tail
    if low < 1:
        return None
    return low, n + 1 - low, float(1 - 2 * binom.cdf(low - 1, n, 0.5))


def median_interval(values: Sequence[float], level: float = 0.95) -> Interval | None:
    """A distribution-free interval of the median: between two order statistics chosen by the
    binomial distribution (`median_ranks`); its coverage is exact, at least `level`, whatever the
    distribution of the values. None below 6 values (no pair of order statistics reaches 95%)."""
    ranks = median_ranks(len(values), level)
    if ranks is None:
        return None
    v = sorted(values)
    low, high, coverage = ranks
    return Interval("median", "median", v[low - 1], v[high - 1], coverage)


def interval(values: Sequence[float], kind: str = "t") -> Interval | None:
    """The 95% interval of `kind` (INTERVALS) of the values; None where there are too few."""
    if kind == "t":
        return t_interval(values)
    if kind == "bootstrap":
        return bootstrap_interval(values)
    if kind == "median":
        return median_interval(values)
    raise ValueError(f"interval {kind!r}: one of {', '.join(INTERVALS)}")


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
