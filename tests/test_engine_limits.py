"""The schema's bounds against the engine's (issue 47, defect 5): nothing validation accepts is
refused by the engine when a point starts.

`catnip-engine limits` prints every bound the engine checks at load. Three checks keep the two
sides from drifting: each bound is real (a configuration at it loads, one beyond it is refused,
through `catnip-engine check`); each has its counterpart in the schema (SCHEMA below, read from
the constants and fields the validators use), lying within it; and a scenario written at the
schema's own edge is accepted and loads in the engine, one step beyond is refused by the schema.
"""

from __future__ import annotations

import copy
import sys
from typing import Any, Callable

import pytest
from annotated_types import Ge, Gt, Le, Lt

from catnip.spec import bounded, edge, graph, policy, units
from catnip.spec import scenario as s
from catnip.spec import transfer
from catnip.testbed.engine import RouterEngine
from catnip.testbed.paths import REPO, engine_binary
from tests import engine_check

if not engine_binary().exists():  # built by scripts/setup.sh; CI builds it before the tests
    pytest.skip(f"no queue engine at {engine_binary()} (scripts/setup.sh builds it)", allow_module_level=True)

QUICK = REPO / "scenarios" / "quick.yaml"
U64 = 2**64 - 1
F64_MAX = sys.float_info.max


def field_bounds(model: Any, name: str) -> tuple[float | None, float | None, bool, bool]:
    """(min, max, min exclusive, max exclusive) of a pydantic field's ge/gt/le/lt."""
    lo = hi = None
    lo_x = hi_x = False
    for m in model.model_fields[name].metadata:
        if isinstance(m, Ge):
            lo = m.ge
        elif isinstance(m, Gt):
            lo, lo_x = m.gt, True
        elif isinstance(m, Le):
            hi = m.le
        elif isinstance(m, Lt):
            hi, hi_x = m.lt, True
    return lo, hi, lo_x, hi_x


def _engine_defaults() -> dict[str, Any]:
    """What the controller sets itself in every engine configuration (testbed/engine.py)."""
    return RouterEngine(None, [], REPO, 0).config()


def schema_bounds() -> dict[str, tuple]:
    """For each engine bound, the range of values the schema can hand the engine: (min, max) or
    (min, max, min exclusive, max exclusive), read from what the validators use."""
    seed_lo, seed_hi, _, _ = field_bounds(s.Scenario, "seed")
    _, reps, _, _ = field_bounds(s.RunSpec, "repetitions")
    t_lo, t_hi, _, _ = field_bounds(transfer.TransferScenario, "seed")
    _, late, _, _ = field_bounds(s.RunSpec, "late_threshold")
    _, spin, _, _ = field_bounds(s.RunSpec, "engine_spin")
    tiny = field_bounds(edge.Tcpf, "tiny_window")[:2]
    controller = _engine_defaults()
    # A link takes at least one value of the file, so bounded.MAX_NODES bounds the router links;
    # each host has two directions on its router.
    directions = 2 * graph.MAX_HOSTS + 2 * bounded.MAX_NODES
    micros = 1e6
    return {
        # Points repeat with seed + 1000 x repetition (controller/runner.py); transfers seed x 1000 + point.
        "seed": (min(seed_lo, t_lo), max(seed_hi + 1000 * (reps - 1), t_hi * 1000 + 1000)),
        "stats_interval_ms": (controller["stats_interval_ms"], 1000),  # 1000: controller/transfers.py
        "late_threshold_us": (0, late * micros),
        "spin_us": (0, spin * micros),
        "queue_maxlen": (controller["queue_maxlen"], controller["queue_maxlen"]),
        "verdict_batch": (32, 32),  # not set by the controller: the engine's default
        "recv_batch": (32, 32),  # not set by the controller: the engine's default
        "links.count": (1, directions),
        "link.queue_num": (0, directions - 1),
        "link.rate_bps": (0, max(graph.MAX_RATE, units.MAX_RATE)),  # 0: a host's uplink, serialized by its htb
        "link.delay_us": (0, units.MAX_DURATION * micros / 2),  # links: graph.MAX_DELAY; transfers: rtt / 2
        "buffer.packets": (1, units.MAX_BUFFER_PACKETS),
        "buffer.bytes": (1, units.MAX_SIZE_BYTES),
        "loss.p": field_bounds(graph.LossSpec, "p"),
        "loss.p_high": field_bounds(graph.LossSpec, "p_high"),
        "policy.loss_p": field_bounds(policy.Bernoulli, "loss_p"),
        "policy.loss_p_high": field_bounds(policy.CatnipLoss, "loss_p_high"),
        "policy.w_q": field_bounds(policy._RedFamily, "w_q"),
        "policy.max_p": field_bounds(policy._Red, "max_p"),
        "policy.levels.max_p": field_bounds(policy.Level, "max_p"),
        "policy.min_th": (0, F64_MAX),  # policy._threshold: a finite number >= 0
        "policy.mean_pkt_bytes": field_bounds(policy._RedFamily, "mean_pkt_bytes")[:2],
        "policy.min_q": (0, F64_MAX),  # policy._min_q: >= 0, a size within units.MAX_SIZE_BYTES
        "policy.weights": (1, policy.MAX_WRR_WEIGHT),
        "policy.weights.count": (2, 3),  # policy.Wrr._two_or_three
        "policy.levels.count": (policy.Rio.LEVELS, policy.Red3.LEVELS),
        "policy.downgrade_after_us": (1, policy.MAX_DOWNGRADE_AFTER * micros),
        "bucket.rate_bps": (1, units.MAX_RATE),
        "bucket.bucket_bytes": (units.MIN_BUCKET_BYTES, units.MAX_SIZE_BYTES),
        "port": (0, 65535),  # edge.parse_ports
        "dscp": (0, 63),  # edge.parse_dscp
        "edge.proto": {"one_of": [edge.MarkRule(proto=p, dscp=0).engine_rule({})["proto"] for p in ("tcp", "udp")]},
        "edge.interval_us": (1, edge.MAX_MARKER_INTERVAL * micros),
        "edge.pool_bytes": (1, units.MAX_SIZE_BYTES),
        "edge.tiny_window": tiny,
        "edge.mss_bytes": (1, edge.MAX_MSS),
        "edge.w_gain": field_bounds(edge.Tcpf, "w_gain"),
        "edge.e_gain": field_bounds(edge.Tcpf, "e_gain"),
        "edge.flow_idle_us": (int(edge.MIN_FLOW_IDLE * micros), 2 * edge.MAX_MARKER_INTERVAL * micros),
    }


