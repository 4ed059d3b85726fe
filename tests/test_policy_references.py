"""The engine's queue policies against independent references written from the papers' text
(tests/reference/red_ref.py, ...), on generated, adversarial and hypothesis traces run through
`catnip-engine replay`.

RED's early drops are random and the engine's draws cannot be reproduced here, so each packet is
held to what is deterministic (never a drop where the reference's probability is 0, always one
where it is 1, departures on the reference's serialization), and the random decisions as a whole:
given the engine's past fates the reference knows each packet's drop probability p_a, so the
drops of a run are a sum of Bernoulli(p_a) whose mean and variance it knows."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from hypothesis import HealthCheck, given, settings, strategies as st

from tests.conftest import need_engine
from tests.reference.replay import run_replay, write_simple_trace
from tests.reference import bucket_ref, fred_ref, red_ref, wrr_ref

RATE = 10_000_000
DSCPS = (10, 12, 14, 0, 46)


def engine_fates(tmp_path, trace, policy, *, rate_bps=RATE, seed=1, flows=None, buffer=None):
    """FATES.csv rows of `trace` [(time_us, size, dscp)] through one link with `policy` (no
    delay; `buffer` as CONFIG.json's, default unlimited)."""
    cfg = {"seed": seed, "links": [{"name": "b", "queue_num": 0, "rate_bps": rate_bps, "delay_us": 0,
                                    "buffer": buffer, "policy": policy}]}
    return run_replay(tmp_path, cfg, lambda path: write_simple_trace(path, trace, flows))


def random_trace(rng: random.Random, n: int = 3000, dscps=DSCPS):
    """Bursts above the link's rate (a 1500 B packet takes 1200 us at 10 Mbit/s) alternating with
    quieter spells, so the queue builds, drains and idles."""
    trace, t = [], 0
    for i in range(n):
        t += int(rng.expovariate(1 / (500 if (i // 300) % 2 == 0 else 2500)))
        trace.append((t, rng.choice((40, 576, 1000, 1500)), rng.choice(dscps)))
    return trace


def adversarial_traces(dscps=DSCPS):
    """Traces no TCP would send: simultaneous arrivals, one level only, 1-byte and 65535-byte
    packets, long idle gaps between bursts, a single packet."""
    rng = random.Random(7)
    out = {
        "single": [(0, 1500, 0)],
        "simultaneous": [(1000, 1500, dscps[i % len(dscps)]) for i in range(400)],
        "in_only": [(i * 300, 1500, 10) for i in range(1500)],
        "out_only": [(i * 300, 1500, 0) for i in range(1500)],
        "tiny_and_huge": [(i * 500, rng.choice((1, 65535)), rng.choice(dscps)) for i in range(600)],
    }
    gaps, t = [], 0
    for burst in range(12):
        t += rng.choice((10, 5_000, 2_000_000))
        for _ in range(rng.randint(1, 120)):
            gaps.append((t, rng.choice((64, 1500)), rng.choice(dscps)))
            t += rng.choice((0, 1, 100))
    out["idle_gaps"] = gaps
    return out


def multired_policy(kind, levels, w_q, mean=1000):
    return {"kind": kind, "w_q": w_q, "mean_pkt_bytes": mean,
            "levels": [{"min_th": {"bytes": lv.min_th}, "max_th": {"bytes": lv.max_th}, "max_p": lv.max_p}
                       for lv in levels]}


# w_q = 1 and an empty early-drop band (packet sizes are whole bytes, the thresholds 1 B apart,
# min_th odd: only an average of exactly min_th would fall in it) make every decision
# deterministic: a level-k arrival is dropped iff the bytes waiting at levels 0..k reach max_th.
DET = {"rio": [red_ref.Level(30001, 30002, 0.1), red_ref.Level(10001, 10002, 0.1)],
       "red3": [red_ref.Level(40001, 40002, 0.1), red_ref.Level(20001, 20002, 0.1),
                red_ref.Level(8001, 8002, 0.1)]}
# Early-drop bands wide enough that most decisions are random. rio: the TCP-friendly marking
# paper's Table 1, "good" (IN 50/490 KB, max_p 0.005; OUT 10/200 KB, max_p 0.25), scaled down
# tenfold in bytes so that 3000 packets at 10 Mbit/s reach them; red3: Nouredine-Tobagi's
# section 4.2 shape (HIGH above MED above LOW, one max_p 0.1).
RAND = {"rio": [red_ref.Level(5000, 49000, 0.005), red_ref.Level(1000, 20000, 0.25)],
        "red3": [red_ref.Level(30000, 60000, 0.1), red_ref.Level(15000, 40000, 0.1),
                 red_ref.Level(5000, 20000, 0.1)]}


def deterministic_violations(tmp_path, kind, trace):
    levels = DET[kind]
    fates = engine_fates(tmp_path, trace, multired_policy(kind, levels, 1.0))
    return red_ref.check(trace, fates, levels, 1.0, RATE, 1000)[0]


@pytest.mark.parametrize("kind", ["rio", "red3"])
def test_rio_and_red3_per_level_rules_on_generated_and_adversarial_traces(tmp_path, kind):
    """Which level's thresholds apply and which bytes its average counts (RIO: IN counts IN,
    OUT counts all; red3: each level counts itself and higher), exactly, packet for packet."""
    need_engine()
    traces = {f"random{s}": random_trace(random.Random(s)) for s in range(3)} | adversarial_traces()
    for name, trace in traces.items():
        v = deterministic_violations(tmp_path, kind, trace)
        assert not v, f"{kind}, trace {name}: {len(v)} differences, first: {v[0]}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 1500), st.sampled_from((1, 40, 576, 1500, 9000)),
                          st.sampled_from(DSCPS)), min_size=1, max_size=500),
       st.sampled_from(("rio", "red3")))
def test_rio_and_red3_per_level_rules_hypothesis(tmp_path, gaps, kind):
    need_engine()
    trace, t = [], 0
    for gap, size, dscp in gaps:
        t += gap
        trace.append((t, size, dscp))
    v = deterministic_violations(tmp_path, kind, trace)
    assert not v, f"{kind}: {len(v)} differences, first: {v[0]}"


@pytest.mark.parametrize("kind", ["rio", "red3"])
def test_rio_and_red3_random_drops_follow_the_reference_probabilities(tmp_path, kind):
    """With an EWMA (w_q 0.01 and the paper's usual 0.002) and wide bands: no drop below min_th,
    every arrival dropped at or above max_th, and the early drops of each of 12 runs within 4.5
    standard deviations of the sum of the reference's p_a (count-spaced: p_b / (1 - count p_b)),
    and within 4 over all runs together (a 1 in 15,000 chance of failing a correct engine)."""
    need_engine()
    tot_sum = tot_var = tot_drops = 0.0
    levels = RAND[kind]
    for w_q in (0.01, 0.002):
        for run in range(6):
            # a trace and an engine seed of its own for every run: the runs are independent
            seed = 1000 + 100 * (kind == "red3") + 10 * (w_q == 0.002) + run
            trace = random_trace(random.Random(seed))
            fates = engine_fates(tmp_path, trace, multired_policy(kind, levels, w_q), seed=seed)
            v, n, sp, vp, dr = red_ref.check(trace, fates, levels, w_q, RATE, 1000, margin=1e-6)
            assert not v, f"{kind} w_q {w_q} seed {seed}: {len(v)} differences, first: {v[0]}"
            assert n > 100, f"{kind} w_q {w_q} seed {seed}: only {n} random decisions"
            z = red_ref.z_score(sp, vp, dr)
            assert abs(z) < 4.5, (f"{kind} w_q {w_q} seed {seed}: {dr} early drops of {n}, the reference "
                                  f"expects {sp:.1f} (sd {vp ** 0.5:.1f})")
            tot_sum, tot_var, tot_drops = tot_sum + sp, tot_var + vp, tot_drops + dr
    z = red_ref.z_score(tot_sum, tot_var, int(tot_drops))
    assert abs(z) < 4, f"all runs: {tot_drops:.0f} early drops, the reference expects {tot_sum:.1f}"


# --- WRR (tests/reference/wrr_ref.py) ---------------------------------------------------------

WRR_WEIGHTS = ([1, 2, 3], [5, 1], [3, 1, 1], [1, 1], [7, 2, 1])


def wrr_differences(tmp_path, trace, weights, buffer_packets=None):
    policy = {"kind": "wrr", "weights": weights}
    fates = engine_fates(tmp_path, trace, policy, buffer={"packets": buffer_packets} if buffer_packets else None)
    shares = None
    if buffer_packets:
        shares = [buffer_packets * w // sum(weights) for w in weights]
    ref = wrr_ref.simulate(trace, weights, RATE, shares)
    out = []
    for f, (fate, t) in zip(fates, ref):
        if f["fate"] != fate or abs(float(f["fate_us"]) - t) > 0.01:
            out.append(f"packet {f['id']} ({trace[int(f['id'])]}): engine {f['fate']} at {f['fate_us']} us, "
                       f"reference {fate} at {t:.3f} us")
    return fates, out


@pytest.mark.parametrize("weights", WRR_WEIGHTS, ids=str)
def test_wrr_engine_matches_the_reference_packet_for_packet(tmp_path, weights):
    """Every departure time (so the service order) on random and adversarial traces, with an
    unlimited buffer and with one split in proportion (60 packets: each share exact)."""
    need_engine()
    dscps = (10, 12, 14, 0)
    traces = {f"random{s}": random_trace(random.Random(s), dscps=dscps) for s in range(3)}
    traces |= adversarial_traces(dscps)
    for name, trace in traces.items():
        for buf in (None, 60 if sum(weights) in (2, 5, 6, 10) else None):
            _, d = wrr_differences(tmp_path, trace, weights, buf)
            assert not d, f"weights {weights}, trace {name}, buffer {buf}: {len(d)} differences, first: {d[0]}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 2500), st.sampled_from((40, 576, 1500)),
                          st.sampled_from((10, 12, 14, 0))), min_size=1, max_size=300),
       st.sampled_from(WRR_WEIGHTS))
