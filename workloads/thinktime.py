"""Think times between a client's pages, and the ns-2 empirical distributions behind them.

A think-time model is chosen by a small spec (a dict, as in the scenario's `workload.think_time`):

    {"model": "zero"}                           no pause (the WAN experiment, section V-G)
    {"model": "fixed", "mean": 2.5}             always 2.5 s
    {"model": "exponential", "mean": 8.0}       exponential with that mean
    {"model": "ns2"}                            the model the CATNIP simulations used (below)
    {"model": "empirical", "cdf": "FILE"}       any CDF file in ns-2's format

`ns2` and `empirical` accept two of ns-2's own `RandomVariable/Empirical` knobs: `max_cdf`
(ns-2 `maxCDF_`: draw u from [0, max_cdf), i.e. the distribution truncated at that quantile) and
`interpolate` (ns-2 `interpolation_`; default off, as in ns-2's `ns-default.tcl`).

Source of `ns2`: the CATNIP paper (section IV-B) drew think times "from the empirically-derived
think time models in the ns-2 simulator [20]", [20] being B. Mah, "An Empirical Model of HTTP
Network Traffic", INFOCOM 1997. In ns-2 that model is the `Http` class of `tcl/http/http.tcl`
(Giao Nguyen, UC Berkeley), whose think time `rvClientTime_` is a `RandomVariable/Empirical`
loaded from `tcl/http/data/HttpThinkTime.cdf`, "empirical data files provided by Bruce Mah"
(`tcl/http/README`); `http.tcl` waits that long after each page before the next one. The table
below is that file (ns-2.35; 1,314 observed think times, 1.005 s to 86,394.941 s, median
16.192 s, mean 1,804 s), stored as `value` or `value*count`; `ns2_text()` rebuilds the original
file byte for byte (SHA-256 below). ns-2 is distributed under the BSD-style licences of its
authors (here: the Regents of the University of California).
Sampling follows ns-2's `EmpiricalRandomVariable::value()` (tools/ranvar.cc): u uniform in
[minCDF, maxCDF), the first entry whose cumulative probability is >= u, interpolating only when
asked.

All sampling is seeded: `sampler(spec, seed)` owns a `random.Random(seed)`.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

MODELS = ("zero", "fixed", "exponential", "ns2", "empirical")
_KEYS = {"model", "mean", "cdf", "max_cdf", "interpolate"}
_USES = {  # which optional keys each model takes; others must be absent or None
    "zero": set(), "fixed": {"mean"}, "exponential": {"mean"},
    "ns2": {"max_cdf", "interpolate"}, "empirical": {"cdf", "max_cdf", "interpolate"},
}


class ThinkTimeError(ValueError):
    """A bad think-time spec or CDF file; the message names the key or line."""


@dataclass(frozen=True)
class EmpiricalCdf:
    """An ns-2 `RandomVariable/Empirical` table: values and their cumulative probabilities."""

    values: tuple[float, ...]
    probs: tuple[float, ...]
    counts: tuple[int, ...] | None = None  # observation counts, when the table came with them

    @classmethod
    def from_counts(cls, pairs: Iterable[tuple[float, int]]) -> "EmpiricalCdf":
        values, counts = zip(*pairs)
        total, running, probs = sum(counts), 0, []
        for c in counts:
            running += c
            probs.append(running / total)
        return cls(tuple(values), tuple(probs), tuple(counts))

    @classmethod
    def from_blob(cls, text: str) -> "EmpiricalCdf":
        """Whitespace-separated `value` or `value*count` tokens (the compact form stored here)."""
        pairs = []
        for token in text.split():
            value, _, count = token.partition("*")
            pairs.append((float(value), int(count or 1)))
        return cls.from_counts(pairs)

    @classmethod
    def from_file(cls, path: str | Path) -> "EmpiricalCdf":
        """ns-2's format, one entry a line: `value count cumulative-probability` (ns-2 reads the
        first and last column; two-column `value probability` files are accepted too)."""
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as exc:
            raise ThinkTimeError(f"CDF file {path}: cannot read it ({exc.strerror})") from None
        values: list[float] = []
        probs: list[float] = []
        for n, line in enumerate(lines, 1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            try:
                if len(fields) not in (2, 3):
                    raise ValueError
                value, prob = float(fields[0]), float(fields[-1])
            except ValueError:
                raise ThinkTimeError(f"CDF file {path} line {n}: expected 'value count probability', "
                                     f"got {line.strip()[:60]!r}") from None
            if not (math.isfinite(value) and value >= 0 and 0 <= prob <= 1):
                raise ThinkTimeError(f"CDF file {path} line {n}: need a value >= 0 and a probability in [0, 1]")
            if values and (value < values[-1] or prob < probs[-1]):
                raise ThinkTimeError(f"CDF file {path} line {n}: values and probabilities must not decrease")
            values.append(value)
            probs.append(prob)
        if not values:
            raise ThinkTimeError(f"CDF file {path}: no entries")
        if abs(probs[-1] - 1.0) > 1e-6:
            raise ThinkTimeError(f"CDF file {path}: the last cumulative probability is {probs[-1]}, not 1")
        return cls(tuple(values), tuple(probs))

    def index(self, u: float) -> int:
        """ns-2 `lookup()`: the first entry whose cumulative probability is >= u."""
        return min(bisect.bisect_left(self.probs, u), len(self.probs) - 1)

    def value_at(self, u: float, interpolate: bool = False) -> float:
        """ns-2 `value()` for a given u (INTER_DISCRETE unless interpolate)."""
        i = self.index(u)
        if i and interpolate and u < self.probs[i]:
            p0, p1 = self.probs[i - 1], self.probs[i]
            return self.values[i - 1] + (u - p0) * (self.values[i] - self.values[i - 1]) / (p1 - p0)
        return self.values[i]

    def sample(self, rng: random.Random, max_cdf: float = 1.0, interpolate: bool = False) -> float:
        return self.value_at(rng.random() * max_cdf, interpolate)

    def cdf_at(self, value: float) -> float:
        """P(X <= value) for the discrete distribution (useful to pick `max_cdf` for a cap)."""
        i = bisect.bisect_right(self.values, value)
        return self.probs[i - 1] if i else 0.0

    def mean(self, max_cdf: float = 1.0) -> float:
        """Mean of the discrete (non-interpolated) distribution truncated at max_cdf."""
        total, prev = 0.0, 0.0
        for value, prob in zip(self.values, self.probs):
            top = min(prob, max_cdf)
            if top > prev:
                total += value * (top - prev)
                prev = top
            if prob >= max_cdf:
                break
        return total / max_cdf

    def ns2_text(self, value_format: str = "{:.3f}") -> str:
        """The table in ns-2's file format (`value count probability`, probability as %.12g)."""
        if self.counts is None:
            raise ValueError("a table read from a file has no counts to write")
        return "".join(f"{value_format.format(v)} {c} {p:.12g}\n"
                       for v, c, p in zip(self.values, self.counts, self.probs))