def test_every_engine_bound_has_its_counterpart_in_the_schema_within_it():
    engine, schema = engine_check.limits(), schema_bounds()
    assert sorted(engine) == sorted(schema), "an engine bound without a schema counterpart, or the reverse"
    for key, b in engine.items():
        if "one_of" in b:  # a set of values: the schema's among them
            assert set(schema[key]["one_of"]) <= set(b["one_of"]), (key, schema[key], b)
            continue
        lo, hi, lo_x, hi_x = (*schema[key], False, False)[:4]
        assert lo is not None and hi is not None, key
        # The schema's lowest value is one the engine takes: above its minimum, or at it when the
        # engine takes the minimum itself (and so for the maximum).
        assert lo > b["min"] or lo == b["min"] and (lo_x or not b.get("min_exclusive")), (key, lo, b)
        assert hi < b["max"] or hi == b["max"] and (hi_x or not b.get("max_exclusive")), (key, hi, b)


LINK = {"name": "l", "queue_num": 0, "rate_bps": 1_000_000, "delay_us": 0, "buffer": {"packets": 10},
        "policy": {"kind": "droptail"}}
# Every parameter given: the engine has none of its own (docs/engine.md); the markers' as the schema writes them.
RED = {"kind": "red", "min_th": 2, "max_th": 6, "w_q": 0.1, "max_p": 0.1, "mean_pkt_bytes": 1000}
BUCKET = {"rate_bps": 1000, "bucket_bytes": 6000}
SCHED = {"kind": "source_scheduler", "high": dict(BUCKET), "med": dict(BUCKET), "classes": [[[80, 80]]],
         "downgrade_after_us": 200_000}
TCPF = edge.Tcpf().engine_config({})
TOKENS = edge.TokenMarker().engine_config({})
MARK = {"kind": "mark", "default": None}


def _config(top: dict | None = None, **link: Any) -> dict:
    return {"seed": 1, **(top or {}), "links": [{**LINK, **link}]}


