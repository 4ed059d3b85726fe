"""Runs whose runner died (SIGKILL, a crash, a reboot) stop showing as running."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from catnip.cli.main import main
from catnip.controller.recover import close_abandoned_runs
from catnip.results.store import Store
from catnip.testbed import processes


def _dead_identity() -> str:
    proc = subprocess.Popen(["true"])
    ident = processes.identity(proc.pid)
    proc.wait()  # reaped: its pid no longer names it (and if reused, the start time differs)
    return ident


def test_identity_tells_a_live_process_from_a_gone_one():
    me = processes.identity()
    assert processes.alive(me)
    assert not processes.alive(_dead_identity())
    boot, pid, ticks = me.split("/")
    assert not processes.alive(f"{'0' * len(boot)}/{pid}/{ticks}"), "another boot's pid is not this process"
    assert not processes.alive(f"{boot}/{pid}/{int(ticks) + 1}"), "a reused pid started at another time"
    with pytest.raises(ValueError, match="not a process identity"):
        processes.alive("1234")


def test_abandoned_runs_are_interrupted_and_only_they(tmp_path):
    db = tmp_path / "db"
    with Store(db) as store:
        for run_id, runner in [("dead", _dead_identity()), ("live", processes.identity()), ("old", None)]:
            store.create_run(run_id, "quick", "x", {}, {}, 1, "abc", {}, {}, runner=runner)
            store.create_point(run_id, 0, 0, {}, {}, 1)
            store.update_point(run_id, 0, status="done")
            store.create_point(run_id, 1, 0, {}, {}, 1)
        assert close_abandoned_runs(store) == ["dead"]
        dead = store.run("dead")
        assert dead["status"] == "interrupted" and "ended without finishing it" in dead["error"] and dead["finished"]
        assert [p["status"] for p in store.points("dead")] == ["done", "interrupted"]
        # A live runner's run goes on; a run recorded before runners were named cannot be told.
        assert store.run("live")["status"] == store.run("old")["status"] == "running"
        assert close_abandoned_runs(store) == []
        # Finished at its last sign of life, not when someone looked.
        store.create_run("gone", "quick", "x", {}, {}, 1, "abc", {}, {}, runner=_dead_identity())
        store.create_point("gone", 0, 0, {}, {}, 1)
        store.add_progress("gone", 0, 5.0, "workload", 3, 10)
        last = store.db.execute("SELECT MAX(t) FROM progress WHERE run_id='gone'").fetchone()[0]
    res = CliRunner().invoke(main, ["list", "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    gone = next(r for r in json.loads(res.output) if r["id"] == "gone")
    assert gone["status"] == "interrupted" and gone["finished"] == last, "`catnip list` closes abandoned runs"