def test_wrr_engine_matches_the_reference_hypothesis(tmp_path, gaps, weights):
    need_engine()
    trace, t = [], 0
    for gap, size, dscp in gaps:
        t += gap
        trace.append((t, size, dscp))
    _, d = wrr_differences(tmp_path, trace, weights)
    assert not d, f"weights {weights}: {len(d)} differences, first: {d[0]}"


@pytest.mark.parametrize("weights", WRR_WEIGHTS, ids=str)
def test_wrr_shares_follow_the_weights_and_the_link_never_idles(tmp_path, weights):
    """The paper's use of WRR (section 5, Fig. 8: a queue's weight is its share of the link):
    with every queue backlogged, each queue's packets among the departures are its weight's share
    (within one round), and the link is work conserving: a packet starts when the previous one
    ends or when it arrives, whichever is later. Checked on the engine's fates alone."""
    need_engine()
    k = len(weights)
    dscps = (10, 12, 0) if k == 3 else (10, 0)
    rng = random.Random(sum(weights))
    # 4000 packets per queue in the first 100 ms, at 10 Mbit/s far more than the link sends
    trace = sorted((rng.randrange(100_000), 1000, dscps[q]) for q in range(k) for _ in range(4000))
    fates, _ = wrr_differences(tmp_path, trace, weights)
    sent = sorted((float(f["fate_us"]), int(f["id"])) for f in fates if f["fate"] == "sent")
    assert len(sent) == len(trace)
    end = 0.0
    for t_end, i in sent:
        start = max(end, float(trace[i][0]))
        assert abs(t_end - (start + 800.0)) < 0.01, f"packet {i}: ends at {t_end}, the link was free at {start}"
        end = t_end
    # all backlogged until the first queue runs dry: count the departures before then
    rounds = 4000 // max(weights) - 1
    first = [wrr_ref.queue_of(trace[i][2], k) for _, i in sent[: rounds * sum(weights)]]
    for q, w in enumerate(weights):
        assert abs(first.count(q) - rounds * w) <= max(weights), (
            f"weights {weights}: queue {q} sent {first.count(q)} of {len(first)}, its share is {rounds * w}")


