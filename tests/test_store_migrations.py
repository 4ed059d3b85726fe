"""Schema versions of the results database (results/store.py): files made before versions existed
(user_version 0, with or without the columns added over time) are upgraded in place without
losing rows; a current file is left alone; a file newer than the code is refused."""

from __future__ import annotations

import sqlite3

import pytest

from catnip.results import store as store_mod
from catnip.results.store import SCHEMA_VERSION, Store, StoreVersionError

# The columns added after their tables first shipped, each (table, column, type): a file of
# version 0 may have any of them.
ADDED = [("queue_samples", "dropped_high", "INTEGER"), ("queue_samples", "dropped_low", "INTEGER"),
         ("points", "marking", "TEXT"), ("runs", "runner", "TEXT")]

# Written out here, not taken from results/store.py: the files as older code left them.
OLD_TABLES = {
    "runs": """id TEXT PRIMARY KEY, name TEXT NOT NULL, source TEXT, scenario TEXT NOT NULL, sweep TEXT NOT NULL,
  seed INTEGER, git_rev TEXT, versions TEXT, capabilities TEXT,
  started REAL, finished REAL, status TEXT NOT NULL, error TEXT""",
    "points": """run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, point INTEGER NOT NULL,
  rep INTEGER NOT NULL, assignment TEXT NOT NULL, resolved TEXT NOT NULL, seed INTEGER,
  switch_kind TEXT, link_backend TEXT, started REAL, finished REAL, status TEXT NOT NULL, error TEXT,
  realtime_ok INTEGER, fidelity TEXT, sysctls TEXT, offloads TEXT, capture TEXT,
  PRIMARY KEY (run_id, point)""",
    "objects": """run_id TEXT NOT NULL, point INTEGER NOT NULL, client TEXT, server TEXT, page INTEGER,
  round INTEGER, url TEXT, conn INTEGER, start REAL, connect_done REAL, first_byte REAL, "end" REAL,
  body_bytes INTEGER, header_bytes INTEGER, status INTEGER, error TEXT""",
    "pages": """run_id TEXT NOT NULL, point INTEGER NOT NULL, client TEXT, server TEXT, page INTEGER,
  round INTEGER, start REAL, "end" REAL, duration REAL, objects INTEGER, bytes INTEGER, error TEXT""",
    "link_stats": """run_id TEXT NOT NULL, point INTEGER NOT NULL, router TEXT, link TEXT, role TEXT, config TEXT,
  class TEXT, arrived_pkts INTEGER, arrived_bytes INTEGER, sent_pkts INTEGER, sent_bytes INTEGER,
  dropped_pkts INTEGER, dropped_bytes INTEGER""",
    "link_summary": """run_id TEXT NOT NULL, point INTEGER NOT NULL, router TEXT, link TEXT, role TEXT,
  max_queue_pkts INTEGER, max_queue_bytes INTEGER, late_events INTEGER, max_late_us REAL,
  kernel_queue_dropped INTEGER, kernel_user_dropped INTEGER""",
    "queue_samples": """run_id TEXT NOT NULL, point INTEGER NOT NULL, router TEXT, link TEXT, t REAL,
  queue_pkts INTEGER, queue_bytes INTEGER, sent_bytes INTEGER, dropped_pkts INTEGER""",
    "progress": """run_id TEXT NOT NULL, point INTEGER NOT NULL, t REAL, elapsed REAL, phase TEXT,
  pages_done INTEGER, pages_total INTEGER""",
    "tcp_counters": "run_id TEXT NOT NULL, point INTEGER NOT NULL, host TEXT, counter TEXT, value INTEGER",
    "transfer_trials": """run_id TEXT NOT NULL, point INTEGER NOT NULL, profile TEXT, p REAL, p_high REAL,
  trial INTEGER, size INTEGER, packets INTEGER, latency REAL, data_segments INTEGER, retransmissions INTEGER,
  high_segments INTEGER, error TEXT""",
}