def _at(key: str) -> Callable[[Any], dict]:
    """A configuration with `value` where the engine bound `key` applies."""
    table: dict[str, Callable[[Any], dict]] = {
        "seed": lambda v: {**_config(), "seed": v},
        "stats_interval_ms": lambda v: _config({"stats_interval_ms": v}),
        "late_threshold_us": lambda v: _config({"late_threshold_us": v}),
        "spin_us": lambda v: _config({"spin_us": v}),
        "queue_maxlen": lambda v: _config({"queue_maxlen": v}),
        "verdict_batch": lambda v: _config({"verdict_batch": v}),
        "recv_batch": lambda v: _config({"recv_batch": v}),
        "links.count": lambda v: {"links": [{**LINK, "name": f"l{i}", "queue_num": i} for i in range(v)]},
        "link.queue_num": lambda v: _config(queue_num=v),
        "link.rate_bps": lambda v: _config(rate_bps=v),
        "link.delay_us": lambda v: _config(delay_us=v),
        "buffer.packets": lambda v: _config(buffer={"packets": v}),
        "buffer.bytes": lambda v: _config(buffer={"bytes": v}),
        "loss.p": lambda v: _config(loss={"p": v, "p_high": 0}),
        "loss.p_high": lambda v: _config(loss={"p": 0, "p_high": v}),
        "policy.loss_p": lambda v: _config(policy={"kind": "bernoulli", "loss_p": v}),
        "policy.loss_p_high": lambda v: _config(policy={"kind": "catnip_loss", "loss_p": 0, "loss_p_high": v}),
        "policy.levels.max_p": lambda v: _config(policy={"kind": "rio", "w_q": 0.1, "mean_pkt_bytes": 1000, "levels": [
            {"min_th": 2, "max_th": 6, "max_p": v}, {"min_th": 2, "max_th": 6, "max_p": 0.1}]}),
        "policy.w_q": lambda v: _config(policy={**RED, "w_q": v}),
        "policy.max_p": lambda v: _config(policy={**RED, "max_p": v}),
        # min_th at its minimum, max_th at the largest number: both ends of a threshold.
        "policy.min_th": lambda v: _config(policy={**RED, "min_th": v, "max_th": F64_MAX} if v != F64_MAX
                                           else {**RED, "min_th": 0, "max_th": v}),
        "policy.mean_pkt_bytes": lambda v: _config(policy={**RED, "mean_pkt_bytes": v}),
        "policy.min_q": lambda v: _config(policy={**RED, "kind": "fred", "min_q": v}),
        "policy.weights": lambda v: _config(buffer=None, policy={"kind": "wrr", "weights": [v, 1]}),
        "policy.weights.count": lambda v: _config(buffer=None, policy={"kind": "wrr", "weights": [1] * v}),
        "policy.levels.count": lambda v: _config(policy={"kind": "rio" if v == 2 else "red3", "w_q": 0.1,
                                                         "mean_pkt_bytes": 1000, "levels": [
            {"min_th": 2, "max_th": 6, "max_p": 0.1}] * v}),
        "policy.downgrade_after_us": lambda v: _config(policy={**SCHED, "downgrade_after_us": v}),
        "bucket.rate_bps": lambda v: _config(edge=[{"kind": "shape", "rate_bps": v, "bucket_bytes": 6000,
                                                    "buffer": None}]),
        "bucket.bucket_bytes": lambda v: _config(policy={**SCHED, "med": {**BUCKET, "bucket_bytes": v}}),
        "port": lambda v: _config(edge=[{**MARK, "rules": [{"dport": [0, v], "dscp": 10}]}]),
        "dscp": lambda v: _config(edge=[{**MARK, "rules": [{"dscp": v}]}]),
        "edge.proto": lambda v: _config(edge=[{**MARK, "rules": [{"proto": v, "dscp": 10}]}]),
        "edge.interval_us": lambda v: _config(edge=[{**TOKENS, "interval_us": v}]),
        "edge.pool_bytes": lambda v: _config(edge=[{**TOKENS, "pool_bytes": v}]),
        "edge.tiny_window": lambda v: _config(edge=[{**TCPF, "tiny_window": v}]),
        "edge.mss_bytes": lambda v: _config(edge=[{**TCPF, "mss_bytes": v}]),
        "edge.w_gain": lambda v: _config(edge=[{**TCPF, "w_gain": v}]),
        "edge.e_gain": lambda v: _config(edge=[{**TCPF, "e_gain": v}]),
        "edge.flow_idle_us": lambda v: _config(edge=[{**TCPF, "flow_idle_us": v}]),
    }
    return table[key]


def _beyond(value: Any, up: bool, exclusive: bool) -> Any:
    """The nearest value the bound refuses."""
    if exclusive:
        return value
    if isinstance(value, int):
        return value + 1 if up else value - 1
    step = max(abs(value) * 1e-9, 1e-9)
    return value + step if up else value - step


