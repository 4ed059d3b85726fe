"""SQLite storage of runs: one file, one writer per run, WAL so readers never block it.

A run (one `catnip run`) has points (sweep value combinations x repetitions). Every table keys on
(run_id, point); a failed point keeps what it recorded and never touches other runs.

Schema versions: the file's `PRAGMA user_version` counts the migrations applied to it. SCHEMA is
version 0 (never edit it: tables created if missing, without the columns migrations 1-4 add); MIGRATIONS[i] takes version i to
i + 1. Opening a file applies the missing migrations in order, all in one transaction with the
version bump (a failure or crash leaves the file as it was); a file at the current version is not
written to; a file newer than this code is refused (StoreVersionError). Files written before versions
existed are at version 0 and may already have some of the columns of migrations 1-4 (they were
added by column checks on every open): those migrations add a column only where it is missing.
A new table or column is a new migration appended to MIGRATIONS, nothing else.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

# Version 0, created where missing. Later tables and columns are MIGRATIONS, never edits here.
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, source TEXT, scenario TEXT NOT NULL, sweep TEXT NOT NULL,
  seed INTEGER, git_rev TEXT, versions TEXT, capabilities TEXT,
  started REAL, finished REAL, status TEXT NOT NULL, error TEXT
);
CREATE TABLE IF NOT EXISTS points (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, point INTEGER NOT NULL,
  rep INTEGER NOT NULL, assignment TEXT NOT NULL, resolved TEXT NOT NULL, seed INTEGER,
  switch_kind TEXT, link_backend TEXT, started REAL, finished REAL, status TEXT NOT NULL, error TEXT,
  realtime_ok INTEGER, fidelity TEXT, sysctls TEXT, offloads TEXT, capture TEXT,
  PRIMARY KEY (run_id, point)
);
CREATE TABLE IF NOT EXISTS objects (
  run_id TEXT NOT NULL, point INTEGER NOT NULL, client TEXT, server TEXT, page INTEGER,
  round INTEGER, url TEXT, conn INTEGER, start REAL, connect_done REAL, first_byte REAL, "end" REAL,
  body_bytes INTEGER, header_bytes INTEGER, status INTEGER, error TEXT
);
CREATE TABLE IF NOT EXISTS pages (
  run_id TEXT NOT NULL, point INTEGER NOT NULL, client TEXT, server TEXT, page INTEGER,
  round INTEGER, start REAL, "end" REAL, duration REAL, objects INTEGER, bytes INTEGER, error TEXT
);
CREATE TABLE IF NOT EXISTS link_stats (
  run_id TEXT NOT NULL, point INTEGER NOT NULL, router TEXT, link TEXT, role TEXT, config TEXT,
  class TEXT, arrived_pkts INTEGER, arrived_bytes INTEGER, sent_pkts INTEGER, sent_bytes INTEGER,
  dropped_pkts INTEGER, dropped_bytes INTEGER
);
CREATE TABLE IF NOT EXISTS link_summary (
  run_id TEXT NOT NULL, point INTEGER NOT NULL, router TEXT, link TEXT, role TEXT,
  max_queue_pkts INTEGER, max_queue_bytes INTEGER, late_events INTEGER, max_late_us REAL,
  kernel_queue_dropped INTEGER, kernel_user_dropped INTEGER
);
CREATE TABLE IF NOT EXISTS queue_samples (
  run_id TEXT NOT NULL, point INTEGER NOT NULL, router TEXT, link TEXT, t REAL,
  queue_pkts INTEGER, queue_bytes INTEGER, sent_bytes INTEGER, dropped_pkts INTEGER
);
CREATE TABLE IF NOT EXISTS progress (
  run_id TEXT NOT NULL, point INTEGER NOT NULL, t REAL, elapsed REAL, phase TEXT,
  pages_done INTEGER, pages_total INTEGER
);
CREATE TABLE IF NOT EXISTS tcp_counters (
  run_id TEXT NOT NULL, point INTEGER NOT NULL, host TEXT, counter TEXT, value INTEGER
);
CREATE TABLE IF NOT EXISTS transfer_trials (
  run_id TEXT NOT NULL, point INTEGER NOT NULL, profile TEXT, p REAL, p_high REAL, trial INTEGER,
  size INTEGER, packets INTEGER, latency REAL, data_segments INTEGER, retransmissions INTEGER,
  high_segments INTEGER, error TEXT
);
CREATE INDEX IF NOT EXISTS transfer_trials_run ON transfer_trials(run_id, point);
CREATE INDEX IF NOT EXISTS pages_run ON pages(run_id, point);
CREATE INDEX IF NOT EXISTS objects_run ON objects(run_id, point);
CREATE INDEX IF NOT EXISTS link_stats_run ON link_stats(run_id, point);
CREATE INDEX IF NOT EXISTS samples_run ON queue_samples(run_id, point);
CREATE INDEX IF NOT EXISTS tcp_run ON tcp_counters(run_id, point);
CREATE INDEX IF NOT EXISTS progress_run ON progress(run_id, point);
"""



