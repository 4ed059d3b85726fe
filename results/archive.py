"""One run as one file a researcher can take elsewhere, and back into a database.

`export_run` gathers every row the database holds for a run (the `runs` row and the rows of every
table keyed by `run_id`: points with their metadata, pages, objects, link counters and
summaries, queue samples, progress, TCP counters, transfer trials, application samples), the
schema that holds them, and a list of the run's folder (runs/RUN_ID beside the database: configs, logs,
captures) with sizes and SHA-256 sums; `write` stores it as one gzip'd JSON document
(RUN_ID.catnip.json.gz, like Flent's .flent.gz). `read` checks a file is such a document of a
format version this code knows; `import_run` writes its rows into a database in one transaction,
under the run's id or a new one. The format is described in docs/database.md.

Values are carried exactly: rows in the order they were stored (rowid: readers that break ties
by it, e.g. Store.samples, see them in the same order), numbers as JSON numbers (floats by their
shortest exact repr), and a JSON-text column decoded into JSON only where re-encoding it gives
back the stored text byte for byte (else it stays a string, and is not listed in json_columns).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sqlite3
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from results.store import RUN_ID, SCHEMA_VERSION, Store

FORMAT = "catnip-run-export"
FORMAT_VERSION = 1
SUFFIX = ".catnip.json.gz"

# Columns the store writes as JSON text (results/store.py: _dumps, i.e. json.dumps(sort_keys=True)).
JSON_COLUMNS = {
    "runs": ("scenario", "sweep", "versions", "capabilities"),
    "points": ("assignment", "resolved", "fidelity", "sysctls", "offloads", "marking", "environment",
               "environment_after"),
    "link_stats": ("config",),
}
# Where an import records where the run came from (runs.imported, schema version 8; an older
# database without the column imports the run unmarked).
PROVENANCE_COLUMN = "imported"


class ArchiveError(ValueError):
    """An export or import that cannot be done; the message is one line saying why."""


class NotAnExport(ArchiveError):
    pass


class NewerFormat(ArchiveError):
    pass


class RunExists(ArchiveError):
    pass


class ImportFailed(ArchiveError):
    """The database refused a write (full, locked, read-only, a constraint): nothing was imported."""


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]


def run_tables(db: sqlite3.Connection) -> list[str]:
    """`runs`, `points` (their rows reference runs), then every other table with a run_id column,
    by name: what a run owns, found in the schema so a table a migration adds is carried too."""
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite%'"
                                      " ORDER BY name")]
    keyed = [n for n in names if n not in ("runs", "points") and "run_id" in _columns(db, n)]
    return ["runs", "points", *keyed]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _decodable(values: list[Any]) -> bool:
    """Every value is NULL or JSON text that decodes to something other than null and encodes back
    to exactly the same text (so the import writes the very bytes the export read)."""
    for v in values:
        if v is None:
            continue
        if not isinstance(v, str):
            return False
        try:
            decoded = json.loads(v)
        except ValueError:
            return False
        if decoded is None or _canonical(decoded) != v:
            return False
    return True


def _table(db: sqlite3.Connection, table: str, run_id: str) -> dict[str, Any]:
    cols = _columns(db, table)
    key = "id" if table == "runs" else "run_id"
    quoted = ", ".join(f'"{c}"' for c in cols)
    rows = [list(r) for r in db.execute(f'SELECT {quoted} FROM "{table}" WHERE "{key}"=? ORDER BY rowid', (run_id,))]
    for r in rows:
        for c, v in zip(cols, r):
            if isinstance(v, bytes):
                raise ArchiveError(f"table {table} column {c} of run {run_id} holds binary data, which an export"
                                   " does not carry")
    decoded = [c for c in JSON_COLUMNS.get(table, ()) if c in cols
               and _decodable([r[cols.index(c)] for r in rows])]
    for c in decoded:
        i = cols.index(c)
        for r in rows:
            if r[i] is not None:
                r[i] = json.loads(r[i])
    return {"columns": cols, "json_columns": decoded, "rows": rows}


def run_folder_manifest(folder: Path) -> dict[str, Any] | None:
    """The regular files of a run's folder (links not followed): path relative to it, size and
    SHA-256, so a copy sent beside the export can be checked; None when there is no folder."""
    if not folder.is_dir():
        return None
    files = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = Path(root) / name
            if path.is_symlink() or not path.is_file():
                continue
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            files.append({"path": path.relative_to(folder).as_posix(), "bytes": path.stat().st_size,
                          "sha256": h.hexdigest()})
    return {"path": str(folder), "files": files}


def export_run(store: Store, run_id: str, folder: Path | None = None, code_rev: str | None = None
               ) -> dict[str, Any]:
    """The export document of run `run_id` (its exact id). `folder` is the run's folder (listed,
    not included); `code_rev` the exporting code's git revision."""
    run = store.run(run_id)
    if run is None:
        raise ArchiveError(f"no run {run_id!r} in {store.path} (`catnip list` shows the runs)")
    if run["status"] == "running":
        raise ArchiveError(f"run {run_id} is still running: export it once it has ended (a run whose runner"
                           " died is marked interrupted by `catnip list`)")
    db = store.db
    tables = {t: _table(db, t, run_id) for t in run_tables(db)}
    schema = {r[0]: r[1] for r in db.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"
                                             " AND name NOT LIKE 'sqlite%' ORDER BY type DESC, name")}
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "run_id": run_id,
        "exported": {"at": time.time(), "code_git_rev": code_rev, "schema_version": store.version()},
        "summary": {"name": run["name"], "status": run["status"], "seed": run["seed"], "git_rev": run["git_rev"],
                    "started": run["started"], "finished": run["finished"],
                    "rows": {t: len(v["rows"]) for t, v in tables.items()}},
        "schema": schema,
        "run_folder": run_folder_manifest(folder) if folder is not None else None,
        "tables": tables,
    }


