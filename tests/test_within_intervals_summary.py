"""The within-intervals-summary layout (results/layouts.py): pairs of runs, per pair how many figures
lie inside each other's 95% intervals, how many not, and whether the pair is one commit twice or two
commits (docs/equivalence.md's summary, issue 43). The counts are checked against samples chosen here
so that which figure falls inside is known without the layout: a file time inside, an echo delay far
outside, a page time inside, a metric with one sample (no interval) left out."""

from __future__ import annotations

import pytest

from catnip.results import layouts
from catnip.results.store import Store
from tests import test_within_intervals as within_intervals


def _run(store: Store, run_id: str, git_rev: str, samples: dict[str, list[float]],
         pages: dict[int, list[float]], realtime_ok: bool = True) -> None:
    within_intervals._run(store, run_id, samples, pages, realtime_ok, git_rev=git_rev)


FILE_A, FILE_B = [1.0, 1.2, 1.1, 0.9], [1.05, 1.15, 1.0, 1.1]    # means 1.05, 1.075: inside
ECHO_A, ECHO_B = [0.10, 0.11, 0.10, 0.12], [0.20, 0.21, 0.19, 0.22]  # means 0.1075, 0.205: outside
PAGE_A, PAGE_B = [2.0, 2.2, 2.1], [2.05, 2.1, 2.3]                # inside


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "t.db") as s:
        # Two commits: one figure of three outside, "once" (one sample in run a) left out.
        _run(s, "before", "aaaa1111bbbb2222", {"file_time": FILE_A, "echo": ECHO_A, "once": [5.0]}, {1: PAGE_A})
        _run(s, "after", "cccc3333dddd4444", {"file_time": FILE_B, "echo": ECHO_B, "once": [5.0, 6.0]}, {1: PAGE_B})
        # One commit twice: every figure inside; the second run missed real time.
        _run(s, "after-again", "cccc3333dddd4444", {"file_time": FILE_B, "echo": ECHO_B}, {1: PAGE_B},
             realtime_ok=False)
        # A dirty tree at the "same" revision is no repeat of a commit.
        _run(s, "dirty-1", "cccc3333dddd4444-dirty", {"file_time": FILE_A}, {})
        _run(s, "dirty-2", "cccc3333dddd4444-dirty", {"file_time": FILE_B}, {})
        yield s


def _rows(table) -> list[dict]:
    names = [c.name for c in table.columns]
    return [dict(zip(names, r)) for r in table.rows]


def test_each_pair_counts_inside_outside_and_left_out(store):
    table = layouts.build("within-intervals-summary", store, "before", "after", "after", "after-again")
    rows = _rows(table)
    assert [(r["pair"], r["a"], r["b"]) for r in rows] == [(1, "before", "after"), (2, "after", "after-again")]
    across, repeat = rows
    assert (across["compared"], across["inside"], across["outside"], across["left_out"]) == (3, 2, 1, 1)
    assert across["outside_share"] == pytest.approx(1 / 3)
    # "once" is in run "after" only: left out.
    assert (repeat["compared"], repeat["inside"], repeat["outside"], repeat["left_out"]) == (3, 3, 0, 1)
    assert repeat["outside_share"] == 0.0
    assert table.run_ids == ("before", "after", "after", "after-again")


def test_the_counts_are_within_intervals_own(store):
    """The summary of a pair says what within-intervals' table of that pair says."""
    detail = layouts.build("within-intervals", store, "before", "after")
    inside = [r[[c.name for c in detail.columns].index("inside")] for r in detail.rows]
    row = _rows(layouts.build("within-intervals-summary", store, "before", "after"))[0]
    assert (row["compared"], row["inside"], row["outside"]) == (len(inside), inside.count(True), inside.count(False))
    assert f"{row['left_out']} left out" in detail.notes[0]


def test_same_commit_and_real_time_per_pair(store):
    rows = _rows(layouts.build("within-intervals-summary", store, "before", "after", "after", "after-again",
                               "dirty-1", "dirty-2"))
    assert [r["same_commit"] for r in rows] == [False, True, False]
    assert [(r["a_git"], r["b_git"]) for r in rows] == [
        ("aaaa1111bbbb", "cccc3333dddd"), ("cccc3333dddd", "cccc3333dddd"),
        ("cccc3333dddd-dirty", "cccc3333dddd-dirty")]
    assert [(r["a_realtime_ok"], r["b_realtime_ok"]) for r in rows] == [(True, True), (True, False), (True, True)]


def test_runs_not_in_pairs_or_a_run_with_itself_are_refused(store):
    with pytest.raises(layouts.LayoutError, match="in pairs"):
        layouts.build("within-intervals-summary", store, "before", "after", "after-again")
    with pytest.raises(layouts.LayoutError, match="two different runs"):
        layouts.build("within-intervals-summary", store, "before", "after", "after", "after")
    with pytest.raises(layouts.LayoutError, match="takes 2 or more run id"):
        layouts.build("within-intervals-summary", store, "before")
