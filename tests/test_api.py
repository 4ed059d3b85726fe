"""The researcher's API (catnip/api.py, docs/api.md): loading as `catnip run` loads, the same
refusals, runs and tables as DataFrames with the run's metadata, and the example notebook run
whole as a script on a real network."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas
import pytest

import catnip
from catnip.results.store import Store
from tests.test_web_runlist import PAGE_RUN, _record_page_run

REPO = Path(__file__).resolve().parent.parent


def test_load_takes_overrides_and_seed_as_the_cli_does():
    sweep = catnip.load("quick", set=["topology.clients=3"], seed=7)
    (_, point), = sweep.points
    assert (point.topology.clients, point.seed) == (3, 7)


def test_a_scenario_built_in_code_is_kept_as_a_file(tmp_path):
    raw = {"name": "mine", "topology": {"clients": 2, "servers": 1, "client_link": {"rate": "10Mbit", "delay": "2ms", "buffer": "50p"},
                                        "server_link": {"rate": "10Mbit", "delay": "2ms", "buffer": "50p"}, "bottleneck": {"rate": "1.5Mbit", "delay": "5ms", "buffer": "10p"}},
           "router": {"policy": {"kind": "droptail"}}}
    path = catnip.scenario_file(raw, tmp_path)
    assert path.parent == tmp_path and path.name.startswith("mine-")
    assert catnip.scenario_file(raw, tmp_path) == path  # the same scenario, the same file
    sweep = catnip.load(path)
    assert sweep.points[0][1].topology.clients == 2


def test_the_docs_scenario_built_in_code_loads_as_printed(isolated_data):
    """docs/api.md's scenario written as a dict, run as printed: its two clients overridden to four,
    kept as a file under the data folder."""
    text = (REPO / "docs" / "api.md").read_text()
    block = next(b for b in text.split("```python\n")[1:] if b.startswith("mine = {")).split("```", 1)[0]
    names = {"catnip": catnip}
    exec(block, names)
    (_, point), = names["sweep"].points
    assert point.router.policy.kind == "droptail" and point.topology.clients == 4
    assert names["sweep"].name == "mine" and list((isolated_data / "data" / "scenarios").glob("mine-*.yaml"))


@pytest.mark.parametrize("scenario, kwargs, message", [
    ("quick", {"set": ["topology.clients=zero"]}, r"invalid scenario .*topology.clients"),
    ("no-such-scenario", {}, r"no-such-scenario"),
    ({"name": "../up"}, {}, r"run id|letters"),
    ([1, 2], {}, r"a scenario is a file, a name in scenarios/ or a mapping"),
])
def test_bad_input_is_refused_in_words(scenario, kwargs, message):
    with pytest.raises(catnip.Refused, match=message):
        catnip.load(scenario, **kwargs)


def test_runs_and_tables_are_dataframes_with_the_runs_metadata(tmp_path):
    db = tmp_path / "catnip.db"
    with Store(db) as store:
        _record_page_run(store)
    runs = catnip.runs(db)
    assert list(runs["run_id"]) == [PAGE_RUN]
    assert runs.loc[0, "points_realtime"] == 0 and runs.loc[0, "points"] == 1
    run = catnip.open_run(PAGE_RUN, db)
    pages = run.table("page_time")
    assert isinstance(pages, pandas.DataFrame) and len(pages) == 6
    assert {"run_id", "scenario", "point_label", "seed", "realtime_ok"} <= set(pages.columns)
    assert str(pages["duration"].dtype) == "float64" and str(pages["realtime_ok"].dtype) == "boolean"
    assert pages.groupby("page")["duration"].mean().round(3).to_dict() == {1: 1.067, 2: 2.1}
    table = run.layout("catnip-table-ii")
    assert table.attrs["paper"] == "CATNIP Table II" and len(table) == 2
    with pytest.raises(KeyError, match="no table 'nope'"):
        run.table("nope")
    with pytest.raises(KeyError, match="no run 'absent'"):
        catnip.open_run("absent", db)


def test_catnip_imports_nothing_heavy():
    """`import catnip` runs in every program started in an emulated host: it must not pull in
    pandas, pydantic or Flask until the API is used."""
    code = "import sys, catnip; print(sorted(m for m in ('pandas', 'pydantic', 'flask', 'catnip.api') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.netns
@pytest.mark.slow
def test_the_example_notebook_runs_whole(tmp_path, no_leftovers):
    figure = tmp_path / "fig5.svg"
    out = subprocess.run([sys.executable, str(REPO / "examples" / "api_table_ii.py"), "3", str(tmp_path / "c.db"),
                          str(figure)], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert "CATNIP Table II" in out.stdout
    # CATNIP's Fig. 5 drawn from the run, the paper's Table II bars beside ours (issue 48: a paper
    # figure reproduced from scratch by the notebook)
    assert f"figure {figure}" in out.stdout
    svg = figure.read_text()
    assert svg.startswith("<svg") and "CATNIP Fig. 5" in svg
    assert "ours: quick, DropTail, 3 clients" in svg and "the paper: Table II, Reno/DropTail" in svg
    run_id = out.stdout.split("run ", 1)[1].split()[0]
    run = catnip.open_run(run_id, tmp_path / "c.db")
    assert run.status == "done"
    assert len(run.table("page_time")) == 30  # 3 clients x 10 pages
