"""The schema's queue policies and edge functions are the engine's (issue 43, registries): a kind
a scenario can name that the engine lacks would be refused only when a run starts, and one the
engine has that no scenario can name is dead code. Compared with `catnip-engine kinds`."""

from __future__ import annotations

import json
import subprocess
import typing

import pytest

from catnip.spec import edge, policy
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
