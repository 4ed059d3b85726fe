"""The fresh-machine tier's verdict (scripts/test-fresh.sh --verdict): what makes `make test-fresh`
pass is read from the run's database, so it is checked here on databases built to fail it.

The tier itself (debootstrap, set-up and a run inside a bare Debian 12) is `make test-fresh`,
docs/testing.md, "Fresh machine tier"; it is too heavy for this suite.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from catnip.results.store import SCHEMA

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "test-fresh.sh"
RUN = "20261128-000000-quick-test"


def _db(path: Path, status: str = "done", ok_pages: int = 100, failed_pages: int = 0,
        error: str | None = None) -> Path:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.execute("INSERT INTO runs (id, name, scenario, sweep, status, error) VALUES (?, 'quick', '', '', ?, ?)",
               (RUN, status, error))
    db.execute("INSERT INTO points (run_id, point, rep, assignment, resolved, status, realtime_ok)"
               " VALUES (?, 0, 0, '{}', '{}', ?, 0)", (RUN, status))
    for i in range(ok_pages + failed_pages):
        db.execute("INSERT INTO pages (run_id, point, client, page, duration, error) VALUES (?, 0, ?, ?, 0.1, ?)",
                   (RUN, f"c{i // 10}", i % 10 + 1, "timeout" if i >= ok_pages else None))
    db.commit()
    db.close()
    return path


def _verdict(db: Path, run: str = RUN) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--verdict", run], cwd=REPO, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "CATNIP_DB": str(db)}, timeout=60)


def test_done_with_every_page_passes(tmp_path):
    r = _verdict(_db(tmp_path / "c.db"))
    assert r.returncode == 0, r.stderr
    assert "status done, 100 of 100 pages fetched, 0 failed" in r.stdout
    assert "real time kept: NO (not judged by this tier)" in r.stdout


def test_a_page_short_fails(tmp_path):
    r = _verdict(_db(tmp_path / "c.db", ok_pages=99))
    assert r.returncode != 0
    assert "FAIL: wanted status done and 100 of 100 pages (status done, 99 pages, 0 failed)" in r.stderr


def test_a_failed_page_fails_even_with_100_fetched(tmp_path):
    r = _verdict(_db(tmp_path / "c.db", ok_pages=100, failed_pages=1))
    assert r.returncode != 0
    assert "100 pages, 1 failed" in r.stderr


def test_a_failed_run_fails_with_every_page(tmp_path):
    r = _verdict(_db(tmp_path / "c.db", status="failed", error="RuntimeError: engine died"))
    assert r.returncode != 0
    assert "status failed: RuntimeError: engine died" in r.stderr


def test_an_unknown_run_fails(tmp_path):
    r = _verdict(_db(tmp_path / "c.db"), run="no-such-run")
    assert r.returncode != 0
    assert "run no-such-run is not in" in r.stderr


def test_an_unknown_option_is_refused_in_one_line():
    r = subprocess.run(["bash", str(SCRIPT), "--bogus"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == ["test-fresh: unknown option --bogus (it takes none)"]
