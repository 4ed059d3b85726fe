"""A run's free-text note (issue 48, finding 8; results/run_notes.py): one check of what a note may
be, and the note set, changed, shown and cleared from `catnip note`, the API (`Run.set_note`) and
the dashboard's run page (a form: CSRF, same origin, escaped on display, the kept page not built
again); shown on `catnip list` and the runs page; carried by `catnip export`/`catnip import` and
the docs archive; a database of the previous schema (version 9) migrated in place."""

from __future__ import annotations

import gzip
import json
import re
import sqlite3

import pytest
from click.testing import CliRunner
from flask import template_rendered

from catnip import api
from catnip.cli.archive import export_cmd, import_cmd
from catnip.cli.main import main
from catnip.controller.run_queue import RunQueue
from catnip.results import archive, docs_archive, run_notes
from catnip.results import store as store_mod
from catnip.results.store import SCHEMA_VERSION, Store
from tests.test_dashboard_browser import _shot, _text, _wait, browser, catnip_web  # noqa: F401 (a fixture)
from tests.test_store_migrations import RUN as OLD_RUN, _old_file, _schema
from tests.test_web import _record_run
from catnip.webui import notes as web_notes
from catnip.webui.app import create_app

RUN, OTHER = "20260101-000000-quick-a1b2", "20260102-000000-quick-c3d4"
NOTE = "re-run after the window-probe fix; machine busy"
# Markup, a shell substitution and a second line: stored and shown as the text it is.
HOSTILE = "<script>alert(1)</script> $(touch /tmp/catnip-note-ran) `id`\nsecond line & more"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "catnip.db"
    with Store(path) as store:
        _record_run(store, RUN, {1: 2.0, 2: 4.0}, dropped=10)
        _record_run(store, OTHER, {1: 1.0}, dropped=5)
    return path


def _note(path, run_id=RUN):
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT note FROM runs WHERE id=?", (run_id,)).fetchone()[0]
    finally:
        con.close()


def _cli(*args, stdin=None):
    return CliRunner().invoke(main, list(args), input=stdin)


# --- what a note may be ---------------------------------------------------------------------------------
def test_a_note_is_text_of_at_most_max_chars_without_control_characters():
    assert run_notes.check("  a\r\nb\rc\t d \n") == "a\nb\nc\t d"  # a form's \r\n; blanks around taken off
    longest = "é" * run_notes.MAX_CHARS
    assert run_notes.check(longest) == longest  # characters, not bytes
    with pytest.raises(run_notes.NoteTooLong, match=f"is {run_notes.MAX_CHARS + 1} characters long; at most"
                                                    f" {run_notes.MAX_CHARS}"):
        run_notes.check(longest + "é")
    for bad, words in (("a\x1b[2Jb", "control character U+001B at character 2"), ("a\x00", "U+0000"),
                       ("x\ud800", "lone surrogate"), ("a\x7f", "U+007F")):
        with pytest.raises(run_notes.NoteError, match=re.escape(words)):
            run_notes.check(bad)
    for empty in ("", "  \r\n\t "):
        with pytest.raises(run_notes.EmptyNote, match="the note is empty"):
            run_notes.check(empty)
    for not_text in (None, 3, b"bytes", ["a"]):
        with pytest.raises(TypeError, match=f"a note is text, not {type(not_text).__name__}"):
            run_notes.check(not_text)
    assert run_notes.first_line("one\ntwo") == "one \u2026" and run_notes.first_line(None) == ""
    assert run_notes.first_line("x" * 200) == "x" * 79 + "\u2026"


# --- catnip note ------------------------------------------------------------------------------------------
def test_catnip_note_sets_shows_changes_and_clears(db):
    res = _cli("note", RUN, "--db", str(db))
    assert res.exit_code == 0 and res.output == f"run {RUN} has no note (`catnip note {RUN} TEXT` sets one)\n"
    res = _cli("note", RUN[:-3], NOTE, "--db", str(db))  # an unambiguous prefix
    assert res.exit_code == 0 and res.output == f"run {RUN}: note set ({len(NOTE)} characters)\n", res.output
    assert _note(db) == NOTE and _note(db, OTHER) is None
    assert _cli("note", RUN, "--db", str(db)).output == NOTE + "\n"
    res = _cli("note", RUN, "-", "--db", str(db), stdin=HOSTILE.replace("\n", "\r\n") + "\n")
    assert res.exit_code == 0 and res.output == f"run {RUN}: note set ({len(HOSTILE)} characters, 2 lines)\n"
    assert _note(db) == HOSTILE and _cli("note", RUN, "--db", str(db)).output == HOSTILE + "\n"
    res = _cli("list", "--db", str(db))
    line = next(v for v in res.output.splitlines() if v.startswith(RUN))
    assert line.endswith("  note: " + run_notes.first_line(HOSTILE)), line
    listed = {r["id"]: r["note"] for r in json.loads(_cli("list", "--db", str(db), "--json").output)}
    assert listed == {RUN: HOSTILE, OTHER: None}
    res = _cli("note", RUN, "--clear", "--db", str(db))
    assert res.exit_code == 0 and res.output == f"run {RUN}: note removed\n" and _note(db) is None
    assert _cli("note", RUN, "--clear", "--db", str(db)).output == f"run {RUN} had no note\n"


