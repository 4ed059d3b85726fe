"""What is read from the store (results/store.py's Store): runs, points and each point's
records, as sqlite3.Row lists."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable


class Queries:
    """The Store's reads (mixed into Store, which holds `db`)."""

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
