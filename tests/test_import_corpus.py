"""A generated corpus of hostile imports (issue 47): every case through `catnip import` (click's
runner, in process) under a time bound, then everything that reads an accepted run.

The generator (seeded: CATNIP_CORPUS_SEED, default 47; CATNIP_CORPUS_CASES, default 520) starts
from a real export (tests/test_archive.py's run with rows in every table) and makes each case with
what it expects:

- refused: a wrong type in any column of any table (text for a number, a fraction for a whole
  number, a boolean, a list, null where the column is required), NaN and infinities, integers
  past 64 bits, strings past their bound, bad run ids ('..', '.', '-rf', a slash, 101 characters,
  not text), JSON columns broken, of the wrong kind, too deep, with a lone surrogate or NaN inside,
  json_columns naming a column that is not JSON (the run id), an unknown status, a page without
  error or duration, the document's structure broken (tables, rows, columns, versions), gzip bombs
  (zeros, a string or rows without end), truncated and random files, non-regular files (FIFO,
  /dev/zero, /dev/urandom, a directory);
- accepted: values of the right type changed (finite numbers, unicode and markup in text, nulls
  where allowed, JSON columns as text instead of decoded), and a run recorded `running` or `queued`,
  which must arrive `interrupted` with its points.

A refusal must be exit code 2, one line, no traceback, nothing written; an accepted case exit 0.
Every accepted run is then read by `catnip list`, `catnip report --loss` and `--apps`, the runs
page and its run page (report, point summaries, resolved scenarios, application metrics), eight of
them by their JSON report and first point's application metrics too: none may fail. Each case runs under a 10 s alarm (a hang is a failure naming the case). The figures
(cases, refused, accepted, slowest case, wall time) are printed with -s.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import random
import signal
import sqlite3
import time
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from catnip.cli.archive import import_cmd
from catnip.cli.main import main
from catnip.controller.run_queue import RunQueue
from catnip.results import archive
from catnip.results import import_schema as schema
from catnip.results.store import Store
from tests.test_archive import RUN, _record_rich
from catnip.webui.app import create_app

CASES = int(os.environ.get("CATNIP_CORPUS_CASES", "520"))
SEED = int(os.environ.get("CATNIP_CORPUS_SEED", "47"))
CASE_SECONDS = 10
SMALL_TEXT = 2 * 1024 * 1024  # the decompressed bound while the corpus runs (bombs need not be 256 MB)

WRONG_FOR_NUMBER = ["yesterday", "", "1.5e3x", True, False, [1], {"a": 1}, "NaN"]
WRONG_FOR_INT = [1.5, "3", True, 2**63, -(2**63) - 1, 10**30, [0]]
NON_FINITE = [float("nan"), float("inf"), float("-inf")]
BAD_IDS = ["..", ".", ".hidden", "-rf", "a/b", "../x", "", "x" * 101, "a b", "é", 5, None, ["a"], "a\x00b"]


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("corpus-base")
    with Store(tmp / "source.db") as store:
        _record_rich(store, RUN)
        store.finish_run(RUN, "done")
        return archive.export_run(store, RUN)


def _types(db: Path) -> dict[str, dict[str, tuple[str, bool]]]:
    con = sqlite3.connect(db)
    try:
        return {t: {r[1]: (r[2], bool(r[3])) for r in con.execute(f'PRAGMA table_info("{t}")')}
                for t in archive.run_tables(con)}
    finally:
        con.close()


def _kind(table: str, column: str, declared: str) -> str:
    """int, real, text or json: what the schema wants of a column."""
    if column in schema.JSON_COLUMNS.get(table, ()):
        return "json"
    known = {**schema.KEYS, **schema.COLUMNS.get(table, {})}.get(column)
    if known in (schema.Int64, schema.Count, schema.Index, schema.Flag):
        return "int"
    if known in (schema.Real, schema.Time, schema.Duration):
        return "real"
    if known is None:
        return {"INTEGER": "int", "REAL": "real"}.get(declared.upper(), "text")
    return "text"


class Corpus:
    """Each case: (name, expect 'refused' or 'accepted', how to make its file)."""

    def __init__(self, base: dict, types: dict, rnd: random.Random, tmp: Path):
        self.base, self.types, self.rnd, self.tmp = base, types, rnd, tmp

    def doc(self, run_id: str) -> dict:
        d = copy.deepcopy(self.base)
        d["run_id"] = run_id
        for name, t in d["tables"].items():
            key = t["columns"].index("id" if name == "runs" else "run_id")
            for r in t["rows"]:
                r[key] = run_id
        return d

    def cell(self, d: dict, rows_needed: bool = True) -> tuple[str, str, int, int] | None:
        """A random (table, column, row index, column index) of the document with a row."""
        tables = [n for n, t in d["tables"].items() if t["rows"]]
        name = self.rnd.choice(tables)
        t = d["tables"][name]
        i = self.rnd.randrange(len(t["columns"]))
        return name, t["columns"][i], self.rnd.randrange(len(t["rows"])), i

    def write(self, path: Path, d: dict) -> Path:
        path.write_bytes(gzip.compress(json.dumps(d).encode(), compresslevel=1))
        return path

    # --- refused ---------------------------------------------------------------------------
    def wrong_value(self, run_id: str, path: Path) -> str:
        d = self.doc(run_id)
        while True:
            table, column, row, i = self.cell(d)
            if column not in ("id", "run_id"):
                break
        declared, notnull = self.types[table][column]
        kind = _kind(table, column, declared)
        t = d["tables"][table]
        if kind == "json" and column in t.get("json_columns", []) and self.rnd.random() < 0.5:
            self._as_text(t, i)  # carried as text, as a column that is not canonical JSON is
        decoded = column in t.get("json_columns", [])
        if kind == "int":
            value = self.rnd.choice(WRONG_FOR_INT + WRONG_FOR_NUMBER[:3] + NON_FINITE)
        elif kind == "real":
            value = self.rnd.choice(WRONG_FOR_NUMBER + NON_FINITE + [10**400])
        elif kind == "json" and decoded:
            value = self.rnd.choice([{"x": float("nan")}, {"x": float("inf")}, {"s": "\ud800"}, self._deep(80)]
                                    + ([[1, 2], "text", 5] if self._object_column(table, column) else []))
        elif kind == "json":
            value = self.rnd.choice(["{", "NaN", '{"a": Infinity}', "[" * 80 + "]" * 80, 5, '"\\ud800"', "{'a': 1}"]
                                    + (["[1]", '"text"'] if self._object_column(table, column) else []))
        else:
            value = self.rnd.choice([5, 1.5, True, ["a"], {"a": 1}, "\ud800", "x" * (schema.MAX_TEXT + 1)])
        if kind == "text" and column in schema.COLUMNS.get(table, {}) and schema.COLUMNS[table][column] is schema.Name:
            value = self.rnd.choice([value, "n" * (schema.MAX_NAME + 1)])
        t["rows"][row][i] = value
        self.write(path, d)
        return f"{table}.{column}[{row}] = {str(value)[:40]!r}"

    @staticmethod
    def _as_text(t: dict, i: int) -> None:
        t["json_columns"] = [c for c in t["json_columns"] if c != t["columns"][i]]
        for r in t["rows"]:
            if r[i] is not None:
                r[i] = json.dumps(r[i], sort_keys=True)

    def _object_column(self, table: str, column: str) -> bool:
        return schema.COLUMNS.get(table, {}).get(column) is schema.JsonObject

    @staticmethod
    def _deep(n: int):
        v: object = 1
        for _ in range(n):
            v = [v]
        return {"deep": v}

    def missing_required(self, run_id: str, path: Path) -> str:
        d = self.doc(run_id)
        required = [(n, c) for n, t in d["tables"].items() if t["rows"] for c in t["columns"]
                    if self.types[n][c][1] and c not in ("id", "run_id")]
        table, column = self.rnd.choice(required)
        t = d["tables"][table]
        t["rows"][self.rnd.randrange(len(t["rows"]))][t["columns"].index(column)] = None
        self.write(path, d)
        return f"{table}.{column} = null"

    def bad_id(self, run_id: str, path: Path) -> str:
        bad = self.rnd.choice(BAD_IDS)
        d = self.doc(run_id)
        d["run_id"] = bad
        for name, t in d["tables"].items():
            key = t["columns"].index("id" if name == "runs" else "run_id")
            for r in t["rows"]:
                r[key] = bad
        self.write(path, d)
        return f"run_id {str(bad)[:20]!r}"

    def semantic(self, run_id: str, path: Path) -> str:
        d = self.doc(run_id)
        what = self.rnd.choice(["status", "page", "json_id", "json_other", "marking", "point_neg", "point_zero",
                                "started", "duplicate_runs", "other_run", "started_str"])
        runs, points, pages = d["tables"]["runs"], d["tables"]["points"], d["tables"]["pages"]
        if what == "status":
            runs["rows"][0][runs["columns"].index("status")] = self.rnd.choice(["weird", "DONE", "", "running "])
        elif what == "page":
            r = pages["rows"][0]
            r[pages["columns"].index("duration")] = None
            r[pages["columns"].index("error")] = None
        elif what == "json_id":  # the quoted run id of issue 47
            runs["json_columns"] = [*runs["json_columns"], "id"]
        elif what == "json_other":
            t = d["tables"][self.rnd.choice(["pages", "samples", "objects"])]
            t["json_columns"] = [self.rnd.choice(t["columns"])]
        elif what == "marking":
            i = points["columns"].index("marking")
            points["rows"][0][i] = json.dumps({"data_high": self.rnd.choice(["ten", -1, 1.5, True]), "data_low": 1})
        elif what == "point_neg":
            pages["rows"][0][pages["columns"].index("point")] = -1
        elif what == "point_zero":
            points["rows"][0][points["columns"].index("point")] = "zero"
        elif what == "started":
            runs["rows"][0][runs["columns"].index("started")] = self.rnd.choice([-5.0, 1e300, 1e12])
        elif what == "started_str":
            runs["rows"][0][runs["columns"].index("started")] = "yesterday"
        elif what == "duplicate_runs":
            runs["rows"].append(list(runs["rows"][0]))
        else:
            pages["rows"][0][pages["columns"].index("run_id")] = "another-run"
        self.write(path, d)
        return what

    def structure(self, run_id: str, path: Path) -> str:
        d = self.doc(run_id)
        what = self.rnd.choice(["no_runs", "no_points", "short_row", "long_row", "unknown_table", "unknown_column",
                                "columns_dup", "rows_not_list", "table_not_object", "format", "version_new",
                                "version_str", "tables_list", "doc_list", "exported_str", "exported_at",
                                "run_folder", "json_columns_str", "many_tables", "column_long"])
        tables = d["tables"]
        if what == "no_runs":
            del tables["runs"]
        elif what == "no_points":
            del tables["points"]
        elif what == "short_row":
            tables["pages"]["rows"][0] = tables["pages"]["rows"][0][:-1]
        elif what == "long_row":
            tables["pages"]["rows"][0] = [*tables["pages"]["rows"][0], 1]
        elif what == "unknown_table":
            tables["evil"] = {"columns": ["run_id", "x"], "rows": [[run_id, 1]]}
        elif what == "unknown_column":
            tables["pages"]["columns"] = [*tables["pages"]["columns"][:-1], "evil"]
        elif what == "columns_dup":
            tables["pages"]["columns"][1] = tables["pages"]["columns"][0]
        elif what == "rows_not_list":
            tables["pages"]["rows"] = {"a": 1}
        elif what == "table_not_object":
            tables["pages"] = [1, 2]
        elif what == "format":
            d["format"] = "something-else"
        elif what == "version_new":
            d["format_version"] = archive.FORMAT_VERSION + 1
        elif what == "version_str":
            d["format_version"] = self.rnd.choice(["1", True, 1.0, None])
        elif what == "tables_list":
            d["tables"] = [1]
        elif what == "doc_list":
            d = [d]  # type: ignore[assignment]
        elif what == "exported_str":
            d["exported"] = "yesterday"
        elif what == "exported_at":
            d["exported"]["at"] = self.rnd.choice(["now", float("inf"), [1]])
        elif what == "run_folder":
            d["run_folder"] = {"path": self.rnd.choice([5, "p" * 5000])}
        elif what == "json_columns_str":
            tables["points"]["json_columns"] = "assignment"
        elif what == "many_tables":
            for k in range(archive.MAX_TABLES):
                tables[f"t{k}"] = {"columns": ["run_id"], "rows": []}
        else:
            tables["pages"]["columns"][-1] = "c" * 65
        self.write(path, d)
        return what

    def file(self, run_id: str, path: Path) -> str:
        d = self.doc(run_id)
        raw = gzip.compress(json.dumps(d).encode(), compresslevel=1)
        what = self.rnd.choice(["truncated", "random", "empty", "not_gzip_json", "gzip_not_json", "gzip_array",
                                "trailing_garbage", "bomb", "bomb_member", "utf16", "huge_int", "nested",
                                "endless_string", "endless_rows"])
        if what == "truncated":
            path.write_bytes(raw[:self.rnd.randrange(1, len(raw) - 1)])
        elif what == "random":
            path.write_bytes(self.rnd.randbytes(self.rnd.randrange(1, 5000)))
        elif what == "empty":
            path.write_bytes(b"")
        elif what == "not_gzip_json":
            path.write_bytes(json.dumps(d).encode())
        elif what == "gzip_not_json":
            path.write_bytes(gzip.compress(self.rnd.randbytes(300)))
        elif what == "gzip_array":
            path.write_bytes(gzip.compress(b"[" * 100000 + b"]" * 100000))
        elif what == "trailing_garbage":
            path.write_bytes(raw + self.rnd.randbytes(20))
        elif what == "bomb":  # one member: zeros past the bound
            z = zlib.compressobj(9, zlib.DEFLATED, 31)
            block = bytes(1 << 20)
            path.write_bytes(b"".join([z.compress(block) for _ in range(SMALL_TEXT // len(block) + 2)] + [z.flush()]))
        elif what == "bomb_member":  # many small members, as `cat` makes
            member = gzip.compress(bytes(1 << 18), compresslevel=9)
            path.write_bytes(member * (SMALL_TEXT // (1 << 18) + 3))
        elif what == "endless_string":  # JSON that never ends one value
            z = zlib.compressobj(9, zlib.DEFLATED, 31)
            path.write_bytes(z.compress(b'{"format": "catnip-run-export", "pad": "')
                             + b"".join(z.compress(b"a" * (1 << 20)) for _ in range(3)) + z.flush())
        elif what == "endless_rows":  # rows without end: small as text, large as objects
            z = zlib.compressobj(9, zlib.DEFLATED, 31)
            path.write_bytes(z.compress(b'{"tables": {"pages": {"rows": [') + z.compress(b"[0]," * 500_000) + z.flush())
        elif what == "utf16":  # JSON, but not the UTF-8 `catnip export` writes
            path.write_bytes(gzip.compress(json.dumps(d).encode("utf-16")))
        elif what == "huge_int":
            path.write_bytes(gzip.compress(b'{"format": "catnip-run-export", "format_version": 1' + b"0" * 5000 + b"}"))
        else:
            path.write_bytes(gzip.compress(b'{"a": ' + b"[" * 200000 + b"]" * 200000 + b"}"))
        return what

    def special(self, n: int) -> tuple[str, Path]:
        """Files that are not regular files, each once."""
        which = ["fifo", "/dev/zero", "/dev/urandom", "/dev/null", "directory"][n]
        if which == "fifo":
            path = self.tmp / f"fifo{n}"
            os.mkfifo(path)  # nobody writes it: an open() that waits would hang here
            return which, path
        if which == "directory":
            path = self.tmp / f"dir{n}"
            path.mkdir()
            return which, path
        return which, Path(which)

    # --- accepted --------------------------------------------------------------------------
    def valid_value(self, run_id: str, path: Path) -> str:
        d = self.doc(run_id)
        table, column, row, i = self.cell(d)
        declared, notnull = self.types[table][column]
        kind = _kind(table, column, declared)
        t = d["tables"][table]
        old = t["rows"][row][i]
        if column in ("id", "run_id", "point", "status", "duration", "started") or table == "runs" and column in (
                "scenario", "sweep"):
            value = old  # keys, and what other rows or the row itself depend on: left as they are
        elif kind == "int":
            value = self.rnd.choice([0, 1, 7, 12345, 2**40]) if not (old is None and notnull) else old
            if column == "realtime_ok":
                value = self.rnd.choice([0, 1, None])
        elif kind == "real":
            value = self.rnd.choice([0.0, 1e-300, 3.5, 1e15, 1700000000.25])
        elif kind == "json":
            value = old if old is not None else None
            if old is not None and column in t.get("json_columns", []):  # carried as text instead of decoded
                self._as_text(t, i)
                value = t["rows"][row][i]
        else:
            value = self.rnd.choice(["<script>alert(1)</script>", "ü – 漢字 🙂", "a" * 150, "x"])
        if not notnull and self.rnd.random() < 0.2 and column not in ("id", "run_id", "point") and not (
                table == "pages" and column in ("duration", "error")):
            value = None
        t["rows"][row][i] = value
        self.write(path, d)
        return f"{table}.{column}[{row}] = {str(value)[:40]!r}"

    def live(self, run_id: str, path: Path) -> str:
        d = self.doc(run_id)
        status = self.rnd.choice(list(schema.LIVE_STATUSES))
        runs, points = d["tables"]["runs"], d["tables"]["points"]
        runs["rows"][0][runs["columns"].index("status")] = status
        runs["rows"][0][runs["columns"].index("runner")] = "00000000-0000-0000-0000-000000000000/1/1"
        runs["rows"][0][runs["columns"].index("finished")] = None
        points["rows"][0][points["columns"].index("status")] = "running"
        self.write(path, d)
        return f"status {status}"


def _cases(corpus: Corpus, n: int):
    """(name, expect, path) for n cases: 5 special files, then a fixed mix of the kinds."""
    kinds = [("wrong_value", "refused", 40), ("missing_required", "refused", 6), ("bad_id", "refused", 8),
             ("semantic", "refused", 10), ("structure", "refused", 10), ("file", "refused", 8),
             ("valid_value", "accepted", 8), ("live", "accepted", 2)]
    weights = [w for _, _, w in kinds]
    for k in range(5):
        which, path = corpus.special(k)
        yield f"{k}: {which}", "refused", path
    for k in range(5, n):
        name, expect, _ = corpus.rnd.choices(kinds, weights)[0]
        path = corpus.tmp / f"case{k}.gz"
        what = getattr(corpus, name)(f"case{k}", path)
        yield f"{k}: {name} {what}", expect, path


def test_hostile_import_corpus(base, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CATNIP_DATA", str(tmp_path / "data"))
    # Bombs past small bounds: the corpus stays fast (tests/test_archive.py tries the real ones).
    monkeypatch.setattr(archive, "MAX_TEXT_BYTES", SMALL_TEXT)
    monkeypatch.setattr(archive, "MAX_VALUE_CHARS", SMALL_TEXT // 2)
    monkeypatch.setattr(archive, "MAX_ROWS", 10_000)
    db = tmp_path / "target.db"
    with Store(db):
        pass
    corpus = Corpus(base, _types(db), random.Random(SEED), tmp_path)
    runner = CliRunner()
    old = signal.signal(signal.SIGALRM, _alarm)
    results = {"refused": 0, "accepted": 0}
    problems: list[str] = []
    accepted: list[tuple[str, str]] = []
    slowest = (0.0, "")
    started = time.perf_counter()
    try:
        for name, expect, path in _cases(corpus, CASES):
            t = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
            try:
                res = runner.invoke(import_cmd, [str(path), "--db", str(db)], catch_exceptions=True)
            except Timeout:
                problems.append(f"{name}: no answer in {CASE_SECONDS} s (hang)")
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            took = time.perf_counter() - t
            slowest = max(slowest, (took, name))
            if isinstance(res.exception, Timeout):
                problems.append(f"{name}: no answer in {CASE_SECONDS} s (hang)")
                continue
            if res.exception is not None and not isinstance(res.exception, SystemExit):
                problems.append(f"{name}: traceback {type(res.exception).__name__}: {res.exception}")
                continue
            got = "accepted" if res.exit_code == 0 else "refused"
            results[got] += 1
            lines = res.output.splitlines()
            if got != expect:
                problems.append(f"{name}: expected {expect}, got exit {res.exit_code}: {res.output[:300]}")
            elif got == "refused" and (res.exit_code != 2 or len(lines) != 1 or len(lines[0]) > 400):
                problems.append(f"{name}: refusal not one line of exit 2: {res.exit_code} {res.output[:300]!r}")
            elif got == "accepted":
                accepted.append((name, res.output.split()[2]))
        wall = time.perf_counter() - started
    finally:
        signal.signal(signal.SIGALRM, old)
    with Store(db) as store:
        stored = {r["id"]: r for r in store.runs()}
    left = sorted(set(stored) - {rid for _, rid in accepted})
    if left:
        problems.append(f"refused cases left runs behind: {left[:10]}")
    for name, rid in accepted:
        run = stored[rid]
        if "live" in name:
            with Store(db) as store:
                statuses = {p["status"] for p in store.points(rid)}
            if run["status"] != "interrupted" or "running" in statuses or run["finished"] is None:
                problems.append(f"{name}: imported {run['status']} with points {sorted(statuses)}")
    problems += _readers(db, tmp_path, [rid for _, rid in accepted])
    with capsys.disabled():
        print(f"\nimport corpus (seed {SEED}): {CASES} cases, {results['refused']} refused, {results['accepted']}"
              f" accepted, {len(problems)} problems; slowest case {slowest[0] * 1000:.0f} ms ({slowest[1]});"
              f" imports {wall:.1f} s, then readers {time.perf_counter() - started - wall:.1f} s")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])
    assert results["accepted"] >= 20 and results["refused"] >= CASES // 2


def _readers(db: Path, tmp: Path, ids: list[str]) -> list[str]:
    """Everything that reads a run, on every accepted run: a failure is an accepted-invalid import."""
    problems = []
    runner = CliRunner()
    res = runner.invoke(main, ["list", "--db", str(db)])
    if res.exit_code != 0:
        problems.append(f"catnip list: exit {res.exit_code}: {res.output[-300:]} {res.exception!r}")
    for rid in ids:
        for args in (["--loss"], ["--apps"]):
            res = runner.invoke(main, ["report", rid, "--db", str(db), *args])
            if res.exit_code != 0:
                problems.append(f"catnip report {rid} {' '.join(args)}: exit {res.exit_code}: {res.output[-200:]}"
                                f" {res.exception!r}")
    queue = RunQueue(db, tmp / "logs", machine_busy=lambda: True)
    try:
        client = create_app(db=db, scenarios_dir=tmp, queue=queue).test_client()
        # The run page holds the report, the point summaries, the resolved scenarios and the
        # application metrics; the downloads of a few runs besides.
        urls = ["/runs"] + [f"/runs/{rid}" for rid in ids] + [
            u for rid in ids[:8] for u in (f"/runs/{rid}/report.json", f"/runs/{rid}/points/0/apps.json")]
        for url in urls:
            r = client.get(url)
            if r.status_code != 200:
                problems.append(f"GET {url}: {r.status_code} {r.get_data(as_text=True)[-200:]}")
    finally:
        queue.shutdown(timeout=5)
    return problems