# ns-2.35 tcl/http/data/HttpThinkTime.cdf (B. Mah's measurements), seconds, `value[*count]`.
# SHA-256 of the original file, which ns2_think_cdf().ns2_text() reproduces exactly:
NS2_THINK_SHA256 = "75b469e7b164c1fd560be53538efacf0180d12feb926d576c8fef3b013b4d8d9"
_NS2_THINK = """
    1.005 1.010 1.022 1.024 1.037*2 1.038 1.040 1.065 1.066 1.078 1.089 1.094 1.102 1.132*2 1.138
    1.141 1.153 1.158 1.195 1.201 1.202 1.212*2 1.213 1.235 1.261 1.272 1.295 1.312 1.321 1.323
    1.324 1.332 1.340 1.349 1.354 1.375 1.376 1.381 1.393 1.429 1.434 1.445 1.463 1.465 1.487 1.491
    1.493 1.497*2 1.500 1.501*2 1.505 1.506*2 1.515 1.530 1.531 1.534 1.536 1.550 1.579 1.580 1.585
    1.587 1.610 1.615 1.616 1.620 1.623 1.634 1.650 1.663 1.667 1.669 1.682 1.684 1.691 1.713 1.730
    1.737 1.752 1.783 1.788 1.792 1.804 1.817 1.828 1.836 1.845 1.871 1.884 1.905*2 1.910*2 1.923
    1.935 1.957 1.958 1.961 1.963 1.967 1.981 1.986 2.001 2.006 2.010 2.029 2.030 2.041 2.050
    2.072*2 2.075 2.105 2.109*2 2.117 2.138 2.151 2.170*2 2.188 2.194 2.195 2.197 2.207 2.212 2.226
    2.240 2.251 2.277 2.296 2.307 2.332 2.337 2.343 2.355 2.380 2.400 2.401 2.415 2.428 2.440 2.446
    2.466 2.467 2.472 2.492 2.503*2 2.549 2.566 2.610 2.620 2.626 2.632 2.655*3 2.671 2.676 2.690
    2.697 2.735 2.737*2 2.745 2.750 2.761 2.770 2.783 2.797 2.836 2.874 2.890 2.903 2.938 2.948
    2.975 2.987 2.988 2.995 3.002 3.005 3.014 3.039 3.052 3.057 3.068 3.097 3.148 3.205 3.211 3.227
    3.233 3.238 3.242 3.243 3.244 3.283 3.293 3.306 3.364 3.365 3.375 3.404*2 3.407 3.419 3.443
    3.449 3.483 3.488 3.492 3.493 3.497 3.517 3.520 3.529 3.564 3.566 3.574 3.591*2 3.596 3.614
    3.616 3.625 3.649 3.658 3.666 3.669*2 3.747 3.755 3.816 3.827 3.840 3.843 3.859 3.872 3.891
    3.902 3.920 3.945 3.976 3.989 3.992 3.998 4.013 4.017 4.085 4.088 4.103 4.112 4.170 4.183 4.198
    4.203 4.237 4.238 4.239 4.240 4.307 4.326 4.334 4.337 4.360 4.380 4.384 4.385 4.388 4.393 4.402
    4.420 4.424 4.427 4.446 4.449 4.454 4.491 4.519 4.548 4.569 4.586 4.589 4.617 4.624 4.641 4.666
    4.667 4.680 4.694 4.699 4.722 4.728 4.747*2 4.751 4.755 4.759 4.781 4.791 4.841 4.867 4.869
    4.888 4.931 4.934 4.935 4.949 4.963 4.967 4.976 5.027 5.035 5.044 5.055 5.074 5.080 5.114 5.133
    5.138 5.171 5.175 5.186 5.230 5.286 5.353 5.399 5.417 5.423 5.474 5.478 5.492 5.511 5.540 5.559
    5.563 5.568 5.582 5.608 5.618 5.652 5.677 5.703 5.730 5.825 5.836 5.846 5.852 5.887 5.906 5.925
    5.933 5.991 6.001 6.009 6.012 6.028 6.038 6.053 6.058 6.102 6.108 6.109 6.119 6.128 6.174 6.217
    6.233 6.234 6.259 6.278 6.302 6.313 6.314 6.329 6.397 6.423 6.437 6.474 6.531 6.535 6.595 6.622
    6.633 6.634 6.663 6.682 6.690 6.741 6.745 6.783 6.788 6.794 6.815 6.821 6.868 6.874 6.878 6.961
    7.019 7.035 7.051 7.055 7.088 7.111 7.126 7.155 7.174 7.181 7.278 7.305 7.363 7.389 7.429 7.441
    7.470 7.473 7.486 7.552 7.560 7.582 7.651 7.658 7.661 7.705 7.719 7.731 7.738 7.780 7.792 7.795
    7.821 7.839 7.867 7.910 7.962 7.996 8.000 8.049 8.062 8.067 8.077 8.082 8.083 8.126 8.160 8.175
    8.231 8.257 8.295 8.322 8.323 8.333 8.335 8.434 8.453 8.496 8.519 8.523 8.551 8.688 8.711 8.749
    8.810 8.864 8.875 8.913 8.958 8.998 9.021 9.114 9.127 9.174 9.192 9.193 9.307 9.402 9.451 9.487
    9.521 9.600 9.607 9.608 9.656 9.666 9.727 9.769 9.797 9.823 9.844 9.848 9.864 9.895 9.927 10.060
    10.091 10.104 10.112 10.120 10.140 10.146 10.165 10.175 10.231 10.396 10.401 10.489 10.505
    10.595 10.609 10.627 10.690 10.749 10.754 10.789 10.870 10.887 10.911 10.931 10.941 10.948
    10.955 10.963 10.990 11.016 11.029 11.040 11.091 11.100 11.120*2 11.204 11.241 11.304 11.312
    11.349 11.353 11.357 11.360 11.381 11.414 11.469 11.483 11.493 11.500 11.536 11.681 11.721
    11.787 11.802 11.866 11.892 12.009 12.025 12.093 12.174 12.197 12.268 12.372 12.377 12.429
    12.433 12.449 12.543 12.568 12.575 12.584 12.598 12.613 12.753 12.754 12.774 12.816 12.823
    12.872 12.904 12.917 12.938 12.940 12.941 12.957 12.989 12.998 13.019 13.070 13.095 13.096
    13.104 13.177 13.342 13.367 13.371 13.429 13.453 13.460 13.479 13.495 13.563 13.568 13.577
    13.882 13.940 13.958 14.028 14.032 14.144 14.199 14.205 14.322 14.381 14.383 14.424 14.558
    14.578 14.580 14.696 14.703 14.792 14.808 14.853 14.890 14.937 14.939 15.027 15.041 15.062
    15.171 15.315 15.349 15.350 15.398 15.407 15.429 15.624 15.635 15.661 15.701 15.718 15.722
    15.826 15.844 15.852 15.869 15.893 15.901 16.067 16.084 16.132 16.192 16.231 16.242 16.300
    16.353 16.600 16.628 16.651 16.677 16.700 16.705 16.759 16.864 16.877 16.908 17.102 17.126
    17.157 17.200 17.232 17.234 17.276 17.292 17.319 17.526 17.564 17.604 17.657 17.667 17.796
    17.813 17.819 17.936 17.946 17.971 17.989 18.002 18.049 18.054 18.074 18.142 18.342 18.404
    18.591 18.849 18.872 19.033 19.138 19.155 19.177 19.326 19.377 19.462 19.471 19.558 19.577
    19.586 19.594 19.619 19.821 19.936 19.956 19.961 19.971 20.063 20.194 20.243 20.258 20.277
    20.350 20.389 20.527 20.530 20.555 20.584 20.609 20.625 20.785 20.807 20.818 20.832 20.908
    20.985 20.994 21.008 21.188 21.397 21.400 21.559 21.582 21.624 21.645 21.654 21.710 21.847
    21.907 21.914 21.976 21.981 21.986 22.012 22.019 22.060 22.076 22.135 22.298 22.391 22.569
    22.582 22.655 22.684 22.723 22.871 23.032 23.080 23.099 23.693 23.702 23.899 23.951 24.069
    24.256 24.332 24.405 24.484 24.666 24.737 24.763 24.784*2 25.014 25.046 25.119 25.307 25.596
    25.750 25.870 25.912 25.950 26.241 26.442 26.462 26.653 26.709 26.731 26.838 26.848 26.868
    26.921 27.032 27.141 27.252 27.440 27.594 27.713 27.725 27.873 27.896 27.921 27.957 28.102
    28.413 28.415 28.506 28.523 28.825 28.951 28.994 29.111 29.129 29.169 29.183 29.309 29.546
    29.986 30.025 30.069 30.113 30.155 30.282 30.563 31.192 31.202 31.309 31.424 31.642 31.646
    31.652 31.736 31.776 31.801 31.876 32.106 32.289 32.347 32.364 32.550 32.661 32.696 32.717
    32.725 32.815 33.016 33.142 33.190 33.248 33.259 33.295 33.298 33.490 33.858 33.868 33.997
    34.005 34.041 34.081 34.174 34.252 34.389 34.403 34.413 34.429 34.536 34.634 34.733 34.894
    34.901 34.963 35.067 35.516 35.645 36.324 36.687 36.719 36.833 36.898 36.969 37.151 37.396
    37.473 37.638 37.887 38.186 38.444 38.628 38.722 38.981 38.993 39.139 39.225 39.282 39.467
    39.483 39.561 39.600 40.030 40.350 40.601 40.634 40.981 41.105 41.165 41.254 41.638 41.741
    41.993 42.138 42.179 42.737 42.814 42.876 42.937 43.028 43.308 43.529 43.735 43.860 43.874
    44.269 44.573 44.685 45.031 45.066 45.099 45.167 45.683 45.820 46.058 46.109 46.134 46.189
    46.498 46.590 46.686 47.013 47.104 47.358 47.501 47.902 48.418 49.571 49.601 49.870 50.167
    51.371 51.603 52.075 52.084 52.913 53.234 53.276 53.328 54.148 55.257 55.361 56.192 56.639
    56.871 57.243 58.009 58.157 58.316 59.006 59.896 60.078 60.245 61.282 61.341 61.432 61.573
    61.612 61.656 61.698 61.860 63.497 63.796 63.907 63.919 64.120 64.923 65.235 65.457 66.128
    66.813 67.855 67.860 68.527 69.187 69.462 69.552 69.796 70.049 70.387 71.107 71.664 71.856
    71.878 72.175 72.921 73.165 73.549 73.894 74.684 75.175 75.711 77.166 77.319 77.796 80.676
    81.272 81.282 82.145 85.264 85.324 85.453 85.573 86.076 86.400 86.950 86.988 87.239 87.908
    88.172 88.583 88.857 89.874 91.236 91.579 93.930 94.000 94.160 95.179 95.368 95.492 97.778
    98.426 99.621 99.799 100.546 100.904 101.486 102.845 103.188 106.904 107.723 109.080 111.809
    115.254 116.636 117.343 119.456 120.144 120.650 121.896 125.109 125.181 125.565 125.886 126.408
    126.989 128.273 128.302 129.838 131.222 131.675 133.029 133.790 134.730 134.909 135.150 138.821
    140.275 140.752 142.230 144.414 144.494 148.193 148.268 149.011 151.581 153.094 158.426 160.997
    164.569 166.120 168.526 168.696 170.064 170.829 173.328 174.325 175.409 176.796 182.425 190.978
    191.872 192.497 194.375 195.439 196.741 197.008 199.015 200.306 200.699 201.540 207.660 208.578
    216.928 219.407 219.737 220.035 225.491 234.283 236.198 247.486 256.473 258.052 268.626 283.755
    291.335 310.894 324.430 334.397 336.871 356.425 359.826 369.924 379.771 386.482 391.477 399.782
    409.394 409.836 411.582 414.448 417.474 420.337 429.775 430.046 439.917 454.650 468.838 472.913
    475.461 480.848 506.030 506.673 510.040 510.727 522.892 523.614 525.162 533.167 538.093 543.904
    563.953 566.444 629.128 676.286 682.883 683.312 704.728 717.571 751.132 752.351 763.651 794.455
    807.305 811.234 868.456 901.744 923.952 954.825 968.155 1038.212 1046.615 1085.266 1105.325
    1105.723 1174.546 1287.271 1292.881 1329.739 1388.699 1495.280 1500.084 1501.186 1525.962
    1596.118 1602.803 1618.348 1753.192 1866.644 1998.382 2020.757 2071.757 2133.312 2272.556
    2370.961 2414.215 2503.314 2767.265 2825.967 2856.912 3108.214 3259.038 3283.010 3586.420
    3734.187 3750.556 3751.912 3777.320 3846.408 3854.542 4038.538 4186.116 4375.387 4379.991
    4392.896 4434.616 4572.373 4575.401 4839.955 4970.075 5061.918 5307.333 5312.009 5369.920
    5686.005 5730.478 5832.781 5944.221 6014.229 6083.311 6441.100 6530.980 6533.521 6675.949
    6840.707 7100.095 7141.474 7679.478 8000.412 8039.261 8081.083 8329.244 9743.292 9753.185
    10354.384 10797.105 11560.890 11809.110 11958.338 12537.117 13374.598 14221.075 14879.242
    16024.275 16337.937 16950.393 18157.392 18561.981 19655.745 19796.931 19865.193 19978.161
    20153.116 20996.190 21596.407 23049.254 24540.118 28400.325 30485.574 32293.403 39738.449
    40837.624 50111.232 51054.417 51423.703 52156.500 53529.671 53783.839 55730.739 60560.414
    61568.396 62012.791 62644.794 64196.583 68308.521 69261.188 71747.823 73348.352 78124.239
    78497.560 79849.995 83060.516 84659.438 86394.941"""