# --- police and shape (tests/reference/bucket_ref.py) ------------------------------------------

def edge_fates(tmp_path, trace, edge, flows):
    """One edge function in front of an unlimited DropTail with no serialization: a packet's
    fate_us is when the edge function let it go."""
    cfg = {"seed": 1, "links": [{"name": "e", "queue_num": 0, "rate_bps": 0, "delay_us": 0, "buffer": None,
                                 "policy": {"kind": "droptail"}, "edge": [edge]}]}
    return run_replay(tmp_path, cfg, lambda path: write_simple_trace(path, trace, list(flows)))


# (rate_bps, bucket_bytes, per, metered DSCPs, remark DSCP or None: drop)
POLICERS = ((1_000_000, 3000, "link", None, None), (400_000, 3000, "flow", [10], 12),
            (3_000_000, 1500, "link", [10, 12], 14), (8_000_000, 64, "flow", None, None))
# (rate_bps, bucket_bytes, buffer packets or None)
SHAPERS = ((1_000_000, 3000, None), (4_000_000, 1000, 20), (2_000_000, 64, 5), (9_999_999, 6000, 1))


def police_differences(tmp_path, trace, flows, params):
    rate, bucket, per, dscps, remark = params
    edge = {"kind": "police", "rate_bps": rate, "bucket_bytes": bucket, "dscp": dscps, "per": per,
            "exceed": {"action": "drop"} if remark is None else {"action": "remark", "dscp": remark}}
    fates = edge_fates(tmp_path, trace, edge, flows)
    ref = bucket_ref.police([(t, s, d, f) for (t, s, d), f in zip(trace, flows)], rate, bucket, per, dscps, remark)
    out = []
    for f, (what, dscp) in zip(fates, ref):
        eng = ("drop", None) if f["fate"] == "dropped" else ("pass", int(f["dscp_out"]))
        if eng != (what, dscp) or (what == "drop" and f["by"] != "police"):
            out.append(f"packet {f['id']} ({trace[int(f['id'])]}, flow {flows[int(f['id'])]}): engine {eng} "
                       f"(by {f['by']!r}), reference {(what, dscp)}")
    return fates, ref, out


