"""Issue 46: the report's router-set claims (papers/catnip/claims.py) compute ours from the router
set's archived run through catnip-loss-beside and catnip-vs-first-point, each point found by the
policy its resolved record says it ran (issue 43), never by its label; and the layouts' columns
they read (the high-priority shares, the policies) and catnip-pages-beside, our page times beside
the paper's detailed table of what each point ran. The paper's numbers below are typed from its
Tables II and V (C. Williamson, Q. Wu, "A Case for Context-Aware TCP/IP", ACM SIGMETRICS PER 29(4),
2002), not read from published.py. Root-free: runs written through the store's own API."""

from __future__ import annotations

import json
import re

import pytest

import catnip.papers  # noqa: F401 (registers the papers' layouts)
from catnip.papers.catnip import claims as cc
from catnip.papers.claims import ClaimsError
from catnip.results import layouts
from catnip.results.store import Store
from catnip.spec import scenario
from catnip.testbed import paths
from catnip.testbed.plan import plan
from tests.test_paper_published import _resolved, catnip_run

TEN = {"packets": 10}
GOOD, BAD = {"router.policy": {"kind": "catnip_good"}}, {"router.policy": {"kind": "catnip_bad"}}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "catnip.db") as s:
        catnip_run(s, "set", "catnip-sim-routers", [
            ({"router.policy": {"kind": "droptail"}}, _resolved("catnip_reno", "droptail", TEN), 0.3, (100, 10, 200, 20)),
            # labelled CATNIP-Bad, its record says CATNIP-Good: it ran CATNIP-Good
            (BAD, _resolved("catnip_reno", "catnip_good", TEN), 0.2, (100, 1, 200, 30)),
            # labelled CATNIP-Good, its record says CATNIP-Bad
            (GOOD, _resolved("catnip_reno", "catnip_bad", TEN), 0.45, (100, 20, 200, 10)),
            ({"router.policy": {"kind": "red"}}, _resolved("catnip_reno", "red", TEN), 0.25, (100, 5, 200, 25))])
        s.update_point("set", 1, marking={"data_high": 40, "data_low": 60, "data_high_bytes": 300,
                                          "data_low_bytes": 700, "retransmissions": 0, "documents": 1,
                                          "control_high": 5, "control_low": 0})
        catnip_run(s, "red-first", "catnip-sim-routers", [
            ({"router.policy": {"kind": "red"}}, _resolved("catnip_reno", "red", TEN), 0.25, (100, 5, 200, 25)),
            (GOOD, _resolved("catnip_reno", "catnip_good", TEN), 0.2, (100, 1, 200, 30))])
        catnip_run(s, "twice", "catnip-sim-routers", [
            ({"router.policy": {"kind": "droptail"}}, _resolved("catnip_reno", "droptail", TEN), 0.3, (100, 10, 200, 20)),
            (GOOD, _resolved("catnip_reno", "catnip_good", TEN), 0.2, (100, 1, 200, 30)),
            (GOOD, _resolved("catnip_reno", "catnip_good", TEN), 0.2, (100, 1, 200, 30))])
        yield s


def _point(policy: str, *more: str) -> tuple[dict, dict]:
    """As _resolved (Reno, the 10-packet bottleneck), with more overrides."""
    sc = scenario.load(paths.REPO / "scenarios" / "quick.yaml", overrides=[
        "tcp.congestion_control=catnip_reno", f"router.policy={{kind: {policy}}}", "topology.bottleneck.buffer=10p",
        *more]).points[0][1]
    return sc.model_dump(mode="json"), plan(sc).model_dump(mode="json")


def _http11(policy: str) -> tuple[dict, dict]:
    """HTTP/1.1 pipelined over one connection per session (section V-F)."""
    return _point(policy, "workload.http_version='1.1'")


def _rows(table) -> list[dict]:
    return [dict(zip([c.name for c in table.columns], r)) for r in table.rows]


