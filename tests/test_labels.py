"""Human point labels (results/labels.py): every point of every scenario file gets one, distinct
within its file, with no raw dict in it; and the labels readers see are these."""

import glob
import json

import pytest

from catnip.results.labels import label_of, point_label, run_labels
from catnip.spec.scenario import load
from catnip.testbed.plan import plan

FILES = sorted(glob.glob("scenarios/*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.split("/")[-1])
def test_every_point_of_every_scenario_has_a_distinct_readable_label(path):
    sweep = load(path)
    labels = [point_label(a, sweep.sweep, plan(sc, seed=sc.seed)) for a, sc in sweep.points]
    assert all(labels), labels
    assert len(set(labels)) == len(labels), f"{path}: labels repeat: {labels}"
    for label in labels:
        assert "{" not in label and "'" not in label and "=" not in label, f"{path}: {label!r} is raw"
    # Without the sweep (a point alone) and without the record, still readable.
    for a, _ in sweep.points:
        alone = point_label(a)
        assert alone and "{" not in alone and "'" not in alone, alone


def _labels(name):
    sweep = load(f"scenarios/{name}.yaml")
    return [point_label(a, sweep.sweep, plan(sc, seed=sc.seed)) for a, sc in sweep.points]


def test_labels_say_what_the_paper_calls_each_point():
    assert _labels("catnip-sim-routers") == ["DropTail", "RED", "CATNIP-Good", "CATNIP-Bad", "CATNIP-RED"]
    assert _labels("catnip-sim-senders-droptail") == ["Reno", "Reno+RBPLW", "ECA", "ECA+RBPLW"]
    assert _labels("catnip-wan-baseline")[0] == "64 KB buffer"
    assert _labels("newcwv-fig11-fairness") == ["Reno", "newCWV", "newCWV, paced 200%"]
    assert _labels("sd-fig2-droptail")[0] == "5.4 Mbit/s"
    # The record turns senders into flows; good and mistuned RED are told apart by the threshold
    # that differs (Table 1: OUT max_th 200 KB or 30 KB); TailDrop has no twin, so no detail.
    grid = _labels("tcpf-grid")
    assert grid[0] == "TCPF+FRIO (max_th 200 KB), SACK, 100 flows"
    assert grid[2] == "TCPF(O)+RIO (max_th 200 KB), SACK, 100 flows"
    assert grid[5] == "DropTail, SACK, 100 flows"
    assert grid[-1] == "RED (max_th 30 KB), no SACK, 50 flows"
    assert _labels("quick") == ["single point"]


def test_a_value_alone_shows_all_it_sets():
    # No sweep to compare with: every field of the value, the queue first.
    a = {"topology.bottleneck": {"rate": "10Mbit", "buffer": "64KB", "policy": {"kind": "red", "w_q": 0.002}}}
    assert point_label(a) == "RED, 10 Mbit/s, 64 KB buffer"
    # Against its sweep, only what differs from the other values (and the queue, which it is).
    sweep = {"topology.bottleneck": [a["topology.bottleneck"], {**a["topology.bottleneck"], "rate": "5Mbit"}]}
    assert point_label(a, sweep) == "RED, 10 Mbit/s"
    assert point_label({}, sweep, default="quick") == "quick"


def test_values_that_read_the_same_are_told_apart():
    one = {"kind": "red", "min_th": "20%", "max_th": "60%"}
    two = {"kind": "red", "min_th": "10%", "max_th": "60%"}
    sweep = {"router.policy": [one, two]}
    assert point_label({"router.policy": one}, sweep) == "RED (min_th 20%)"
    assert point_label({"router.policy": two}, sweep) == "RED (min_th 10%)"


def test_stored_rows_are_labelled_from_the_run_sweep_and_the_point_record():
    sweep = load("scenarios/tcpf-quick.yaml")
    a, sc = sweep.points[0]
    run = {"sweep": json.dumps(sweep.sweep)}
    rows = [{"point": 0, "rep": r, "assignment": json.dumps(a), "record": plan(sc, seed=1).model_dump_json()}
            for r in (0, 1)]
    assert label_of(run, rows[0]) == "TCPF+FRIO"
    assert run_labels(run, rows) == {0: "TCPF+FRIO"}
    # A record this code cannot read does not cost the label, only the flows.
    bad = {**rows[0], "record": json.dumps({"version": 99})}
    assert label_of(run, bad) == "TCPF+FRIO"