def shape_differences(tmp_path, trace, params):
    rate, bucket, buf = params
    edge = {"kind": "shape", "rate_bps": rate, "bucket_bytes": bucket,
            "buffer": None if buf is None else {"packets": buf}}
    fates = edge_fates(tmp_path, trace, edge, [1] * len(trace))
    ref = bucket_ref.shape([(t, s) for t, s, _ in trace], rate, bucket, buf)
    out = []
    for f, (fate, t) in zip(fates, ref):
        # the engine's clock counts nanoseconds: a release rounds up to the next one
        if f["fate"] != fate or not (-0.0005 <= float(f["fate_us"]) - t < 0.0015) or (
                fate == "dropped" and f["by"] != "shape"):
            out.append(f"packet {f['id']} ({trace[int(f['id'])]}): engine {f['fate']} at {f['fate_us']} "
                       f"(by {f['by']!r}), reference {fate} at {t:.4f}")
    return fates, out


def edge_traces():
    dscps = (10, 12, 14, 0)
    traces = {f"random{s}": random_trace(random.Random(s), n=2000, dscps=dscps) for s in range(3)}
    traces |= adversarial_traces(dscps)
    return traces


@pytest.mark.parametrize("params", POLICERS, ids=str)
def test_police_engine_matches_rfc_2697_packet_for_packet(tmp_path, params):
    """Each packet's fate and DSCP, on random and adversarial traces (packets larger than the
    bucket, simultaneous arrivals, idle gaps), with 4 flows for the per-flow buckets; and the
    RFC's guarantee on the engine's own output: over any interval t, each bucket's in-profile
    bytes <= R t / 8 + B."""
    need_engine()
    rate, bucket, per, dscps, remark = params
    for name, trace in edge_traces().items():
        flows = [random.Random(i).randrange(4) for i in range(len(trace))]
        fates, ref, d = police_differences(tmp_path, trace, flows, params)
        assert not d, f"{params}, trace {name}: {len(d)} differences, first: {d[0]}"
        if name.startswith("random"):   # both outcomes occur, so the comparison means something
            metered_in = sum(r == ("pass", dscp) and (dscps is None or dscp in dscps)
                             for r, (_, _, dscp) in zip(ref, trace))
            out = sum(r != ("pass", dscp) for r, (_, _, dscp) in zip(ref, trace))
            assert metered_in and out, f"{params}, trace {name}: {metered_in} metered in profile, {out} out"
        metered = [i for i, (_, _, dscp) in enumerate(trace) if dscps is None or dscp in dscps]
        for key in ({None} if per == "link" else set(flows)):
            ins = [i for i in metered if (key is None or flows[i] == key) and fates[i]["fate"] == "sent"
                   and int(fates[i]["dscp_out"]) == trace[i][2]]
            for a in range(len(ins)):
                total = 0
                for b in range(a, min(len(ins), a + 60)):
                    total += trace[ins[b]][1]
                    span = trace[ins[b]][0] - trace[ins[a]][0]
                    assert total * 8e6 <= rate * span + bucket * 8e6, (
                        f"{params}, trace {name}: {total} B in profile in {span} us from packet {ins[a]}")