@pytest.mark.parametrize("args, words", [
    ([RUN, ""], "the note is empty: give its text, or --clear to remove the run's note"),
    ([RUN, "x" * (run_notes.MAX_CHARS + 1)], f"run {RUN}: the note is {run_notes.MAX_CHARS + 1} characters long"),
    ([RUN, "a\x1bb"], "control character U+001B"),
    ([RUN, "x", "--clear"], "TEXT and --clear: give one"),
    (["20990101-000000-nope-0000", "x"], "no run '20990101-000000-nope-0000' in"),
    (["2026010", "x"], "a prefix must name one run"),  # both runs start so
])
def test_catnip_note_refuses_in_one_line(db, args, words):
    _cli("note", RUN, NOTE, "--db", str(db))
    res = _cli("note", *args, "--db", str(db))
    assert res.exit_code == 2 and words in res.output and "Traceback" not in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1
    assert _note(db) == NOTE  # unchanged


def test_catnip_note_does_not_create_a_database(tmp_path):
    res = _cli("note", RUN, NOTE, "--db", str(tmp_path / "none.db"))
    assert res.exit_code == 2 and "no database" in res.output and not (tmp_path / "none.db").exists()


# --- the API ----------------------------------------------------------------------------------------------
def test_the_api_sets_reads_and_clears_a_note(db):
    run = api.open_run(RUN, db)
    assert run.note is None
    assert run.set_note(" " + NOTE + "\r\n") == NOTE and run.note == NOTE and _note(db) == NOTE
    frame = api.runs(db)
    assert str(frame["note"].dtype) == "string"
    notes = frame.set_index("run_id")["note"]
    assert notes[RUN] == NOTE and notes.isna().to_dict() == {RUN: False, OTHER: True}
    with pytest.raises(run_notes.NotText, match="a note is text, not int"):
        run.set_note(5)
    with pytest.raises(TypeError):
        run.set_note(None)
    with pytest.raises(api.NoteError, match="at most"):
        run.set_note("x" * (run_notes.MAX_CHARS + 1))
    with pytest.raises(run_notes.EmptyNote, match=r"Run\.clear_note\(\) removes"):
        run.set_note("  ")
    assert run.note == NOTE  # none of those changed it
    with pytest.raises(run_notes.UnknownRun, match="no run 'gone'"):
        api.Run("gone", db).set_note("x")
    assert run.clear_note() is True and run.note is None and run.clear_note() is False


# --- the dashboard ----------------------------------------------------------------------------------------
@pytest.fixture
def web(db, tmp_path):
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=db, scenarios_dir=tmp_path, queue=queue)
    client = app.test_client()
    client.environ_base["HTTP_ORIGIN"] = "http://localhost"
    yield app, client
    queue.shutdown(timeout=5)


def _note_token(client, run_id=RUN) -> str:
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    form = re.search(r'<form[^>]*id="note-form".*?</form>', page, re.S)
    assert form, "the run page has no note form"
    return re.search(r'name="csrf_token" value="([^"]+)"', form.group(0)).group(1)


def _section(page: str) -> str:
    found = re.search(r'<section id="run-note">.*?</section>', page, re.S)
    assert found, "no note section"
    return found.group(0)


