"""One sweep point's repetitions on a cluster worker's machine: the process
controller/cluster_task.py starts as `python -m catnip.controller.cluster_point SPEC`.

SPEC (JSON, controller/cluster.py PointTask.spec) carries what the coordinator loaded: the
scenario file's text and name, its --set overrides narrowed to this one point, the seed, and the
hash of the point's resolved scenario. This process loads the same text with the same code (the
task checked the fingerprint), refuses if it resolves to anything but that very point, and runs it
with the local runner into the database CATNIP_DB names: the same code path and real-time checks
as a local run. It waits while another run holds this machine. Progress goes to stdout as JSON
lines; SIGTERM cancels the point cleanly (skeleton.signals_cancel).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from catnip.controller import runner, skeleton
from catnip.results.store import Store
from catnip.spec import scenario as scenario_mod
from catnip.testbed import paths


def resolved_hash(sc: scenario_mod.Scenario) -> str:
    """What the coordinator and the worker compare: the point's resolved scenario, as the store
    records it (results/store_runs.py dumps)."""
    import hashlib
    return hashlib.sha256(json.dumps(sc.model_dump(), sort_keys=True, default=str).encode()).hexdigest()


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    # The file keeps its name: a scenario's name defaults to its file's.
    scenario_file = Path(spec_path).parent / spec["scenario_name"]
    scenario_file.write_text(spec["scenario_text"])
    try:
        sweep = scenario_mod.load(scenario_file, spec["overrides"], spec["seed"])
    except scenario_mod.ScenarioError as exc:
        print(f"the scenario does not load here: {exc}", file=sys.stderr)
        return 2
    if len(sweep.points) != 1 or resolved_hash(sweep.points[0][1]) != spec["resolved"]:
        print("the scenario resolves to another point here than on the coordinator", file=sys.stderr)
        return 2

    from catnip.testbed.capabilities import probe
    # A cancel while probing (a throwaway namespace) or waiting for the machine is clean too.
    with skeleton.signals_cancel(), Store(paths.database()) as store:
        try:
            caps = probe()
            runner.run(sweep, caps, store, progress=skeleton.emit_progress, run_id=spec["run_id"], wait_for_machine=True)
        except skeleton.RunCancelled:
            return 130
        except Exception as exc:  # the run's shared set-up failed; runner.run recorded it as the run's error
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
