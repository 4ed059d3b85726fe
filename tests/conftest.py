"""Shared fixtures. Tests needing root or a built engine skip with the reason named."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testbed import cleanup, paths

REPO = paths.REPO
ARTIFACTS = REPO / "tests" / "artifacts"


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces, iptables and OVS")


def need_engine():
    if not paths.engine_binary().exists():
        pytest.skip(f"queue engine not built ({paths.engine_binary()}); run `make setup`")


@pytest.fixture
def isolated_data(tmp_path, monkeypatch):
    """A private results database and data directory per test."""
    monkeypatch.setenv("CATNIP_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("CATNIP_DB", str(tmp_path / "data" / "catnip.db"))
    return tmp_path


@pytest.fixture
def no_leftovers():
    """Fails the test if it leaves namespaces, processes or bridges behind (and cleans them)."""
    yield
    left = cleanup.leftovers()
    if left:
        cleanup.clean()
        pytest.fail(f"test left state behind: {left}")


def catnip(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / ".venv" / "bin" / "catnip"), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=REPO)
