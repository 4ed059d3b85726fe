"""Mah's think times (`think_time: {model: mah1997}`; CATNIP section IV-B drew its think times from
ns-2's copy of them): the table as ns-2 ships it, sampled stepwise as ns-2 samples it, and `max`.
No network."""

from __future__ import annotations

import statistics

import pytest
from pydantic import ValidationError

from catnip.workloads.apps.web import ThinkTimeSpec
from catnip.workloads.thinktime import MAH1997, load_cdf, sampler


def test_the_table_is_mahs_as_ns2_ships_it():
    values, probs = load_cdf(MAH1997)
    assert len(values) == 1293 and (values[0], values[-1]) == (1.005, 86394.941) and probs[-1] == 1.0
    assert values[probs.index(next(p for p in probs if p >= 0.5))] == pytest.approx(16.19, abs=0.2)


def test_draws_are_values_of_the_table_with_its_median_and_long_tail():
    values, _ = load_cdf(MAH1997)
    draw = sampler({"model": "mah1997"}, 3)
    xs = [draw() for _ in range(20_000)]
    assert set(xs) <= set(values), "a draw between the table's values: ns-2 does not interpolate"
    assert statistics.median(xs) == pytest.approx(16.2, abs=1.5)
    assert statistics.fmean(xs) > 600  # a mean of about 30 minutes: hours-long pauses are in the data
    again = sampler({"model": "mah1997"}, 3)
    assert [again() for _ in range(20)] == xs[:20]


def test_max_redraws_the_long_pauses():
    """Drawn again above 300 s: the table's mean below 300 s is 29.2 s (86.5% of its probability,
    1,115 of its 1,293 values)."""
    draw = sampler({"model": "mah1997", "max": 300.0}, 5)
    xs = [draw() for _ in range(20_000)]
    assert max(xs) <= 300.0
    assert statistics.fmean(xs) == pytest.approx(29.2, abs=1.5)


def test_bad_think_time_fields_are_named():
    assert ThinkTimeSpec(model="mah1997", max="5min").max == 300.0
    with pytest.raises(ValidationError, match="think time 'max' is for model 'mah1997', not 'uniform'"):
        ThinkTimeSpec(model="uniform", mean="2s", max="5min")
    with pytest.raises(ValidationError, match="think time max 1 s: at least 2 s"):
        ThinkTimeSpec(model="mah1997", max="1s")
