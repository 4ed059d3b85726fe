"""The page times' 95% intervals (results/samples.py): Student t, the percentile bootstrap of the
mean (seeded) and the distribution-free interval of the median (order statistics, binomial)."""

from __future__ import annotations

import math
import random
import statistics

import numpy as np
import pytest
from scipy import stats

from catnip.results import samples


def _binom_cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


@pytest.mark.parametrize("n", [6, 7, 10, 11, 20, 31, 50, 100, 257])
def test_median_ranks_are_the_tightest_with_95_percent(n):
    low, high, coverage = samples.median_ranks(n)
    assert high == n + 1 - low
    # By hand: the interval (x_(l), x_(n+1-l)) misses the median when fewer than l values are
    # below it or fewer than l above, each with probability P(B <= l - 1), B ~ Binomial(n, 1/2).
    assert coverage == pytest.approx(1 - 2 * _binom_cdf(low - 1, n))
    assert coverage >= 0.95
    assert 1 - 2 * _binom_cdf(low, n) < 0.95  # one rank further in would not reach 95%


def test_median_ranks_known_values_and_too_few():
    assert samples.median_ranks(100)[:2] == (40, 61)  # the textbook table's n = 100
    assert samples.median_ranks(20)[:2] == (6, 15)
    assert samples.median_ranks(5) is None and samples.median_interval([1.0] * 5) is None


def test_median_interval_is_scipys_quantile_test_interval():
    rnd = random.Random(3)
    for n in (6, 15, 40, 101):
        values = [rnd.lognormvariate(0, 1.5) for _ in range(n)]
        ours = samples.median_interval(values)
        theirs = stats.quantile_test(values, q=statistics.median(values), p=0.5).confidence_interval(0.95)
        assert (ours.low, ours.high) == (theirs.low, theirs.high), n
        assert ours.of == "median" and ours.low <= statistics.median(values) <= ours.high


def test_bootstrap_is_scipys_percentile_bootstrap_seeded():
    rnd = random.Random(5)
    values = [rnd.lognormvariate(0, 1) for _ in range(40)]
    ours = samples.bootstrap_interval(values)
    theirs = stats.bootstrap((np.array(values),), np.mean, n_resamples=samples.BOOTSTRAP_RESAMPLES,
                             method="percentile", confidence_level=0.95,
                             random_state=np.random.default_rng(samples.BOOTSTRAP_SEED)).confidence_interval
    assert (ours.low, ours.high) == pytest.approx((theirs.low, theirs.high))
    assert samples.bootstrap_interval(values) == ours  # seeded: the same every time
    assert samples.bootstrap_interval(values, seed=1) != ours
    # A heavy right tail: the interval reaches further above the mean than below it; t is symmetric.
    mean = statistics.fmean(values)
    assert ours.high - mean > mean - ours.low
    t = samples.t_interval(values)
    assert t.high - mean == pytest.approx(mean - t.low)


def test_bootstrap_covers_the_mean_of_a_skewed_distribution_about_95_percent():
    # Exponential(1): mean 1. Percentile bootstrap at n = 40 covers it about 93-95% of the time.
    rng = np.random.default_rng(11)
    hits = sum(iv.low <= 1.0 <= iv.high for iv in
               (samples.bootstrap_interval(list(rng.exponential(1.0, 40)), resamples=999) for _ in range(200)))
    assert 0.88 <= hits / 200 <= 0.99, hits


def test_few_or_equal_values():
    for kind in samples.INTERVALS:
        assert samples.interval([1.0], kind) is None
    assert samples.bootstrap_interval([2.0, 2.0, 2.0]) == samples.Interval("bootstrap", "mean", 2.0, 2.0, 0.95)
    with pytest.raises(ValueError, match="one of t, bootstrap, median"):
        samples.interval([1.0, 2.0], "normal")
