"""The within-intervals layout (results/layouts.py): two runs' figures, each mean against the other's
95% interval (docs/equivalence.md), checked against intervals computed here by hand (Student t)."""

from __future__ import annotations

import math

import pytest

from catnip.results import layouts
from catnip.results.store import Store

T975 = {2: 4.302652729911275, 3: 3.182446305284263, 4: 2.776445105197793}  # Student t 0.975, by df


def _half_width(values: list[float]) -> float:
    n = len(values)
    mean = sum(values) / n
    sdev = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return T975[n - 1] * sdev / math.sqrt(n)


def _run(store: Store, run_id: str, samples: dict[str, list[float]], pages: dict[int, list[float]],
         realtime_ok: bool = True, git_rev: str = "abc") -> None:
    store.create_run(run_id, "eq", "x", {"name": "eq"}, {}, 1, git_rev, {}, {})
    store.create_point(run_id, 0, 0, {}, {}, 1)
    store.add_samples(run_id, 0, [{"app": "ftp", "metric": metric, "unit": "s", "value": v, "tag": "rtt1"}
                                  for metric, values in samples.items() for v in values])
    store.add_transfers(run_id, 0, [], [{"client": "c1", "server": "s1", "page": page, "round": i, "start": 0.0,
                                         "end": d, "duration": d, "objects": 1, "bytes": 1000}
                                        for page, values in pages.items() for i, d in enumerate(values)])
    store.update_point(run_id, 0, status="done", realtime_ok=int(realtime_ok))
    store.finish_run(run_id, "done")


A_FILE = [1.0, 1.2, 1.1, 0.9]
B_FILE = [1.05, 1.15, 1.0, 1.1]        # means 1.05 and 1.075: each inside the other's interval
A_ECHO = [0.10, 0.11, 0.10, 0.12]
B_ECHO = [0.20, 0.21, 0.19, 0.22]      # means 0.1075 and 0.205: far outside
A_PAGE = [2.0, 2.2, 2.1]
B_PAGE = [2.05, 2.1, 2.3]


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "t.db") as s:
        _run(s, "run-a", {"file_time": A_FILE, "echo": A_ECHO, "once": [5.0]}, {1: A_PAGE})
        _run(s, "run-b", {"file_time": B_FILE, "echo": B_ECHO, "once": [5.0, 6.0]}, {1: B_PAGE}, realtime_ok=False)
        yield s


def _rows(table) -> dict[tuple, dict]:
    names = [c.name for c in table.columns]
    return {(r[names.index("metric")], r[names.index("tag")]): dict(zip(names, r)) for r in table.rows}


def test_each_mean_is_judged_against_the_other_runs_interval(store):
    table = layouts.build("within-intervals", store, "run-a", "run-b")
    rows = _rows(table)
    assert set(rows) == {("file_time", "rtt1"), ("echo", "rtt1"), ("page_time", "page 1")}
    f = rows[("file_time", "rtt1")]
    assert f["a_mean"] == pytest.approx(sum(A_FILE) / 4) and f["b_mean"] == pytest.approx(sum(B_FILE) / 4)
    assert f["a_ci95"] == pytest.approx(_half_width(A_FILE)) and f["b_ci95"] == pytest.approx(_half_width(B_FILE))
    assert f["inside"] is True
    assert rows[("echo", "rtt1")]["inside"] is False
    page = rows[("page_time", "page 1")]
    assert page["a_ci95"] == pytest.approx(_half_width(A_PAGE)) and page["inside"] is True
    assert (page["a_realtime_ok"], page["b_realtime_ok"]) == (True, False)
    # "once" has one sample in run A: no interval, so it is left out and counted.
    assert "3 figures compared, 2 with each mean inside the other's 95% interval, 1 not; 1 left out" in table.notes[0]


def test_inside_needs_both_intervals_not_just_one(store):
    """A mean inside the wide interval but outside the narrow one is not inside."""
    wide, narrow = [1.0, 3.0, 1.0, 3.0], [2.5, 2.51, 2.49, 2.5]    # means 2.0 and 2.5
    assert abs(2.0 - 2.5) <= _half_width(wide) and abs(2.0 - 2.5) > _half_width(narrow)
    _run(store, "run-c", {"file_time": wide}, {})
    _run(store, "run-d", {"file_time": narrow}, {})
    row = _rows(layouts.build("within-intervals", store, "run-c", "run-d"))[("file_time", "rtt1")]
    assert row["inside"] is False


def test_a_run_with_itself_or_too_few_runs_is_refused(store):
    with pytest.raises(layouts.LayoutError, match="two different runs"):
        layouts.build("within-intervals", store, "run-a", "run-a")
    with pytest.raises(layouts.LayoutError, match="takes 2 run id"):
        layouts.build("within-intervals", store, "run-a")