def test_each_engine_bound_is_what_the_engine_checks():
    """At each bound the engine loads the configuration; one step beyond it refuses it. A bound
    changed in the engine's checks but not in `limits` (or the reverse) fails here."""
    cases, want = [], []
    for key, b in engine_check.limits().items():
        build = _at(key)
        if "one_of" in b:  # each member loads; a neighbour of each does not
            for v in b["one_of"]:
                cases += [build(v), build(v + 1), build(v - 1)]
                want += [(key, "one_of", v, True), (key, "one_of", v + 1, (v + 1) in b["one_of"]),
                         (key, "one_of", v - 1, (v - 1) in b["one_of"])]
            continue
        for end, up, exclusive in (("min", False, b.get("min_exclusive", False)),
                                   ("max", True, b.get("max_exclusive", False))):
            value = b[end]
            inside = value if not exclusive else (value + 1e-9 if not up else value - 1e-9)
            if key == "links.count" and up:  # 65536 links load; the 65537th has no queue number left
                inside = value
            cases += [build(inside)]
            want += [(key, end, inside, True)]
            if up and value == F64_MAX:
                continue  # nothing lies beyond the largest number JSON writes
            outside = _beyond(value, up, exclusive)
            cases += [build(outside)]
            want += [(key, end, outside, False)]
    answers = engine_check.check(cases)
    wrong = [(k, end, v if not isinstance(v, int) or v < 10**6 else f"{v:.3g}", error)
             for (k, end, v, ok), error in zip(want, answers) if (error is None) != ok]
    assert not wrong, wrong


# A scenario at the schema's edge loads in the engine; one step beyond, the schema refuses it.
EDGES = [
    ("topology.bottleneck.buffer", f"{units.MAX_BUFFER_PACKETS}p", f"{units.MAX_BUFFER_PACKETS + 1}p"),
    ("topology.bottleneck.buffer", "1048576MB", "1048577MB"),
    ("topology.bottleneck.edge", "[{kind: police, rate: 1000Gbit, bucket: 64B}]",
     "[{kind: police, rate: 1000.001Gbit, bucket: 64B}]"),
    ("topology.bottleneck.edge", "[{kind: police, rate: 1bit, bucket: 1024MB}]",
     "[{kind: police, rate: 1bit, bucket: 63B}]"),
    ("topology.bottleneck.edge", "[{kind: shape, rate: 1Mbit, bucket: 1048576MB}]",
     "[{kind: shape, rate: 1Mbit, bucket: 1048577MB}]"),
    ("topology.bottleneck.forward", "{edge: [{kind: token_marker, interval: 1us, pool: 1B}]}",
     "{edge: [{kind: token_marker, interval: 0.4us, pool: 1B}]}"),
    ("topology.bottleneck.forward", "{edge: [{kind: token_marker, interval: 60min, pool: 1048576MB}]}",
     "{edge: [{kind: token_marker, interval: 60.01min}]}"),
    ("topology.bottleneck.reverse", "{edge: [{kind: tcpf, interval: 1us, flow_idle: 120min, mss: 65535B}]}",
     "{edge: [{kind: tcpf, interval: 1us, mss: 65536B}]}"),
    ("topology.bottleneck", f"{{rate: 1.5Mbit, delay: 5ms, buffer: {policy.MAX_WRR_WEIGHT + 1}p, policy: {{kind: wrr,"
     f" weights: [1, {policy.MAX_WRR_WEIGHT}]}}}}", f"{{rate: 1.5Mbit, delay: 5ms, buffer: 10000000p, policy:"
     f" {{kind: wrr, weights: [1, {policy.MAX_WRR_WEIGHT + 1}]}}}}"),
    ("topology.bottleneck.buffer", f"{units.MAX_BUFFER_PACKETS}p", "1e30p"),
    ("seed", "2147483647", "2147483648"),
    ("run.late_threshold", "60s", "60.001s"),
    ("run.repetitions", "100", "101"),
]


@pytest.mark.parametrize("field, edge_value, beyond", EDGES)
def test_a_scenario_at_the_schemas_edge_loads_in_the_engine_and_one_beyond_is_refused(field, edge_value, beyond):
    sweep = s.load(QUICK, [f"{field}={edge_value}"])
    configs = [c for _, sc in sweep.points
               for rep in range(sc.run.repetitions)
               for c in engine_check.engine_configs(sc, sc.seed + 1000 * rep)]
    assert engine_check.check(configs) == [None] * len(configs)
    with pytest.raises(s.ScenarioError, match=field.split(".")[-1]):
        s.load(QUICK, [f"{field}={beyond}"])


def test_a_transfer_measurement_at_its_largest_seed_loads_in_the_engine():
    sc = transfer.load(REPO / "scenarios" / "transfers" / "hysteresis-validation.yaml", ["seed=2147483647"])
    configs = engine_check.transfer_configs(sc)
    assert configs and engine_check.check(configs) == [None] * len(configs)
    bad = copy.deepcopy(configs[0])
    bad["seed"] = 2**64
    assert "seed" in engine_check.check([bad])[0]
