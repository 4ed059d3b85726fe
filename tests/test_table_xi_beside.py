"""The catnip-table-xi-beside layout (papers/catnip/layouts.py) over the Table XI runs kept in
archive/ (docs/reproduction.md, "Table XI"): each compared point's Mean against a reference
computed here straight from the stored page times, only from points that kept real time, the
buffer read from the point's resolved record, and the paper's numbers beside it from
papers/catnip/published.py (CATNIP, Table XI). Root-free: the archived runs are imported into a
database in memory."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

import catnip.papers  # noqa: F401  (registers the papers' layouts)
from catnip.papers.catnip import published
from catnip.results import docs_archive, layouts

ARCHIVE = Path(__file__).resolve().parent.parent / "archive"
ENTRIES = json.loads((ARCHIVE / "MANIFEST.json").read_text())["runs"]


def _ids(name: str) -> list[str]:
    return sorted(e["run_id"] for e in ENTRIES if e["name"] == name)


BASELINE, PARTIAL, FULL = _ids("catnip-wan-baseline"), _ids("catnip-wan-partial-spm"), _ids("catnip-wan-catnip")
pytestmark = pytest.mark.skipif(not (BASELINE and PARTIAL and FULL), reason="no Table XI runs in archive/")


@pytest.fixture(scope="module")
def db():
    with docs_archive.RunsDB(ARCHIVE) as runs:
        for rid in BASELINE + PARTIAL + FULL:
            runs.need(rid)
        yield runs.store


def _real_time_members(store, run_ids: list[str], buffer: str) -> list[tuple[str, int]]:
    return [(rid, p["point"]) for rid in run_ids for p in store.points(rid)
            if json.loads(p["assignment"]) == {"topology.bottleneck.buffer": buffer} and p["realtime_ok"]
            and p["status"] == "done"]


def _pooled_means(store, members: list[tuple[str, int]]) -> dict[int, float]:
    by_page: dict[int, list[float]] = {}
    for rid, point in members:
        for p in store.pages(rid, point):
            if not p["error"]:
                by_page.setdefault(p["page"], []).append(p["duration"])
    return {page: statistics.fmean(v) for page, v in by_page.items()}


def test_each_mean_is_the_mean_page_ratio_over_real_time_points_only(db):
    table = layouts.build("catnip-table-xi-beside", db, "+".join(BASELINE), "+".join(PARTIAL), "+".join(FULL))
    rows = table.records()
    assert [r["buffer_kb"] for r in rows] == [64, 128, 256, 512] * 2  # from each point's record
    assert [r["run_name"] for r in rows] == ["catnip-wan-partial-spm"] * 4 + ["catnip-wan-catnip"] * 4
    seen_value = 0
    for r, (ids, kb) in zip(rows, [(PARTIAL, kb) for kb in (64, 128, 256, 512)]
                            + [(FULL, kb) for kb in (64, 128, 256, 512)]):
        buffer = f"{kb}KB"
        base, mine = _real_time_members(db, BASELINE, buffer), _real_time_members(db, ids, buffer)
        if not base or not mine:  # nothing in real time on one side: no value, and not called real time
            assert r["relative_mean"] is None and not (r["realtime_ok"] and r["baseline_realtime_ok"])
            continue
        theirs, ours = _pooled_means(db, base), _pooled_means(db, mine)
        ref = statistics.fmean(ours[p] / theirs[p] for p in ours if p in theirs)
        assert r["relative_mean"] == pytest.approx(ref, rel=1e-12)
        assert r["realtime_ok"] is True and r["baseline_realtime_ok"] is True
        seen_value += 1
    assert seen_value >= 4  # the archive holds real-time points on both sides for most buffers


def test_the_papers_columns_are_table_xi_of_the_points_buffer(db):
    table = layouts.build("catnip-table-xi-beside", db, "+".join(BASELINE), "+".join(PARTIAL))
    for r in table.records():
        col = published.table_xi_column(r["buffer_kb"])
        assert (r["paper_mean"], r["paper_sdev"], r["paper_loss"]) == (col["mean"], col["sdev"], col["loss"])
    # Table XI as printed (CATNIP, section V-G): Mean 0.93 at 64 KB, TCP pkt loss 4.74% at 128 KB
    assert table.records()[0]["paper_mean"] == 0.93 and table.records()[1]["paper_loss"] == pytest.approx(0.0474)


def test_a_late_baseline_alone_gives_no_value(db):
    late = [rid for rid in BASELINE if any(not p["realtime_ok"] for p in db.points(rid))]
    if not late:
        pytest.skip("every archived baseline point kept real time")
    rid = late[0]
    late_buffers = {json.loads(p["assignment"])["topology.bottleneck.buffer"] for p in db.points(rid)
                    if not p["realtime_ok"]}
    rows = layouts.build("catnip-table-xi-beside", db, rid, "+".join(PARTIAL)).records()
    for r in rows:
        if f"{r['buffer_kb']}KB" in late_buffers:
            assert r["relative_mean"] is None and r["baseline_realtime_ok"] is not True


def test_the_per_page_text_names_each_column_by_its_whole_label(db):
    table = layouts.build("catnip-table-xi-beside", db, "+".join(BASELINE), "+".join(PARTIAL))
    text = layouts.render_text(table)  # `catnip compare --realtime-only`'s table (the docs' per-page region)
    assert re.findall(r" (\d+ KB) buffer", text.splitlines()[3]) == ["64 KB", "128 KB", "256 KB", "512 KB"]  # not "28 KB"
    assert "Only points that kept real time" in text


def test_a_label_too_long_for_its_column_is_cut_with_a_mark():
    col = {"label": "topology.bottleneck={'rate': '10Mbit', 'buffer': '500KB'}", "relative": {1: 0.5},
           "relative_ci95": {1: 0.1}, "relative_mean": 0.5, "relative_mean_ci95": 0.1, "relative_sdev": None,
           "loss": 0.1, "baseline_loss": 0.2, "realtime_ok": True, "baseline_realtime_ok": True}
    from catnip.results import compare
    text = compare.render_text({"baseline": {"run_id": "b"}, "columns": [col],
                                "pages": [{"page": 1, "conns": 1, "bytes": 10}]})
    head = text.splitlines()[3]
    assert head.endswith("topology.bottleneck={'r~") and len(head) == len("Page Conns    Bytes ") + 24
    assert text.splitlines()[4].endswith(" " * 15 + "0.50+-0.10")  # values aligned under it
