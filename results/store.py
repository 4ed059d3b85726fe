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

import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from catnip.results.store_queries import Queries
from catnip.results.store_runs import RunRecords

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
    add_column("runs", "note", "TEXT"),                      # 10: a researcher's free-text note (results/run_notes.py)
]
SCHEMA_VERSION = len(MIGRATIONS)

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # a run id's shape; checked by results/run_ids.py


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


class Store(RunRecords, Queries):
    """The database file: opening it (read-only where it cannot be written), its schema version
    and migrations, the room kept for a run's final status, transactions. What is written per
    run is RunRecords' (results/store_runs.py), what is read Queries' (results/store_queries.py).

    `readonly` is true when the file could only be opened for reading (a read-only file
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
