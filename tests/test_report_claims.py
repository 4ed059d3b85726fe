"""The reproduction report (issue 46, item 6; papers/claims.py, docs/report.md, /report): the
papers' claims data is whole and cites what exists, docs/report.md is what the claims and the
archive give (and stops being so when either changes), and the dashboard's page shows every
paper's rows from the same function. Reads archive/ and the docs, never data/catnip.db."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from markupsafe import escape

import catnip.papers  # noqa: F401 (registers the papers and the report=claims region)
from catnip.papers import claims
from catnip.papers.registry import PAPERS, Citation, Paper
from catnip.results import doc_regions, docs_archive
from catnip.results.table import Column, Table
from catnip.testbed import paths

REPO = paths.REPO
REPORT = "docs/report.md"
FOUR = ("agrees", "direction only", "disagrees", "not run")  # the verdicts, as it spells them


@pytest.fixture(autouse=True)
def no_machine_database(tmp_path, monkeypatch):
    monkeypatch.setenv("CATNIP_DB", str(tmp_path / "not-here" / "catnip.db"))
    monkeypatch.setenv("CATNIP_DATA", str(tmp_path / "not-here"))


def _heading_lines(doc: Path) -> set[str]:
    return {m[1].strip() for m in re.finditer(r"^#{1,6} +(.+?)\s*$", doc.read_text(), re.M)}


def test_every_paper_declares_claims_with_a_known_verdict_citing_sections_that_exist():
    assert set(PAPERS) >= {"catnip", "newcwv", "tcpf", "servdiff", "hysteresis"}
    for paper in PAPERS.values():
        found = claims.claims_of(paper)
        assert found, f"{paper.name} declares no claims"
        assert len({c.key for c in found}) == len(found), paper.name
        for c in found:
            assert c.verdict in FOUR, (paper.name, c.key, c.verdict)
            assert c.claim and c.paper and c.where, (paper.name, c.key)
            doc = REPO / (c.doc or paper.docs)
            sections = _heading_lines(doc)
            for s in filter(None, (c.section, c.cause_section)):
                assert s in sections, f"{paper.name}/{c.key}: {doc.name} has no heading {s!r}"
    assert claims.problems(REPO, PAPERS) == []


def test_the_validation_names_a_bad_verdict_a_missing_section_and_a_paper_without_claims(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "toy.md").write_text("# Toy\n\n## Results\n\n```\n## Not a heading\n```\n")
    toy = Paper(name="toy", title="Toy", citation=Citation("A. B", "T", "V", 2000), docs="docs/toy.md",
                scenarios=(), claims="toy_claims")
    bare = replace(toy, name="bare", claims=None)
    import sys
    import types
    module = types.ModuleType("toy_claims")
    module.CLAIMS = (claims.Claim("a", "c", "1", "Table 1", "Results", "holds"),
                     claims.Claim("b", "c", "1", "Table 1", "Not a heading", "agrees"),
                     claims.Claim("b", "c", "1", "Table 1", "Results", "agrees", measure=claims.Measure(
                         "no-such-layout", (), lambda t: claims.Figure("", 0), "")))
    sys.modules["toy_claims"] = module
    try:
        found = claims.problems(tmp_path, {"toy": toy, "bare": bare})
    finally:
        del sys.modules["toy_claims"]
    text = "\n".join(found)
    assert "claim 'a': verdict 'holds' is not one of agrees, direction only, disagrees, not run" in text
    assert "claim 'b': docs/toy.md has no section 'Not a heading'" in text
    assert "claim 'b': key given twice" in text
    assert "layout 'no-such-layout' is not registered" in text
    assert "paper 'bare' declares no claims" in text
    assert len(found) == 6  # 'b' twice for its key, once for its section; a, the layout, bare


def test_docs_report_is_what_the_claims_and_the_archive_give():
    lines = (REPO / REPORT).read_text().split("\n")
    regions = [r for r in doc_regions.parse(REPORT, lines) if r.attrs == {"report": "claims"}]
    assert len(regions) == 1
    outcome = doc_regions.check(REPO, [REPO / REPORT])
    assert outcome.problems == [] and outcome.differences == [], outcome.problems + outcome.differences
    body = "\n".join(lines[regions[0].start + 1:regions[0].end])
    for paper in PAPERS.values():
        assert str(paper.citation).replace("|", "\\|") in body
        for c in claims.claims_of(paper):
            assert f"| {c.claim.replace('|', chr(92) + '|')} |" in body, c.key


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "archive", root / "archive")
    for md in (REPO / "docs").rglob("*.md"):
        (root / md.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(md, root / md.relative_to(REPO))
    return root


def _patch_claim(monkeypatch, paper: str, key: str, **changes) -> None:
    module = __import__(PAPERS[paper].claims, fromlist=["CLAIMS"])
    monkeypatch.setattr(module, "CLAIMS", tuple(replace(c, **changes) if c.key == key else c for c in module.CLAIMS))


def test_a_changed_verdict_or_a_claim_naming_a_run_not_archived_fails_the_check(tmp_path, monkeypatch):
    root = _copy(tmp_path)
    assert doc_regions.check(root, [root / REPORT]).differences == []
    _patch_claim(monkeypatch, "catnip", "xi-64", verdict="agrees")
    out = doc_regions.check(root, [root / REPORT])
    assert out.problems == [] and len(out.differences) == 1, out
    assert out.differences[0].startswith("docs/report.md:") and "differs from the archive" in out.differences[0]
    measure = claims.Measure("catnip-table-xi", ("20990101-000000-gone-0000", "20990101-000000-gone-0001"),
                             claims.table_xi("relative_mean", (64,)), "x")
    _patch_claim(monkeypatch, "catnip", "xi-64", measure=measure)
    out = doc_regions.check(root, [root / REPORT])
    assert any("claim 'xi-64': run 20990101-000000-gone-0000" in p and "not in" in p for p in out.problems), out.problems
    # The archived runs through a layout without the records' buffers: refused, naming the claim.
    from catnip.papers.catnip.claims import TABLE_XI_RUNS
    measure = claims.Measure("catnip-table-xi", (TABLE_XI_RUNS["baseline"], TABLE_XI_RUNS["partial"]),
                             claims.table_xi("relative_mean", (64,)), "x")
    _patch_claim(monkeypatch, "catnip", "xi-64", measure=measure)
    out = doc_regions.check(root, [root / REPORT])
    assert any("claim 'xi-64': layout catnip-table-xi has no buffer_kb column" in p for p in out.problems), out.problems


def test_build_writes_the_report_into_an_emptied_region(tmp_path):
    root = _copy(tmp_path)
    doc = root / REPORT
    text = doc.read_text()
    lines = text.split("\n")
    region = doc_regions.parse(REPORT, lines)[0]
    doc.write_text("\n".join(lines[:region.start + 1] + lines[region.end:]))  # the region emptied
    assert doc_regions.check(root, [doc]).differences
    doc_regions.build(root, [doc])
    assert doc.read_text() == text


def _xi_table(rows: list[tuple]) -> Table:
    """Rows as catnip-table-xi-beside gives them: buffer_kb is the buffer of the point's record."""
    cols = [Column("run_id", "str"), Column("label", "str"), Column("buffer_kb", "int", "KB"),
            Column("relative_mean", "float", "1"), Column("relative_mean_ci95", "float", "1"),
            Column("baseline_loss", "float", "1"), Column("realtime_ok", "bool"),
            Column("baseline_realtime_ok", "bool")]
    return Table("catnip-table-xi-beside", "t", "p", ("b", "r"), tuple(cols), tuple(rows))


