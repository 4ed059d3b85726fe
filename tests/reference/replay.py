"""Running the engine's offline replay on a config and a trace: the one helper the reference tests
share (docs/engine.md, "Replay")."""

from __future__ import annotations

import csv
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from catnip.testbed import paths


def run_replay(folder: Path, config: dict, write_trace: Callable[[Path], None]) -> list[dict]:
    """FATES.csv's rows for `config` and the trace `write_trace(path)` writes, from
    `catnip-engine replay` run in `folder`."""
    (folder / "cfg.json").write_text(json.dumps(config))
    write_trace(folder / "trace.csv")
    res = subprocess.run([str(paths.engine_binary()), "replay", "--config", str(folder / "cfg.json"),
                          "--trace", str(folder / "trace.csv"), "--out", str(folder / "fates.csv")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    with open(folder / "fates.csv") as fh:
        return list(csv.DictReader(fh))


def write_simple_trace(path: Path, trace: list[tuple[int, int, int]], flows: list | None = None) -> None:
    """A trace of (time_us, size, dscp) rows, each with its flow (default 1)."""
    with open(path, "w") as fh:
        fh.write("time_us,size,dscp,flow\n")
        for i, (t, size, dscp) in enumerate(trace):
            fh.write(f"{t},{size},{dscp},{flows[i] if flows else 1}\n")