class StoreVersionError(RuntimeError):
    """The file's schema is newer than this code knows."""


class StoreReadOnly(sqlite3.OperationalError):
    """The database cannot be written here (read-only file system, folder or file); the message
    is one line naming the file and what to do."""


class StoreFull(sqlite3.OperationalError):
    """The disk holding the database is full (SQLite's SQLITE_FULL)."""


# SQLite's primary result codes (the low byte of sqlite_errorcode) told apart here.
_READONLY, _CANTOPEN, _FULL, _PERM = 8, 14, 13, 3
RESERVE_BYTES = 1024 * 1024  # kept beside the database while a run records: room for its final status


@dataclass(frozen=True)
class Migration:
    """One step, version n -> n + 1: `apply` runs inside the step's transaction."""
    what: str
    apply: Callable[[sqlite3.Connection], None]


def _statements(sql: str) -> list[str]:
    """A script's statements (executescript would commit the migration's transaction midway)."""
    out, current = [], ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            out.append(current.strip())
            current = ""
    if current.strip():
        raise ValueError(f"incomplete SQL statement: {current.strip()!r}")
    return out


def sql(script: str, what: str | None = None) -> Migration:
    """A migration that runs SQL statements."""
    def apply(db: sqlite3.Connection) -> None:
        for statement in _statements(script):
            db.execute(statement)
    return Migration(what or " ".join(script.split())[:80], apply)


def add_column(table: str, column: str, kind: str) -> Migration:
    """A column added where missing (files from before versions may already have it)."""
    def apply(db: sqlite3.Connection) -> None:
        if column not in {r[1] for r in db.execute(f"PRAGMA table_info({table})")}:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    return Migration(f"{table}.{column}", apply)


# MIGRATIONS[i] takes a file from version i to i + 1; append only, never reorder or edit a shipped one.
MIGRATIONS: list[Migration] = [
    add_column("queue_samples", "dropped_high", "INTEGER"),  # 1
    add_column("queue_samples", "dropped_low", "INTEGER"),   # 2
    add_column("points", "marking", "TEXT"),                 # 3
    add_column("runs", "runner", "TEXT"),                    # 4
    sql("""
CREATE TABLE IF NOT EXISTS samples (
  run_id TEXT NOT NULL, point INTEGER NOT NULL, app TEXT NOT NULL, metric TEXT NOT NULL, host TEXT, peer TEXT,
  flow TEXT, tag TEXT, t REAL, value REAL, unit TEXT, error TEXT
);
CREATE INDEX IF NOT EXISTS samples_metric ON samples(run_id, point, app, metric);
""", "samples: per-sample metrics of any application"),  # 5
    add_column("points", "environment", "TEXT"),             # 6: testbed/metadata.py, before the workload
    add_column("points", "environment_after", "TEXT"),       # 7: and after it
    add_column("runs", "imported", "TEXT"),                  # 8: where an imported run came from (results/archive.py)
    add_column("points", "record", "TEXT"),                  # 9: the resolved record of what ran (spec/record.py)
]
SCHEMA_VERSION = len(MIGRATIONS)

# The columns of a samples row (Store.add_samples); app and metric are required.
SAMPLE_KEYS = ("app", "metric", "host", "peer", "flow", "tag", "t", "value", "unit", "error")

CLASSES = ("high", "low", "lowest", "other")
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # a run id's shape; checked by results/run_ids.py


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


