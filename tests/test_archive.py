"""`catnip export` / `catnip import` (results/archive.py, cli/archive.py): a run written
to one file and read into a fresh database is the same run: every table's rows, `catnip report`
(text, --json, --apps) and the dashboard's run page are identical; the refusals are one line and
leave nothing behind; docs/database.md describes every column of the schema.

Runs are records written through the store's API, as a run writes them (tests/test_web.py's
_record_run for pages, link counters, queue samples and progress; the rest added here so that
every table holds rows of the run)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from catnip.cli.archive import export_cmd, import_cmd
from catnip.cli.main import main
from catnip.controller.run_queue import RunQueue
from catnip.results import archive
from catnip.results.store import SCHEMA_VERSION, Store
from catnip.testbed.paths import REPO
from tests.test_web import _record_run
from catnip.webui.app import create_app

RUN, OTHER = "20260101-000000-quick-a1b2", "20260101-010000-other-c3d4"
TAG = "<b>x</b>"


def _record_rich(store: Store, run_id: str) -> None:
    """A finished two-point run with rows in every table: point 0 as tests/test_web.py records a
    web run, plus objects, TCP counters, application samples (ties in t, errors, markup, unicode),
    a transfer trial, a second router's counters, and every metadata column of its point; point 1
    failed with samples only."""
    _record_run(store, run_id, {1: 2.0, 2: 4.0}, dropped=100, high=True)
    store.add_transfers(run_id, 0, [{"client": f"c{c}", "server": "v1", "page": 1, "round": 0, "url": "/p1.html",
                                     "conn": 0, "start": 100.0 + c, "connect_done": 100.01 + c,
                                     "first_byte": 100.1 + c, "end": 102.0 + c, "body_bytes": 4945,
                                     "header_bytes": 230, "status": 200} for c in range(3)], [])
    store.add_tcp_counters(run_id, 0, "ctpc1", {"TcpOutSegs": 2**40, "TcpRetransSegs": 12, "TcpExtTCPTimeouts": 1})
    store.add_tcp_counters(run_id, 0, "ctps1", {"TcpOutSegs": 900, "TcpRetransSegs": 3})
    # Ties in (app, metric, t): Store.samples breaks them by rowid, and the goodput chart's flow order follows.
    store.add_samples(run_id, 0, [
        {"app": "bulk", "metric": "goodput", "flow": f, "tag": tag, "t": t, "value": v, "unit": "bit/s"}
        for f, tag, t, v in (("b", TAG, 100.0, 1e6), ("a", "rtt20ms", 100.0, 4e6), ("a", "rtt20ms", 101.0, 5e6),
                             ("b", TAG, 101.0, 3e6), ("a", "rtt20ms", 102.0, 0.1 + 0.2))]
        + [{"app": "telnet", "metric": "echo_delay", "host": "ctpc1", "peer": "ctps1", "flow": f"e{i}",
            "tag": "rtt20ms", "t": 10.0 + i, "value": v, "unit": "s"} for i, v in enumerate((0.02, 0.05, 1e-300))]
        + [{"app": "telnet", "metric": "echo_delay", "tag": "rtt20ms", "t": 20.0, "unit": "s", "error": "timeout: ü"}])
    store.add_transfer_trials(run_id, 0, [{"profile": "reno2004", "p": 0.01, "p_high": None, "trial": 0,
                                          "size": 8192, "packets": 6, "latency": 0.8, "data_segments": 7,
                                          "retransmissions": 1, "high_segments": 0, "error": None}])
    final = {"links": {"ctprc>ctpc1": {"arrived": {"other": [10, 15000]}, "sent": {"other": [10, 15000]},
                                       "max_queue_pkts": 1, "max_queue_bytes": 1500, "late_events": 0,
                                       "max_late_us": 1.7976931348623157e308}}}
    store.add_link_stats(run_id, 0, "ctprc", final, {"ctprc>ctpc1": "access"}, {"ctprc>ctpc1": {"rate_bps": 10e6}},
                         {"ctprc>ctpc1": {"queue_dropped": 0, "user_dropped": 2}})
    store.update_point(run_id, 0, switch_kind="linux-bridge", link_backend="engine", capture=f"/data/runs/{run_id}/p0.pcap",
                       sysctls={"client": {"net.ipv4.tcp_sack": "1"}}, offloads={"client": {"tso": "off"}},
                       fidelity={"engine_events": 1000, "late_events": 2, "late_fraction": 0.002, "max_late_us": 1500.0,
                                 "kernel_queue_drops": 0, "late_threshold_us": 1000, "cpu_busy_fraction": 0.31},
                       environment={"when": "before", "hosts": {"client": {"host": "ctpc1", "qdiscs": {
                           "ctpc1-eth0": "qdisc htb 5: root refcnt 2 r2q 10\n Sent 0 bytes 0 pkt"}}}},
                       environment_after={"when": "after", "hosts": {}, "routers": {}},
                       # Stored as given (a string is not re-encoded): not canonical JSON, so exported as text.
                       marking='{"data_high": 10, "data_low": 30, "control_high": 1, "control_low": 2, '
                               '"retransmissions": 0, "documents": 4}')
    store.create_point(run_id, 1, 0, {"router.policy": {"kind": "red"}}, {"topology": {"clients": 3}}, 2)
    store.add_samples(run_id, 1, [{"app": "ftp", "metric": "file_time", "value": 2.5, "unit": "s"}])
    store.update_point(run_id, 1, status="failed", error="RuntimeError: time limit 30 s reached", finished=2.0)


@pytest.fixture
def source(tmp_path) -> Path:
    db = tmp_path / "source.db"
    with Store(db) as store:
        _record_run(store, OTHER, {1: 1.0}, dropped=5)  # stored first: the run's rowids do not start at 1
        _record_rich(store, RUN)
    return db


def _invoke(cmd, *args: str):
    return CliRunner().invoke(cmd, list(args))


def _export(db: Path, out: Path, run: str = RUN):
    res = _invoke(export_cmd, run, "--db", str(db), "--out", str(out))
    assert res.exit_code == 0, res.output
    return res


def _tables(con: sqlite3.Connection) -> dict[str, list[str]]:
    """Every table of a database with its columns (read here, not by the code under test)."""
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    return {t: [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')] for t in names}


def _rows(db: Path, run_id: str) -> dict[str, list[tuple]]:
    """Every table's rows of a run (runs by id, the others by run_id), in stored order, the
    provenance column left out."""
    con = sqlite3.connect(db)
    try:
        out = {}
        for t, columns in _tables(con).items():
            cols = [c for c in columns if not (t == "runs" and c == archive.PROVENANCE_COLUMN)]
            key = "id" if t == "runs" else "run_id"
            out[t] = con.execute(f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{t}" WHERE "{key}"=?'
                                 " ORDER BY rowid", (run_id,)).fetchall()
        return out
    finally:
        con.close()


@pytest.fixture
def imported(source, tmp_path, monkeypatch):
    monkeypatch.setenv("CATNIP_DATA", str(tmp_path / "data"))
    out = tmp_path / "x.catnip.json.gz"
    _export(source, out)
    target = tmp_path / "target.db"
    res = _invoke(import_cmd, str(out), "--db", str(target))
    assert res.exit_code == 0, res.output
    return source, target, out, res.output


def test_the_rich_run_has_rows_in_every_table(source):
    # Else the round trip below would not cover a table (a new migration's table must be filled here).
    con = sqlite3.connect(source)
    tables = _tables(con)
    con.close()
    assert all(t == "runs" or "run_id" in cols for t, cols in tables.items())  # else _rows would miss rows
    assert {t: len(r) for t, r in _rows(source, RUN).items() if not r} == {}


def test_import_says_what_it_did(imported):
    source, target, _, output = imported
    rows = sum(len(r) for r in _rows(source, RUN).values())
    assert output == f"imported run {RUN} into {target} ({rows} rows); `catnip report {RUN} --db {target}` shows it\n"


def test_every_table_round_trips_row_for_row(imported):
    source, target, *_ = imported
    assert _rows(target, RUN) == _rows(source, RUN)
    with Store(target) as store:
        assert [r["id"] for r in store.runs()] == [RUN]  # the other run of the source stayed there
        assert store.link_summary(RUN, 0)[-1]["max_late_us"] == 1.7976931348623157e308  # the largest double
        assert store.points(RUN)[0]["marking"].startswith('{"data_high": 10, "data_low"')


@pytest.mark.parametrize("args", [(), ("--json",), ("--apps",), ("--loss",)])
def test_catnip_report_is_identical(imported, args):
    source, target, *_ = imported
    out = [CliRunner().invoke(main, ["report", RUN, "--db", str(db), *args]) for db in (source, target)]
    assert [r.exit_code for r in out] == [0, 0], out[0].output + out[1].output
    assert out[1].stdout == out[0].stdout
    assert RUN in out[0].stdout and len(out[0].stdout) > 300


def _page(db: Path, tmp_path: Path, url: str) -> str:
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    try:
        r = create_app(db=db, scenarios_dir=tmp_path, queue=queue).test_client().get(url)
        assert r.status_code == 200, url
        # The run page's note form carries the visitor's own CSRF token (webui/notes.py): not the run's.
        return re.sub(r'name="csrf_token" value="[^"]+"', 'name="csrf_token"', r.get_data(as_text=True))
    finally:
        queue.shutdown(timeout=5)


@pytest.mark.parametrize("url", [f"/runs/{RUN}", f"/runs/{RUN}/points/0/apps.json", f"/runs/{RUN}/report.csv"])
def test_dashboard_shows_the_imported_run_as_the_original(imported, tmp_path, url):
    source, target, *_ = imported
    page = _page(source, tmp_path, url)
    assert _page(target, tmp_path, url) == page
    if url.endswith(RUN):  # the page has what the run recorded: its tables, applications and configuration
        assert 'id="apps-0"' in page and "Packet capture, point 0" in page and "&lt;b&gt;x&lt;/b&gt;" in page


def test_import_as_a_new_id_next_to_the_original(imported, tmp_path):
    source, target, out, _ = imported
    res = _invoke(import_cmd, str(out), "--db", str(target), "--as", "copy-2")
    assert res.exit_code == 0 and res.output.startswith(f"imported run {RUN} as copy-2 into "), res.output
    renamed = {t: [tuple("copy-2" if v == RUN else v for v in r) for r in rows] for t, rows in _rows(source, RUN).items()}
    assert _rows(target, "copy-2") == renamed
    assert _rows(target, RUN) == _rows(source, RUN)
    text = [CliRunner().invoke(main, ["report", r, "--db", str(target)]).stdout for r in (RUN, "copy-2")]
    assert text[1] == text[0].replace(RUN, "copy-2")


def test_the_file_is_gzipd_json_with_decoded_metadata(imported, tmp_path):
    source, _, out, _ = imported
    raw = out.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and raw[4:8] == b"\0\0\0\0"  # gzip, no time in its header
    doc = json.loads(gzip.decompress(raw))
    assert (doc["format"], doc["format_version"], doc["run_id"]) == ("catnip-run-export", 1, RUN)
    assert doc["exported"]["schema_version"] == Store(source).version()
    assert doc["summary"]["rows"] == {t: len(r) for t, r in _rows(source, RUN).items()}
    points = doc["tables"]["points"]
    row = dict(zip(points["columns"], points["rows"][0]))
    # JSON columns are JSON in the file, except one whose text is not what re-encoding gives (kept as text)
    assert row["sysctls"] == {"client": {"net.ipv4.tcp_sack": "1"}} and row["fidelity"]["late_events"] == 2
    assert "ctpc1-eth0" in row["environment"]["hosts"]["client"]["qdiscs"]
    assert "marking" not in points["json_columns"] and isinstance(row["marking"], str)
    runs = doc["tables"]["runs"]
    assert dict(zip(runs["columns"], runs["rows"][0]))["versions"] == {"kernel": "x"}
    assert "CREATE TABLE samples" in doc["schema"]["samples"]
    assert doc["run_folder"] is None  # runs/RUN beside the database does not exist here


def test_the_run_folder_is_listed_with_sums(source, tmp_path, monkeypatch):
    monkeypatch.setenv("CATNIP_DATA", str(tmp_path / "data"))  # not where run folders are: beside the database
    folder = source.parent / "runs" / RUN
    (folder / "point0").mkdir(parents=True)
    (folder / "point0" / "engine-ctpr1.stats.jsonl").write_text('{"t": 0.5}\n')
    (folder / "p0.pcap").write_bytes(b"\xd4\xc3\xb2\xa1")
    (folder / "elsewhere").symlink_to(tmp_path / "source.db")  # not followed
    res = _export(source, tmp_path / "f.gz")
    assert "its folder (2 files) is listed, not included" in res.output
    doc = json.loads(gzip.decompress((tmp_path / "f.gz").read_bytes()))
    assert doc["run_folder"] == {"path": str(folder), "files": [
        {"path": "p0.pcap", "bytes": 4, "sha256": hashlib.sha256(b"\xd4\xc3\xb2\xa1").hexdigest()},
        {"path": "point0/engine-ctpr1.stats.jsonl", "bytes": 11,
         "sha256": hashlib.sha256(b'{"t": 0.5}\n').hexdigest()}]}


def test_a_prefix_names_the_run_and_the_default_file_name(source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = _invoke(export_cmd, RUN[:20], "--db", str(source))
    assert res.exit_code == 0, res.output
    assert (tmp_path / f"{RUN}.catnip.json.gz").exists() and f"-> {RUN}.catnip.json.gz (" in res.output


# --- refusals ------------------------------------------------------------------------------
def _one_line_refusal(res, *words: str) -> str:
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in res.output, res.output
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _write_gz(path: Path, doc) -> Path:
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def test_import_refuses_what_is_not_an_export(tmp_path, imported):
    _, _, good, _ = imported
    db = tmp_path / "never.db"
    doc = json.loads(gzip.decompress(good.read_bytes()))
    (tmp_path / "plain.json").write_text("{}")
    (tmp_path / "bad.gz").write_bytes(gzip.compress(b"\xff not json"))
    (tmp_path / "text.gz").write_bytes(gzip.compress(b"not json"))
    cases = [(tmp_path / "plain.json", "not gzip'd"), (tmp_path / "bad.gz", "not UTF-8 text: byte 0"),
             (tmp_path / "text.gz", "not a JSON document"),
             (_write_gz(tmp_path / "other.gz", {"name": "x"}), "is not a catnip run export"),
             (_write_gz(tmp_path / "flent.gz", [1, 2]), "is not a catnip run export"),
             (_write_gz(tmp_path / "v0.gz", {**doc, "format_version": "1"}), "format_version '1'"),
             (_write_gz(tmp_path / "rows.gz", {**doc, "tables": {**doc["tables"], "pages": {
                 **doc["tables"]["pages"], "rows": [[RUN]]}}}), "every row must be a list of 12 values"),
             (_write_gz(tmp_path / "mixed.gz", {**doc, "tables": {**doc["tables"], "progress": {
                 **doc["tables"]["progress"], "rows": [[OTHER, 0, 1.0, 1.0, "x", 0, 0]]}}}), "rows of another run"),
             (tmp_path / "missing.gz", "cannot read")]
    for path, words in cases:
        _one_line_refusal(_invoke(import_cmd, str(path), "--db", str(db)), str(path), words)
    assert not db.exists()  # the file is checked before the database is opened (or created)


def test_import_refuses_a_newer_format_and_a_newer_schema(tmp_path, imported):
    _, _, good, _ = imported
    doc = json.loads(gzip.decompress(good.read_bytes()))
    newer = _write_gz(tmp_path / "v2.gz", {**doc, "format_version": 2})
    _one_line_refusal(_invoke(import_cmd, str(newer), "--db", str(tmp_path / "a.db")),
                      "export format version 2; this code reads versions up to 1: update this checkout")
    samples = doc["tables"]["samples"]
    wider = {**samples, "columns": [*samples["columns"], "jitter"], "rows": [[*r, 1.0] for r in samples["rows"]]}
    schema = _write_gz(tmp_path / "s.gz", {**doc, "exported": {**doc["exported"], "schema_version": 9},
                                           "tables": {**doc["tables"], "samples": wider}})
    _one_line_refusal(_invoke(import_cmd, str(schema), "--db", str(tmp_path / "a.db")),
                      "table samples has columns jitter that", f"schema version is 9, this code's {SCHEMA_VERSION}")
    assert _rows(tmp_path / "a.db", RUN)["runs"] == []


def test_import_refuses_a_run_id_already_there_and_says_to_use_as(imported, tmp_path):
    source, target, out, _ = imported
    before = _rows(target, RUN)
    _one_line_refusal(_invoke(import_cmd, str(out), "--db", str(target)),
                      f"run {RUN} is already in {target}: import it under another id with --as NEW_ID")
    _one_line_refusal(_invoke(import_cmd, str(out), "--db", str(source), "--as", OTHER), f"run {OTHER} is already in")
    _one_line_refusal(_invoke(import_cmd, str(out), "--db", str(target), "--as", "../x"), "--as: '../x' is not a run id")
    assert _rows(target, RUN) == before and _rows(target, "../x")["runs"] == []


def test_a_failed_import_leaves_nothing_behind(imported, tmp_path):
    _, _, good, _ = imported
    db = tmp_path / "fresh.db"
    with Store(db):
        pass
    con = sqlite3.connect(db)  # the database refuses the last table written: every other one is in by then
    con.execute("CREATE TRIGGER no_trials BEFORE INSERT ON transfer_trials BEGIN SELECT RAISE(ABORT, 'no room');"
                " END")
    con.commit()
    res = _invoke(import_cmd, str(good), "--db", str(db))
    assert res.exit_code == 1 and res.output.count("\n") == 1, res.output
    assert "no room; nothing was imported" in res.output
    assert {t: r for t, r in _rows(db, RUN).items() if r} == {}
    con.execute("DROP TRIGGER no_trials")
    con.commit()
    con.close()
    res = _invoke(import_cmd, str(good), "--db", str(db))  # and the database takes the good file after it
    assert res.exit_code == 0, res.output


def test_export_refusals(source, tmp_path):
    out = tmp_path / "out.gz"
    _one_line_refusal(_invoke(export_cmd, "2099", "--db", str(source)), "no run '2099'")
    _one_line_refusal(_invoke(export_cmd, "2026", "--db", str(source), "--out", str(out)), "no run '2026'")  # 2 runs
    _one_line_refusal(_invoke(export_cmd, RUN, "--db", str(tmp_path / "none.db")), "no database")
    assert not (tmp_path / "none.db").exists()
    with Store(source) as store:
        store.create_run("live", "quick", "x", {}, {}, 1, "abc", {}, {})
    _one_line_refusal(_invoke(export_cmd, "live", "--db", str(source), "--out", str(out)), "run live is still running")
    out.write_text("keep me")
    _one_line_refusal(_invoke(export_cmd, RUN, "--db", str(source), "--out", str(out)), f"{out} exists already")
    assert out.read_text() == "keep me" and [p.name for p in tmp_path.iterdir() if p.name.startswith(".export")] == []


def test_the_import_is_marked_where_the_schema_has_a_provenance_column(imported, tmp_path):
    source, _, out, _ = imported
    db = tmp_path / "marked.db"
    with Store(db) as store:  # migration 8 adds the column
        assert archive.PROVENANCE_COLUMN in {r[1] for r in store.db.execute("PRAGMA table_info(runs)")}
    assert _invoke(import_cmd, str(out), "--db", str(db), "--as", "theirs").exit_code == 0
    with Store(db) as store:
        mark = json.loads(store.run("theirs")[archive.PROVENANCE_COLUMN])
    assert mark["run_id"] == RUN and mark["file"] == out.name
    assert mark["file_sha256"] == hashlib.sha256(out.read_bytes()).hexdigest() and mark["imported_at"] > 0
    assert _rows(db, "theirs")["samples"] == [tuple("theirs" if v == RUN else v for v in r)
                                              for r in _rows(source, RUN)["samples"]]


# --- docs/database.md ----------------------------------------------------------------------
def test_docs_describe_every_table_and_column(tmp_path):
    text = (REPO / "docs" / "database.md").read_text()
    with Store(tmp_path / "fresh.db") as store:
        schema = _tables(store.db)
    documented = {}
    for m in re.finditer(r"^### `(\w+)`\n(.*?)(?=^##)", text, re.S | re.M):
        documented[m.group(1)] = re.findall(r"^\| `(\w+)` \|", m.group(2), re.M)
    assert documented == schema


# --- hostile files (issue 47): bounded, typed, never running --------------------------------
def _bomb(path: Path, shape: str) -> Path:
    """About 4 GiB of text in a few MB of gzip members one after another (as the issue's 4.2 MB
    bomb of zeros): zeros; one JSON string that never ends; or rows of `[0]` without end."""
    head = {"zeros": b"", "string": b'{"format": "catnip-run-export", "pad": "',
            "rows": b'{"format": "catnip-run-export", "tables": {"pages": {"rows": ['}[shape]
    body = {"zeros": bytes(1 << 20), "string": b"a" * (1 << 20), "rows": b"[0]," * (1 << 18)}[shape]
    member = gzip.compress(body, compresslevel=9)
    with open(path, "wb") as fh:
        fh.write(gzip.compress(head))
        for _ in range(4 * 1024):
            fh.write(member)
    return path


@pytest.mark.slow  # a child process per shape, seconds each
@pytest.mark.parametrize("shape, words", [
    ("zeros", "not a JSON document: Expecting value at character 0"),
    ("string", f"a value of more than {archive.MAX_VALUE_CHARS} characters"),
    ("rows", f"more than {archive.MAX_ROWS} rows in its tables"),
])
def test_a_gzip_bomb_is_refused_within_the_bound(tmp_path, shape, words):
    # Run as a child process to read its peak memory: before, 2.7 GB then a MemoryError traceback.
    bomb = _bomb(tmp_path / "bomb.catnip.json.gz", shape)
    assert bomb.stat().st_size < 20e6
    code = ("import resource, sys\n"
            "from cli.main import main\n"
            "try:\n"
            "    main(['import', sys.argv[1], '--db', sys.argv[2]])\n"
            "except SystemExit as exc:\n"
            "    print('exit', exc.code, 'maxrss_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    res = subprocess.run([sys.executable, "-c", code, str(bomb), str(tmp_path / "t.db")], capture_output=True,
                         text=True, timeout=300, cwd=REPO)
    assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert words in res.stderr, res.stderr
    exit_code, rss_kb = re.search(r"exit (\d+) maxrss_kb (\d+)", res.stdout).groups()
    assert exit_code == "2"
    # Streamed: what is held is a window, one value, or the rows counted so far, not the text.
    assert int(rss_kb) * 1024 < 600e6, f"peak {int(rss_kb) // 1024} MB"
    print(f"{shape}: peak {int(rss_kb) // 1024} MB")
    assert not (tmp_path / "t.db").exists()


@pytest.mark.parametrize("which", ["fifo", "/dev/zero", "/dev/urandom", "directory"])
def test_a_file_that_is_not_regular_is_refused_at_once(tmp_path, which):
    path = Path(which)
    if which == "fifo":
        path = tmp_path / "export.gz"
        os.mkfifo(path)  # nobody writes it: an open() that waits would hang
    elif which == "directory":
        path = tmp_path
    res = _invoke(import_cmd, str(path), "--db", str(tmp_path / "t.db"))
    kind = {"fifo": "a FIFO", "directory": "a directory"}.get(which, "a device")
    _one_line_refusal(res, f"{path} is {kind}, not a regular file")
    assert not (tmp_path / "t.db").exists()


def _export_doc(source: Path) -> dict:
    with Store(source) as store:
        return archive.export_run(store, RUN)


def _set(doc: dict, table: str, column: str, value, row: int = 0) -> dict:
    t = doc["tables"][table]
    t["rows"][row][t["columns"].index(column)] = value
    return doc


@pytest.mark.parametrize("table, column, value, words", [
    ("runs", "started", "yesterday", "table runs row 0 column started is 'yesterday': Input should be a valid number"),
    ("pages", "duration", float("nan"), "table pages row 0 column duration is nan, not a finite number"),
    ("pages", "point", "zero", "table pages row 0 column point is 'zero': Input should be a valid integer"),
    ("points", "resolved", "{broken", "table points row 0 column resolved is not JSON text"),
    ("runs", "name", "n" * 608_000, "table runs row 0 column name is 'nnnn"),
    ("runs", "status", "weird", "table runs row 0 column status is 'weird': Input should be 'done'"),
])
def test_a_value_of_the_wrong_type_is_refused_naming_it(source, tmp_path, table, column, value, words):
    doc = _export_doc(source)
    if column == "resolved":  # carried as text (as a column that is not canonical JSON is): broken text
        points = doc["tables"]["points"]
        points["json_columns"].remove("resolved")
        i = points["columns"].index("resolved")
        for r in points["rows"]:
            r[i] = json.dumps(r[i])
    path = _write_gz(tmp_path / "bad.gz", _set(doc, table, column, value))
    res = _invoke(import_cmd, str(path), "--db", str(tmp_path / "t.db"))
    line = _one_line_refusal(res, words)
    assert len(line) < 400
    with Store(tmp_path / "t.db") as store:
        assert store.runs() == []


def test_a_quoted_run_id_through_json_columns_is_refused(source, tmp_path):
    # Issue 47: json_columns naming `id` made the import write the id quoted ('"jsonkey"').
    doc = _export_doc(source)
    doc["tables"]["runs"]["json_columns"].append("id")
    res = _invoke(import_cmd, str(_write_gz(tmp_path / "q.gz", doc)), "--db", str(tmp_path / "t.db"))
    _one_line_refusal(res, "json_columns id are not JSON columns of it")


@pytest.mark.parametrize("status", ["running", "queued"])
def test_a_run_recorded_running_is_imported_interrupted(source, tmp_path, status):
    # Issue 47: imported `running` with runner pid 1, it stayed running for ever with a live page.
    doc = _set(_set(_export_doc(source), "runs", "status", status), "runs", "finished", None)
    _set(doc, "runs", "runner", "00000000-0000-0000-0000-000000000000/1/1")
    _set(doc, "points", "status", "running", row=1)
    db = tmp_path / "t.db"
    res = _invoke(import_cmd, str(_write_gz(tmp_path / "live.gz", doc)), "--db", str(db))
    assert res.exit_code == 0, res.output
    with Store(db) as store:
        run = store.run(RUN)
        assert run["status"] == "interrupted" and run["finished"] is not None
        assert "imported while recorded as " + status in run["error"]
        assert [p["status"] for p in store.points(RUN)] == ["done", "interrupted"]
        assert json.loads(run["imported"])["status_was"] == status
    res = _invoke(main, "list", "--db", str(db))
    assert res.exit_code == 0 and "interrupted" in res.output
