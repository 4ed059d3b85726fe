"""The resolved record of a stored point (spec/record.py): the one place reports, layouts, labels
and the dashboard learn what a point ran.

A point recorded since records exist carries its own (`points.record`, written when its network
was planned). A point recorded before has none: its record is planned again, by the same planner
the run would use today, from what the run stored (its scenario with the overrides, its sweep and
the point's assignment and seed), and says so (`derived: true`).
"""

from __future__ import annotations

import json
from typing import Any

from spec.record import PointRecord, RecordError, parse


def record_of(run: Any, point: Any) -> PointRecord:
    """The record of a point row (`run`: its run's row, used only for a point without its own).
    RecordError where there is none to read or plan (say which point)."""
    keys = point.keys() if hasattr(point, "keys") else ()
    stored = point["record"] if "record" in keys else None
    record = parse(stored)
    if record is not None:
        return record
    return _derived(run, point)


def _derived(run: Any, point: Any) -> PointRecord:
    from spec.scenario import ScenarioError, stored_point
    from testbed.plan import plan
    where = f"run {run['id']} point {point['point']}" if run is not None else f"point {point['point']}"
    if run is None:
        raise RecordError(f"{where}: no record and no run to plan one from")
    try:
        raw, sweep, assignment = (json.loads(run["scenario"]), json.loads(run["sweep"] or "{}"),
                                  json.loads(point["assignment"]))
        sc = stored_point(raw, sweep, assignment)
        return plan(sc, seed=point["seed"]).model_copy(update={"derived": True})
    except (ValueError, TypeError, KeyError, ScenarioError) as exc:
        raise RecordError(f"{where} was recorded before records and its scenario no longer plans: "
                          f"{str(exc).splitlines()[0][:200]}") from None