def test_loss_beside_gives_the_high_share_at_the_bottleneck_and_the_share_spm_marked(store):
    rows = _rows(layouts.build("catnip-loss-beside", store, "set"))
    assert rows[0]["high_share"] == pytest.approx(100 / 300)
    assert rows[1]["marked_high"] == pytest.approx(0.4)  # 40 of 100 data segments
    assert rows[0]["marked_high"] is None  # no marker counters: no figure, not 0


def test_vs_first_point_names_each_points_policy_from_its_record(store):
    rows = _rows(layouts.build("catnip-vs-first-point", store, "set"))
    assert [(r["point"], r["policy"]) for r in rows] == [(1, "CATNIP-Good"), (2, "CATNIP-Bad"), (3, "RED")]
    assert "bad" in rows[0]["label"].lower() and "good" in rows[1]["label"].lower()  # the labels say otherwise
    assert {r["baseline_policy"] for r in rows} == {"DropTail"}


def test_pages_beside_puts_the_papers_table_of_what_ran(store):
    rows = _rows(layouts.build("catnip-pages-beside", store, "set"))
    by = {(r["point"], r["page"]): r for r in rows}
    assert len(rows) == 4 * 3  # four points, pages 1, 2 and 9
    dt1 = by[(0, 1)]
    assert (dt1["sender"], dt1["policy"], dt1["paper_table"]) == ("Reno", "DropTail", "Table II")
    assert dt1["n"] == 3 and dt1["mean"] == pytest.approx(0.33) and dt1["min"] == pytest.approx(0.3)
    # Table II, page 1: min 0.134, median 0.134, max 18.131, mean 1.058, sdev 2.613
    assert (dt1["paper_min"], dt1["paper_median"], dt1["paper_max"], dt1["paper_mean"], dt1["paper_sdev"]) == \
        pytest.approx((0.134, 0.134, 18.131, 1.058, 2.613))
    # point 1 is labelled CATNIP-Bad and ran CATNIP-Good: Table V (page 9: mean 0.230, sdev 0.070)
    good9 = by[(1, 9)]
    assert (good9["policy"], good9["paper_table"]) == ("CATNIP-Good", "Table V")
    assert (good9["paper_mean"], good9["paper_sdev"]) == pytest.approx((0.230, 0.070))
    assert by[(2, 2)]["paper_table"] == "Table VIII" and by[(2, 2)]["paper_mean"] == pytest.approx(1.445)
    red = by[(3, 1)]
    assert red["paper_table"] is None and red["paper_mean"] is None  # the paper prints no RED table


def test_pages_beside_puts_no_table_beside_http11(store):
    """Tables II-IX are HTTP/1.0's; section V-F (HTTP/1.1) gives its gains in words only."""
    catnip_run(store, "http11", "catnip-sim-http11", [
        ({"router.policy": {"kind": "droptail"}}, _http11("droptail"), 0.3, (100, 10, 200, 20))])
    rows = _rows(layouts.build("catnip-pages-beside", store, "http11"))
    assert rows and all(r["paper_table"] is None and r["paper_mean"] is None for r in rows)
    assert rows[0]["policy"] == "DropTail" and rows[0]["mean"] == pytest.approx(0.33)


def test_the_period_sets_queue_counted_in_bytes_is_the_simulations_not_a_wan_buffer(store):
    """scenarios/catnip-sim-routers-period.yaml counts the 10-packet queue as 5,520 bytes: the paper's
    rows go beside it; a 64 KB buffer is Table XI's WAN setup, with no simulation table beside it."""
    catnip_run(store, "bytes", "catnip-sim-routers-period", [
        ({"router.policy": {"kind": "catnip_good"}}, _point("catnip_good", "topology.bottleneck.buffer=5520B"), 0.2,
         (100, 1, 200, 30)),
        ({"router.policy": {"kind": "droptail"}}, _point("droptail", "topology.bottleneck.buffer=64KB"), 0.3,
         (100, 10, 200, 20))])
    loss = _rows(layouts.build("catnip-loss-beside", store, "bytes"))
    assert loss[0]["paper_row"] == "Table VII, Reno/CATNIP-Good" and loss[1]["paper_row"] is None
    pages = _rows(layouts.build("catnip-pages-beside", store, "bytes"))
    assert {r["paper_table"] for r in pages if r["point"] == 0} == {"Table V"}
    assert {r["paper_table"] for r in pages if r["point"] == 1} == {None}


