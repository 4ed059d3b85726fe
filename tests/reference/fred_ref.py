"""A reference FRED and FRIO in byte mode, written from the papers' text, not the engine.

FRED (Lin and Morris, SIGCOMM 1997, the TCP-friendly marking paper's [15]; its algorithm figure):
per active flow i (one with packets queued) qlen_i and strike_i; nactive the active flows; the
average share avgcq = avg / nactive. On each arrival of flow i: maxq = min_th, or 2 packets once
avg >= max_th; if qlen_i >= maxq, or avg >= max_th and qlen_i > 2 avgcq, or qlen_i >= avgcq and
strike_i > 1: strike_i += 1 and drop. Else RED's rule: between the thresholds count += 1 and, only
if qlen_i >= max(min_q, avgcq), drop with RED's p_a (count-spaced; count = 0 on a drop); below
min_th count = -1; at or above max_th drop (count = 0). Else accept.

FRIO (the marking paper, section 5): FRED extended as RED to RIO: "a separate set of parameters
and queue measures are used for packets marked IN and for packets marked OUT"; "instantaneous
per-flow queue size instead of average per-flow queue size" (docs/engine.md reads it as avgcq =
q / nactive with q the instantaneous queue); "calculation of average queue length exclusively on
arrival of packets", with Linux RED's idle-time model (FRED too, docs/engine.md).

CHOICES where the texts are silent (stated before comparing): byte mode counts bytes everywhere
(qlen_i, avg, avgcq, min_q; maxq above max_th is 2 x mean_pkt_bytes); FRIO's IN measures count
AF11 packets (its IN average, IN per-flow counts, IN active flows, IN strikes), OUT's count all,
and an arrival is judged by its level's measures, updating the averages that count it (as in
red_ref); a flow's state lives while it has bytes waiting (strikes forgotten when it empties);
nactive = 0 makes avgcq the average itself; the queue, idle spell and arrival order as red_ref.
"""

from __future__ import annotations

from collections import Counter

from tests.reference.red_ref import Level, level_of, tx_ns


class Measures:
    def __init__(self):
        self.qlen: dict = {}      # flow -> bytes waiting
        self.strike: dict = {}

    def active(self):
        return sum(1 for v in self.qlen.values() if v > 0)


def check(trace, fates, levels: list[Level], w_q: float, rate_bps: int, mean: int, min_q: int | None = None,
          frio: bool = False, margin: float = 0.0):
    """As red_ref.check, for trace rows (time_us, size, dscp, flow) through FRED (one level) or
    FRIO (levels IN, OUT); plus a Counter of the rules behind the engine's drops as the reference
    reads them (maxq, share, strikes, max_th, random), to show which rules a trace exercised."""
    why = Counter()
    n = len(levels)
    min_q = 2 * mean if min_q is None else min_q
    avg = [0.0] * n
    count = [-1] * n
    meas = [Measures() for _ in range(n)]
    waiting = []            # (start_us, size, level, flow)
    busy_until = last_start = 0     # ns
    violations, n_rand, sum_p, var_p, drops_rand = [], 0, 0.0, 0.0, 0
    for (t, size, dscp, flow), f in zip(trace, fates):
        still = []
        for w in waiting:
            if w[0] > t * 1000:
                still.append(w)
            else:                        # left the queue: its flow's counts shrink
                for j in range(w[2], n):
                    m = meas[j]
                    m.qlen[w[3]] -= w[1]
                    if m.qlen[w[3]] == 0:
                        del m.qlen[w[3]]
                        m.strike.pop(w[3], None)
        waiting = still
        k = level_of(dscp, n) if n == 2 else 0
        q_level = [sum(w[1] for w in waiting if w[2] <= j) for j in range(n)]
        idle = None if waiting or avg == [0.0] * n else max(0.0, (t * 1000 - last_start) / 1000)
        for j in range(k, n):
            if idle is not None:
                avg[j] *= (1 - w_q) ** (idle * rate_bps / (8e6 * mean))
            else:
                avg[j] = (1 - w_q) * avg[j] + w_q * q_level[j]
        lv, a, m = levels[k], avg[k], meas[k]
        nact = m.active()
        share = (q_level[k] if frio else a) / nact if nact else (q_level[k] if frio else a)
        qlen = m.qlen.get(flow, 0)
        maxq = 2 * mean if a >= lv.max_th else lv.min_th
        dropped = f["fate"] == "dropped"
        sure = (a < lv.min_th * (1 - margin)) or (a >= lv.max_th * (1 + margin))
        forced = qlen >= maxq or (a >= lv.max_th and qlen > 2 * share) or (qlen >= share and m.strike.get(flow, 0) > 1)
        near = abs(a - lv.max_th) <= lv.max_th * margin + 1e-9 or abs(a - lv.min_th) <= lv.min_th * margin + 1e-9
        where = f"packet {f['id']} (level {k}, flow {flow}, {size} B at {t} us; avg {a:.1f}, qlen {qlen}, avgcq {share:.1f})"
        if forced:
            p = 1.0
            if dropped and flow in m.qlen:      # a flow with nothing waiting has no state to strike
                m.strike[flow] = m.strike.get(flow, 0) + 1
                why["maxq" if qlen >= maxq else "share" if a >= lv.max_th and qlen > 2 * share else "strikes"] += 1
        elif a < lv.min_th:
            count[k] = -1
            p = 0.0
        elif a >= lv.max_th:
            count[k] = 0
            p = 1.0
            why["max_th"] += dropped
        else:
            count[k] += 1
            if qlen >= max(min_q, share):
                p_b = lv.max_p * (a - lv.min_th) / (lv.max_th - lv.min_th)
                p = 1.0 if count[k] * p_b >= 1 else min(1.0, p_b / (1 - count[k] * p_b))
            else:
                p = 0.0
            if dropped:
                count[k] = 0
                why["random"] += 1
        if p == 0.0 and dropped and (sure or not near):
            violations.append(f"{where}: dropped, the reference's p is 0")
        elif p == 1.0 and not dropped and (sure or not near):
            violations.append(f"{where}: accepted, the reference drops it ({'forced' if forced else 'avg >= max_th'})")
        elif 0.0 < p < 1.0:
            n_rand += 1
            sum_p += p
            var_p += p * (1 - p)
            drops_rand += dropped
        if not dropped:
            start = max(t * 1000, busy_until)
            busy_until = start + tx_ns(size, rate_bps)
            last_start = start
            waiting.append((start, size, k, flow))
            for j in range(k, n):
                meas[j].qlen[flow] = meas[j].qlen.get(flow, 0) + size
            if abs(busy_until - round(float(f["fate_us"]) * 1000)) > 1000:
                violations.append(f"packet {f['id']}: delivered at {f['fate_us']} us, reference "
                                  f"serialization ends at {busy_until / 1000:.3f} us")
    return violations, n_rand, sum_p, var_p, drops_rand, why