def default_name(run_id: str) -> str:
    return run_id + SUFFIX


def write(document: dict[str, Any], path: Path) -> int:
    """Writes the document gzip'd (no name or time in the gzip header) to a new file `path`, whole
    or not at all (a temporary file renamed); refuses to replace a file. Returns its size."""
    path = Path(path)
    if path.exists():
        raise ArchiveError(f"{path} exists already: choose another --out, or remove it first")
    data = json.dumps(document, separators=(",", ":")).encode()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".export-", dir=path.parent)
    except OSError as exc:
        raise ArchiveError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as a file opened for writing would be (mkstemp makes 0600)
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            gz.write(data)
        try:
            os.link(tmp, path)  # fails if `path` appeared meanwhile: never replaces a file
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links
            if path.exists():
                raise FileExistsError from None
            os.replace(tmp, path)
    except FileExistsError:
        raise ArchiveError(f"{path} exists already: choose another --out, or remove it first") from None
    except OSError as exc:
        raise ArchiveError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path.stat().st_size


def _not_valid(path: Path, why: str) -> NotAnExport:
    return NotAnExport(f"{path} is not a valid catnip run export: {why}")


def _scalar(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float, str)) and not isinstance(v, bool))


def check(document: Any, path: Path) -> dict[str, Any]:
    """The document if it is an export this code can import; NotAnExport or NewerFormat otherwise."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise NotAnExport(f"{path} is not a catnip run export (a gzip'd JSON document written by `catnip export`)")
    version = document.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _not_valid(path, f"format_version {version!r} is not a whole number from 1")
    if version > FORMAT_VERSION:
        raise NewerFormat(f"{path} is export format version {version}; this code reads versions up to"
                          f" {FORMAT_VERSION}: update this checkout to import it")
    run_id = document.get("run_id")
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise _not_valid(path, f"run_id {str(run_id)[:120]!r} is not a run id")
    tables = document.get("tables")
    if not isinstance(tables, dict) or "runs" not in tables or "points" not in tables:
        raise _not_valid(path, "it has no tables runs and points")
    for name, t in tables.items():
        if not isinstance(t, dict):
            raise _not_valid(path, f"table {str(name)[:60]!r} is not an object")
        cols, decoded, rows = t.get("columns"), t.get("json_columns", []), t.get("rows")
        if (not isinstance(cols, list) or not cols or not all(isinstance(c, str) for c in cols)
                or len(set(cols)) != len(cols)):
            raise _not_valid(path, f"table {name[:60]!r} has no list of distinct column names")
        if not isinstance(decoded, list) or not set(decoded) <= set(cols):
            raise _not_valid(path, f"table {name[:60]!r}: json_columns are not among its columns")
        if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == len(cols) for r in rows):
            raise _not_valid(path, f"table {name[:60]!r}: every row must be a list of {len(cols)} values")
        key = "id" if name == "runs" else "run_id"
        if key not in cols:
            raise _not_valid(path, f"table {name[:60]!r} has no column {key}")
        k = cols.index(key)
        if any(r[k] != run_id for r in rows):
            raise _not_valid(path, f"table {name[:60]!r} has rows of another run than {run_id}")
        raw = [i for i, c in enumerate(cols) if c not in decoded]
        if any(not _scalar(r[i]) for r in rows for i in raw):
            raise _not_valid(path, f"table {name[:60]!r} has a value that is not a number, string or null")
    if len(tables["runs"]["rows"]) != 1:
        raise _not_valid(path, f"it holds {len(tables['runs']['rows'])} runs rows, not one")
    return document


def read(path: Path) -> tuple[dict[str, Any], str]:
    """The checked document of an export file and the SHA-256 of the file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ArchiveError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error):
        raise NotAnExport(f"{path} is not a catnip run export (not gzip'd; `catnip export` writes"
                          f" RUN{SUFFIX})") from None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # ValueError: not JSON, or not UTF-8
        raise NotAnExport(f"{path} is not a catnip run export (gzip'd, but not a JSON document)") from None
    return check(document, path), hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class Imported:
    run_id: str
    rows: int
    marked: bool  # the provenance was recorded (the schema has PROVENANCE_COLUMN)


