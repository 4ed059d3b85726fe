"""A reference token-bucket marker TB, from the TCP-friendly marking paper's text.

Section 6.1: "The token bucket and TCP-friendly markers deal with a pool of tokens refreshed every
update interval. The number of token bytes per interval is about 300KB ... and the update interval
is 400ms"; Table 3, case 4 (TB+RIO); section 6.2.1: "simple token bucket marking" (Ibanez et al.,
Sahu et al.), with no TCP awareness. Written before reading the engine's TokenMarker.

CHOICES where the text is silent: one pool for every packet of the marked direction (reading
notes 2.1.c item 5); "refreshed" means set to M, not added to (unused tokens are not carried);
the intervals start at the first packet; a packet is IN when the pool holds its whole length,
then takes it (the conformance test of a token bucket, RFC 2697 section 3: "if Tc(t)-B >= 0,
the packet is green and Tc is decremented by B").
"""

from __future__ import annotations


def mark(times_us: list[int], sizes: list[int], interval_us: int = 400_000, pool: int = 300 * 1024) -> list[str]:
    """IN/OUT for packets arriving at `times_us` (non-decreasing) with IP lengths `sizes`."""
    out = []
    start = None
    current = None     # index of the interval the pool was last refreshed for
    tokens = 0
    for t, size in zip(times_us, sizes):
        if start is None:
            start = t
        k = (t - start) // interval_us
        if k != current:
            current, tokens = k, pool      # refreshed, not topped up
        if tokens >= size:
            tokens -= size
            out.append("IN")
        else:
            out.append("OUT")
    return out
