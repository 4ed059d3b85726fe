"""A run's points before they run: what each is (its scenario, sweep values, repetition and
seed), what it will run (its resolved record, spec/record.py) and where its files go. The first
phase of a point; controller/point.py builds, starts, watches and collects it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from catnip.controller.skeleton import Progress
from catnip.results.store import Store
from catnip.spec.record import PointRecord
from catnip.spec.scenario import Scenario, Sweep, point_label
from catnip.testbed.plan import plan as plan_point


def plan_points(sweep: Sweep, artifacts: Path) -> list["PointPlan"]:
    """Every point run of the sweep in order; each point repeats as its own scenario says
    (run.repetitions can be swept, so points may differ)."""
    total = sum(s.run.repetitions for _, s in sweep.points)
    plans: list[PointPlan] = []
    for assignment, scenario in sweep.points:
        for rep in range(scenario.run.repetitions):
            index = len(plans)
            plans.append(PointPlan(index, rep, assignment, scenario, point_label(assignment, sweep.name),
                                   total, artifacts / f"point{index}"))
    return plans


@dataclass
class PointPlan:
    """One point of a run, before it runs: what it is, where its files go."""

    index: int
    rep: int
    assignment: dict
    scenario: Scenario
    label: str
    points: int
    workdir: Path

    @property
    def seed(self) -> int:
        return self.scenario.seed + 1000 * self.rep

    def progress(self, run_id: str) -> Progress:
        return Progress(run_id, self.index, self.points, self.label)

    @property
    def record(self) -> PointRecord:
        """What this point runs (spec/record.py): the network is built from it and it is stored."""
        return plan_point(self.scenario, self.seed)

    def create(self, store: Store, run_id: str) -> None:
        # Configs, logs and client records stay with the run (enough to explain it).
        self.workdir.mkdir(parents=True, exist_ok=True)
        store.create_point(run_id, self.index, self.rep, self.assignment, self.scenario.model_dump(), self.seed,
                           record=self.record.model_dump(mode="json"))
