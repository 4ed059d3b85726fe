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

import codecs
import gzip
import hashlib
import json
import math
import os
import sqlite3
import stat
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from catnip.results import import_schema, json_stream, run_ids
from catnip.results.store import SCHEMA_VERSION, Store

FORMAT = "catnip-run-export"
FORMAT_VERSION = 1
SUFFIX = ".catnip.json.gz"

# Columns the store writes as JSON text (results/store_runs.py: dumps, i.e. json.dumps(sort_keys=True)):
# an export may carry them decoded (json_columns), no other column.
JSON_COLUMNS = import_schema.JSON_COLUMNS
# What reading an export may cost (issue 47: a 4.2 MB gzip bomb of 4 GiB, /dev/zero, a FIFO). The
# largest export measured here is a few MB (a 100-client point with 100,000 samples: about 10 MB
# of JSON); the text is read whole, so these bound the memory an import takes too.
MAX_FILE_BYTES = 256 * 1024 * 1024   # the gzip'd file
MAX_TEXT_BYTES = 256 * 1024 * 1024   # the JSON it decompresses to
MAX_TABLES = 64
MAX_VALUE_CHARS = 64 * 1024 * 1024   # one value: a row, or a JSON column (import_schema: 16 MB each)
MAX_ROWS = 4_000_000                 # every table's rows together: 54,403 for a 2-point, 100-client run
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
    if folder.is_symlink() or not folder.is_dir():  # a link in place of the folder lists where it points
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
    why = run_ids.problem(run_id)
    if why is not None:  # e.g. '..' imported by an older version: its "folder" would be the data folder
        raise ArchiveError(f"run {why}: not exported (its folder would not be its own)")
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
    why = run_ids.problem(document.get("run_id"))  # the id names a folder: the one validator of every id
    if why is not None:
        raise _not_valid(path, f"run_id {why}")
    run_id = document["run_id"]
    tables = document.get("tables")
    if not isinstance(tables, dict) or "runs" not in tables or "points" not in tables:
        raise _not_valid(path, "it has no tables runs and points")
    if len(tables) > MAX_TABLES:
        raise _not_valid(path, f"it has {len(tables)} tables; a database has fewer than {MAX_TABLES}")
    for key in ("exported", "run_folder"):
        if document.get(key) is not None and not isinstance(document[key], dict):
            raise _not_valid(path, f"{key} is {type(document[key]).__name__}, not an object")
    exported = document.get("exported") or {}
    at, rev = exported.get("at"), exported.get("code_git_rev")
    if at is not None and (not isinstance(at, (int, float)) or isinstance(at, bool) or not math.isfinite(at)):
        raise _not_valid(path, f"exported.at is {str(at)[:40]!r}, not a time in seconds")
    if rev is not None and (not isinstance(rev, str) or len(rev) > import_schema.MAX_NAME):
        raise _not_valid(path, f"exported.code_git_rev {str(rev)[:60]!r} is not a git revision")
    folder = (document.get("run_folder") or {}).get("path")
    if folder is not None and (not isinstance(folder, str) or len(folder) > 4096):
        raise _not_valid(path, f"run_folder.path {str(folder)[:60]!r} is not a path")
    for name, t in tables.items():
        if not isinstance(t, dict):
            raise _not_valid(path, f"table {str(name)[:60]!r} is not an object")
        cols, decoded, rows = t.get("columns"), t.get("json_columns", []), t.get("rows")
        if (not isinstance(cols, list) or not cols or not all(isinstance(c, str) and len(c) <= 64 for c in cols)
                or len(set(cols)) != len(cols)):
            raise _not_valid(path, f"table {name[:60]!r} has no list of distinct column names")
        if not isinstance(decoded, list) or not all(isinstance(c, str) for c in decoded):
            raise _not_valid(path, f"table {name[:60]!r}: json_columns is not a list of column names")
        foreign = [c for c in decoded if c not in cols or c not in JSON_COLUMNS.get(name, ())]
        if foreign:  # e.g. the run id "decoded": it would be written back quoted
            raise _not_valid(path, f"table {name[:60]!r}: json_columns {', '.join(foreign)[:120]} are not JSON"
                                   f" columns of it (those are: {', '.join(JSON_COLUMNS.get(name, ())) or 'none'})")
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


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _gunzip(fh, path: Path, max_file: int, max_text: int, digest) -> Iterator[str]:
    """The text of a gzip file (every member of it), decompressed block by block as it is asked
    for, UTF-8 decoded; the file's bytes go into `digest`. Refused past max_file bytes of file or
    max_text of text, before holding more."""
    not_gzip = NotAnExport(f"{path} is not a catnip run export (not gzip'd; `catnip export` writes RUN{SUFFIX})")
    utf8 = codecs.getincrementaldecoder("utf-8")()
    read, size = 0, 0
    inflate, in_member = zlib.decompressobj(wbits=31), False

    def text(data: bytes, final: bool = False) -> str:
        try:
            return utf8.decode(data, final)
        except UnicodeDecodeError as exc:
            raise NotAnExport(f"{path} is not a catnip run export (gzip'd, but not UTF-8 text: byte"
                              f" {size - len(data) + exc.start})") from None

    while block := fh.read(1 << 20):
        read += len(block)
        if read > max_file:
            raise ArchiveError(f"{path} is larger than {max_file >> 20} MB, the most an import reads")
        digest.update(block)
        pending = block
        while pending:
            in_member = True
            try:
                # At most 1 MB at a time and what is still allowed, +1 to see it overflow: a bomb stops here.
                out = inflate.decompress(pending, min(1 << 20, max_text + 1 - size))
            except zlib.error:
                raise not_gzip from None
            size += len(out)
            if size > max_text:
                raise ArchiveError(f"{path} decompresses to more than {max_text >> 20} MB, the most an import"
                                   " reads (a run's export is a few MB)")
            if out:
                yield text(out)
            if inflate.eof:  # a member ended; another may follow (as `cat a.gz b.gz` makes)
                pending = inflate.unused_data
                inflate, in_member = zlib.decompressobj(wbits=31), False
            else:
                pending = inflate.unconsumed_tail
    if not read:
        raise NotAnExport(f"{path} is empty, not a catnip run export")
    if in_member:
        raise NotAnExport(f"{path} is not a catnip run export (gzip'd data cut short)") if size else not_gzip
    yield text(b"", final=True)


