"""A paper is a plug-in folder (papers/registry.py; issue 43, item 4): a toy sixth paper, made in a
temporary folder with one scenario, one layout and one dashboard view, registered with one line,
is found by `catnip report --layouts`, `catnip report RUN --layout toy`, a run's dashboard page
and the runs page's paper column and filter (by its `paper:` field's start and short name), with no
other file touched; the run page of a run that is not the toy paper's does not show it."""

from __future__ import annotations

import json
import re
import sys
import textwrap

import pytest
from click.testing import CliRunner

from catnip import papers
from catnip.cli.main import main
from catnip.controller.run_queue import RunQueue
from catnip.papers import registry
from catnip.results import layouts
from catnip.results.store import Store
from catnip.spec import scenario as scenario_mod
from catnip.testbed.paths import REPO
from catnip.webui.app import create_app
from tests.test_web import _record_run
from tests.test_web_runlist import PAGE_RUN, _cells, _record_page_run

TOY_RUN = "20260201-000000-toy-ffff"

# The toy paper's folder: what a paper's author writes, nothing else.
TOY_INIT = '''
"""A toy paper: pages per client of a run of its scenario."""
from pathlib import Path

from catnip.papers.registry import Citation, Paper, View
from catnip.results import layouts
from catnip.results.table import Column

FOLDER = Path(__file__).resolve().parent


@layouts.layout("toy", "Pages fetched per client", "Toy paper, Table 1")
def toy_table(store, run_id):
    run = layouts.one_run(store, run_id, "toy")
    rows = store.db.execute("SELECT client, count(*) FROM pages WHERE run_id=? GROUP BY client ORDER BY client",
                            (run["id"],)).fetchall()
    return layouts.make_table("toy", [run["id"]], [Column("client", "str"), Column("pages", "int")],
                              [tuple(r) for r in rows])


def toy_view(store, run_id, page):
    run = store.run(run_id)
    if run["source"] not in {str(p) for p in PAPER.scenario_files()}:
        return None  # not a run of the toy paper's scenario
    return {"rows": layouts.build("toy", store, run_id).records()}


PAPER = Paper(name="toy", title="Toy paper", citation=Citation("A. Toy", "Toy results", "Toy Workshop", 2026),
              docs="docs/reproduction-toy.md", scenarios=("toy-*.yaml",), layouts=("toy",),
              views=(View("pages", "view.html", toy_view),), scenario_dir=FOLDER, short="Toy", paper_field=("Toy,",))
'''
TOY_VIEW = '''<section id="toy"><h2>Toy paper ({{ paper.citation.authors }}, {{ paper.citation.year }})</h2>
{% for r in view.rows %}<p class="toy-row">{{ r.client }} fetched {{ r.pages }} pages</p>{% endfor %}</section>
'''


def _toy_folder(tmp_path):
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent(TOY_INIT))
    (folder / "view.html").write_text(TOY_VIEW)
    scenario = (REPO / "scenarios" / "quick.yaml").read_text().replace("name: quick", "name: toy-one", 1)
    scenario = re.sub(r"(?m)^paper: .*$", 'paper: "Toy, Table 1"', scenario, count=1)
    (folder / "toy-one.yaml").write_text(scenario)
    return folder


@pytest.fixture
def toy(tmp_path):
    """The toy paper's folder, registered with one line; taken off the registry afterwards."""
    folder = _toy_folder(tmp_path)
    papers.register(folder)  # the one registration line
    yield folder
    registry.unregister("toy")
    sys.modules.pop("catnip_paper_toy", None)


@pytest.fixture
def db(tmp_path):
    db = tmp_path / "catnip.db"
    with Store(db) as store:
        _record_page_run(store)  # a CATNIP run: not the toy paper's
        _record_run(store, TOY_RUN, {1: 2.0, 2: 3.0}, dropped=0)
        store.db.execute("UPDATE runs SET name='toy-one', source=? WHERE id=?",
                         (str(tmp_path / "toy" / "toy-one.yaml"), TOY_RUN))
        store.db.commit()
    return db


def _report(db, *args):
    return CliRunner().invoke(main, ["report", "--db", str(db), *args])


def test_toy_paper_folder_holds_a_valid_scenario(toy):
    paper = papers.PAPERS["toy"]
    assert paper.folder == toy.resolve() and paper.scenario_files() == [toy / "toy-one.yaml"]
    assert scenario_mod.load(toy / "toy-one.yaml").name == "toy-one"
    assert registry.paper_of_layout("toy") is paper


