"""How a run's end is recorded (controller/skeleton.recorded_run), once for runs, transfer
measurements and cluster runs: done, failed as told, failed by an exception (raised again) or
cancelled (raised again), and always written."""

from __future__ import annotations

import pytest

from catnip.controller.skeleton import RunCancelled, recorded_run
from catnip.results.store import Store


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "r.db") as s:
        s.create_run("r1", "t", "t.yaml", {}, {}, 1, "rev", {}, {})
        yield s


def _end(store) -> tuple[str, str | None]:
    run = store.run("r1")
    return run["status"], run["error"]


def test_a_run_that_goes_through_is_done(store):
    with recorded_run(store, "r1"):
        pass
    assert _end(store) == ("done", None)
    assert store.run("r1")["finished"] is not None


def test_a_failed_point_fails_the_run_with_its_words(store):
    with recorded_run(store, "r1") as end:
        end.fail("point 2: client on ctpc3 failed")
    assert _end(store) == ("failed", "point 2: client on ctpc3 failed")


def test_an_exception_fails_the_run_and_is_raised_again(store):
    with pytest.raises(OSError, match="disk"):
        with recorded_run(store, "r1"):
            raise OSError("disk full")
    assert _end(store) == ("failed", "OSError: disk full")


def test_a_cancel_is_recorded_and_raised_again(store):
    with pytest.raises(RunCancelled):
        with recorded_run(store, "r1"):
            raise RunCancelled("SIGTERM")
    assert _end(store) == ("cancelled", "SIGTERM")


def test_a_point_in_another_process_reports_progress_as_json_lines_and_stops_when_nobody_reads(capsys, monkeypatch):
    import json

    from catnip.controller.skeleton import Progress, emit_progress
    emit_progress(Progress(run_id="r1", point=0, points=2, label="x", pages_done=3, pages_total=10))
    assert json.loads(capsys.readouterr().out)["pages_done"] == 3

    class Gone:
        def write(self, _):
            raise BrokenPipeError

        def flush(self):
            raise BrokenPipeError
    monkeypatch.setattr("sys.stdout", Gone())
    with pytest.raises(RunCancelled, match="is gone"):
        emit_progress(Progress(run_id="r1", point=0, points=2, label="x"))