RUN = ("r1", "old", "old.yaml", '{"name": "old"}', "{}", 7, "abc", "{}", "{}", 100.0, 200.0, "done", None)
POINT = ("r1", 0, 0, '{"router.buffer": 10}', "{}", 7, "ovs", "engine", 100.0, 200.0, "done", None,
         1, '{"late_events": 0}', "{}", "{}", None)
PAGE = ("r1", 0, "c1", "s1", 3, 0, 101.0, 102.5, 1.5, 2, 1000, None)
QUEUE = ("r1", 0, "r", "b", 1.0, 5, 7000, 9000, 3)


def _old_file(path, present=(), skip_tables=(), version=0) -> None:
    """A file as older code made it: today's tables less the added columns but those `present`
    (appended at the end, where the old column checks put them), one row in runs, points, pages
    and queue_samples."""
    db = sqlite3.connect(path)
    for table, columns in OLD_TABLES.items():
        if table in skip_tables:
            continue
        extra = "".join(f", {c} {k}" for t, c, k in ADDED if t == table and c in present)
        if table == "points" and extra:  # the primary key clause comes last in CREATE TABLE
            columns = columns.replace(",\n  PRIMARY KEY", extra + ",\n  PRIMARY KEY")
            extra = ""
        db.execute(f"CREATE TABLE {table} ({columns}{extra})")
    db.execute(f"INSERT INTO runs VALUES ({','.join('?' * len(RUN))}{', NULL' * ('runner' in present)})", RUN)
    db.execute(f"INSERT INTO points VALUES ({','.join('?' * len(POINT))}{', NULL' * ('marking' in present)})",
               POINT)
    db.execute(f"INSERT INTO pages VALUES ({','.join('?' * len(PAGE))})", PAGE)
    n_queue = sum(c in present for c in ("dropped_high", "dropped_low"))
    db.execute(f"INSERT INTO queue_samples VALUES ({','.join('?' * len(QUEUE))}{', NULL' * n_queue})", QUEUE)
    db.execute(f"PRAGMA user_version = {version}")
    db.commit()
    db.close()


def _schema(path) -> dict:
    db = sqlite3.connect(path)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    out = {t: [r[1:] for r in db.execute(f"PRAGMA table_info({t})")] for t in tables}
    out["indexes"] = sorted(db.execute("SELECT name, tbl_name FROM sqlite_master WHERE type='index'"
                                       " AND sql IS NOT NULL").fetchall())
    db.close()
    return out


