"""Issue 48, items 8 and 10 on the dashboard: the runs page's provenance (paper, points, real time,
imported mark) and its filter by validated query parameters; the import hint's `--db`; a point
that missed real time says why and what that means inline; the study page's error names its
reason; the servdiff layout refuses a run that is not one of the paper's experiments; sdev bars
clipped at 0 s with a note; the drops legend names the classes counted; "no data" notes on empty
charts (the last in a real browser)."""

from __future__ import annotations

import html
import json
import re
import shlex
import shutil

import pytest
from click.testing import CliRunner

from catnip.controller import fidelity as fidelity_mod
from catnip.controller.run_queue import RunQueue
from catnip.results import layouts
from catnip.results.store import Store
from catnip.testbed.paths import REPO
from tests.test_dashboard_browser import _shot, _wait, browser, catnip_web  # noqa: F401 (a fixture)
from tests.test_web import _record_run
from catnip.webui import runlist
from catnip.webui.app import create_app

CATNIP_RUN, NEWCWV_RUN, IMPORTED_RUN, OTHER_RUN = ("20260101-000000-quick-aaaa", "20260102-000000-newcwv-bbbb",
                                                   "20260103-000000-imp-cccc", "20260104-000000-lot-dddd")
QUICK_PAPER = "CATNIP (context-aware TCP/IP), section IV-A (Fig. 3), IV-B (Fig. 4), Table II layout"


def _run(store: Store, run_id: str, scenario: dict, realtime: list[int | None], status: str = "done") -> None:
    store.create_run(run_id, scenario["name"], f"scenarios/{scenario['name']}.yaml", scenario, {}, 1, "abc", {}, {})
    for i, ok in enumerate(realtime):
        store.create_point(run_id, i, 0, {}, {"run": {"max_late_fraction": 0.001}}, 1)
        store.update_point(run_id, i, status="done", realtime_ok=ok)
    store.finish_run(run_id, status)


@pytest.fixture
def env(tmp_path):
    db = tmp_path / "catnip.db"
    with Store(db) as store:
        _run(store, CATNIP_RUN, {"name": "quick", "paper": QUICK_PAPER}, [1, 0])
        # a run that stored no `paper:` field: its scenario file's is read
        _run(store, NEWCWV_RUN, {"name": "newcwv-fig7-unlimited"}, [1, 1])
        _run(store, IMPORTED_RUN, {"name": "gone", "paper": "Nouredine and Tobagi, Computer Networks 40"}, [None],
             status="failed")
        store.db.execute("UPDATE runs SET imported=? WHERE id=?",
                         (json.dumps({"file": "x.catnip.json.gz", "run_id": "orig-1"}), IMPORTED_RUN))
        store.db.commit()
        _run(store, OTHER_RUN, {"name": "parking-lot", "paper": "experiment-model check (parking lot)"}, [])
    scen = tmp_path / "scenarios"
    scen.mkdir()
    shutil.copy(REPO / "scenarios" / "newcwv-fig7-unlimited.yaml", scen)
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=db, scenarios_dir=scen, queue=queue)
    yield app.test_client(), db
    queue.shutdown(timeout=5)


def _cells(page: str) -> dict[str, dict[str, str]]:
    """The runs table's rows by run id: each provenance cell's text."""
    out = {}
    for run_id, row in re.findall(r'<tr class="run-row" data-run="([^"]+)">(.*?)</tr>', page, re.S):
        cell = {k: " ".join(re.sub(r"<[^>]+>", " ", m.group(1)).split()) if (m := re.search(
            rf'<td class="run-{k}[^"]*"[^>]*>(.*?)</td>', row, re.S)) else None
            for k in ("paper", "points", "realtime", "origin")}
        out[run_id] = cell
    return out


def test_run_list_shows_paper_points_real_time_and_origin(env):
    client, _ = env
    page = client.get("/runs").get_data(as_text=True)
    cells = _cells(page)
    assert cells == {
        CATNIP_RUN: {"paper": "CATNIP", "points": "2", "realtime": "1 of 2 kept", "origin": "here"},
        NEWCWV_RUN: {"paper": "newCWV", "points": "2", "realtime": "2 of 2 kept", "origin": "here"},
        IMPORTED_RUN: {"paper": "service differentiation", "points": "1", "realtime": "-",
                       "origin": "imported from x.catnip.json.gz (run orig-1 there)"},
        OTHER_RUN: {"paper": "other", "points": "0", "realtime": "-", "origin": "here"}}
    assert f'title="{QUICK_PAPER}"' in page  # the whole field where the column shows its short name
    assert 'class="run-realtime realtime-missed"' in page


