"""Repetitions pooled per sweep point (results/pooled.py, `catnip report --pool`)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from controller.cli import main
from results import pooled
from results.store import Store


def _page(client: str, page: int, duration: float | None, error: str | None = None) -> dict:
    return {"client": client, "server": "ctpv1", "page": page, "round": 0, "start": 0, "end": 1,
            "duration": duration, "objects": 1, "bytes": 1, "error": error}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "db"
    with Store(path) as store:
        store.create_run("r1", "reps", "x", {"name": "reps"}, {}, 1, "abc", {}, {})
        # Two sweep values x two repetitions; point 3 did not keep real time, point 4 failed.
        for point, (policy, rt, status, durations) in enumerate([
                ("droptail", 1, "done", (1.0, 3.0)), ("droptail", 1, "done", (2.0,)),
                ("catnip_good", 1, "done", (1.0,)), ("catnip_good", 0, "done", (9.0,)),
                ("catnip_good", 1, "failed", (7.0,))]):
            store.create_point("r1", point, point % 2, {"router.policy": {"kind": policy}}, {}, 1)
            store.update_point("r1", point, realtime_ok=rt, status=status)
            store.add_transfers("r1", point, [], [_page(f"c{i}", 1, d) for i, d in enumerate(durations)]
                                + [_page("cx", 2, None, "timeout")])
    return path


def test_pooled_tables_count_what_they_leave_out(db):
    with Store(db) as store:
        dt, cg = pooled.pooled_report(store, "r1")["groups"]
        assert dt["points"] == [0, 1] and dt["table"][0]["n"] == 3 and dt["table"][0]["mean"] == 2.0
        assert dt["table"][1]["failed"] == 2
        assert cg["points"] == [2, 3] and cg["excluded_not_done"] == [4] and cg["table"][0]["mean"] == 5.0
        _, cg = pooled.pooled_report(store, "r1", realtime_only=True)["groups"]
        assert cg["points"] == [2] and cg["excluded_not_real_time"] == [3] and cg["table"][0]["mean"] == 1.0
        with pytest.raises(KeyError):
            pooled.pooled_report(store, "nope")


def test_cli_pool(db):
    res = CliRunner().invoke(main, ["report", "r1", "--db", str(db), "--pool", "--realtime-only"])
    assert res.exit_code == 0, res.output
    assert "left out, real time not kept: points [3]" in res.output
    assert "left out, did not finish: points [4]" in res.output
    res = CliRunner().invoke(main, ["report", "r1", "--db", str(db), "--realtime-only"])
    assert res.exit_code != 0 and "--realtime-only goes with --pool" in res.output