def test_router_figures_find_a_point_by_the_policy_it_ran_not_its_label(store):
    table = layouts.build("catnip-loss-beside", store, "set")
    split = cc.router_loss(("CATNIP-Bad",), lambda r: cc._split(r, "CATNIP-Bad"))(table)
    assert split.text == "high 20.00% / low 5.00%" and split.kept == 1 and split.left_out == ()
    total = cc.router_loss(("CATNIP-Good", "DropTail"),
                           lambda r: f"{cc._pct(r['CATNIP-Good']['loss'])} against {cc._pct(r['DropTail']['loss'])}")(table)
    assert total.text == "10.33% against 10.00%" and total.kept == 2
    pages = cc.router_pages("CATNIP-Bad")(layouts.build("catnip-vs-first-point", store, "set"))
    # every page of the CATNIP-Bad point took 0.45/0.3 of DropTail's
    assert re.fullmatch(r"1\.50 ±\d\.\d\d of DropTail's page times \(per page 1\.50-1\.50\); faster on 0 of 3"
                        r" pages, 0 with the interval clear of 1\.00, slower so on 3", pages.text), pages.text
    good = cc.router_pages("CATNIP-Good")(layouts.build("catnip-vs-first-point", store, "set"))
    assert "0.67 ±" in good.text and "faster on 3 of 3 pages, 3 with the interval clear" in good.text


def test_router_figures_leave_a_late_point_out_and_refuse_what_is_unclear(store):
    store.update_point("set", 1, realtime_ok=0)  # CATNIP-Good's point missed real time
    fig = cc.router_loss(("CATNIP-Good", "DropTail"), lambda r: "x")(layouts.build("catnip-loss-beside", store, "set"))
    assert (fig.text, fig.kept, fig.left_out) == ("no point in real time", 0, ("CATNIP-Good",))
    fig = cc.router_pages("CATNIP-Good")(layouts.build("catnip-vs-first-point", store, "set"))
    assert fig.kept == 0 and fig.left_out == ("CATNIP-Good",)
    with pytest.raises(ClaimsError, match="compared with RED, not DropTail"):
        cc.router_pages("CATNIP-Good")(layouts.build("catnip-vs-first-point", store, "red-first"))
    with pytest.raises(ClaimsError, match="two points ran CATNIP-Good"):
        cc.router_loss(("CATNIP-Good",), lambda r: "x")(layouts.build("catnip-loss-beside", store, "twice"))
    with pytest.raises(ClaimsError, match="no point ran CATNIP-RED"):
        cc.router_pages("CATNIP-RED")(layouts.build("catnip-vs-first-point", store, "set"))


def test_the_router_claims_read_the_archived_router_set_run():
    manifest = json.loads((paths.REPO / "archive" / "MANIFEST.json").read_text())
    runs = manifest["runs"] if isinstance(manifest.get("runs"), dict) else {r["run_id"]: r for r in manifest["runs"]}
    entry = runs[cc.ROUTERS_RUN]
    assert entry["scenario"] == "scenarios/catnip-sim-routers.yaml"
    assert all(p["realtime_ok"] for p in entry["points"])
    measured = {c.key: c.measure for c in cc.CLAIMS if c.measure and c.measure.layout != "catnip-table-xi-beside"}
    assert set(measured) == {"droptail-loss", "good-split", "good-total", "good-pages", "bad-pages", "bad-split",
                             "red-pages", "catnip-red-pages", "marked-high"}
    assert all(m.runs == (cc.ROUTERS_RUN,) for m in measured.values())