@pytest.mark.parametrize("query, shown", [
    ("paper=CATNIP", {CATNIP_RUN}),
    ("paper=newCWV", {NEWCWV_RUN}),
    ("paper=other", {OTHER_RUN}),
    ("status=failed", {IMPORTED_RUN}),
    ("realtime=kept", {NEWCWV_RUN}),
    ("realtime=missed", {CATNIP_RUN}),
    ("realtime=unjudged", {IMPORTED_RUN, OTHER_RUN}),
    ("status=done&realtime=unjudged", {OTHER_RUN}),
    ("paper=&status=&realtime=", {CATNIP_RUN, NEWCWV_RUN, IMPORTED_RUN, OTHER_RUN}),
])
def test_run_list_filter(env, query, shown):
    client, _ = env
    r = client.get(f"/runs?{query}")
    assert r.status_code == 200
    page = r.get_data(as_text=True)
    assert set(_cells(page)) == shown
    if query.strip("=&").replace("paper=&status=&realtime", ""):
        assert f"{len(shown)} of 4 runs" in page and 'id="filter-clear"' in page


def test_run_list_filter_that_matches_nothing_says_so(env):
    client, _ = env
    page = client.get("/runs?paper=hysteresis").get_data(as_text=True)
    assert 'id="no-match"' in page and "No run matches the filter (paper hysteresis)" in page


@pytest.mark.parametrize("query, message", [
    ("paper=Bogus", "paper='Bogus' is not one of: CATNIP, newCWV"),
    ("status=<script>", "status='&lt;script&gt;' is not one of: done, failed"),
    ("realtime=yes", "realtime='yes' is not one of: kept, missed, unjudged"),
    ("status=done&status=failed", "status is given 2 times: choose one"),
    ("sort=id", "unknown parameter 'sort': the runs page is filtered by paper, status, realtime"),
])
def test_run_list_filter_refuses_bad_parameters(env, query, message):
    client, _ = env
    r = client.get(f"/runs?{query}")
    assert r.status_code == 400
    text = re.search(r'<p class="message">(.*?)</p>', r.get_data(as_text=True), re.S).group(1)
    assert message.replace("'", "&#39;") in text


def test_paper_names():
    assert runlist.paper_name(QUICK_PAPER) == "CATNIP"
    assert runlist.paper_name("hysteresis paper, section 4 (Table 1)") == "hysteresis"
    assert runlist.paper_name("Lo Monaco, Feroz, Kalyanaraman, Xia, TCP-friendly marking") == "TCP-friendly marking"
    assert runlist.paper_name("") == "none" and runlist.paper_name("something else") == "other"
    # every scenario file names one of the five papers, but the parking lot (a model check)
    named = {p.stem: runlist.paper_name(runlist._file_paper(REPO / "scenarios", p.stem, {}))
             for p in (REPO / "scenarios").rglob("*.yaml")}
    assert {k for k, v in named.items() if v in ("other", "none")} == {"parking-lot"}
    assert named["hysteresis-validation"] == "hysteresis" and named["sd-range"] == "service differentiation"