def ns2_think_cdf() -> EmpiricalCdf:
    """Mah's think-time distribution as ns-2 ships it (module docstring)."""
    return _NS2_THINK_CDF


_NS2_THINK_CDF = EmpiricalCdf.from_blob(_NS2_THINK)


@dataclass(frozen=True)
class ThinkTime:
    """A validated think-time spec."""

    model: str = "zero"
    mean: float | None = None
    cdf: str | None = None
    max_cdf: float = 1.0
    interpolate: bool = False

    def table(self) -> EmpiricalCdf | None:
        if self.model == "ns2":
            return ns2_think_cdf()
        if self.model == "empirical":
            return load_cdf(self.cdf)
        return None

    def expected_mean(self) -> float:
        """The model's mean think time in seconds (for estimating how long a session takes)."""
        if self.model == "zero":
            return 0.0
        if self.model in ("fixed", "exponential"):
            return float(self.mean)
        table = self.table()
        if self.interpolate:  # no closed form kept for the interpolated table: integrate it
            n = 20000
            return sum(table.value_at((k + 0.5) / n * self.max_cdf, True) for k in range(n)) / n
        return table.mean(self.max_cdf)


def load_cdf(path: str | Path) -> EmpiricalCdf:
    """A CDF file in ns-2's format, validated (raises ThinkTimeError naming the line)."""
    return EmpiricalCdf.from_file(path)


