"""`catnip report`: what is reported (the view) apart from how (the format), refusals naming both
flags, and the page times' 95% interval (--interval t|bootstrap|median). Root-free: a recorded
database in a temporary folder."""

from __future__ import annotations

import csv
import io
import json
import random

import pytest
from click.testing import CliRunner

from catnip.cli import main as cli
from catnip.cli.main import main
from catnip.results import table as tables
from catnip.results import layouts, pooled, report, samples
from catnip.results.store import Store
from catnip.spec import scenario
from catnip.testbed.plan import plan
from tests.conftest import REPO


def _page(client: str, page: int, duration: float | None, error: str | None = None) -> dict:
    return {"client": client, "server": "ctpv1", "page": page, "round": 0, "start": 0, "end": 1,
            "duration": duration, "objects": 1, "bytes": 1, "error": error}


@pytest.fixture
def db(tmp_path):
    """Two runs of one scenario (two sweep points each) with heavy-tailed (lognormal) page times."""
    path = tmp_path / "db"
    rnd = random.Random(7)
    # What the points ran (their record): quick.yaml's dumbbell, whose server ctpv1 ran cubic.
    record = plan(scenario.load(REPO / "scenarios" / "quick.yaml").points[0][1]).model_dump(mode="json")
    with Store(path) as s:
        for run in ("s1", "s2"):
            s.create_run(run, "web", "x", {"name": "web"}, {}, 1, "abc", {}, {})
            for point, policy in enumerate(("droptail", "catnip_good")):
                s.create_point(run, point, 0, {"router.policy": {"kind": policy}}, {}, 1, record=record)
                s.update_point(run, point, realtime_ok=1, status="done")
                s.add_transfers(run, point, [], [_page(f"c{c}", pg, rnd.lognormvariate(0, 1))
                                                 for pg in (1, 2) for c in range(15)])
                final = {"links": {"b": {"arrived": {"high": [100, 1], "low": [900, 9]}, "sent": {},
                                         "dropped": {"high": [1, 0], "low": [9 + point, 0]}}}}
                s.add_link_stats(run, point, "r", final, {"b": "bottleneck-data"}, {}, {})
    return str(path)


def _report(db, *args):
    return CliRunner().invoke(main, ["report", *args, "--db", db])


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


# --- views and formats ------------------------------------------------------------------------------
def test_pool_csv_is_the_pooled_table(db):
    res = _report(db, "s1+s2", "--pool", "--csv")
    assert res.exit_code == 0, res.output
    with Store(db) as s:
        rep = pooled.pooled_runs_report(s, ["s1", "s2"])
    assert res.output == report.render_csv(rep).replace("\r\n", "\n")
    rows = _rows(res.output)
    # Pooled: 15 pages of each run per point and page, the runs joined in run_id.
    assert {r["run_id"] for r in rows} == {"s1+s2"} and {r["n"] for r in rows} == {"30"}
    # The flags' order does not matter: --csv --pool is the same, and not the un-pooled table.
    assert _report(db, "s1+s2", "--csv", "--pool").output == res.output
    assert {r["n"] for r in _rows(_report(db, "s1", "--csv").output)} == {"15"}