def _version(path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


@pytest.fixture
def fresh_schema(tmp_path):
    Store(tmp_path / "fresh.db").close()
    return _schema(tmp_path / "fresh.db")


@pytest.mark.parametrize("present", [
    (),                                                            # before any column was added
    ("dropped_high", "dropped_low"),                               # some of them
    ("dropped_high", "dropped_low", "marking"),
    ("dropped_high", "dropped_low", "marking", "runner"),          # made by the code before versions
], ids=["none", "queue", "queue+marking", "all"])
def test_old_file_is_upgraded_in_place(tmp_path, fresh_schema, present):
    path = tmp_path / "old.db"
    _old_file(path, present)
    with Store(path) as store:
        assert store.migrated == list(range(1, SCHEMA_VERSION + 1))
        assert store.version() == SCHEMA_VERSION
        run, pt = store.run("r1"), store.point("r1", 0)
        assert tuple(run)[:len(RUN)] == RUN and run["runner"] is None
        assert tuple(pt)[:len(POINT)] == POINT and pt["marking"] is None
        (page,) = store.pages("r1", 0)
        assert tuple(page) == PAGE
        (q,) = store.queue_samples("r1", 0)
        assert tuple(q) == QUEUE + (None, None)
        # What today's writers need: the added columns, the samples table, positional inserts.
        store.update_point("r1", 0, marking={"data_high": 1})
        store.add_queue_samples("r1", 0, [("r", "b", 2.0, 1, 1500, 9500, 4, 1, 3)])
        store.create_run("r2", "new", "x", {}, {}, 1, "def", {}, {}, runner="boot:1:2")
        store.add_samples("r1", 0, [{"app": "telnet", "metric": "echo_delay", "value": 0.1}])
        assert [s["value"] for s in store.samples("r1", 0)] == [0.1]
        assert store.queue_samples("r1", 0)[1]["dropped_low"] == 3 and store.run("r2")["runner"] == "boot:1:2"
    # The same tables, columns (in order), types and indexes as a file made new by this code.
    assert _schema(path) == fresh_schema
    assert _version(path) == SCHEMA_VERSION


def test_file_lacking_a_later_table_gets_it(tmp_path, fresh_schema):
    """Tables added before versions existed (transfer_trials) were created if missing: still so."""
    path = tmp_path / "old.db"
    _old_file(path, skip_tables=("transfer_trials",))
    with Store(path) as store:
        store.add_transfer_trials("r1", 0, [{"profile": "linux", "size": 1000, "latency": 0.2}])
        assert store.transfer_trials("r1")[0]["latency"] == 0.2
        assert tuple(store.run("r1"))[:len(RUN)] == RUN
    assert _schema(path) == fresh_schema


def test_second_open_changes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    _old_file(path)
    Store(path).close()
    before = _schema(path)
    # Any migration run again would fail loudly.
    def broken(db):
        raise AssertionError("a migration ran on a current file")
    monkeypatch.setattr(store_mod, "MIGRATIONS", [store_mod.Migration(m.what, broken)
                                                  for m in store_mod.MIGRATIONS])
    with Store(path) as store:
        assert store.migrated == []
        assert tuple(store.pages("r1", 0)[0]) == PAGE
    assert _schema(path) == before and _version(path) == SCHEMA_VERSION


def test_new_file_is_current(tmp_path):
    with Store(tmp_path / "new.db") as store:
        assert store.version() == SCHEMA_VERSION and store.migrated == list(range(1, SCHEMA_VERSION + 1))
    with Store(tmp_path / "new.db") as store:
        assert store.migrated == []


def test_newer_file_is_refused(tmp_path):
    path = tmp_path / "newer.db"
    _old_file(path, version=SCHEMA_VERSION + 1)
    before = _schema(path)
    with pytest.raises(StoreVersionError) as exc:
        Store(path)
    message = str(exc.value)
    assert f"schema version {SCHEMA_VERSION + 1}" in message and f"up to {SCHEMA_VERSION}" in message
    assert str(path) in message
    assert _schema(path) == before and _version(path) == SCHEMA_VERSION + 1


def test_failed_migration_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    _old_file(path)
    before = _schema(path)

    def fails(db):
        raise sqlite3.OperationalError("broken on purpose")
    steps = list(store_mod.MIGRATIONS)
    steps[-1] = store_mod.Migration("broken", fails)  # after the column steps have run
    monkeypatch.setattr(store_mod, "MIGRATIONS", steps)
    with pytest.raises(sqlite3.OperationalError, match="broken on purpose"):
        Store(path)
    assert _schema(path) == before and _version(path) == 0
    monkeypatch.undo()
    with Store(path) as store:  # and the real migrations still work on it afterwards
        assert store.version() == SCHEMA_VERSION and tuple(store.pages("r1", 0)[0]) == PAGE


def test_migrations_are_append_only_steps():
    """One step per version; the first four are the columns once added by checks on every open."""
    assert SCHEMA_VERSION == len(store_mod.MIGRATIONS) >= 5
    assert [m.what for m in store_mod.MIGRATIONS[:4]] == [f"{t}.{c}" for t, c, _ in ADDED]
    assert "samples" in store_mod.MIGRATIONS[4].what


def test_report_names_the_versions_of_a_newer_file(tmp_path):
    from click.testing import CliRunner

    from catnip.cli.main import main
    path = tmp_path / "newer.db"
    _old_file(path, version=SCHEMA_VERSION + 3)
    res = CliRunner().invoke(main, ["report", "r1", "--db", str(path)])
    assert res.exit_code == 1 and f"schema version {SCHEMA_VERSION + 3}" in res.output, res.output
    assert f"versions up to {SCHEMA_VERSION}" in res.output