def read(path: Path, max_file: int | None = None, max_text: int | None = None) -> tuple[dict[str, Any], str]:
    """The checked document of an export file and the SHA-256 of the file. Only a regular file is
    read (opened without waiting on a FIFO), at most `max_file` bytes (MAX_FILE_BYTES) decompressing
    to at most `max_text` (MAX_TEXT_BYTES); decompressed and parsed as it is read
    (results/json_stream.py), so the whole text is never held: a gzip bomb, a device or a pipe is
    refused in one line, and text that is not JSON where it is met."""
    path = Path(path)
    max_file = MAX_FILE_BYTES if max_file is None else max_file
    max_text = MAX_TEXT_BYTES if max_text is None else max_text
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ArchiveError(f"cannot read {path}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ArchiveError(f"{path} is {_kind(mode)}, not a regular file: give the file `catnip export` wrote")
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as fh:
        try:
            document = json_stream.loads(_gunzip(fh, path, max_file, max_text, digest), MAX_VALUE_CHARS, MAX_ROWS)
        except json_stream.StreamError as exc:
            raise NotAnExport(f"{path} is not a catnip run export (gzip'd, but not a JSON document:"
                              f" {str(exc)[:160]})") from None
        except OSError as exc:
            raise ArchiveError(f"cannot read {path}: {exc.strerror or exc}") from None
    return check(document, path), digest.hexdigest()


@dataclass(frozen=True)
class Imported:
    run_id: str
    rows: int
    marked: bool  # the provenance was recorded (the schema has PROVENANCE_COLUMN)


def check_new_id(run_id: str) -> None:
    """The shape of a run id (it names the run's folder, data/runs/ID): results/run_ids.py, as
    `catnip run --run-id` and the dashboard's URLs."""
    try:
        run_ids.check(run_id, "--as")
    except run_ids.BadRunId as exc:
        raise ArchiveError(str(exc)) from None


def _check_tables(store: Store, document: dict[str, Any], source: str) -> None:
    """ArchiveError unless `store` has every table and column the document's rows fill."""
    written = document.get("exported", {}).get("schema_version") if isinstance(document.get("exported"), dict) \
        else None
    newer = f" (the export's schema version is {written}, this code's {SCHEMA_VERSION}: update this checkout)"
    present = set(run_tables(store.db))
    for name, t in document["tables"].items():
        if name not in present:
            raise ArchiveError(f"{source}: table {name[:60]!r} is not in {store.path}" + newer)
        have = set(_columns(store.db, name))
        missing = [c for c in t["columns"] if c not in have]
        if missing:
            raise ArchiveError(f"{source}: table {name} has columns {', '.join(missing)[:200]} that {store.path}"
                               " lacks" + newer)


_CHECKERS: dict[tuple[str, tuple], Any] = {}


def _checker(db: sqlite3.Connection, table: str):
    """The row checker of `table` as this database declares it (results/import_schema.py)."""
    info = tuple((r[1], r[2], bool(r[3])) for r in db.execute(f'PRAGMA table_info("{table}")'))
    key = (table, info)
    if key not in _CHECKERS:
        _CHECKERS[key] = import_schema.row_model(table, list(info))
    return _CHECKERS[key]


def prepare_rows(store: Store, document: dict[str, Any], source: str) -> dict[str, tuple[list[str], list[list]]]:
    """Every table's rows checked against the schema of `store` (results/import_schema.py) and made
    ready to write: (columns, rows), JSON columns as the text the store holds (decoded ones encoded
    as the store writes them, text ones as they came). ArchiveError naming the first wrong value."""
    _check_tables(store, document, source)
    out = {}
    for name, t in document["tables"].items():
        cols = t["columns"]
        decoded = set(t.get("json_columns", []))
        json_cols = [i for i, c in enumerate(cols) if c in JSON_COLUMNS.get(name, ())]
        values, texts = t["rows"], t["rows"]  # a table without JSON columns is checked and written as it came
        try:
            if json_cols:  # the values checked (decoded) and the text written differ: two lists
                values, texts = [], []
                for n, r in enumerate(t["rows"]):
                    v, text = list(r), list(r)
                    for i in json_cols:
                        if r[i] is None:
                            continue
                        if cols[i] in decoded:
                            text[i] = _canonical(r[i])
                        else:
                            v[i] = import_schema.decode_json(name, cols[i], n, r[i])
                    values.append(v)
                    texts.append(text)
            import_schema.check_rows(name, _checker(store.db, name), cols, values)
        except import_schema.SchemaError as exc:
            raise ArchiveError(f"{source}: {exc}") from None
        out[name] = (cols, texts)
    return out


def _never_running(tables: dict[str, tuple[list[str], list[list]]], run_id: str) -> str | None:
    """A run recorded running (or queued) elsewhere has no runner here: the import makes it, and
    such points, `interrupted`, as `catnip list` marks a run whose runner died; what it measured
    is kept. Its finish is its last sign of life (a point's end, a progress row, its start).
    Returns the status it was imported with when it was changed."""
    cols, rows = tables["runs"]
    run = rows[0]
    status = run[cols.index("status")]
    if status not in import_schema.LIVE_STATUSES:
        return None
    note = (f"imported while recorded as {status}: its runner was on the machine it came from, so it is"
            " interrupted here")
    times = [run[cols.index("started")]] if "started" in cols else []
    if "points" in tables:
        pcols, prows = tables["points"]
        for p in prows:
            if "finished" in pcols and p[pcols.index("finished")] is not None:
                times.append(p[pcols.index("finished")])
            if p[pcols.index("status")] in import_schema.LIVE_STATUSES:
                p[pcols.index("status")] = "interrupted"
                if "error" in pcols:
                    p[pcols.index("error")] = note
    if "progress" in tables:
        gcols, grows = tables["progress"]
        times += [g[gcols.index("t")] for g in grows if "t" in gcols and g[gcols.index("t")] is not None]
    run[cols.index("status")] = "interrupted"
    if "error" in cols:
        error = run[cols.index("error")]
        run[cols.index("error")] = note if not error else f"{note}; {error}"[:import_schema.MAX_ERROR]
    if "finished" in cols and run[cols.index("finished")] is None:
        run[cols.index("finished")] = max((t for t in times if t is not None), default=None)
    return status


def import_run(store: Store, document: dict[str, Any], new_id: str | None = None, source: str = "",
               sha256: str | None = None) -> Imported:
    """Writes a checked document's rows into `store` in one transaction, under `new_id` or the
    run's own id: all of them, or (on any error) none. Every row is checked against the store's
    schema first (prepare_rows); a run recorded running is imported interrupted. RunExists if the
    id is taken."""
    old_id = document["run_id"]
    if new_id is not None:
        check_new_id(new_id)
    why = run_ids.problem(old_id)
    if why is not None:  # check() refuses it; a document built in code comes here too
        raise ArchiveError(f"{source}: run_id {why}")
    run_id = new_id or old_id
    if store.readonly:
        raise ArchiveError(f"{store.path} can only be read here (a read-only file system, folder or file): give"
                           " another --db")
    db = store.db
    tables = prepare_rows(store, document, source)
    was = _never_running(tables, run_id)
    order = ["runs", "points", *sorted(n for n in tables if n not in ("runs", "points"))]
    total = 0
    try:
        db.execute("BEGIN IMMEDIATE")  # the id check and the rows in one transaction
        if db.execute("SELECT 1 FROM runs WHERE id=?", (run_id,)).fetchone():
            raise RunExists(f"run {run_id} is already in {store.path}: import it under another id with --as NEW_ID")
        for name in order:
            cols, rows = tables[name]
            key = cols.index("id" if name == "runs" else "run_id")
            quoted = ", ".join(f'"{c}"' for c in cols)
            # Each row under the new id as it is written: the document (maybe the caller's) stays as it was.
            db.executemany(f'INSERT INTO "{name}" ({quoted}) VALUES ({", ".join("?" * len(cols))})',
                           ([*r[:key], run_id, *r[key + 1:]] for r in rows))
            total += len(rows)
        marked = PROVENANCE_COLUMN in _columns(db, "runs")
        if marked:
            rcols, rrows = tables["runs"]
            previous = rrows[0][rcols.index(PROVENANCE_COLUMN)] if PROVENANCE_COLUMN in rcols else None
            exported = document.get("exported") or {}
            db.execute(f'UPDATE runs SET "{PROVENANCE_COLUMN}"=? WHERE id=?', (_canonical({
                "file": Path(source).name, "file_sha256": sha256, "run_id": old_id, "exported_at": exported.get("at"),
                "exported_by": exported.get("code_git_rev"), "imported_at": time.time(),
                "run_folder": (document.get("run_folder") or {}).get("path"), "status_was": was,
                "earlier": None if previous is None else json.loads(previous)}), run_id))
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
    tables = {n: t for n, t in prepare_rows(store, document, source).items() if n != "runs"}
    pcols, prows = tables["points"]
    numbers = sorted({r[pcols.index("point")] for r in prows})  # whole numbers from 0 (prepare_rows)
    targets = [first_point + p for p in numbers]
    db = store.db
    total = 0
    try:
        db.execute("BEGIN IMMEDIATE")
        for name in ["points", *sorted(n for n in tables if n != "points")]:
            cols, rows = tables[name]
            key, at = cols.index("run_id"), cols.index("point")
            rows = [list(r) for r in rows]  # renumbered here: the document (maybe the caller's) stays as it was
            for r in rows:
                r[key], r[at] = run_id, first_point + r[at]
                if name == "points" and environment is not None and "environment" in cols:
                    i = cols.index("environment")
                    env = json.loads(r[i]) if r[i] is not None else None
                    r[i] = _canonical({**(env if isinstance(env, dict) else {}), "cluster": environment})
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
