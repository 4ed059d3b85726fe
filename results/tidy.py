"""A run as tidy tables (`catnip export RUN --tidy DIR`, docs/analysis.md): one file per metric,
one row per sample, each row carrying the run's metadata, ready for pandas, R or a spreadsheet.

Every file starts with the same columns: run_id, scenario, point, rep, point_label (results/labels.py),
seed and realtime_ok (the point kept real time: true, false, or empty where unknown), then the
sample's own columns as the database holds them (docs/database.md gives their units and clocks).
The files:

* `points.csv`: one row per point, with its status and its sweep assignment (JSON);
* `page_time.csv` (web pages), `object_time.csv` (their objects), `queue.csv` (the engines' queue
  samples), `link_counters.csv` and `link_summary.csv` (per link direction), `tcp_counters.csv`,
  `transfer_trials.csv` (the hysteresis measurements): where the run has rows of them;
* `APP.METRIC.csv` for each application metric (`bulk.goodput.csv`, `telnet.echo_delay.csv`).

With pyarrow installed (scripts/setup.sh installs it), each file is also written as Parquet beside
the CSV, with the column types of the database (INTEGER as int64, REAL as float64, TEXT as string).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from catnip.results.labels import run_labels
from catnip.results.store import Store

META = (("run_id", "TEXT"), ("scenario", "TEXT"), ("point", "INTEGER"), ("rep", "INTEGER"),
        ("point_label", "TEXT"), ("seed", "INTEGER"), ("realtime_ok", "BOOLEAN"))
# file stem -> table: the tables whose rows are samples of one kind each.
TABLES = {"page_time": "pages", "object_time": "objects", "queue": "queue_samples", "link_counters": "link_stats",
          "link_summary": "link_summary", "tcp_counters": "tcp_counters", "transfer_trials": "transfer_trials"}
_SAFE = re.compile(r"[^A-Za-z0-9_-]+")


class TidyError(ValueError):
    """A tidy export that cannot be written (say what and why, in one line)."""


def _columns(store: Store, table: str) -> list[tuple[str, str]]:
    """The table's columns but run_id and point (the metadata gives them), with declared types."""
    info = store.db.execute(f"PRAGMA table_info({table})").fetchall()
    return [(r["name"], (r["type"] or "TEXT").upper()) for r in info if r["name"] not in ("run_id", "point")]


def _stem(app: str, metric: str) -> str:
    """A file name of letters, digits, _ and - for an application's metric (names come from plug-ins)."""
    return f"{_SAFE.sub('_', app).strip('_') or 'app'}.{_SAFE.sub('_', metric).strip('_') or 'metric'}"


def tables(store: Store, run_id: str) -> dict[str, tuple[list[tuple[str, str]], list[dict[str, Any]]]]:
    """Every tidy table of a run: stem -> (columns with types, rows as dicts), metadata first."""
    run = store.run(run_id)
    if run is None:
        raise TidyError(f"no run {run_id!r} in {store.path}")
    points = store.points(run_id)
    labels = run_labels(run, points)
    meta = {p["point"]: {"run_id": run_id, "scenario": run["name"], "point": p["point"], "rep": p["rep"],
                         "point_label": labels[p["point"]], "seed": p["seed"],
                         "realtime_ok": None if p["realtime_ok"] is None else bool(p["realtime_ok"])}
            for p in points}
    out: dict[str, tuple[list[tuple[str, str]], list[dict[str, Any]]]] = {}
    out["points"] = ([*META, ("status", "TEXT"), ("assignment", "TEXT")],
                     [{**meta[p["point"]], "status": p["status"], "assignment": p["assignment"]} for p in points])

    def rows_of(table: str, columns: list[tuple[str, str]], where: str = "", args: tuple = ()) -> list[dict]:
        names = ", ".join(f'"{c}"' for c, _ in columns)
        found = store.db.execute(f"SELECT point, {names} FROM {table} WHERE run_id=? {where} ORDER BY point, rowid",
                                 (run_id, *args)).fetchall()
        # A row of a point the run does not list (not written by a run) still says which point.
        return [{**meta.get(r["point"], {"run_id": run_id, "scenario": run["name"], "point": r["point"]}),
                 **{c: r[c] for c, _ in columns}} for r in found]

    for stem, table in TABLES.items():
        columns = _columns(store, table)
        rows = rows_of(table, columns)
        if rows:
            out[stem] = ([*META, *columns], rows)
    columns = _columns(store, "samples")
    metrics = store.db.execute("SELECT DISTINCT app, metric FROM samples WHERE run_id=? ORDER BY app, metric",
                               (run_id,)).fetchall()
    for m in metrics:
        stem = _stem(m["app"], m["metric"])
        rows = rows_of("samples", columns, "AND app=? AND metric=?", (m["app"], m["metric"]))
        if stem in out:  # two names that differ only in characters a file name cannot hold
            out[stem][1].extend(rows)
        else:
            out[stem] = ([*META, *columns], rows)
    return out


def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return v  # floats as repr: they read back exactly


def _arrow_type(pa: Any, kind: str) -> Any:
    if kind == "BOOLEAN":
        return pa.bool_()
    if "INT" in kind:
        return pa.int64()
    if kind in ("REAL", "FLOAT", "DOUBLE"):
        return pa.float64()
    return pa.string()


def _arrow_column(pa: Any, values: list[Any], kind: str) -> Any:
    """A column in its declared type; SQLite's affinity lets a row hold another (2.5 in an INTEGER
    column), and then the column is float64, or text where even that fails."""
    for t in (_arrow_type(pa, kind), pa.float64()):
        try:
            return pa.array(values, type=t)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            continue
    return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def write(store: Store, run_id: str, folder: Path) -> list[Path]:
    """Writes the run's tidy tables into `folder` (created; refused if it holds anything), CSV and,
    where pyarrow imports, Parquet. Returns the files written."""
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise TidyError(f"--tidy {folder}: {'not a folder' if not folder.is_dir() else 'not empty'}; give a new"
                        " or empty folder (nothing there is replaced)")
    data = tables(store, run_id)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # CSV alone: scripts/setup.sh installs pyarrow, a bare pip install may not
        pa = pq = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for stem, (columns, rows) in data.items():
            names = [c for c, _ in columns]
            path = folder / f"{stem}.csv"
            with path.open("w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(names)
                w.writerows([_csv_value(r.get(c)) for c in names] for r in rows)
            written.append(path)
            if pa is not None:
                arrays = [_arrow_column(pa, [r.get(c) for r in rows], kind) for c, kind in columns]
                pq.write_table(pa.Table.from_arrays(arrays, names=names), folder / f"{stem}.parquet")
                written.append(folder / f"{stem}.parquet")
    except OSError as exc:
        raise TidyError(f"--tidy {folder}: {exc.strerror or exc}") from None
    return written


def read_csv(path: Path) -> list[dict[str, str]]:
    """A tidy CSV back as rows of text (what a test or a quick script compares)."""
    with Path(path).open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
