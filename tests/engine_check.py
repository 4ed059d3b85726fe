"""The queue engine as the judge of what validation accepted (issue 47, defect 5).

`engine_configs` lays a validated scenario out as its engines would be given it (testbed/plan.py,
the same record network.build() starts the engines from; RouterEngine.config, the file each
engine reads), and `check` hands configurations to `catnip-engine check`, which loads each one as
`catnip-engine run` does, without running, and says whether it would start.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from catnip.spec.scenario import Scenario
from catnip.spec.transfer import TransferScenario
from catnip.testbed.engine import RouterEngine
from catnip.testbed.paths import engine_binary


def engine_configs(sc: Scenario, seed: int | None = None) -> list[dict[str, Any]]:
    """The configuration of every engine of one point of `sc` (default: the scenario's seed)."""
    from catnip.testbed.plan import plan
    record = plan(sc, seed)
    routers: dict[str, list] = {}
    for d in record.links:
        if d.backend == "engine":
            routers.setdefault(d.router, []).append(d)
    return [RouterEngine(SimpleNamespace(name=name), links, Path("/nonexistent"), record.seed,
                         late_threshold_s=sc.run.late_threshold, spin_s=sc.run.engine_spin).config()
            for name, links in routers.items()]


def transfer_configs(sc: TransferScenario) -> list[dict[str, Any]]:
    """The engine configuration of every point of a transfer measurement (controller/transfers.py),
    at the largest seed a point gets."""
    from catnip.controller.transfers import _engine
    points = sc.points()
    router = SimpleNamespace(name="r")
    return [_engine(router, sc, loss, Path("/nonexistent"), sc.seed * 1000 + len(points)).config()
            for _, loss in points]


def check(configs: list[dict[str, Any]]) -> list[str | None]:
    """Each configuration through `catnip-engine check` (one process for all): None where the
    engine would load it, else its error."""
    if not configs:
        return []
    text = "".join(json.dumps(c, separators=(",", ":"), allow_nan=False) + "\n" for c in configs)
    done = subprocess.run([str(engine_binary()), "check"], input=text, capture_output=True, text=True,
                          timeout=120, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(configs), done.stderr[-500:]
    return [None if a["ok"] else a["error"] for a in answers]


def limits() -> dict[str, dict[str, Any]]:
    """Every bound the engine checks at load (`catnip-engine limits`)."""
    done = subprocess.run([str(engine_binary()), "limits"], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(done.stdout)