def check_new_id(run_id: str) -> None:
    """The shape of a run id (it names the run's folder, data/runs/ID), as `catnip run --run-id`."""
    if not RUN_ID.fullmatch(run_id) or run_id.startswith((".", "-")):
        raise ArchiveError(f"--as {run_id[:120]!r}: a run id is letters, digits, '.', '_' and '-', at most 100,"
                           " starting with a letter or digit")


def _check_tables(store: Store, document: dict[str, Any], source: str) -> None:
    """ArchiveError unless `store` has every table and column the document's rows fill."""
    written = document.get("exported", {}).get("schema_version") if isinstance(document.get("exported"), dict) \
        else None
    newer = f" (the export's schema version is {written}, this code's {SCHEMA_VERSION}: update this checkout)"
    present = set(run_tables(store.db))
    for name, t in document["tables"].items():
        if name not in present:
            raise ArchiveError(f"{source}: table {name[:60]!r} is not in {store.path}" + newer)
        missing = [c for c in t["columns"] if c not in _columns(store.db, name)]
        if missing:
            raise ArchiveError(f"{source}: table {name} has columns {', '.join(missing)[:200]} that {store.path}"
                               " lacks" + newer)


def import_run(store: Store, document: dict[str, Any], new_id: str | None = None, source: str = "",
               sha256: str | None = None) -> Imported:
    """Writes a checked document's rows into `store` in one transaction, under `new_id` or the
    run's own id: all of them, or (on any error) none. RunExists if the id is taken."""
    old_id = document["run_id"]
    if new_id is not None:
        check_new_id(new_id)
    run_id = new_id or old_id
    if store.readonly:
        raise ArchiveError(f"{store.path} can only be read here (a read-only file system, folder or file): give"
                           " another --db")
    db = store.db
    tables = document["tables"]
    _check_tables(store, document, source)
    order = ["runs", "points", *sorted(n for n in tables if n not in ("runs", "points"))]
    total = 0
    try:
        db.execute("BEGIN IMMEDIATE")  # the id check and the rows in one transaction
        if db.execute("SELECT 1 FROM runs WHERE id=?", (run_id,)).fetchone():
            raise RunExists(f"run {run_id} is already in {store.path}: import it under another id with --as NEW_ID")
        for name in order:
            t = tables[name]
            cols = t["columns"]
            key = cols.index("id" if name == "runs" else "run_id")
            decoded = [cols.index(c) for c in t.get("json_columns", [])]
            rows = []
            for r in t["rows"]:
                r = list(r)
                r[key] = run_id
                for i in decoded:
                    if r[i] is not None:
                        r[i] = _canonical(r[i])
                rows.append(r)
            quoted = ", ".join(f'"{c}"' for c in cols)
            db.executemany(f'INSERT INTO "{name}" ({quoted}) VALUES ({", ".join("?" * len(cols))})', rows)
            total += len(rows)
        marked = PROVENANCE_COLUMN in _columns(db, "runs")
        if marked:
            previous = tables["runs"]["rows"][0][tables["runs"]["columns"].index(PROVENANCE_COLUMN)] \
                if PROVENANCE_COLUMN in tables["runs"]["columns"] else None
            exported = document.get("exported") if isinstance(document.get("exported"), dict) else {}
            db.execute(f'UPDATE runs SET "{PROVENANCE_COLUMN}"=? WHERE id=?', (_canonical({
                "file": Path(source).name, "file_sha256": sha256, "run_id": old_id, "exported_at": exported.get("at"),
                "exported_by": exported.get("code_git_rev"), "imported_at": time.time(), "earlier": previous}),
                run_id))
        db.commit()
    except sqlite3.Error as exc:
        db.rollback()
        raise ImportFailed(f"cannot import {source} into {store.path}: {exc}; nothing was imported") from None
    except BaseException:
        db.rollback()
        raise
    return Imported(run_id, total, marked)


