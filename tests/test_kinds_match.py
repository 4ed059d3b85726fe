"""The schema's queue policies and edge functions are the engine's (issue 43, registries): a kind
a scenario can name that the engine lacks would be refused only when a run starts, and one the
engine has that no scenario can name is dead code. Compared with `catnip-engine kinds`.

A kind's parameters and their defaults are declared once, in the schema (spec/policy.py,
spec/edge.py, spec/graph.py for a link's loss): the engine has no defaults and requires every
parameter (docs/engine.md, "Parameters"). So the block the schema writes for each kind must have
exactly the parameters the engine lists for it, and the engine must refuse the block without any
one of them, naming it: a default added back on either side, or a parameter one side lacks,
fails here."""

from __future__ import annotations

import json
import subprocess
import typing

import pytest
from pydantic import TypeAdapter

from catnip.spec import edge, graph, policy
from catnip.testbed import paths


def _engine_kinds() -> dict:
    if not paths.engine_binary().exists():
        pytest.skip(f"queue engine not built ({paths.engine_binary()}); run `make setup`")
    out = subprocess.run([str(paths.engine_binary()), "kinds"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def schema_edge_kinds() -> set[str]:
    members = typing.get_args(typing.get_args(edge.EdgeSpec)[0])
    return {cls.model_fields["kind"].default for cls in members}


def test_the_schemas_policies_are_the_engines():
    assert set(policy.KINDS) == set(_engine_kinds()["policies"])


def test_the_schemas_edge_functions_are_the_engines():
    assert schema_edge_kinds() == set(_engine_kinds()["edge"])


# Each kind as a scenario may write it, giving only what has no default; the schema writes the rest.
LEVEL = {"min_th": 2, "max_th": 6}
BUCKET = {"rate": "250kbit", "bucket": "6000B"}
POLICIES = {
    "droptail": {}, "catnip_good": {}, "catnip_bad": {},
    "red": {"min_th": 2, "max_th": 6, "w_q": 0.1}, "catnip_red": {"min_th": 2, "max_th": 6, "w_q": 0.1},
    "fred": {"min_th": 2, "max_th": 6, "w_q": 0.1},
    "rio": {"w_q": 0.1, "levels": [LEVEL, LEVEL]}, "frio": {"w_q": 0.1, "levels": [LEVEL, LEVEL]},
    "red3": {"w_q": 0.1, "levels": [LEVEL, LEVEL, LEVEL]},
    "wrr": {"weights": [1, 4]}, "bernoulli": {"loss_p": 0.1}, "catnip_loss": {"loss_p": 0.1, "loss_p_high": 0.01},
    "source_scheduler": {"high": BUCKET, "med": BUCKET, "classes": [[2323], [80]]},
}
EDGES = {
    "mark": {"rules": [{"dport": 80, "dscp": "AF11"}]}, "police": {"rate": "1Mbit", "bucket": "3000B"},
    "shape": {"rate": "1Mbit", "bucket": "3000B"}, "tcpf": {}, "token_marker": {},
}
BUFFER = {"packets": 100}


def schema_blocks() -> list[tuple[str, str, dict]]:
    """(list, kind, the engine block the schema writes) for every kind, the FRED family also with
    byte thresholds (its min_q default is then in bytes)."""
    blocks = [("policies", kind, policy.parse_policy({"kind": kind, **raw}).engine_config(BUFFER))
              for kind, raw in POLICIES.items()]
    blocks.append(("policies", "fred", policy.parse_policy(
        {"kind": "fred", "min_th": "2KB", "max_th": "6KB", "w_q": 0.1}).engine_config(BUFFER)))
    adapter = TypeAdapter(edge.EdgeSpec)
    blocks += [("edge", kind, adapter.validate_python({"kind": kind, **raw}).engine_config({}))
               for kind, raw in EDGES.items()]
    return blocks


def _config(section: str, block: dict) -> dict:
    link = {"name": "b", "queue_num": 0, "rate_bps": 1_000_000, "delay_us": 0, "buffer": BUFFER,
            "policy": block if section == "policies" else {"kind": "droptail"},
            "edge": [block] if section == "edge" else []}
    return {"seed": 1, "links": [link]}


def _engine_check(configs: list[dict]) -> list[dict]:
    """`catnip-engine check`'s answer to each configuration."""
    out = subprocess.run([str(paths.engine_binary()), "check"], input="".join(json.dumps(c) + "\n" for c in configs),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_every_kind_has_a_sample_here():
    assert set(POLICIES) == set(policy.REGISTRY) and set(EDGES) == schema_edge_kinds()


def test_the_schema_writes_exactly_the_parameters_the_engine_takes():
    engine = _engine_kinds()["parameters"]
    for section, kind, block in schema_blocks():
        assert block["kind"] == kind
        assert sorted(set(block) - {"kind"}) == sorted(engine[section][kind]), (section, kind, block)


def test_the_engine_needs_every_parameter_the_schema_writes():
    _engine_kinds()  # skips without an engine
    cases: list[tuple[str, dict | None]] = []  # (the key left out or None, the configuration)
    for section, _kind, block in schema_blocks():
        cases.append((None, _config(section, block)))
        cases += [(key, _config(section, {k: v for k, v in block.items() if k != key})) for key in block if key != "kind"]
    loss = graph.LossSpec(p=0.1).engine_config()
    assert set(loss) == {"p", "p_high"}
    for key in [None, *loss]:
        config = _config("policies", {"kind": "droptail"})
        config["links"][0]["loss"] = {k: v for k, v in loss.items() if k != key}
        cases.append((key, config))
    answers = _engine_check([config for _, config in cases])
    assert len(answers) == len(cases)
    for (key, config), answer in zip(cases, answers):
        if key is None:
            assert answer == {"ok": True}, (config, answer)
        else:
            assert not answer["ok"] and answer["error"].endswith(f": missing field `{key}`"), (key, config, answer)
