"""Issue 47, defect 5: values the schema took that crashed it, or that the engine refused later.

Each input goes through `catnip validate` (in this process) and must be refused in one short line
naming the field, exit code 2, no traceback: infinite and huge sizes, buckets and intervals the
engine cannot hold, empty mark rule addresses, duplicate YAML keys, booleans where a number is
meant, and command-line values thousands of digits long.
"""

from __future__ import annotations

import pytest
import yaml

from catnip.spec import bounded
from catnip.spec import scenario as s
from catnip.spec import transfer
from catnip.testbed.paths import REPO
from tests.test_validate import refused, run_cli

QUICK = str(REPO / "scenarios" / "quick.yaml")
TRANSFERS = str(REPO / "scenarios" / "transfers" / "hysteresis-validation.yaml")


def validate(*overrides: str, path: str = QUICK):
    return run_cli("validate", path, *[a for o in overrides for a in ("--set", o)])


def edge(fn: str) -> str:
    return f"topology.bottleneck.edge=[{fn}]"


@pytest.mark.parametrize("override, words", [
    # OverflowError tracebacks before (infinity reached int()).
    ("topology.bottleneck.buffer=1e999p", ["topology.bottleneck.buffer", "not a finite"]),
    ("topology.bottleneck.buffer=1e999KB", ["topology.bottleneck.buffer", "not a finite"]),
    ("tcp.receive_buffer=1e999KB", ["tcp.receive_buffer", "not a finite"]),
    (edge("{kind: police, rate: 1Mbit, bucket: 1e999B}"), ["edge.0.bucket", "not a finite"]),
    (edge("{kind: shape, rate: 1Mbit, bucket: 1e999KB}"), ["edge.0.bucket", "not a finite"]),
    # Accepted before, refused by the engine when the point started.
    ("topology.bottleneck.buffer=1e30p", ["topology.bottleneck.buffer", "at most 1000000000 packets"]),
    ("topology.bottleneck.buffer=1e25B", ["topology.bottleneck.buffer", "at most 1099511627776 bytes"]),
    ("topology.bottleneck.buffer={packets: 100000000000000000000}", ["topology.bottleneck.buffer", "at most"]),
    (edge("{kind: police, rate: 1Mbit, bucket: -5}"), ["edge.0.bucket", "-5 is ambiguous"]),
    (edge("{kind: police, rate: 1Mbit, bucket: 0B}"), ["edge.0.bucket", "at least"]),
    (edge("{kind: police, rate: 1Mbit, bucket: 63B}"), ["edge.0.bucket", "64 bytes"]),
    (edge("{kind: police, rate: 1Mbit, bucket: 1e25B}"), ["edge.0.bucket", "at most"]),
    (edge("{kind: shape, rate: 1Mbit, bucket: 0}"), ["edge.0.bucket", "ambiguous"]),
    (edge("{kind: shape, rate: 1Mbit, bucket: 10B}"), ["edge.0.bucket", "64 bytes"]),
    (edge("{kind: police, rate: 1e30bit, bucket: 6000B}"), ["edge.0.rate", "above 1000Gbit"]),
    (edge("{kind: token_marker, interval: 0.1us}"), ["edge.0.interval", "above 0, at least 1us"]),
    (edge("{kind: token_marker, interval: 1e300s}"), ["edge.0.interval", "at most"]),
    (edge("{kind: token_marker, pool: 1e25B}"), ["edge.0.pool", "at most"]),
    (edge("{kind: tcpf, interval: 0.4us}"), ["edge.0.interval", "above 0, at least 1us"]),
    (edge("{kind: tcpf, flow_idle: 0.3us}"), ["edge.0.flow_idle", "above 0, at least 1us"]),
    (edge("{kind: tcpf, mss: 5000000000B}"), ["edge.0.mss", "at most"]),
    ("router.policy={kind: wrr, weights: [1, 5000000000]}", ["router.policy.weights", "less than or equal to 1000000"]),
    ("run.late_threshold=1e300s", ["run.late_threshold", "at most"]),
    ("router.policy={kind: fred, min_th: 2, max_th: 6, w_q: 0.1, min_q: .inf}", ["router.policy.min_q", "inf: min_q is a packet count"]),
    # IndexError before: an empty address is neither a block nor a group's name.
    (edge("{kind: mark, rules: [{src: '', dscp: 10}]}"), ["rules.0.src", "''"]),
    (edge("{kind: mark, rules: [{dst: ' ', dscp: 10}]}"), ["rules.0.dst"]),
])
def test_sizes_buckets_and_intervals_beyond_the_engine_are_refused_in_one_line(override, words):
    refused(validate(override), *words)