class Store:
    """`readonly` is true when the file could only be opened for reading (a read-only file
    system, or a folder or file this user cannot write): reading works; a run cannot be
    recorded (StoreReadOnly); closing abandoned runs is skipped."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.readonly = False
        self.migrated: list[int] = []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30)
        except OSError as exc:  # its folder cannot be made, or reached
            raise StoreReadOnly(f"cannot open {self.path}: {exc.strerror}") from None
        except sqlite3.OperationalError as exc:
            raise self._cannot_open(exc) from None
        self.db.row_factory = sqlite3.Row
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.migrated = self._upgrade()
        except sqlite3.OperationalError as exc:
            self.db.close()
            if _code(exc) not in (_READONLY, _CANTOPEN, _PERM):
                raise self._translate(exc) from None
            self._open_readonly(exc)
        except BaseException:
            self.db.close()
            raise

    def _cannot_open(self, exc: sqlite3.Error) -> sqlite3.Error:
        if not self.path.exists():
            return StoreReadOnly(f"cannot create {self.path}: {exc}")
        return self._translate(exc)

    def _open_readonly(self, first: sqlite3.Error) -> None:
        """Open for reading only, after `first` said writing is impossible here. A database whose
        write-ahead log exists needs its -shm file to be read; without a log the file alone is
        the whole database and is read as immutable (no lock or -shm file is written)."""
        if not self.path.exists():
            raise StoreReadOnly(f"cannot create {self.path}: {first}") from None
        uri = f"file:{quote(str(self.path.resolve()))}"
        wal = Path(f"{self.path}-wal")
        try:
            self.db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30)
            version = self.version()
        except sqlite3.OperationalError:
            if wal.exists() and wal.stat().st_size > 0:
                raise StoreReadOnly(
                    f"cannot read {self.path}: it is read-only here ({first}) and its write-ahead log {wal.name} needs"
                    " a writable folder; read it where it is writable, or copy the files") from None
            try:
                self.db = sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=30)
                version = self.version()
            except sqlite3.Error as exc:
                raise StoreReadOnly(f"cannot read {self.path}: {exc}") from None
        self.db.row_factory = sqlite3.Row
        self.readonly = True
        try:
            self._refuse_newer(version)
        except StoreVersionError:
            self.db.close()
            raise
        if version < SCHEMA_VERSION:
            self.db.close()
            raise StoreReadOnly(f"{self.path} is read-only here ({first}) and at schema version {version}: this code"
                                f" reads version {SCHEMA_VERSION}; open it once where it is writable to upgrade it")

    def _translate(self, exc: sqlite3.Error) -> sqlite3.Error:
        """SQLite's error as one line naming the file: StoreFull, StoreReadOnly, or `exc` itself."""
        if isinstance(exc, (StoreFull, StoreReadOnly)):
            return exc
        code = _code(exc)
        if code == _FULL:
            return StoreFull(f"the disk holding {self.path} is full ({exc}): free some space, or record to another"
                             " --db")
        if code in (_READONLY, _PERM) or self.readonly:
            return StoreReadOnly(f"cannot write {self.path}: {exc} (a read-only file system, folder or file)")
        return exc

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One transaction; SQLite's errors translated (_translate)."""
        if self.readonly:
            raise StoreReadOnly(f"cannot write {self.path}: it was opened read-only (a read-only file system,"
                                " folder or file)")
        try:
            with self.db:
                yield
        except sqlite3.OperationalError as exc:
            raise self._translate(exc) from None

    def _reserve(self) -> Path:
        return Path(f"{self.path}-reserve")

    def keep_reserve(self) -> None:
        """Room for a run's final status (`_essential`): RESERVE_BYTES of a file of our own beside
        the database, written (not sparse) so the space is really taken. Best effort: a disk too
        full for it is reported by the writes that follow."""
        reserve = self._reserve()
        if reserve.exists() and reserve.stat().st_size >= RESERVE_BYTES:
            return
        try:
            with open(reserve, "wb") as fh:
                fh.write(bytes(RESERVE_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:
            reserve.unlink(missing_ok=True)

    def release_reserve(self) -> bool:
        try:
            self._reserve().unlink()
            return True
        except FileNotFoundError:
            return False

    def _essential(self, write: Callable[[], None]) -> None:
        """A write that records how a run or point ended: on a full disk the reserve is given back
        and the write tried once more, so the status says why the run failed instead of staying
        'running' (seen: a full disk left a run running, later called killed)."""
        try:
            with self._writing():
                write()
        except StoreFull:
            if not self.release_reserve():
                raise
            with self._writing():
                write()

    def version(self) -> int:
        return self.db.execute("PRAGMA user_version").fetchone()[0]

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreVersionError(
                f"{self.path} has schema version {version}, but this code knows versions up to {SCHEMA_VERSION}:"
                " it was written by a newer CATNIP testbed; update this checkout (or use another --db)")

    def _upgrade(self) -> list[int]:
        """Brings the file to SCHEMA_VERSION in one transaction (all missing steps or none); returns
        the versions it went through (empty if it was current: then nothing is written)."""
        version = self.version()
        self._refuse_newer(version)
        if version == SCHEMA_VERSION:
            return []
        # One process upgrades; another opening the file meanwhile waits for it, then reads the new version.
        self.db.execute("BEGIN IMMEDIATE")
        try:
            version = self.version()
            self._refuse_newer(version)
            if version == 0:  # the tables of version 0 the file lacks (all of them in a new file)
                for statement in _statements(SCHEMA):
                    self.db.execute(statement)
            done = list(range(version + 1, SCHEMA_VERSION + 1))
            for target in done:
                MIGRATIONS[target - 1].apply(self.db)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.db.commit()
        except BaseException:
            self.db.rollback()
            raise
        return done

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- writing -------------------------------------------------------------------------
    def create_run(self, run_id: str, name: str, source: str, scenario: dict, sweep: dict, seed: int,
                   git_rev: str, versions: dict, capabilities: dict, runner: str | None = None) -> None:
        """`runner` names the process that records the run (testbed.processes.identity), so a run
        whose runner died can be told from one still going. Keeps the reserve (keep_reserve) that
        lets its end be recorded on a full disk."""
        self.keep_reserve()
        with self._writing():
            self.db.execute(
                "INSERT INTO runs (id, name, source, scenario, sweep, seed, git_rev, versions, capabilities,"
                " started, status, runner) VALUES (?,?,?,?,?,?,?,?,?,?, 'running', ?)",
                (run_id, name, source, _dumps(scenario), _dumps(sweep), seed, git_rev, _dumps(versions),
                 _dumps(capabilities), time.time(), runner))

    def reopen_run(self, run_id: str, runner: str) -> None:
        """A run that ended taken up again by a new runner (`catnip run --cluster --resume`): it runs
        its points that are not done; the others stay as they are."""
        self.keep_reserve()
        with self._writing():
            self.db.execute("UPDATE runs SET status='running', error=NULL, finished=NULL, runner=? WHERE id=?",
                            (runner, run_id))

    def interrupt_run(self, run_id: str, error: str) -> None:
        """A run, and its points, still recorded as running though nothing runs them any more;
        finished at the last sign of life it left (a point's end or a progress row), not now."""
        if self.readonly:  # a reader of a read-only copy cannot record it; the next writer will
            return
        last = self.db.execute(
            "SELECT MAX(t) FROM (SELECT MAX(finished) AS t FROM points WHERE run_id=:r"
            " UNION ALL SELECT MAX(t) FROM progress WHERE run_id=:r UNION ALL SELECT started FROM runs WHERE id=:r)",
            {"r": run_id}).fetchone()[0]

        def write() -> None:
            self.db.execute("UPDATE runs SET status='interrupted', error=?, finished=? WHERE id=? AND status='running'",
                            (error, last, run_id))
            self.db.execute("UPDATE points SET status='interrupted', error=?, finished=?"
                            " WHERE run_id=? AND status='running'", (error, last, run_id))
        self._essential(write)

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        self._essential(lambda: self.db.execute("UPDATE runs SET status=?, error=?, finished=? WHERE id=?",
                                                (status, error, time.time(), run_id)))
        self.release_reserve()

    def create_point(self, run_id: str, point: int, rep: int, assignment: dict, resolved: dict,
                     seed: int, record: dict | None = None) -> None:
        """`resolved` is the point's scenario (defaults in place, as validated); `record` what it
        runs (spec/record.py), written by the code that plans and builds its network."""
        with self._writing():
            self.db.execute(
                "INSERT INTO points (run_id, point, rep, assignment, resolved, seed, started, status, record)"
                " VALUES (?,?,?,?,?,?,?, 'running', ?)",
                (run_id, point, rep, _dumps(assignment), _dumps(resolved), seed, time.time(),
                 None if record is None else _dumps(record)))

    def update_point(self, run_id: str, point: int, **fields: Any) -> None:
        allowed = {"switch_kind", "link_backend", "finished", "status", "error", "realtime_ok",
                   "fidelity", "sysctls", "offloads", "capture", "marking", "environment", "environment_after",
                   "record"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"unknown point fields: {sorted(bad)}")
        cols = ", ".join(f"{k}=?" for k in fields)
        values = [v if isinstance(v, (str, int, float, type(None))) else _dumps(v) for v in fields.values()]
        self._essential(lambda: self.db.execute(f"UPDATE points SET {cols} WHERE run_id=? AND point=?",
                                                (*values, run_id, point)))

    def add_transfers(self, run_id: str, point: int, objects: Iterable[dict], pages: Iterable[dict]) -> None:
        with self._writing():
            self.db.executemany(
                'INSERT INTO objects (run_id, point, client, server, page, round, url, conn, start,'
                ' connect_done, first_byte, "end", body_bytes, header_bytes, status, error)'
                ' VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)',
                [(run_id, point, o.get("client"), o.get("server"), o.get("page"), o.get("round"), o.get("url"),
                  o.get("conn"), o.get("start"), o.get("connect_done"), o.get("first_byte"), o.get("end"),
                  o.get("body_bytes"), o.get("header_bytes"), o.get("status"), o.get("error"))
                 for o in objects])
            self.db.executemany(
                'INSERT INTO pages (run_id, point, client, server, page, round, start, "end", duration,'
                ' objects, bytes, error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)',
                [(run_id, point, p.get("client"), p.get("server"), p.get("page"), p.get("round"), p.get("start"),
                  p.get("end"), p.get("duration"), p.get("objects"), p.get("bytes"), p.get("error"))
                 for p in pages])

    def add_link_stats(self, run_id: str, point: int, router: str, final: dict, roles: dict[str, str],
                       configs: dict[str, dict], kernel: dict[str, dict]) -> None:
        rows, summary = [], []
        for link, s in final.get("links", {}).items():
            role = roles.get(link, "")
            for cls in CLASSES:
                a, t, d = (s.get(k, {}).get(cls, [0, 0]) for k in ("arrived", "sent", "dropped"))
                rows.append((run_id, point, router, link, role, _dumps(configs.get(link, {})), cls,
                             a[0], a[1], t[0], t[1], d[0], d[1]))
            k = kernel.get(link, {})
            summary.append((run_id, point, router, link, role, s.get("max_queue_pkts"), s.get("max_queue_bytes"),
                            s.get("late_events"), s.get("max_late_us"), k.get("queue_dropped"),
                            k.get("user_dropped")))
        with self._writing():
            self.db.executemany("INSERT INTO link_stats VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            self.db.executemany("INSERT INTO link_summary VALUES (?,?,?,?,?,?,?,?,?,?,?)", summary)

    def add_queue_samples(self, run_id: str, point: int, rows: list[tuple]) -> None:
        """rows: (router, link, t, queue_pkts, queue_bytes, sent_bytes, dropped_pkts, dropped_high,
        dropped_low), counters cumulative since the engine started."""
        with self._writing():
            self.db.executemany("INSERT INTO queue_samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                                [(run_id, point, *r) for r in rows])

    def add_progress(self, run_id: str, point: int, elapsed: float, phase: str, pages_done: int,
                     pages_total: int) -> None:
        with self._writing():
            self.db.execute("INSERT INTO progress VALUES (?,?,?,?,?,?,?)",
                            (run_id, point, time.time(), elapsed, phase, pages_done, pages_total))

    def add_tcp_counters(self, run_id: str, point: int, host: str, counters: dict[str, int]) -> None:
        with self._writing():
            self.db.executemany("INSERT INTO tcp_counters VALUES (?,?,?,?,?)",
                                [(run_id, point, host, k, v) for k, v in counters.items()])

    def add_transfer_trials(self, run_id: str, point: int, rows: Iterable[dict]) -> None:
        cols = ("profile", "p", "p_high", "trial", "size", "packets", "latency", "data_segments", "retransmissions",
                "high_segments", "error")
        with self._writing():
            self.db.executemany(
                f"INSERT INTO transfer_trials (run_id, point, {', '.join(cols)}) VALUES (?,?{',?' * len(cols)})",
                [(run_id, point, *(r.get(c) for c in cols)) for r in rows])

    def add_samples(self, run_id: str, point: int, rows: Iterable[dict]) -> int:
        """Per-sample metrics of any application: dicts with SAMPLE_KEYS (app and metric required,
        a missing other key is NULL; `error` set where the sample failed, its value then usually
        None). Returns the number of rows stored. Raises ValueError for an unknown key or a row
        without app or metric, storing none of the rows."""
        values = []
        for i, r in enumerate(rows):
            unknown = set(r) - set(SAMPLE_KEYS)
            if unknown:
                raise ValueError(f"sample {i}: unknown keys {sorted(unknown)} (known: {', '.join(SAMPLE_KEYS)})")
            if not r.get("app") or not r.get("metric"):
                raise ValueError(f"sample {i}: app and metric are required: {r!r}")
            values.append((run_id, point, *(r.get(k) for k in SAMPLE_KEYS)))
        with self._writing():
            self.db.executemany(f"INSERT INTO samples (run_id, point, {', '.join(SAMPLE_KEYS)})"
                                f" VALUES (?,?{',?' * len(SAMPLE_KEYS)})", values)
        return len(values)

    # --- reading -------------------------------------------------------------------------
    def runs(self) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM runs ORDER BY started DESC").fetchall()

    def running_runs(self) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM runs WHERE status='running'").fetchall()

    def run(self, run_id: str) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()

    def find_run(self, prefix: str) -> sqlite3.Row | None:
        """A run by id or unambiguous id prefix."""
        exact = self.run(prefix)
        if exact:
            return exact
        rows = self.db.execute("SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\'",
                               (prefix.replace("%", "\\%").replace("_", "\\_") + "%",)).fetchall()
        return rows[0] if len(rows) == 1 else None

    def points(self, run_id: str) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM points WHERE run_id=? ORDER BY point", (run_id,)).fetchall()

    def point(self, run_id: str, point: int) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM points WHERE run_id=? AND point=?", (run_id, point)).fetchone()

    def pages(self, run_id: str, point: int) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM pages WHERE run_id=? AND point=?", (run_id, point)).fetchall()

    def objects(self, run_id: str, point: int) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM objects WHERE run_id=? AND point=?", (run_id, point)).fetchall()

    def link_stats(self, run_id: str, point: int) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM link_stats WHERE run_id=? AND point=?", (run_id, point)).fetchall()

    def link_summary(self, run_id: str, point: int) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM link_summary WHERE run_id=? AND point=?", (run_id, point)).fetchall()

    def tcp_counters(self, run_id: str, point: int) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM tcp_counters WHERE run_id=? AND point=?", (run_id, point)).fetchall()

    def tcp_totals(self, run_id: str, point: int, counters: Iterable[str]) -> dict[str, int]:
        """Chosen counters summed over all hosts (in SQL: a 100-host point has ~40,000 rows)."""
        names = list(counters)
        rows = self.db.execute(
            f"SELECT counter, SUM(value) AS total FROM tcp_counters WHERE run_id=? AND point=?"
            f" AND counter IN ({','.join('?' * len(names))}) GROUP BY counter", (run_id, point, *names)).fetchall()
        found = {r["counter"]: r["total"] for r in rows}
        return {n: found.get(n, 0) for n in names}

    def transfer_trials(self, run_id: str) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM transfer_trials WHERE run_id=? ORDER BY point, size, trial",
                               (run_id,)).fetchall()

    def queue_samples(self, run_id: str, point: int, after: float | None = None) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM queue_samples WHERE run_id=? AND point=? AND t>? ORDER BY t",
                               (run_id, point, -1.0 if after is None else after)).fetchall()

    def samples(self, run_id: str, point: int, app: str | None = None, metric: str | None = None
                ) -> list[sqlite3.Row]:
        """A point's samples, optionally of one app and/or metric, by app, metric, t, then as stored."""
        where, args = "run_id=? AND point=?", [run_id, point]
        for column, value in (("app", app), ("metric", metric)):
            if value is not None:
                where += f" AND {column}=?"
                args.append(value)
        return self.db.execute(f"SELECT * FROM samples WHERE {where} ORDER BY app, metric, t, rowid", args).fetchall()

    def progress(self, run_id: str, point: int, after: float | None = None) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM progress WHERE run_id=? AND point=? AND t>? ORDER BY t",
                               (run_id, point, -1.0 if after is None else after)).fetchall()

    def latest_progress(self, run_id: str) -> list[sqlite3.Row]:
        """The newest progress row of each point of a run."""
        return self.db.execute(
            "SELECT p.* FROM progress p JOIN (SELECT point, MAX(t) AS t FROM progress WHERE run_id=?"
            " GROUP BY point) m ON p.point=m.point AND p.t=m.t WHERE p.run_id=? ORDER BY p.point",
            (run_id, run_id)).fetchall()

    def mark_recovered(self, run_id: str, note: str) -> None:
        """A run whose runner died, whose clients' records were read from its folder afterwards
        (controller/recover.py): status `recovered`, `note` after its error; its finish stays."""
        with self._writing():
            self.db.execute("UPDATE runs SET status='recovered', error=CASE WHEN error IS NULL OR error=''"
                            " THEN ? ELSE error || '; ' || ? END WHERE id=? AND status IN ('interrupted', 'recovered')",
                            (note, note, run_id))
