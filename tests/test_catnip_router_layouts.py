"""The router set's layouts for the docs (papers/catnip/layouts.py): catnip-loss-beside, our loss
by priority beside the paper's row of Tables IV/VII/X for what each point's record says it ran,
and catnip-vs-first-point, each point's page times over the run's first point's (DropTail in the
router set). The paper's numbers below are typed from its Table VII (C. Williamson, Q. Wu, "A Case
for Context-Aware TCP/IP", ACM SIGMETRICS PER 29(4), 2002), not read from published.py. Root-free:
runs written through the store's own API."""

from __future__ import annotations

import pytest

from catnip.results import layouts
from catnip.results.layouts import LayoutError
from catnip.results.store import Store
from tests.test_paper_published import _resolved, catnip_run

TEN = {"packets": 10}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "catnip.db") as s:
        catnip_run(s, "routers", "catnip-sim-routers", [
            ({"router.policy": {"kind": "droptail"}}, _resolved("catnip_reno", "droptail", TEN), 0.3, (100, 10, 200, 20)),
            ({"router.policy": {"kind": "catnip_good"}}, _resolved("catnip_reno", "catnip_good", TEN), 0.2,
             (100, 1, 200, 30)),
            ({"router.policy": {"kind": "red"}}, _resolved("catnip_reno", "red", TEN), 0.25, (100, 5, 200, 25)),
            # the scenario's router default says DropTail, the bottleneck's own policy CATNIP-Good: it ran CATNIP-Good
            ({"x": 1}, _resolved("catnip_reno", "droptail", TEN, bottleneck_policy="catnip_good"), 0.2, (100, 2, 200, 40)),
            ({"router.policy": {"kind": "catnip_good"}}, _resolved("cubic", "catnip_good", TEN), 0.2, (100, 1, 200, 30))])
        catnip_run(s, "one", "quick", [({}, _resolved("catnip_reno", "droptail", TEN), 0.3, (100, 10, 200, 20))])
        yield s


def _rows(table) -> list[dict]:
    return [dict(zip([c.name for c in table.columns], r)) for r in table.rows]


def test_loss_beside_puts_the_papers_row_of_what_ran(store):
    rows = _rows(layouts.build("catnip-loss-beside", store, "routers"))
    assert [(r["sender"], r["policy"]) for r in rows] == [
        ("Reno", "DropTail"), ("Reno", "CATNIP-Good"), ("Reno", "RED"), ("Reno", "CATNIP-Good"), ("cubic", "CATNIP-Good")]
    good = rows[1]
    assert good["loss"] == pytest.approx(31 / 300) and good["high_loss"] == pytest.approx(0.01)
    assert good["low_loss"] == pytest.approx(0.15)
    assert good["paper_row"].startswith("Table VII, Reno/CATNIP-Good")
    assert (good["paper_loss"], good["paper_high_loss"], good["paper_low_loss"]) == pytest.approx((0.0374, 0.0049, 0.0588))
    assert rows[3]["paper_row"] == good["paper_row"]  # its record, not the scenario's router default
    assert rows[2]["paper_row"] is None and rows[2]["paper_loss"] is None  # RED: the paper prints no row
    assert rows[4]["paper_row"] is None  # CUBIC is not one of the paper's senders


def test_vs_first_point_divides_by_the_first_points_pages(store):
    rows = _rows(layouts.build("catnip-vs-first-point", store, "routers"))
    assert [r["point"] for r in rows] == [1, 2, 3, 4]
    assert {r["baseline_label"] for r in rows} == {rows[0]["baseline_label"]} and "droptail" in rows[0]["baseline_label"].lower()
    good, red = rows[0], rows[1]
    # every page of CATNIP-Good's point took 0.2/0.3 of DropTail's, RED's 0.25/0.3
    assert good["relative_mean"] == pytest.approx(2 / 3) and good["relative_min"] == pytest.approx(2 / 3)
    assert good["relative_max"] == pytest.approx(2 / 3) and red["relative_mean"] == pytest.approx(5 / 6)
    assert good["pages"] == red["pages"] == 3 and good["pages_faster"] == red["pages_faster"] == 3
    # 3 clients a page 10% apart: a third faster is clear of 1.00 on each page, a sixth is not
    assert good["pages_faster_clear"] == 3 and red["pages_faster_clear"] == 0
    assert good["pages_slower_clear"] == red["pages_slower_clear"] == 0


def test_vs_first_point_refuses_a_run_of_one_point(store):
    with pytest.raises(LayoutError, match="two or more points; one has 1"):
        layouts.build("catnip-vs-first-point", store, "one")


def test_vs_first_point_text_names_its_baseline_point(store):
    text = layouts.get("catnip-vs-first-point").text(layouts.build("catnip-vs-first-point", store, "routers").source)
    first = text.splitlines()[0]
    assert "over the first point's (DropTail)" in first and "Table XI" not in first