def test_table_xi_figure_reads_the_first_compared_run_and_leaves_late_points_out():
    buf = "topology.bottleneck.buffer="
    table = _xi_table([
        ("r", buf + "64KB", 64, 1.0234, 0.051, 0.2286, True, True),
        ("r", buf + "128KB", 128, 0.981, 0.02, 0.175, False, True),
        ("r", "256 KB buffer", 256, 1.0, 0.01, 0.0403, True, True),  # a named point (scenarios/catnip-wan-*.yaml)
        ("other", buf + "64KB", 64, 0.5, 0.1, 0.2, True, True)])
    fig = claims.table_xi("relative_mean", (64, 128))(table)
    assert fig.text == "64 KB: 1.02 ±0.05" and fig.kept == 1 and fig.left_out == ("128 KB",)
    loss = claims.table_xi("baseline_loss", (64, 256, 512))(table)
    assert loss.text == "64 KB: 22.86%; 256 KB: 4.03% (not in the runs: 512 KB)" and loss.kept == 2


def test_table_xi_figure_takes_the_buffer_the_record_gives_not_the_label():
    """Issue 43: what a point ran is its record's. A label naming another buffer (a sweep label or a
    point's name: any text) does not move the point; a point whose record has no Table XI buffer
    (buffer_kb None) is none of them, whatever its label says; a table without the record's buffer
    (catnip-table-xi) is refused, naming the layout, not read by its labels."""
    table = _xi_table([
        ("r", "topology.bottleneck.buffer=64KB", 256, 1.11, 0.05, 0.04, True, True),
        ("r", "128 KB buffer", None, 0.9, 0.05, 0.1, True, True),
        ("r", "a point", 512, 1.02, 0.03, 0.02, True, True)])
    fig = claims.table_xi("relative_mean", (64, 128, 256, 512))(table)
    assert fig.text == "256 KB: 1.11 ±0.05; 512 KB: 1.02 ±0.03 (not in the runs: 64 KB, 128 KB)", fig
    plain = Table("catnip-table-xi", "t", "p", ("b", "r"),
                  tuple(c for c in table.columns if c.name != "buffer_kb"), tuple(r[:2] + r[3:] for r in table.rows))
    with pytest.raises(claims.ClaimsError, match="layout catnip-table-xi has no buffer_kb column"):
        claims.table_xi("relative_mean", (64,))(plain)


def test_the_dashboard_report_shows_every_papers_rows_from_the_same_function(tmp_path):
    from flask import url_for

    from catnip.webui.app import create_app
    app = create_app(db=tmp_path / "catnip.db")
    app.config.update(TESTING=True)
    page = app.test_client().get("/report")
    html = page.get_data(as_text=True)
    assert page.status_code == 200, html
    assert 'href="/report"' in html  # the site's navigation
    with docs_archive.RunsDB(REPO / "archive") as db:
        reports = claims.report(db, REPO, PAPERS)
    assert [r.paper.name for r in reports] == list(PAPERS)
    for rep in reports:
        assert f'id="report-{rep.paper.name}"' in html and str(escape(str(rep.paper.citation))) in html
        with app.test_request_context():
            runs_link = url_for("runs", paper=rep.paper.short_name)
        assert f'href="{escape(runs_link)}"' in html, runs_link  # the paper's runs
        for r in rep.rows:
            row = re.search(rf'<tr id="claim-{rep.paper.name}-{re.escape(r.claim.key)}" '
                            rf'data-verdict="{re.escape(r.claim.verdict)}">(.*?)</tr>', html, re.S)
            assert row, (rep.paper.name, r.claim.key)
            assert str(escape(r.claim.claim)) in row[1] and str(escape(r.ours)) in row[1]
    assert sum(r.archived for r in reports) >= 2  # ours computed from archived runs, not only "not archived"