def test_pool_json_has_the_tables_loss_and_comparison(db):
    res = _report(db, "s1+s2", "--pool", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["pooled"]["runs"] == ["s1", "s2"] and doc["pooled"]["points"][0]["table"][0]["n"] == 30
    assert [r["drops"] for r in doc["loss"]] == [20, 22]
    assert doc["against"]["base"] == 0 and doc["against"]["columns"][0]["label"] == "CATNIP-Good"
    assert doc["no_comparison"] is None


def test_loss_and_by_sender_in_every_format(db):
    with Store(db) as s:
        table = layouts.build("catnip-loss", s, "s1")
    assert _report(db, "s1", "--loss").output == layouts.render_text(table) + "\n"
    assert _report(db, "s1", "--loss", "--csv").output == tables.render_csv(table).replace("\r\n", "\n")
    assert json.loads(_report(db, "s1", "--loss", "--json").output)["layout"] == "catnip-loss"
    text = _report(db, "s1", "--by-sender").output
    assert text.startswith("Page times and retransmissions by the servers' congestion control")
    doc = json.loads(_report(db, "s1", "--by-sender", "--json").output)
    assert [p["groups"][0]["pages"] for p in doc] == [30, 30]
    rows = _rows(_report(db, "s1", "--by-sender", "--csv").output)
    assert [(r["point"], r["servers"], r["pages"]) for r in rows] == [("0", "ctpv1", "30"), ("1", "ctpv1", "30")]
    assert float(rows[0]["mean"]) == pytest.approx(doc[0]["groups"][0]["mean"])


@pytest.mark.parametrize("args", [
    ["s1"], ["s1", "--json"], ["s1", "--csv"], ["s1", "--loss"], ["s1", "--by-sender"], ["s1", "--pool"],
    ["s1+s2", "--pool", "--realtime-only", "--against", "1"], ["s1", "--apps", "--csv"], ["s1", "--apps", "--json"],
    ["s1", "--layout", "catnip-loss"], ["s1", "--apps", "--layout", "app-metrics"], ["s1", "s2", "--layout",
                                                                                    "catnip-table-xi", "--csv"],
    ["--layouts"], ["--layouts", "--json"], ["s1", "--interval", "t", "--pool"],
])
def test_the_invocations_scripts_and_docs_use_still_work(db, args):
    res = _report(db, *args)
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("args, message", [
    (["s1", "--pool", "--loss"], "--loss and --pool: choose one view"),
    (["s1", "--by-sender", "--apps"], "--by-sender and --apps: choose one view"),
    (["s1", "--pool", "--layout", "catnip-loss"], "--pool and --layout catnip-loss: choose one view"),
    (["s1", "--json", "--csv"], "--json and --csv: choose one format"),
    (["s1", "--pool", "--json", "--csv"], "--json and --csv: choose one format"),
    (["--layouts", "--csv"], "--layouts and --csv: --layouts lists the layouts, as text or --json"),
    (["--layouts", "--loss"], "--layouts and --loss"),
    (["s1", "--interval", "bootstrap", "--pool"], "--interval bootstrap and --pool"),
    (["s1", "--interval", "median", "--loss"], "--interval median and --loss"),
    (["s1", "--realtime-only", "--loss"], "--realtime-only goes with --pool, not --loss"),
    (["s1+s2", "--loss"], "runs joined with '+' are pooled: add --pool (not --loss)"),
])
def test_conflicting_flags_are_refused_in_one_line_naming_both(db, args, message):
    res = _report(db, *args)
    assert res.exit_code == 2, res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0], res.output


# --- the page times' interval -------------------------------------------------------------------------
def _durations(db, run: str, point: int, page: int) -> list[float]:
    with Store(db) as s:
        return [p["duration"] for p in s.pages(run, point) if p["page"] == page and not p["error"]]


def test_interval_choices_are_the_statistics_module_s():
    assert cli.INTERVAL_KINDS == tuple(samples.INTERVALS)


@pytest.mark.parametrize("kind, head", [("t", "+-95%"), ("bootstrap", "Mean 95%"), ("median", "Median 95%")])
def test_report_shows_and_names_the_chosen_interval(db, kind, head):
    values = _durations(db, "s1", 0, 1)
    want = samples.interval(values, kind)
    text = _report(db, "s1", "--interval", kind).output
    assert f"Page times: {head} = {samples.INTERVALS[kind]}" in text
    header = next(line for line in text.splitlines() if line.strip().startswith("Page Conns"))
    assert head in header
    row = next(line for line in text.splitlines() if line.split()[:2] == ["1", "3"])
    if kind == "t":
        assert f"{(want.high - want.low) / 2:.3f}" in row.split()
    else:
        assert f"{want.low:.3f}..{want.high:.3f}" in row.split()
    doc = json.loads(_report(db, "s1", "--interval", kind, "--json").output)
    assert doc["interval"]["kind"] == kind
    first = doc["points"][0]["table"][0]
    assert (first["interval"], first["ci_low"], first["ci_high"]) == (kind, pytest.approx(want.low),
                                                                      pytest.approx(want.high))
    rows = _rows(_report(db, "s1", "--interval", kind, "--csv").output)
    if kind == "t":  # the default CSV keeps its columns (scripts read them)
        assert "ci_low" not in rows[0]
    else:
        assert (rows[0]["interval"], float(rows[0]["ci_low"]), float(rows[0]["ci_high"])) == \
            (kind, pytest.approx(want.low), pytest.approx(want.high))


def test_bootstrap_report_is_reproducible(db):
    first = _report(db, "s1", "--interval", "bootstrap", "--json").output
    assert first == _report(db, "s1", "--interval", "bootstrap", "--json").output