@pytest.mark.parametrize("params", SHAPERS, ids=str)
def test_shape_engine_matches_the_reference_packet_for_packet(tmp_path, params):
    """Each packet's release time (within the engine's nanosecond) or drop, on random and
    adversarial traces; and on the engine's own output: releases in arrival order, never before
    the arrival, and over any interval t at most R t / 8 + B bytes released plus one packet's
    debt."""
    need_engine()
    rate, bucket, buf = params
    for name, trace in edge_traces().items():
        fates, d = shape_differences(tmp_path, trace, params)
        assert not d, f"{params}, trace {name}: {len(d)} differences, first: {d[0]}"
        held = sum(float(f["fate_us"]) > t for f, (t, _, _) in zip(fates, trace))
        if name.startswith("random"):   # the shaper did hold packets back
            assert held > 100, f"{params}, trace {name}: only {held} packets delayed"
        sent = [(float(f["fate_us"]), int(f["id"])) for f in fates if f["fate"] == "sent"]
        assert [i for _, i in sent] == sorted(i for _, i in sent) and sent == sorted(sent)
        assert all(t >= trace[i][0] for t, i in sent)
        biggest = max(s for _, s, _ in trace)
        for a in range(len(sent)):
            total = 0
            for b in range(a, min(len(sent), a + 60)):
                total += trace[sent[b][1]][1]
                span = sent[b][0] - sent[a][0]
                assert total * 8e6 <= rate * (span + 0.002) + (bucket + biggest) * 8e6, (
                    f"{params}, trace {name}: {total} B released in {span} us from packet {sent[a][1]}")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 4000), st.sampled_from((1, 64, 576, 1500, 9000)),
                          st.sampled_from((10, 12, 0)), st.integers(0, 2)), min_size=1, max_size=300),
       st.sampled_from(POLICERS), st.sampled_from(SHAPERS))
def test_police_and_shape_hypothesis(tmp_path, rows, police, shaper):
    need_engine()
    trace, flows, t = [], [], 0
    for gap, size, dscp, flow in rows:
        t += gap
        trace.append((t, size, dscp))
        flows.append(flow)
    _, _, d = police_differences(tmp_path, trace, flows, police)
    assert not d, f"police {police}: {len(d)} differences, first: {d[0]}"
    _, d = shape_differences(tmp_path, trace, shaper)
    assert not d, f"shape {shaper}: {len(d)} differences, first: {d[0]}"


# --- FRED and FRIO in byte mode (tests/reference/fred_ref.py) --------------------------------

def fred_policy(kind, levels, w_q, mean=1000):
    min_q = {"bytes": 2 * mean}  # the reference's (fred_ref.check); the engine takes every parameter
    if kind == "fred":
        lv = levels[0]
        return {"kind": "fred", "min_th": {"bytes": lv.min_th}, "max_th": {"bytes": lv.max_th}, "w_q": w_q,
                "max_p": lv.max_p, "mean_pkt_bytes": mean, "min_q": min_q}
    return {**multired_policy("frio", levels, w_q, mean), "min_q": min_q}


FRED_DET = {"fred": [red_ref.Level(20001, 20002, 0.1)],
            "frio": [red_ref.Level(20001, 20002, 0.1), red_ref.Level(10001, 10002, 0.1)]}
# Wide bands above FRED's maxq: min_th is also a flow's cap (maxq), so it must hold several
# packets for any flow to be "robust" (qlen >= max(min_q, avgcq)) below it.
FRED_RAND = {"fred": [red_ref.Level(20000, 60000, 0.1)],
             "frio": [red_ref.Level(30000, 60000, 0.05), red_ref.Level(15000, 40000, 0.2)]}


