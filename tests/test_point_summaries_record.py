"""The run page's point summaries (webui/app.py `_point_summaries`) count a point that left no
progress row against what its resolved record says it planned, not its stored scenario (issue 43:
one record of what ran, read by everything after it).

The stored scenario here says 3 clients x 2 pages x 1 round (6 pages); the point's record, as the
planner wrote it, says the web application ran with other clients, pages and rounds. The summary's
total is the record's, and a point whose record cannot be read or planned has an unknown total (0).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from catnip.results.store import Store
from catnip.spec.scenario import stored_point
from catnip.testbed.paths import REPO
from catnip.testbed.plan import plan
from catnip.webui.app import _point_summaries

RUN = "20260101-000000-quick-aaaa"


def _record(clients: int, pages: list[int], rounds: int) -> dict:
    raw = yaml.safe_load((REPO / "scenarios" / "quick.yaml").read_text())
    raw["topology"]["clients"] = clients
    raw["workload"]["pages"], raw["workload"]["rounds"] = pages, rounds
    return plan(stored_point(raw, {}, {}), seed=1).model_dump(mode="json")


def _store(tmp_path: Path, record: dict | None, scenario: dict | None = None) -> Store:
    store = Store(tmp_path / "catnip.db")
    store.create_run(RUN, "quick", "scenarios/quick.yaml", scenario or {"name": "quick"}, {}, 1, "abc123",
                     {"kernel": "x"}, {"root": True})
    stored = {"topology": {"clients": 3}, "workload": {"pages": [1, 2], "rounds": 1}}  # 6 pages, not what ran
    store.create_point(RUN, 0, 0, {}, stored, 1, record=record)
    pages = [{"client": f"c{c}", "server": "v1", "page": p, "round": 0, "start": 0.0, "end": 1.0, "duration": 1.0,
              "objects": 2, "bytes": 1000} for c in range(2) for p in (1, 2)]
    store.add_transfers(RUN, 0, [], pages)
    store.update_point(RUN, 0, status="done", realtime_ok=1, finished=1.0)
    store.finish_run(RUN, "done")
    return store


def test_total_is_the_records_plan(tmp_path):
    with _store(tmp_path, _record(clients=4, pages=[1, 2, 3], rounds=2)) as store:
        (summary,) = _point_summaries(store, RUN)
    assert (summary["pages_done"], summary["pages_total"]) == (4, 4 * 3 * 2)


def test_a_point_without_a_record_has_one_planned_from_its_run(tmp_path):
    # Recorded before records: the record is planned again from the run's stored scenario (quick.yaml
    # as it stood, 10 clients x Fig. 4's 10 pages x 1 round), not read off the point's `resolved`.
    raw = yaml.safe_load((REPO / "scenarios" / "quick.yaml").read_text())
    with _store(tmp_path, None, scenario=raw) as store:
        (summary,) = _point_summaries(store, RUN)
    assert summary["pages_total"] == 10 * 10 * 1


def test_an_unplannable_point_has_an_unknown_total(tmp_path):
    with _store(tmp_path, None) as store:  # {"name": "quick"}: no record, and nothing to plan one from
        (summary,) = _point_summaries(store, RUN)
    assert (summary["pages_done"], summary["pages_total"]) == (4, 0)