def merge_points(store: Store, document: dict[str, Any], run_id: str, first_point: int,
                 environment: dict[str, Any] | None = None, source: str = "") -> int:
    """Writes the points of a checked document (a run of one sweep point's repetitions, run
    elsewhere: controller/cluster.py) into run `run_id` of `store`, its point p as point
    first_point + p, in one transaction; what the run held for those points before (a start
    recorded while the point ran elsewhere, an earlier attempt) is replaced. `environment` is
    added to each point's environment record under "cluster". The `runs` row is not carried: the
    run is the store's own. Returns the rows written."""
    if store.run(run_id) is None:
        raise ArchiveError(f"no run {run_id!r} in {store.path} to merge points into")
    _check_tables(store, document, source)
    tables = {n: t for n, t in document["tables"].items() if n != "runs"}
    numbers = sorted({r[tables["points"]["columns"].index("point")] for r in tables["points"]["rows"]})
    if any(not isinstance(p, int) or p < 0 for p in numbers):
        raise ArchiveError(f"{source}: point numbers {numbers[:5]} are not whole numbers from 0")
    targets = [first_point + p for p in numbers]
    db = store.db
    total = 0
    try:
        db.execute("BEGIN IMMEDIATE")
        for name in ["points", *sorted(n for n in tables if n != "points")]:
            t = tables[name]
            cols = t["columns"]
            key, at = cols.index("run_id"), cols.index("point")
            decoded = [cols.index(c) for c in t.get("json_columns", [])]
            rows = []
            for r in t["rows"]:
                r = list(r)
                r[key], r[at] = run_id, first_point + r[at]
                if name == "points" and environment is not None and "environment" in cols:
                    i = cols.index("environment")
                    env = r[i] if i in decoded else json.loads(r[i]) if r[i] is not None else None
                    env = {**(env if isinstance(env, dict) else {}), "cluster": environment}
                    r[i] = env if i in decoded else _canonical(env)
                for i in decoded:
                    if r[i] is not None:
                        r[i] = _canonical(r[i])
                rows.append(r)
            marks = ", ".join("?" * len(targets))
            db.execute(f'DELETE FROM "{name}" WHERE run_id=? AND point IN ({marks})', (run_id, *targets))
            quoted = ", ".join(f'"{c}"' for c in cols)
            db.executemany(f'INSERT INTO "{name}" ({quoted}) VALUES ({", ".join("?" * len(cols))})', rows)
            total += len(rows)
        db.commit()
    except sqlite3.Error as exc:
        db.rollback()
        raise ImportFailed(f"cannot merge {source} into run {run_id} of {store.path}: {exc}; nothing was merged") \
            from None
    except BaseException:
        db.rollback()
        raise
    return total
