"""SQLite storage of runs: one file, one writer per run, WAL so readers never block it.

A run (one `catnip run`) has points (sweep value combinations x repetitions). Every table keys on
(run_id, point); a failed point keeps what it recorded and never touches other runs.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

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
  realtime_ok INTEGER, fidelity TEXT, sysctls TEXT, offloads TEXT, capture TEXT, marking TEXT,
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
  queue_pkts INTEGER, queue_bytes INTEGER, sent_bytes INTEGER, dropped_pkts INTEGER,
  dropped_high INTEGER, dropped_low INTEGER
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

# Columns added after a table first shipped: (table, column, type). Older databases get them.
MIGRATIONS = [("queue_samples", "dropped_high", "INTEGER"), ("queue_samples", "dropped_low", "INTEGER"),
              ("points", "marking", "TEXT"), ("runs", "runner", "TEXT")]

CLASSES = ("high", "low", "lowest", "other")
RUN_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")  # the shape of a run id (CLI --run-id, dashboard URLs)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class Store:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        for table, column, kind in MIGRATIONS:
            have = {r["name"] for r in self.db.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                with self.db:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- writing -------------------------------------------------------------------------
    def create_run(self, run_id: str, name: str, source: str, scenario: dict, sweep: dict, seed: int,
                   git_rev: str, versions: dict, capabilities: dict, runner: str | None = None) -> None:
        """`runner` names the process that records the run (testbed.processes.identity), so a run
        whose runner died can be told from one still going."""
        with self.db:
            self.db.execute(
                "INSERT INTO runs (id, name, source, scenario, sweep, seed, git_rev, versions, capabilities,"
                " started, status, runner) VALUES (?,?,?,?,?,?,?,?,?,?, 'running', ?)",
                (run_id, name, source, _dumps(scenario), _dumps(sweep), seed, git_rev, _dumps(versions),
                 _dumps(capabilities), time.time(), runner))

    def interrupt_run(self, run_id: str, error: str) -> None:
        """A run, and its points, still recorded as running though nothing runs them any more;
        finished at the last sign of life it left (a point's end or a progress row), not now."""
        last = self.db.execute(
            "SELECT MAX(t) FROM (SELECT MAX(finished) AS t FROM points WHERE run_id=:r"
            " UNION ALL SELECT MAX(t) FROM progress WHERE run_id=:r UNION ALL SELECT started FROM runs WHERE id=:r)",
            {"r": run_id}).fetchone()[0]
        with self.db:
            self.db.execute("UPDATE runs SET status='interrupted', error=?, finished=? WHERE id=? AND status='running'",
                            (error, last, run_id))
            self.db.execute("UPDATE points SET status='interrupted', error=?, finished=?"
                            " WHERE run_id=? AND status='running'", (error, last, run_id))

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        with self.db:
            self.db.execute("UPDATE runs SET status=?, error=?, finished=? WHERE id=?",
                            (status, error, time.time(), run_id))

    def create_point(self, run_id: str, point: int, rep: int, assignment: dict, resolved: dict,
                     seed: int) -> None:
        with self.db:
            self.db.execute(
                "INSERT INTO points (run_id, point, rep, assignment, resolved, seed, started, status)"
                " VALUES (?,?,?,?,?,?,?, 'running')",
                (run_id, point, rep, _dumps(assignment), _dumps(resolved), seed, time.time()))

    def update_point(self, run_id: str, point: int, **fields: Any) -> None:
        allowed = {"switch_kind", "link_backend", "finished", "status", "error", "realtime_ok",
                   "fidelity", "sysctls", "offloads", "capture", "marking"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"unknown point fields: {sorted(bad)}")
        cols = ", ".join(f"{k}=?" for k in fields)
        values = [v if isinstance(v, (str, int, float, type(None))) else _dumps(v) for v in fields.values()]
        with self.db:
            self.db.execute(f"UPDATE points SET {cols} WHERE run_id=? AND point=?", (*values, run_id, point))

    def add_transfers(self, run_id: str, point: int, objects: Iterable[dict], pages: Iterable[dict]) -> None:
        with self.db:
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
        with self.db:
            self.db.executemany("INSERT INTO link_stats VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            self.db.executemany("INSERT INTO link_summary VALUES (?,?,?,?,?,?,?,?,?,?,?)", summary)

    def add_queue_samples(self, run_id: str, point: int, rows: list[tuple]) -> None:
        """rows: (router, link, t, queue_pkts, queue_bytes, sent_bytes, dropped_pkts, dropped_high,
        dropped_low), counters cumulative since the engine started."""
        with self.db:
            self.db.executemany("INSERT INTO queue_samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                                [(run_id, point, *r) for r in rows])

    def add_progress(self, run_id: str, point: int, elapsed: float, phase: str, pages_done: int,
                     pages_total: int) -> None:
        with self.db:
            self.db.execute("INSERT INTO progress VALUES (?,?,?,?,?,?,?)",
                            (run_id, point, time.time(), elapsed, phase, pages_done, pages_total))

    def add_tcp_counters(self, run_id: str, point: int, host: str, counters: dict[str, int]) -> None:
        with self.db:
            self.db.executemany("INSERT INTO tcp_counters VALUES (?,?,?,?,?)",
                                [(run_id, point, host, k, v) for k, v in counters.items()])

    def add_transfer_trials(self, run_id: str, point: int, rows: Iterable[dict]) -> None:
        cols = ("profile", "p", "p_high", "trial", "size", "packets", "latency", "data_segments", "retransmissions",
                "high_segments", "error")
        with self.db:
            self.db.executemany(
                f"INSERT INTO transfer_trials (run_id, point, {', '.join(cols)}) VALUES (?,?{',?' * len(cols)})",
                [(run_id, point, *(r.get(c) for c in cols)) for r in rows])

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

    def progress(self, run_id: str, point: int, after: float | None = None) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM progress WHERE run_id=? AND point=? AND t>? ORDER BY t",
                               (run_id, point, -1.0 if after is None else after)).fetchall()

    def latest_progress(self, run_id: str) -> list[sqlite3.Row]:
        """The newest progress row of each point of a run."""
        return self.db.execute(
            "SELECT p.* FROM progress p JOIN (SELECT point, MAX(t) AS t FROM progress WHERE run_id=?"
            " GROUP BY point) m ON p.point=m.point AND p.t=m.t WHERE p.run_id=? ORDER BY p.point",
            (run_id, run_id)).fetchall()
