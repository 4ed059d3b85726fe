"""`catnip export RUN --tidy DIR` (results/tidy.py): a run's samples as one table per metric, a row
per sample with the run's metadata, read back value for value from CSV and from Parquet. The run
is written through the store's API as a run writes it (tests/test_archive.py's rich run: pages,
objects, queue samples, link counters, TCP counters, application samples with errors and markup,
a transfer trial; a second point that failed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from catnip.cli.archive import export_cmd
from catnip.results import tidy
from catnip.results.store import Store
from tests.test_archive import RUN, _record_rich

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is a dependency (pyproject.toml): setup installs it")


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "catnip.db"
    with Store(path) as store:
        _record_rich(store, RUN)
        with store.db:  # the sweep its second point comes from: the label reads it
            store.db.execute("UPDATE runs SET sweep=? WHERE id=?",
                             (json.dumps({"router.policy": [{"kind": "droptail"}, {"kind": "red"}]}), RUN))
    return path


def _export(db: Path, *args: str):
    return CliRunner().invoke(export_cmd, [RUN[:12], "--db", str(db), *args])


def _same(text: str, value) -> bool:
    """A CSV cell against the database's value: empty for NULL, floats exactly (repr)."""
    if value is None:
        return text == ""
    if isinstance(value, float):
        return float(text) == value or (math.isnan(value) and math.isnan(float(text)))
    return text == str(value)


def test_every_sample_round_trips_with_the_run_metadata(db, tmp_path):
    out = tmp_path / "tidy"
    res = _export(db, "--tidy", str(out))
    assert res.exit_code == 0, res.output
    assert f"run {RUN}:" in res.output and "csv and parquet" in res.output
    with Store(db) as store:
        points = {p["point"]: p for p in store.points(RUN)}
        expected = {"page_time": "pages", "object_time": "objects", "queue": "queue_samples",
                    "link_counters": "link_stats", "link_summary": "link_summary", "tcp_counters": "tcp_counters",
                    "transfer_trials": "transfer_trials"}
        metrics = store.db.execute("SELECT DISTINCT app, metric FROM samples WHERE run_id=?", (RUN,)).fetchall()
        wanted = {**expected, **{f"{m['app']}.{m['metric']}": "samples" for m in metrics}}
        assert {p.stem for p in out.glob("*.csv")} == {*wanted, "points"}
        assert {p.stem for p in out.glob("*.parquet")} == {*wanted, "points"}
        for stem, table in wanted.items():
            where = ""
            if table == "samples":
                app, metric = stem.split(".")
                where = f" AND app='{app}' AND metric='{metric}'"
            rows = store.db.execute(f"SELECT * FROM {table} WHERE run_id=?{where} ORDER BY point, rowid",
                                    (RUN,)).fetchall()
            assert rows, stem
            csv_rows = tidy.read_csv(out / f"{stem}.csv")
            parquet = pq.read_table(out / f"{stem}.parquet").to_pylist()
            assert len(csv_rows) == len(parquet) == len(rows), stem
            for db_row, c, p in zip(rows, csv_rows, parquet):
                point = points[db_row["point"]]
                # The metadata of every row: the run, its scenario, the point and its human label.
                assert (c["run_id"], c["scenario"], c["point"], c["seed"]) == (RUN, "quick", str(point["point"]),
                                                                             str(point["seed"]))
                assert p["run_id"] == RUN and p["point"] == point["point"] and p["seed"] == point["seed"]
                assert c["point_label"] == p["point_label"] == ("single point" if point["point"] == 0 else "RED")
                rt = None if point["realtime_ok"] is None else bool(point["realtime_ok"])
                assert p["realtime_ok"] == rt and c["realtime_ok"] == {None: "", True: "true", False: "false"}[rt]
                for col in db_row.keys():
                    if col in ("run_id", "point"):
                        continue
                    assert _same(c[col], db_row[col]), (stem, col, c[col], db_row[col])
                    assert p[col] == db_row[col] or (isinstance(p[col], float) and p[col] == float(db_row[col])), \
                        (stem, col, p[col], db_row[col])
    pts = tidy.read_csv(out / "points.csv")
    assert [(r["point"], r["status"], json.loads(r["assignment"])) for r in pts] == \
        [("0", "done", {}), ("1", "failed", {"router.policy": {"kind": "red"}})]


def test_refusals_are_one_line(db, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.csv").write_text("keep")
    res = _export(db, "--tidy", str(full))
    assert res.exit_code != 0 and "not empty" in res.output and (full / "mine.csv").read_text() == "keep"
    res = _export(db, "--tidy", str(tmp_path / "t"), "--out", str(tmp_path / "x.gz"))
    assert res.exit_code != 0 and "--out and --tidy: give one" in res.output and not (tmp_path / "t").exists()
    res = CliRunner().invoke(export_cmd, ["nosuchrun", "--db", str(db), "--tidy", str(tmp_path / "u")])
    assert res.exit_code != 0 and "no run 'nosuchrun'" in res.output and not (tmp_path / "u").exists()


def test_the_docs_pandas_recipe_reads_an_export(db, tmp_path, monkeypatch):
    """docs/analysis.md's recipe ("In pandas"), run as printed on an export written where it looks
    (`quick-tables/`): page times per point label and page, the counts and means the database holds."""
    from tests.conftest import REPO
    docs = (REPO / "docs" / "analysis.md").read_text()
    recipe = docs.split("\n## In pandas\n", 1)[1].split("```python\n", 1)[1].split("```", 1)[0].strip().splitlines()
    monkeypatch.chdir(tmp_path)
    assert _export(db, "--tidy", "quick-tables").exit_code == 0
    names: dict = {}
    exec("\n".join(recipe[:-1]), names)
    described = eval(recipe[-1], names)  # the last line is the table a notebook cell shows
    with Store(db) as store:
        want = store.db.execute("SELECT point, page, COUNT(duration) n, AVG(duration) mean FROM pages"
                                " WHERE run_id=? GROUP BY point, page", (RUN,)).fetchall()
    label = {0: "single point", 1: "RED"}  # test_every_sample_round_trips_with_the_run_metadata's labels
    assert want and {(label[r["point"]], r["page"]): (r["n"], pytest.approx(r["mean"])) for r in want} == \
        {key: (row["count"], row["mean"]) for key, row in described.iterrows()}
