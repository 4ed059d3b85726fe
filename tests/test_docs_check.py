"""`catnip docs check` and `build` (issue 46): the docs' generated regions against the archive of
runs kept in archive/. The check passes on this repository; a changed archived number, a region
citing a run not archived, a file the manifest does not list, each makes it fail. Everything here
reads archive/ (copied to a temporary folder where it is changed), never data/catnip.db."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from catnip.cli.main import main
from catnip.results import archive as export
from catnip.results import doc_regions, docs_archive
from catnip.results.store import Store
from catnip.testbed import paths

REPO = paths.REPO
DOC = "docs/reproduction.md"  # holds the first generated table (the default run)


@pytest.fixture(autouse=True)
def no_machine_database(tmp_path, monkeypatch):
    """Any read of the default database would find an empty folder: the tests cannot lean on it."""
    monkeypatch.setenv("CATNIP_DB", str(tmp_path / "not-here" / "catnip.db"))
    monkeypatch.setenv("CATNIP_DATA", str(tmp_path / "not-here"))


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def copy_repo(tmp_path: Path) -> Path:
    """archive/, README.md and every doc (Markdown only) in a folder of their own."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "archive", root / "archive")
    shutil.copy(REPO / "README.md", root / "README.md")
    for md in (REPO / "docs").rglob("*.md"):
        (root / md.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(md, root / md.relative_to(REPO))
    return root


def first_region(root: Path) -> doc_regions.Region:
    lines = (root / DOC).read_text().split("\n")
    # A page-time table of one run (the tests change its pages; a pooled region names several runs)
    regions = [r for r in doc_regions.parse(DOC, lines) if r.attrs.get("layout") == "catnip-table-ii"
               and not any(c in r.attrs["runs"] for c in "+,")]
    assert regions, f"{DOC} has no generated table"
    return regions[0]


def rewrite_run(root: Path, run_id: str, change, reseal: bool = True) -> None:
    """Changes the archived document of `run_id` in place (`change(document)`), then (`reseal`)
    gives the manifest the file's new size and SHA-256, as if it had been archived so."""
    path = root / "archive" / docs_archive.RUNS / export.default_name(run_id)
    document = json.loads(gzip.decompress(path.read_bytes()))
    change(document)
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    if reseal:
        manifest = docs_archive.manifest_path(root / "archive")
        doc = json.loads(manifest.read_text())
        for e in doc["runs"]:
            if e["run_id"] == run_id:
                e["bytes"], e["sha256"] = path.stat().st_size, docs_archive.sha256_of(path)
        manifest.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def column(document: dict, table: str, name: str) -> tuple[list, int]:
    t = document["tables"][table]
    return t["rows"], t["columns"].index(name)


def test_the_repository_docs_match_the_archive():
    result = invoke("docs", "check")
    assert result.exit_code == 0, result.output
    found = re.search(r"(\d+) region\(s\) in (\d+) doc\(s\) match", result.output)
    assert found and int(found[1]) >= 2, result.output  # not a pass over nothing
    assert first_region(REPO).attrs["runs"] in docs_archive.load(REPO / "archive")


def test_the_archive_is_small_and_listed():
    entries = docs_archive.load(REPO / "archive")
    assert entries
    assert sum(e["bytes"] for e in entries.values()) < 30 * 1024 * 1024
    assert docs_archive.problems(REPO / "archive") == []
    for e in entries.values():
        assert e["status"] == "done" and e["points"] and e["seed"] is not None and e["git_rev"]


def test_a_changed_archived_number_fails_the_check(tmp_path):
    root = copy_repo(tmp_path)
    region = first_region(root)

    def slower(document):
        rows, i = column(document, "pages", "duration")
        rows[0][i] += 1.0  # one page one second slower: its page's mean moves
    rewrite_run(root, region.attrs["runs"], slower)
    result = invoke("docs", "check", "--root", str(root))
    assert result.exit_code == 1, result.output
    assert f"{DOC}:{region.start + 1}: region layout={region.attrs['layout']}" in result.output
    assert "differs from the archive" in result.output


def test_an_archived_file_changed_behind_the_manifest_fails(tmp_path):
    root = copy_repo(tmp_path)
    run_id = first_region(root).attrs["runs"]

    def nothing_visible(document):
        document["exported"]["at"] += 1
    rewrite_run(root, run_id, nothing_visible, reseal=False)
    result = invoke("docs", "check", "--root", str(root))
    assert result.exit_code == 1
    assert "not the file the manifest lists" in result.output and export.default_name(run_id) in result.output


def test_a_region_citing_a_run_not_archived_fails(tmp_path):
    root = copy_repo(tmp_path)
    run_id = first_region(root).attrs["runs"]
    doc = root / DOC
    doc.write_text(doc.read_text().replace(f"runs={run_id}", "runs=20990101-000000-gone-0000", 1))
    result = invoke("docs", "check", "--root", str(root))
    assert result.exit_code == 1
    assert "cites run 20990101-000000-gone-0000" in result.output and "not in" in result.output


def test_a_file_the_manifest_does_not_list_fails(tmp_path):
    root = copy_repo(tmp_path)
    (root / "archive" / "runs" / "stray.catnip.json.gz").write_bytes(b"")
    result = invoke("docs", "check", "--root", str(root))
    assert result.exit_code == 1 and "stray.catnip.json.gz: not in" in result.output


def test_build_mends_an_edited_region(tmp_path):
    root = copy_repo(tmp_path)
    doc = root / DOC
    original = doc.read_text()
    region = first_region(root)
    lines = original.split("\n")
    lines[region.end - 2] = "| typed by hand |"
    doc.write_text("\n".join(lines))
    result = invoke("docs", "check", "--root", str(root))
    assert result.exit_code == 1 and f"line {region.end - 1} differs" in result.output, result.output
    result = invoke("docs", "build", "--root", str(root))
    assert result.exit_code == 0 and "rewrote" in result.output, result.output
    assert doc.read_text() == original
    assert invoke("docs", "check", "--root", str(root)).exit_code == 0


LATE_DOC = """# late
<!-- catnip:generated layout=catnip-table-ii runs={run} columns=page,n,mean -->
<!-- /catnip:generated -->
<!-- catnip:generated layout=catnip-table-ii runs={run} columns=page,n,mean late=mark -->
<!-- /catnip:generated -->
"""


def _verdicts(root: Path, run_id: str, ok: bool) -> list[list[str]]:
    def set_ok(document):
        rows, i = column(document, "points", "realtime_ok")
        for r in rows:
            r[i] = int(ok)
    rewrite_run(root, run_id, set_ok)
    manifest = docs_archive.manifest_path(root / "archive")
    doc = json.loads(manifest.read_text())  # the manifest says what the file says
    for e in doc["runs"]:
        for p in e["points"] if e["run_id"] == run_id else ():
            p["realtime_ok"] = ok
    manifest.write_text(json.dumps(doc))
    md = root / "docs" / "late.md"
    md.write_text(LATE_DOC.format(run=run_id))
    result = invoke("docs", "build", "--root", str(root), str(md))
    assert result.exit_code == 0, result.output
    text = md.read_text()
    return [part.split("\n") for part in text.split("<!-- /catnip:generated -->")[:2]]


def test_points_that_missed_real_time_are_left_out_unless_marked(tmp_path):
    root = copy_repo(tmp_path)
    run_id = first_region(root).attrs["runs"]
    omit, mark = _verdicts(root, run_id, ok=False)
    assert "| (no rows) |  |  |" in omit and "rows, whose points did not keep real time" in " ".join(omit)
    assert sum(line.startswith("| 1 |") for line in omit) == 0
    assert sum(line.startswith("| 1 |") and line.endswith("| no |") for line in mark) == 1
    assert "Marked, not left out" in " ".join(mark)
    omit, mark = _verdicts(root, run_id, ok=True)
    assert sum(line.startswith("| 1 |") for line in omit) == 1 and "Left out" not in " ".join(omit)
    assert "kept real time." in " ".join(omit)


@pytest.mark.parametrize("lines, why", [
    (["<!-- catnip:generated layout=catnip-table-ii runs=R -->"], "x.md:1: region not closed"),
    (["<!-- /catnip:generated -->"], "x.md:1: <!-- /catnip:generated --> without a region"),
    (["<!-- catnip:generated layout=catnip-table-ii runs=R -->", "<!-- catnip:generated archive=contents -->"],
     "x.md:2: a region opens inside the region of line 1"),
    (["<!-- catnip:generated layout=catnip-table-ii runs=R colour=red -->"], "'colour' is not one of layout"),
    (["<!-- catnip:generated layout=catnip-table-ii -->"], "x.md:1: region has no runs="),
    (["<!-- catnip:generated layout=catnip-table-ii runs=R view=chart -->"], "view=chart is not one of table, text"),
    (["<!-- catnip:generated layout=catnip-table-ii runs=R decimals=12 -->"], "decimals=12 is not a whole number"),
    (["<!-- catnip:generated  layout=x runs=R-->"], "x.md:1: a region's opening comment must be"),
])
def test_a_malformed_region_is_named(lines, why):
    with pytest.raises(doc_regions.RegionError, match=re.escape(why)):
        doc_regions.parse("x.md", lines)


def test_an_unknown_layout_or_column_is_named(tmp_path):
    root = copy_repo(tmp_path)
    run_id = first_region(root).attrs["runs"]
    md = root / "docs" / "bad.md"
    md.write_text(f"<!-- catnip:generated layout=no-such runs={run_id} -->\n<!-- /catnip:generated -->\n"
                  f"<!-- catnip:generated layout=catnip-table-ii runs={run_id} columns=page,speed -->\n"
                  "<!-- /catnip:generated -->\n")
    result = invoke("docs", "check", "--root", str(root), str(md))
    assert result.exit_code == 1
    assert "docs/bad.md:1: region layout=no-such" in result.output and "unknown layout 'no-such'" in result.output
    assert "docs/bad.md:3:" in result.output and "columns speed are not the layout's" in result.output


def _database_with(tmp_path: Path, run_id: str, new_id: str | None = None, status: str | None = None) -> Path:
    """A database holding the archived run (as `catnip import` would write it)."""
    db = tmp_path / "db" / "catnip.db"
    document, sha = export.read(REPO / "archive" / docs_archive.RUNS / export.default_name(run_id))
    with Store(db) as store:
        export.import_run(store, document, new_id, source="test", sha256=sha)
        if status:
            store.db.execute("UPDATE runs SET status=? WHERE id=?", (status, new_id or run_id))
            store.db.commit()
    return db


def test_docs_archive_adds_a_done_run_once(tmp_path):
    run_id = first_region(REPO).attrs["runs"]
    db = _database_with(tmp_path, run_id)
    root = tmp_path / "fresh"
    result = invoke("docs", "archive", run_id[:15], "--db", str(db), "--root", str(root))
    assert result.exit_code == 0, result.output
    entry = docs_archive.load(root / "archive")[run_id]
    want = docs_archive.load(REPO / "archive")[run_id]
    for key in ("scenario", "name", "seed", "git_rev", "engine_sha256", "status", "started", "finished", "points"):
        assert entry[key] == want[key], key
    assert docs_archive.problems(root / "archive") == []
    again = invoke("docs", "archive", run_id, "--db", str(db), "--root", str(root))
    assert again.exit_code == 2 and "is archived already" in again.output


def test_docs_archive_refuses_a_run_that_is_not_done(tmp_path):
    run_id = first_region(REPO).attrs["runs"]
    db = _database_with(tmp_path, run_id, new_id="cut-short", status="interrupted")
    root = tmp_path / "fresh"
    result = invoke("docs", "archive", "cut-short", "--db", str(db), "--root", str(root))
    assert result.exit_code == 2 and "run cut-short is interrupted, not done" in result.output
    assert not (root / "archive" / "runs").exists() or not any((root / "archive" / "runs").iterdir())
    missing = invoke("docs", "archive", "nope", "--db", str(db), "--root", str(root))
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output
    no_db = invoke("docs", "archive", run_id, "--db", str(tmp_path / "none.db"), "--root", str(root))
    assert no_db.exit_code == 2 and "no database" in no_db.output


def test_a_manifest_edited_by_hand_fails(tmp_path):
    root = copy_repo(tmp_path)
    run_id = first_region(root).attrs["runs"]
    manifest = docs_archive.manifest_path(root / "archive")
    doc = json.loads(manifest.read_text())
    for e in doc["runs"]:
        if e["run_id"] == run_id:
            e["points"][0]["realtime_ok"] = not e["points"][0]["realtime_ok"]  # a verdict the file does not hold
    manifest.write_text(json.dumps(doc))
    result = invoke("docs", "check", "--root", str(root))
    assert result.exit_code == 1
    assert f"run {run_id}'s points is" in result.output and "but its file says" in result.output


def test_a_marker_in_a_code_block_is_an_example_not_a_region():
    lines = ["```markdown", "<!-- catnip:generated layout=catnip-table-ii runs=R -->", "```",
             "<!-- catnip:generated archive=contents -->", "<!-- /catnip:generated -->"]
    regions = doc_regions.parse("x.md", lines)
    assert [(r.start, r.attrs) for r in regions] == [(3, {"archive": "contents"})]