def parse_spec(spec: Mapping[str, Any] | ThinkTime | None) -> ThinkTime:
    """Validate a spec dict; keys a model does not use must be absent or None."""
    if spec is None:
        return ThinkTime()
    if isinstance(spec, ThinkTime):
        return spec
    if not isinstance(spec, Mapping):
        raise ThinkTimeError(f"think_time must be a mapping such as {{'model': 'zero'}}, not {spec!r}")
    unknown = set(spec) - _KEYS
    if unknown:
        raise ThinkTimeError(f"think_time: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
    model = spec.get("model", "zero")
    if model not in MODELS:
        raise ThinkTimeError(f"think_time.model {model!r} not allowed: one of {', '.join(MODELS)}")
    given = {k for k, v in spec.items() if k != "model" and v is not None}
    stray = given - _USES[model]
    if stray:
        raise ThinkTimeError(f"think_time: model {model!r} does not use {sorted(stray)}")
    mean = spec.get("mean")
    if model in ("fixed", "exponential"):
        if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean) or mean < 0:
            raise ThinkTimeError(f"think_time.mean: model {model!r} needs a mean in seconds >= 0, got {mean!r}")
        mean = float(mean)
    cdf = spec.get("cdf")
    if model == "empirical":
        if not isinstance(cdf, (str, Path)) or not str(cdf):
            raise ThinkTimeError("think_time.cdf: model 'empirical' needs the path of a CDF file in ns-2's format")
        cdf = str(cdf)
        load_cdf(cdf)  # fail now, not in the middle of a session
    max_cdf = spec.get("max_cdf")
    max_cdf = 1.0 if max_cdf is None else max_cdf
    if isinstance(max_cdf, bool) or not isinstance(max_cdf, (int, float)) or not 0 < max_cdf <= 1:
        raise ThinkTimeError(f"think_time.max_cdf must be in (0, 1], got {max_cdf!r}")
    interpolate = spec.get("interpolate")
    interpolate = False if interpolate is None else interpolate
    if not isinstance(interpolate, bool):
        raise ThinkTimeError(f"think_time.interpolate must be true or false, got {interpolate!r}")
    return ThinkTime(model, mean, cdf, float(max_cdf), interpolate)


def sampler(spec: Mapping[str, Any] | ThinkTime | None, seed: int) -> Callable[[], float]:
    """A function returning successive think times (seconds) for one client, from its own
    `random.Random(seed)`: the same spec and seed give the same sequence everywhere."""
    s = parse_spec(spec)
    rng = random.Random(seed)
    if s.model == "zero":
        return lambda: 0.0
    if s.model == "fixed":
        return lambda: s.mean
    if s.model == "exponential":
        if s.mean == 0:
            return lambda: 0.0
        return lambda: rng.expovariate(1.0 / s.mean)
    table = s.table()
    return lambda: table.sample(rng, s.max_cdf, s.interpolate)