@pytest.mark.parametrize("override, field", [
    ("seed=true", "seed"),
    ("topology.clients=true", "topology.clients"),
    ("topology.servers=false", "topology.servers"),
    ("run.repetitions=true", "run.repetitions"),
    ("run.max_late_fraction=true", "run.max_late_fraction"),
    ("workload.parallel=true", "workload.parallel"),
    ("router.policy={kind: red, min_th: 2, max_th: 6, w_q: true}", "router.policy.w_q"),
    ("tcp.initial_cwnd=true", "tcp.initial_cwnd"),
])
def test_booleans_are_not_numbers(override, field):
    refused(validate(override), field, "a boolean")


def test_a_boolean_that_is_a_boolean_is_still_taken():
    assert validate("tcp.sack=false", "run.capture=true").exit_code == 0


def test_a_transfer_measurement_refuses_booleans_and_huge_seeds():
    refused(validate("seed=true", path=TRANSFERS), "seed", "a boolean")
    refused(validate("seed=100000000000000000000000000000", path=TRANSFERS), "seed", "2147483647")
    refused(validate("trials=true", path=TRANSFERS), "trials", "a boolean")


@pytest.mark.parametrize("text, words", [
    # The second `topology:` block replaced the first: a 100 Gbit/s "bottleneck".
    ("\ntopology:\n  clients: 10\n  servers: 1\n  bottleneck: {rate: 100Gbit, delay: 5ms, buffer: 10p}\n",
     ["key 'topology' given twice", "line"]),
    ("\nseed: 2\n", ["key 'seed' given twice"]),
])
def test_duplicate_keys_are_refused(tmp_path, text, words):
    path = tmp_path / "dup.yaml"
    path.write_text((REPO / "scenarios" / "quick.yaml").read_text() + text)
    refused(run_cli("validate", str(path)), *words)


def test_duplicate_keys_inside_a_section_and_a_set_value_are_refused(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text((REPO / "scenarios" / "quick.yaml").read_text().replace(
        "  servers: 1\n", "  servers: 1\n  clients: 50\n"))
    refused(run_cli("validate", str(path)), "key 'clients' given twice")
    refused(validate("workload.think_time={model: zero, model: exponential}"), "key 'model' given twice")


def test_merge_keys_are_not_duplicates(tmp_path):
    # A YAML merge (`<<: *anchor`) followed by a key that overrides the merged one is what merges are for.
    path = tmp_path / "merge.yaml"
    path.write_text((REPO / "scenarios" / "quick.yaml").read_text().replace(
        "  client_link: {rate: 10Mbit, delay: 2ms, buffer: 50p}",
        "  client_link: &l {rate: 10Mbit, delay: 2ms, buffer: 50p}").replace(
        "  server_link: {rate: 10Mbit, delay: 5ms, buffer: 50p}", "  server_link: {<<: *l, delay: 5ms}"))
    assert run_cli("validate", str(path)).exit_code == 0
    assert bounded.load_yaml("a: &a {x: 1, y: 2}\nb: {<<: *a, x: 3}\n", "t")["b"] == {"x": 3, "y": 2}


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("option", ["--seed", "--jobs"])
def test_an_integer_option_thousands_of_digits_long_is_echoed_short(command, option):
    # click's usage lines, then one error line quoting the value shortened (refused while the
    # options are read: `catnip run` starts nothing).
    text = refused(run_cli(command, QUICK, option, "9" * 5000), option, "at most 30 digits", lines=4)
    assert max(len(line) for line in text.splitlines()) <= 200, text


def test_the_engine_bounds_hold_for_code_built_values_too():
    # Code builds policies and edge functions from values already parsed (bare numbers allowed):
    # the bounds hold there as well, so nothing reaches the engine beyond them.
    from catnip.spec.edge import Police, TokenMarker
    from catnip.spec.policy import TokenBucket
    with pytest.raises(ValueError, match="bucket"):
        Police(rate=1000, bucket=-5)
    with pytest.raises(ValueError, match="bucket"):
        TokenBucket(rate=1000, bucket=10**25)
    with pytest.raises(ValueError, match="interval"):
        TokenMarker(interval=1e-7)
    assert Police(rate=1000, bucket=64).bucket == 64


def test_the_shipped_transfer_measurement_still_loads():
    sc = transfer.load(TRANSFERS)
    assert sc.seed >= 0 and yaml.safe_load((REPO / "scenarios" / "quick.yaml").read_text())["seed"] == 1
    assert len(s.load(QUICK).points) == 1


def test_the_dashboard_forms_seed_is_echoed_short(tmp_path):
    from catnip.webui import forms
    (tmp_path / "q.yaml").write_text((REPO / "scenarios" / "quick.yaml").read_text())
    req, errors = forms.parse_run_request({"scenario": "q", "seed": "9" * 5000}, tmp_path)
    assert req is None and "is not a seed" in errors["seed"] and len(errors["seed"]) <= 200, errors
