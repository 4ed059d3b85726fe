"""What a run writes into the store (results/store.py's Store): the run, its points, and each
point's records (transfers, link stats, queue samples, progress, TCP counters, transfer trials,
samples). Every write goes through the Store's transactions (`_writing`), and the writes a run's
end depends on through `_essential` (the room kept for its final status)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

# The columns of a samples row (Store.add_samples); app and metric are required.
SAMPLE_KEYS = ("app", "metric", "host", "peer", "flow", "tag", "t", "value", "unit", "error")

CLASSES = ("high", "low", "lowest", "other")


def dumps(value: Any) -> str:
    """A value as the store writes it into a JSON text column (sorted keys; str() of what JSON lacks)."""
    return json.dumps(value, sort_keys=True, default=str)


class RunRecords:
    """The Store's writes of runs and their points (mixed into Store, which holds `db`,
    `_writing`, `_essential`, `keep_reserve` and `release_reserve`)."""

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
                (run_id, name, source, dumps(scenario), dumps(sweep), seed, git_rev, dumps(versions),
                 dumps(capabilities), time.time(), runner))

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
                (run_id, point, rep, dumps(assignment), dumps(resolved), seed, time.time(),
                 None if record is None else dumps(record)))

    def update_point(self, run_id: str, point: int, **fields: Any) -> None:
        allowed = {"switch_kind", "link_backend", "finished", "status", "error", "realtime_ok",
                   "fidelity", "sysctls", "offloads", "capture", "marking", "environment", "environment_after",
                   "record"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"unknown point fields: {sorted(bad)}")
        cols = ", ".join(f"{k}=?" for k in fields)
        values = [v if isinstance(v, (str, int, float, type(None))) else dumps(v) for v in fields.values()]
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
                rows.append((run_id, point, router, link, role, dumps(configs.get(link, {})), cls,
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

    def set_note(self, run_id: str, note: str | None) -> bool:
        """Writes run `run_id`'s free-text note (None removes it) as given: results/run_notes.py
        checks it first. Only that column is written, so a note may be set while the run's runner
        records the rest. Returns False when there is no such run."""
        with self._writing():
            return self.db.execute("UPDATE runs SET note=? WHERE id=?", (note, run_id)).rowcount == 1

    # --- reading -------------------------------------------------------------------------

    def mark_recovered(self, run_id: str, note: str) -> None:
        """A run whose runner died, whose clients' records were read from its folder afterwards
        (controller/recover.py): status `recovered`, `note` after its error; its finish stays."""
        with self._writing():
            self.db.execute("UPDATE runs SET status='recovered', error=CASE WHEN error IS NULL OR error=''"
                            " THEN ? ELSE error || '; ' || ? END WHERE id=? AND status IN ('interrupted', 'recovered')",
                            (note, note, run_id))