# --- the import hint ------------------------------------------------------------------------------------------------
def test_import_hint_carries_the_database_it_imported_into(tmp_path, monkeypatch):
    from catnip.cli.archive import export_cmd, import_cmd
    from catnip.cli.main import main
    monkeypatch.setenv("CATNIP_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("CATNIP_DB", str(tmp_path / "data" / "default.db"))
    src = tmp_path / "src.db"
    with Store(src) as store:
        _record_run(store, CATNIP_RUN, {1: 2.0}, dropped=3)
    out = tmp_path / "run.catnip.json.gz"
    assert CliRunner().invoke(export_cmd, [CATNIP_RUN, "--db", str(src), "--out", str(out)]).exit_code == 0
    target = tmp_path / "other place" / "t.db"
    target.parent.mkdir()
    res = CliRunner().invoke(import_cmd, [str(out), "--db", str(target)])
    assert res.exit_code == 0, res.output
    hint = re.search(r"`catnip (report [^`]+)` shows it", res.output).group(1)
    assert hint == f"report {CATNIP_RUN} --db '{target}'"
    shown = CliRunner().invoke(main, shlex.split(hint))  # the hint works as given
    assert shown.exit_code == 0 and "Point 0" in shown.output, shown.output
    # without --db, the default database: no --db in the hint
    res = CliRunner().invoke(import_cmd, [str(out)])
    assert res.exit_code == 0 and res.output.endswith(f"`catnip report {CATNIP_RUN}` shows it\n"), res.output


# --- servdiff refuses another paper's run ------------------------------------------------------------------------
def test_servdiff_layout_refuses_a_run_that_is_not_one_of_its_experiments(tmp_path):
    from catnip.cli.main import main
    from tests.test_servdiff import _resolved, _run as sd_run, _samples
    with Store(tmp_path / "s.db") as s:
        web = [{"kind": "web", "name": None, "http_version": "1.0"}]
        sd_run(s, "quick", [({}, _resolved(web, {"kind": "dumbbell", "bottleneck": {"rate": 1_500_000}}),
                              _samples("web", "page_time", [1.0, 2.0]))], name="quick")
        sd_run(s, "tree", [({}, _resolved(web), _samples("web", "page_time", [1.0, 2.0]))], name="tree-small")
        with pytest.raises(layouts.LayoutError, match="no point of quick is a Nouredine and Tobagi experiment"):
            layouts.build("servdiff", s, "quick")
        with pytest.raises(layouts.LayoutError, match="no point of quick is a Nouredine and Tobagi experiment"):
            layouts.build("servdiff", s, "tree", "quick")  # one such run among others is refused too
        assert [r["tag"] for r in layouts.build("servdiff", s, "tree").records()] == ["all"]  # on the tree: kept
        res = CliRunner().invoke(main, ["report", "quick", "--layout", "servdiff", "--db", str(s.path)])
        assert res.exit_code == 2 and "no point of quick is a Nouredine and Tobagi experiment" in res.output
        assert "HTTP/1.0" not in res.output  # no table printed


# --- real time: why not, and what it means ------------------------------------------------------------------------
GOOD = {"engine_events": 1000, "late_events": 0, "late_fraction": 0.0, "max_late_us": 10, "late_threshold_us": 1000,
        "kernel_queue_drops": 0, "engines_without_final_stats": [], "backlog_drops": 0}


@pytest.mark.parametrize("change, words", [
    ({"late_events": 25, "late_fraction": 0.025}, "25 of 1000 verdicts (2.50%) were more than 1 ms late; at most 0.1%"),
    ({"kernel_queue_drops": 7}, "the kernel's NFQUEUE dropped 7 packets"),
    ({"backlog_drops": 3}, "the CPUs' receive backlogs dropped 3 packets"),
    ({"tunnel_drops": 2}, "the tunnels between machines lost 2 packets"),
    ({"machines": {"m2": None}}, "machine m2's CPU and backlog counters were not read"),
    ({"machines": {"m2": {"backlog_drops": 4}}}, "machine m2's receive backlogs dropped 4 packets"),
    ({"engines_without_final_stats": ["r1"]}, "the engines of r1 wrote no closing counters"),
    ({"gso_packets": 2}, "the engines took 2 segmentation-offload super-packets whole"),
    ({"unbound_packets": 5}, "the engines accepted 5 packets of a queue no link has"),
    ({"client_start": {"late": {"web": ["c1", "c2"]}, "limit_s": 0.1}}, "web: client(s) c1, c2 ready more than 0.1 s"),
    ({"client_start": {"first_late": {"telnet": ["t1"]}, "limit_s": 0.1}},
     "telnet: client(s) t1 woken for their first unit of work more than 0.1 s"),
])
def test_every_failed_real_time_check_has_its_reason(change, words):
    """A reason exactly where controller/fidelity.realtime_ok says no, for each of its checks."""
    assert fidelity_mod.realtime_ok(GOOD, 0.001) and runlist.realtime_reasons(GOOD, 0.001) == []
    bad = {**GOOD, **change}
    assert not fidelity_mod.realtime_ok(bad, 0.001)
    reasons = runlist.realtime_reasons(bad, 0.001)
    assert len(reasons) == 1 and reasons[0].startswith(words), reasons
    # a looser run.max_late_fraction lets the late verdicts pass, as the verdict does
    if "late_fraction" in change:
        assert fidelity_mod.realtime_ok(bad, 0.05) and runlist.realtime_reasons(bad, 0.05) == []


def test_max_late_fraction_of_a_point():
    assert runlist.max_late_fraction(json.dumps({"run": {"max_late_fraction": 0.01}})) == 0.01
    assert runlist.max_late_fraction(json.dumps({"sizes_kb": [1]})) == 0.001  # transfers: the default
    assert runlist.max_late_fraction("[1]") == 0.001 and runlist.max_late_fraction("not json") == 0.001
    assert runlist.max_late_fraction(json.dumps({"run": {"max_late_fraction": True}})) == 0.001


# --- the run page: real time inline, sdev bars, drops legend ---------------------------------------------------
LATE = {**GOOD, "late_events": 25, "late_fraction": 0.025, "kernel_queue_drops": 7}
PAGE_RUN = "20260105-000000-quick-eeee"


def _run_data(page: str) -> dict:
    return json.loads(re.search(r'<script id="run-data" type="application/json">(.*?)</script>', page, re.S).group(1))


def _record_page_run(store: Store) -> None:
    """PAGE_RUN: its point missed real time, page 1's mean minus sdev is below 0 s, and its
    bottleneck saw AF11, AF12 and unmarked packets."""
    _record_run(store, PAGE_RUN, {1: 2.0}, dropped=10)
    pages = [{"client": f"c{c}", "server": "v1", "page": p, "round": 1, "start": 0.0, "end": d, "duration": d,
              "objects": 2, "bytes": 1000} for p, ds in ((1, (0.1, 0.1, 3.0)), (2, (2.0, 2.1, 2.2)))
             for c, d in enumerate(ds)]
    store.db.execute("DELETE FROM pages WHERE run_id=?", (PAGE_RUN,))
    store.add_transfers(PAGE_RUN, 0, [], pages)
    store.db.execute("DELETE FROM link_stats WHERE run_id=?", (PAGE_RUN,))
    final = {"links": {"ctprs>ctprc": {"arrived": {"high": [100, 0], "low": [50, 0], "other": [10, 0]},
                                       "sent": {"high": [99, 0], "low": [40, 0], "other": [5, 0]},
                                       "dropped": {"high": [1, 0], "low": [10, 0], "other": [5, 0]}}}}
    store.add_link_stats(PAGE_RUN, 0, "ctprs", final, {"ctprs>ctprc": "bottleneck-data"}, {}, {})
    store.update_point(PAGE_RUN, 0, realtime_ok=0, fidelity=LATE)
    store.db.commit()


@pytest.fixture
def page_env(tmp_path):
    """A run whose point missed real time, with a page whose mean minus sdev is below 0 s, and a
    bottleneck that saw AF11, AF12 and unmarked packets."""
    db = tmp_path / "catnip.db"
    with Store(db) as store:
        _record_page_run(store)
        _record_run(store, CATNIP_RUN, {1: 2.0}, dropped=10)  # unmarked only, kept real time
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    yield create_app(db=db, scenarios_dir=tmp_path, queue=queue).test_client()
    queue.shutdown(timeout=5)


def test_a_point_that_missed_real_time_says_why_and_what_it_means(page_env):
    page = page_env.get(f"/runs/{PAGE_RUN}").get_data(as_text=True)
    why = re.search(r'<p class="realtime-why" id="realtime-why-0">(.*?)</p>', page, re.S)
    assert why, "no reason shown"
    text = html.unescape(" ".join(re.sub(r"<[^>]+>", " ", why.group(1)).split()))
    assert text.startswith("Why: 25 of 1000 verdicts (2.50%) were more than 1 ms late; at most 0.1% may be"
                           " (run.max_late_fraction); the kernel's NFQUEUE dropped 7 packets")
    assert "left out of claims" in text
    assert 'title="see fidelity"' not in page
    kept = page_env.get(f"/runs/{CATNIP_RUN}").get_data(as_text=True)
    assert "realtime-why" not in kept and "real time kept" in kept


def test_sdev_bars_are_clipped_at_zero_and_the_chart_says_so(page_env):
    bars = _run_data(page_env.get(f"/runs/{PAGE_RUN}").get_data(as_text=True))["figures"]["bars"]
    err = bars["data"][0]["error_y"]
    means = bars["data"][0]["y"]
    assert means[0] < err["array"][0] and err["arrayminus"][0] == means[0]  # page 1: mean 1.067, sdev 1.674
    assert err["arrayminus"][1] == err["array"][1] and not err["symmetric"]  # page 2: unclipped
    notes = [a["text"] for a in bars["layout"]["annotations"]]
    assert notes == ["1 of 2 sdev bars clipped at 0 s (mean - sdev < 0; a page time is never negative)"]
    other = _run_data(page_env.get(f"/runs/{CATNIP_RUN}").get_data(as_text=True))["figures"]["bars"]
    assert "annotations" not in other["layout"] and "arrayminus" not in other["data"][0]["error_y"]


def test_drops_legend_names_the_classes_counted(page_env):
    assert _run_data(page_env.get(f"/runs/{PAGE_RUN}").get_data(as_text=True))["dropClasses"] == {
        "0": {"high": "AF11", "rest": "AF12, unmarked/other"}}
    assert _run_data(page_env.get(f"/runs/{CATNIP_RUN}").get_data(as_text=True))["dropClasses"] == {
        "0": {"high": None, "rest": "unmarked/other"}}


def test_study_page_error_names_its_reason_in_the_page(page_env):
    r = page_env.get(f"/study?run={PAGE_RUN}")
    page = r.get_data(as_text=True)
    assert r.status_code == 400 and "Bad Request" not in page
    reason = re.search(r'<span id="study-reason">(.*?)</span>', page, re.S).group(1)
    assert reason.startswith("quick is not a study scenario")
    assert 'href="/runs?paper=CATNIP"' in page and f'href="/runs/{PAGE_RUN}"' in page
    for query, status, words in (("", 400, "tick the runs of a study scenario"), ("?run=nope", 404, "no run"),
                                 ("?run=x;rm", 400, "is not a run id")):
        r = page_env.get("/study" + query)
        assert r.status_code == status and "Bad Request" not in r.get_data(as_text=True)
        assert words in re.search(r'<span id="study-reason">(.*?)</span>', r.get_data(as_text=True), re.S).group(1)


# --- in a real browser -----------------------------------------------------------------------------------------
EMPTY_RUN = "20260106-000000-quick-ffff"


@pytest.fixture
def browser_server(isolated_data):
    """`catnip web` on a database written by hand (no network): PAGE_RUN as page_env writes it, and
    a run that recorded no bottleneck samples, no progress and no pages."""
    db = isolated_data / "data" / "catnip.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    with Store(db) as store:
        _record_page_run(store)
        _run(store, EMPTY_RUN, {"name": "quick", "paper": QUICK_PAPER}, [None], status="failed")
    with catnip_web("--db", str(db)) as address:
        yield address


def test_run_page_notes_legend_and_clipped_bars_in_a_browser(browser_server, browser):  # noqa: F811
    """Drawn by Plotly in Chromium: the drops legend names AF11 and the other classes counted (no
    "high priority"), the bars chart carries its clipping note, a run without samples shows "no
    data" notes in place of its charts, the real-time reason is on the page, and the runs list
    with its provenance and filter."""
    from selenium.webdriver.common.by import By
    base, d = browser_server, browser
    d.get(f"{base}/runs/{PAGE_RUN}")
    _wait("the drops chart", lambda: d.find_elements(By.CSS_SELECTOR, "#chart-drops .legendtext"), 20)
    legend = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#chart-drops .legendtext")]
    # a stacked bar chart lists its legend bottom-up
    assert sorted(legend) == ["0: single point AF11", "0: single point AF12, unmarked/other"], legend
    _wait("the bars chart", lambda: d.find_elements(By.CSS_SELECTOR, "#chart-bars .annotation-text"), 20)
    notes = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#chart-bars .annotation-text")]
    assert notes == ["1 of 2 sdev bars clipped at 0 s (mean - sdev < 0; a page time is never negative)"], notes
    minus = d.execute_script('return document.getElementById("chart-bars").data[0].error_y.arrayminus')
    assert minus[0] == d.execute_script('return document.getElementById("chart-bars").data[0].y[0]')
    assert "the kernel's NFQUEUE dropped 7 packets" in d.find_element(By.ID, "realtime-why-0").text
    _shot(d, "8-run-not-real-time")

    d.get(f"{base}/runs/{EMPTY_RUN}")
    _wait("no-data notes", lambda: len(d.find_elements(By.CSS_SELECTOR, "#live-charts .no-data-note")) == 4, 20)
    texts = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#live-charts .no-data-note")]
    assert texts[0] == "Queue occupancy: no data (no bottleneck samples were recorded for this run)", texts
    assert not d.find_elements(By.CSS_SELECTOR, "#live-charts .main-svg")  # no blank axes
    _shot(d, "9-run-without-data")

    d.get(f"{base}/runs?paper=CATNIP")
    rows = d.find_elements(By.CSS_SELECTOR, "tr.run-row")
    assert {r.get_attribute("data-run") for r in rows} == {PAGE_RUN, EMPTY_RUN}
    assert d.find_element(By.CSS_SELECTOR, f'tr[data-run="{PAGE_RUN}"] .run-realtime').text == "0 of 1 kept"
    _shot(d, "10-runs-filtered")