def test_the_run_page_form_sets_changes_and_clears_the_note(web, db):
    app, client = web
    page = client.get(f"/runs/{RUN}").get_data(as_text=True)
    assert web_notes.MARKER not in page and 'id="run-note-none"' in _section(page)
    r = client.post(f"/runs/{RUN}/note", data={"csrf_token": _note_token(client), "note": HOSTILE.replace("\n", "\r\n")})
    assert r.status_code == 303 and r.headers["Location"].endswith(f"/runs/{RUN}#run-note")
    assert _note(db) == HOSTILE
    shown = _section(client.get(f"/runs/{RUN}").get_data(as_text=True))
    assert "<script>" not in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown  # text, escaped
    assert re.search(r'id="run-note-text">&lt;script&gt;.*\nsecond line &amp; more</p>', shown)
    assert 'id="note-clear"' in shown
    runs = client.get("/runs").get_data(as_text=True)
    cell = re.search(rf'data-run="{RUN}">.*?<td class="run-note-line"([^>]*)>([^<]*)</td>', runs, re.S)
    assert cell.group(2) == "&lt;script&gt;alert(1)&lt;/script&gt; $(touch /tmp/catnip-note-ran) `id` \u2026"
    assert 'title="&lt;script&gt;' in cell.group(1) and "<script>" not in runs
    r = client.post(f"/runs/{RUN}/note", data={"csrf_token": _note_token(client), "note": NOTE})
    assert r.status_code == 303 and _note(db) == NOTE and _note(db, OTHER) is None
    r = client.post(f"/runs/{RUN}/note", data={"csrf_token": _note_token(client), "clear": "1"})
    assert r.status_code == 303 and _note(db) is None
    r = client.post(f"/runs/{RUN}/note", data={"csrf_token": _note_token(client), "note": NOTE},
                    headers={"Accept": "application/json"})
    assert r.status_code == 200 and r.get_json() == {"run_id": RUN, "note": NOTE}


@pytest.mark.parametrize("data, words", [
    ({"note": "x" * (run_notes.MAX_CHARS + 1)}, f"the note is {run_notes.MAX_CHARS + 1} characters long; at most"),
    ({"note": " \r\n "}, "the note is empty: Clear removes a run&#39;s note"),
    ({"note": "a\x1b[2Jb"}, "control character U+001B"),
])
def test_a_note_not_taken_is_a_page_with_the_reason_and_the_text_kept(web, db, data, words):
    app, client = web
    client.post(f"/runs/{RUN}/note", data={"csrf_token": _note_token(client), "note": NOTE})
    r = client.post(f"/runs/{RUN}/note", data={"csrf_token": _note_token(client), **data})
    body = r.get_data(as_text=True)
    assert r.status_code == 400 and "Traceback" not in body
    section = _section(body)
    assert words in re.search(r'id="error-note">([^<]*)<', section).group(1)
    kept = re.search(r"<textarea[^>]*>(.*?)</textarea>", section, re.S).group(1)
    assert kept == data["note"]  # as typed: the browser gets it back to fix
    assert _note(db) == NOTE
    r = client.post(f"/runs/{RUN}/note", data={"csrf_token": _note_token(client), **data},
                    headers={"Accept": "application/json"})
    assert r.status_code == 400 and words.replace("&#39;", "'") in r.get_json()["error"]


@pytest.mark.parametrize("token, data, words", [
    (None, {"note": "x"}, "The CSRF token is missing"),
    ("forged", {"note": "x"}, "The CSRF token is invalid"),
    ("real", {"note": "x", "mode": "sh"}, "unknown field &#39;mode&#39;: the note form sends note, or clear"),
    ("real", {"clear": "yes"}, "clear=&#39;yes&#39;: the Clear button sends clear=1"),
    ("real", {"note": ["x", "y"]}, "note is given 2 times"),
    ("real", {}, "the form sent no note (field note), nor clear"),
])
def test_a_bad_note_post_is_refused_and_changes_nothing(web, db, token, data, words):
    app, client = web
    real = _note_token(client)
    form = {**data, **({} if token is None else {"csrf_token": real if token == "real" else token})}
    r = client.post(f"/runs/{RUN}/note", data=form)
    assert r.status_code == 400 and words in r.get_data(as_text=True), r.get_data(as_text=True)
    assert _note(db) is None


