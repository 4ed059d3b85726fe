"""Reference token-bucket policer and shaper (the edge functions `police` and `shape`), written
from RFC 2697 and docs/engine.md, not from the engine.

RFC 2697 (srTCM), section 3, color-blind, with EBS = 0 (a single bucket, as docs/engine.md
defines `police`): the bucket Tc starts full (CBS), gains CIR bytes per second up to CBS; "if
Tc(t)-B >= 0, the packet is green and Tc is decremented by B", else it is red (out of profile:
dropped or remarked, nothing taken). Packets whose DSCP is not metered pass uncounted. One bucket
per link, per source address or per flow (docs/engine.md).

The shaper (docs/engine.md; the token-bucket shaper of Nouredine-Tobagi section 4.3, Fig. 6, "for
such packets to be transmitted by the source, sufficient tokens must be present"): a FIFO in front
of the same bucket; the head leaves at the first instant the bucket holds its size (a packet
larger than the bucket waits for a full bucket and leaves it in debt), then the next head is
considered; an arrival that finds the FIFO full (packets waiting) is dropped.

CHOICES where the texts are silent: the bucket fills continuously (a fluid bucket: RFC 2697's
one-byte increments CIR times a second, without their phase), kept exactly as integers in
bit-microseconds (bytes x 8,000,000); a release at an arrival's instant happens before the
arrival; an arrival to an empty shaper with the tokens leaves at once.
"""

from __future__ import annotations

SCALE = 8_000_000   # bytes -> bit-microseconds: a rate in bit/s adds rate_bps units per microsecond


class Bucket:
    def __init__(self, rate_bps: int, bucket_bytes: int, t0_us: int | float = 0):
        self.rate, self.cap = rate_bps, bucket_bytes * SCALE
        self.tokens, self.t = self.cap, t0_us

    def at(self, t_us) -> None:
        if t_us > self.t:
            self.tokens = min(self.cap, self.tokens + (t_us - self.t) * self.rate)
            self.t = t_us


def police(trace, rate_bps: int, bucket_bytes: int, per: str = "link", dscps=None, remark=None):
    """trace: [(time_us, size, dscp, key)] (key: source or flow for per src/flow).
    Returns per packet ("pass", dscp) or ("drop", None)."""
    buckets: dict = {}
    out = []
    for t, size, dscp, key in trace:
        if dscps is not None and dscp not in dscps:
            out.append(("pass", dscp))
            continue
        k = key if per != "link" else None
        b = buckets.get(k)
        if b is None:
            b = buckets[k] = Bucket(rate_bps, bucket_bytes, t)
        b.at(t)
        if b.tokens >= size * SCALE:
            b.tokens -= size * SCALE
            out.append(("pass", dscp))
        elif remark is None:
            out.append(("drop", None))
        else:
            out.append(("pass", remark))
    return out


def shape(trace, rate_bps: int, bucket_bytes: int, buffer_packets: int | None = None):
    """trace: [(time_us, size)] in time order. Returns per packet ("sent", release_us: a
    float) or ("dropped", time_us)."""
    b = Bucket(rate_bps, bucket_bytes, trace[0][0] if trace else 0)
    out: list = [None] * len(trace)
    waiting: list[int] = []
    last = float(trace[0][0]) if trace else 0.0   # the last release (releases are in order)

    def release_time(i: int) -> float:
        need = min(trace[i][1], bucket_bytes) * SCALE
        t = max(last, float(trace[i][0]))
        b.at(t)
        if b.tokens >= need:
            return t
        return b.t + (need - b.tokens) / rate_bps

    def release_until(t_limit: float) -> None:
        # every head whose release falls at or before t_limit leaves, in order
        nonlocal last
        while waiting:
            i = waiting[0]
            r = release_time(i)
            if r > t_limit:
                return
            b.at(r)
            b.tokens -= trace[i][1] * SCALE
            out[i] = ("sent", r)
            last = r
            waiting.pop(0)

    for i, (t, size) in enumerate(trace):
        release_until(t)
        if buffer_packets is not None and len(waiting) >= buffer_packets:
            out[i] = ("dropped", float(t))
            continue
        waiting.append(i)
        release_until(t)
    release_until(float("inf"))
    return out