def flow_traces(seed):
    """Random traces with 5 flows (one heavy) and with 60 (so that the average share avgcq falls
    below a packet and the 2 x avgcq rule bites), plus the adversarial ones with 3 flows."""
    rng = random.Random(seed)
    trace = random_trace(rng, dscps=(10, 12, 0))
    out = {f"random{seed}_5flows": [(t, s, d, rng.choice((1, 1, 1, 2, 3, 4, 5))) for t, s, d in trace]}
    # mostly 40-byte packets, about twice what the link sends: hundreds queued over 60 flows
    t, many = 0, []
    for _ in range(4000):
        t += int(rng.expovariate(1 / 30))
        many.append((t, rng.choice((40, 40, 40, 576)), rng.choice((10, 12, 0)), rng.randrange(60)))
    out[f"random{seed}_60flows"] = many
    for name, trace in adversarial_traces((10, 12, 0)).items():
        out[name] = [(t, s, d, i % 3) for i, (t, s, d) in enumerate(trace)]
    return out


def fred_run(tmp_path, kind, levels, w_q, trace, seed=1):
    fates = engine_fates(tmp_path, [r[:3] for r in trace], fred_policy(kind, levels, w_q), seed=seed,
                         flows=[r[3] for r in trace])
    return fred_ref.check(trace, fates, levels, w_q, RATE, 1000, frio=(kind == "frio"), margin=1e-6)


@pytest.mark.parametrize("kind", ["fred", "frio"])
def test_fred_and_frio_per_flow_rules_on_generated_and_adversarial_traces(tmp_path, kind):
    """w_q = 1 and an empty early-drop band: every decision deterministic, packet for packet:
    maxq (min_th, 2 packets above max_th), 2 x avgcq above max_th, strikes, avg >= max_th; FRIO
    with each level's own measures and avgcq from the instantaneous queue (section 5)."""
    need_engine()
    why = Counter()
    for seed in range(2):
        for name, trace in flow_traces(seed).items():
            v, *_, w = fred_run(tmp_path, kind, FRED_DET[kind], 1.0, trace)
            assert not v, f"{kind}, trace {name}: {len(v)} differences, first: {v[0]}"
            why += w
    assert all(why[r] for r in ("maxq", "share", "strikes", "max_th")), f"rules exercised: {dict(why)}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 1500), st.sampled_from((1, 40, 576, 1500, 9000)),
                          st.sampled_from((10, 12, 0)), st.integers(0, 6)), min_size=1, max_size=500),
       st.sampled_from(("fred", "frio")))
def test_fred_and_frio_per_flow_rules_hypothesis(tmp_path, rows, kind):
    need_engine()
    trace, t = [], 0
    for gap, size, dscp, flow in rows:
        t += gap
        trace.append((t, size, dscp, flow))
    v, *_ = fred_run(tmp_path, kind, FRED_DET[kind], 1.0, trace)
    assert not v, f"{kind}: {len(v)} differences, first: {v[0]}"


@pytest.mark.parametrize("kind", ["fred", "frio"])
def test_fred_and_frio_random_drops_follow_the_reference_probabilities(tmp_path, kind):
    """With an EWMA (w_q 0.01, 0.002) and wide bands: the deterministic rules packet for packet
    (within 1e-6 of a threshold excepted), and the early drops of all runs together (those of
    robust flows, qlen >= max(min_q, avgcq), between the thresholds) within 4 standard
    deviations of the sum of the reference's p_a."""
    need_engine()
    tot_sum = tot_var = tot_drops = tot_n = 0.0
    for w_q in (0.01, 0.002):
        for run in range(3):
            seed = 2000 + 100 * (kind == "frio") + 10 * (w_q == 0.002) + run
            for name, trace in flow_traces(seed).items():
                v, n, sp, vp, dr, _ = fred_run(tmp_path, kind, FRED_RAND[kind], w_q, trace, seed=seed)
                assert not v, f"{kind} w_q {w_q} trace {name}: {len(v)} differences, first: {v[0]}"
                tot_sum, tot_var, tot_drops, tot_n = tot_sum + sp, tot_var + vp, tot_drops + dr, tot_n + n
    assert tot_n > 300, f"{kind}: only {tot_n} random decisions"
    z = red_ref.z_score(tot_sum, tot_var, int(tot_drops))
    assert abs(z) < 4, f"{kind}: {tot_drops:.0f} early drops of {tot_n:.0f}, the reference expects {tot_sum:.1f}"