def test_a_note_post_from_elsewhere_or_for_no_run_is_refused(web, db):
    app, client = web
    token = _note_token(client)
    r = client.post(f"/runs/{RUN}/note", data={"csrf_token": token, "note": "x"},
                    headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and _note(db) is None
    r = client.post("/runs/20990101-000000-nope-0000/note", data={"csrf_token": token, "note": "x"})
    assert r.status_code == 404 and "no run &#39;20990101-000000-nope-0000&#39;" in r.get_data(as_text=True)
    r = client.post("/runs/.hidden/note", data={"csrf_token": token, "note": "x"})
    assert r.status_code == 400 and "is not a run id" in r.get_data(as_text=True)


def test_the_kept_page_is_not_built_again_for_a_note_and_carries_each_visitors_token(web, db):
    app, client = web
    built = []

    def count(sender, template, context, **extra):
        if template.name == "run.html":
            built.append(context["run_id"])
    template_rendered.connect(count, app)
    try:
        first = _note_token(client)
        other = app.test_client()
        other.environ_base["HTTP_ORIGIN"] = "http://localhost"
        second = _note_token(other)
        assert first != second  # each session its own token: the kept page carries none
        assert other.post(f"/runs/{RUN}/note", data={"csrf_token": second, "note": NOTE}).status_code == 303
        page = client.get(f"/runs/{RUN}").get_data(as_text=True)
        assert NOTE in _section(page)
        again = re.search(r'name="csrf_token" value="([^"]+)"', _section(page)).group(1)
        assert client.post(f"/runs/{RUN}/note", data={"csrf_token": again, "clear": "1"}).status_code == 303
    finally:
        template_rendered.disconnect(count, app)
    assert built == [RUN] and _note(db) is None  # built once; the note went in on each request
    kept = list(app.extensions["catnip_pages"].pages.values())
    assert len(kept) == 1 and web_notes.MARKER in kept[0] and "csrf_token" not in kept[0]


def test_a_running_runs_page_has_the_note_form_too(web, db):
    app, client = web
    with Store(db) as store:
        store.create_run("live", "quick", "x", {"name": "quick"}, {}, 1, "abc", {}, {})
    assert client.post("/runs/live/note", data={"csrf_token": _note_token(client, "live"), "note": NOTE}
                       ).status_code == 303
    assert NOTE in _section(client.get("/runs/live").get_data(as_text=True)) and _note(db, "live") == NOTE


# --- export, import, the docs archive -------------------------------------------------------------------
def test_export_and_import_carry_the_note(db, tmp_path, isolated_data):
    assert _cli("note", RUN, HOSTILE, "--db", str(db)).exit_code == 0
    out = tmp_path / "x.catnip.json.gz"
    assert CliRunner().invoke(export_cmd, [RUN, "--db", str(db), "--out", str(out)]).exit_code == 0
    runs = json.loads(gzip.decompress(out.read_bytes()))["tables"]["runs"]
    assert dict(zip(runs["columns"], runs["rows"][0]))["note"] == HOSTILE
    target = tmp_path / "target.db"
    res = CliRunner().invoke(import_cmd, [str(out), "--db", str(target), "--as", "theirs"])
    assert res.exit_code == 0, res.output
    assert _note(target, "theirs") == HOSTILE
    assert _cli("note", "theirs", "--db", str(target)).output == HOSTILE + "\n"


def test_import_refuses_a_note_the_cli_would_refuse(db, tmp_path, isolated_data):
    _cli("note", RUN, NOTE, "--db", str(db))
    with Store(db) as store:
        doc = archive.export_run(store, RUN)
    cols = doc["tables"]["runs"]["columns"]
    for value, words in (("x" * (run_notes.MAX_CHARS + 1), f"at most {run_notes.MAX_CHARS}"),
                         ("a\x1b[2J", "control character U+001B"), (" padded ", "starts or ends with blanks"),
                         (7, "Input should be a valid string")):
        doc["tables"]["runs"]["rows"][0][cols.index("note")] = value
        path = tmp_path / "bad.catnip.json.gz"
        path.unlink(missing_ok=True)
        path.write_bytes(gzip.compress(json.dumps(doc).encode()))
        res = CliRunner().invoke(import_cmd, [str(path), "--db", str(tmp_path / "t.db")])
        assert res.exit_code == 2 and "table runs row 0 column note" in res.output and words in res.output, res.output
    with Store(tmp_path / "t.db") as store:
        assert store.runs() == []


def test_an_export_from_before_notes_imports_without_one(tmp_path):
    """An export of schema version 9 (archive/ holds such files) has no note column: imported, the run has none."""
    from tests.conftest import REPO
    name = "20261128-083955-quick-26f8"
    document, sha = archive.read(REPO / "archive" / "runs" / archive.default_name(name))
    assert "note" not in document["tables"]["runs"]["columns"] and document["exported"]["schema_version"] < 10
    with Store(tmp_path / "t.db") as store:
        archive.import_run(store, document, source="old", sha256=sha)
        assert store.run(name)["note"] is None
        assert run_notes.set_note(store, name, NOTE) == NOTE


def test_the_docs_archive_keeps_a_runs_note(db, tmp_path):
    _cli("note", RUN, NOTE, "--db", str(db))
    with Store(db) as store:
        docs_archive.add_run(store, RUN, tmp_path / "archive", None, "abc")
    with docs_archive.RunsDB(tmp_path / "archive") as runs_db:
        runs_db.need(RUN)
        assert runs_db.store.run(RUN)["note"] == NOTE


# --- a database of the previous schema -------------------------------------------------------------------
def _version_9_file(path) -> None:
    """A file as the code of schema version 9 left it: version 0's tables and indexes, migrations 1-9
    (append only: tests/test_store_migrations.py), a row in runs, points, pages and queue_samples."""
    _old_file(path)
    con = sqlite3.connect(path)
    with con:
        for statement in store_mod._statements(store_mod.SCHEMA):
            con.execute(statement)
        for step in store_mod.MIGRATIONS[:9]:
            step.apply(con)
        con.execute("UPDATE runs SET imported=? WHERE id='r1'", ('{"file": "x.catnip.json.gz"}',))
        con.execute("PRAGMA user_version = 9")
    con.close()


def test_a_version_9_database_gets_the_note_column_in_place(tmp_path):
    path = tmp_path / "v9.db"
    _version_9_file(path)
    before = _schema(path)
    assert "note" not in [c[0] for c in before["runs"]]
    with Store(path) as store:
        assert store.migrated == [10] == [SCHEMA_VERSION] and store.version() == 10
        run = store.run("r1")
        assert tuple(run)[:len(OLD_RUN)] == OLD_RUN and run["imported"] == '{"file": "x.catnip.json.gz"}'
        assert run["note"] is None
        assert run_notes.set_note(store, "r1", NOTE) == NOTE
    Store(tmp_path / "fresh.db").close()
    assert _schema(path) == _schema(tmp_path / "fresh.db")
    assert _cli("note", "r1", "--db", str(path)).output == NOTE + "\n"
    with Store(path) as store:
        assert store.migrated == []  # once


def test_the_docs_state_the_schema_version_and_the_notes_limit():
    from tests.conftest import REPO
    database = (REPO / "docs" / "database.md").read_text()
    assert f"This page describes version {SCHEMA_VERSION}:" in database and "| 10 | `runs.note` |" in database
    for page in ("database.md", "api.md", "dashboard.md"):
        assert f"{run_notes.MAX_CHARS:,} characters" in (REPO / "docs" / page).read_text(), page


# --- in a real browser ------------------------------------------------------------------------------------
@pytest.fixture
def note_server(isolated_data):
    """`catnip web` on a database holding one finished run written by hand (no network)."""
    db = isolated_data / "data" / "catnip.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    with Store(db) as store:
        _record_run(store, RUN, {1: 2.0, 2: 4.0}, dropped=10)
    with catnip_web("--db", str(db)) as address:
        yield address, db


def test_a_note_typed_on_the_run_page_in_a_browser(note_server, browser):  # noqa: F811
    """Typed into the run page's form in Chromium (which sends its line ends as \\r\\n), saved, shown as
    the text it is (no script runs), its first line on the runs page, then cleared."""
    from selenium.webdriver.common.by import By
    base, db = note_server
    d = browser
    d.get(f"{base}/runs/{RUN}")
    d.find_element(By.CSS_SELECTOR, "#note-form textarea[name=note]").send_keys(HOSTILE)
    d.find_element(By.ID, "note-save").click()
    shown = _wait("the saved note", lambda: _text(d, By.ID, "run-note-text"), 20)
    assert shown == HOSTILE and _note(db) == HOSTILE
    assert d.execute_script("return document.querySelectorAll('#run-note script').length") == 0
    d.execute_script("window.scrollTo(0, 0)")  # the page came back at its note: the shot from the top
    _shot(d, "11-run-note")
    d.get(f"{base}/runs")
    cell = d.find_element(By.CSS_SELECTOR, f'tr[data-run="{RUN}"] .run-note-line')
    assert cell.text == run_notes.first_line(HOSTILE) and cell.get_attribute("title") == HOSTILE
    d.get(f"{base}/runs/{RUN}")
    d.find_element(By.ID, "note-clear").click()
    _wait("the note cleared", lambda: _text(d, By.ID, "run-note-none"), 20)
    assert _note(db) is None