def test_report_lists_and_builds_the_toy_layout(toy, db):
    listed = _report(db, "--layouts")
    assert listed.exit_code == 0, listed.output
    line = next(x for x in listed.output.splitlines() if x.split()[0] == "toy")
    assert "Toy paper, Table 1" in line and "Pages fetched per client" in line
    listed = json.loads(_report(db, "--layouts", "--json").output)
    assert next(x for x in listed if x["name"] == "toy")["registered_by"] == {
        "paper": "toy", "docs": "docs/reproduction-toy.md", "citation": 'A. Toy, "Toy results", Toy Workshop, 2026'}
    res = _report(db, TOY_RUN, "--layout", "toy", "--csv")
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == ["client,pages", "c0,2", "c1,2", "c2,2"]
    text = _report(db, TOY_RUN, "--layout", "toy")
    assert text.exit_code == 0 and "c1" in text.output


def test_run_page_shows_the_toy_view_only_for_its_runs(toy, db, tmp_path):
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    try:
        client = create_app(db=db, scenarios_dir=tmp_path, queue=queue).test_client()
        page = client.get(f"/runs/{TOY_RUN}")
        assert page.status_code == 200
        html = page.get_data(as_text=True)
        assert '<section id="toy"><h2>Toy paper (A. Toy, 2026)</h2>' in html
        assert html.count('class="toy-row"') == 3 and "c2 fetched 2 pages" in html
        other = client.get(f"/runs/{PAGE_RUN}").get_data(as_text=True)
        assert 'id="toy"' not in other
        csv = client.get(f"/runs/{TOY_RUN}/layouts/toy.csv")
        assert csv.status_code == 200 and csv.get_data(as_text=True).splitlines()[0] == "client,pages"
    finally:
        queue.shutdown(timeout=5)


def _runs_page(db, tmp_path, query=""):
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    try:
        return create_app(db=db, scenarios_dir=tmp_path, queue=queue).test_client().get(f"/runs{query}")
    finally:
        queue.shutdown(timeout=5)


def test_the_runs_page_lists_and_filters_by_the_toy_paper(toy, db, tmp_path):
    # The toy run stored no `paper:` field: its scenario file's ("Toy, Table 1") names the toy paper.
    page = _runs_page(db, tmp_path).get_data(as_text=True)
    assert _cells(page)[TOY_RUN]["paper"] == "Toy" and _cells(page)[PAGE_RUN]["paper"] == "none"
    assert '<option value="Toy">Toy</option>' in page  # the filter offers it
    page = _runs_page(db, tmp_path, "?paper=Toy")
    assert page.status_code == 200 and set(_cells(page.get_data(as_text=True))) == {TOY_RUN}


def test_unregistered_the_toy_paper_is_nowhere(tmp_path, db):
    _toy_folder(tmp_path)  # its folder alone registers nothing
    assert "toy" not in papers.PAPERS and "toy" not in layouts.LAYOUTS
    assert all(x.split()[0] != "toy" for x in _report(db, "--layouts").output.splitlines())
    res = _report(db, TOY_RUN, "--layout", "toy")
    assert res.exit_code != 0 and "unknown layout 'toy'" in res.output
    assert _cells(_runs_page(db, tmp_path).get_data(as_text=True))[TOY_RUN]["paper"] == "other"
    assert _runs_page(db, tmp_path, "?paper=Toy").status_code == 400


def test_a_folder_that_is_no_paper_is_refused(tmp_path):
    folder = tmp_path / "nopaper"
    folder.mkdir()
    (folder / "__init__.py").write_text("X = 1\n")
    with pytest.raises(registry.PaperError, match="defines PAPER"):
        papers.register(folder)
    sys.modules.pop("catnip_paper_nopaper", None)
    with pytest.raises(registry.PaperError, match="registered twice"):
        papers.register("catnip.papers.tcpf")


def test_every_paper_cites_and_points_to_docs_and_scenarios_that_exist():
    citing = " ".join((REPO / "docs" / "citing.md").read_text().split())
    assert list(papers.PAPERS)[:5] == ["catnip", "newcwv", "tcpf", "servdiff", "hysteresis"]
    for paper in papers.PAPERS.values():
        assert (REPO / paper.docs).is_file(), paper.name
        assert paper.scenario_files(), f"{paper.name}: no scenario file matches {paper.scenarios}"
        assert paper.citation is not None and paper.citation.title in citing, paper.name
        assert str(paper.citation.year) in citing
        assert all(registry.paper_of_layout(n) is paper for n in paper.layouts)
    from catnip.papers.tcpf import published
    assert published.paper("A", "TCPF+FRIO", 100) == (41, 4.00, 11.421, 0.06)  # the published numbers live in the paper's folder
