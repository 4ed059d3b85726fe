"""Issue 48, findings 4, 5 and 10's time origins, through Flask's test client: the scenario page
grouped by paper (citations, durations, make targets, placeholders that validate, code spans),
the paper figures the CLI writes drawn on the dashboard by the CLI's own functions (newCWV
Fig. 10, the hysteresis Figs. 3, 4, 6, CATNIP Fig. 2), the plot view of any series of chosen
runs, and one time origin (seconds since the point's start) for charts side by side.

Runs are archived runs (archive/runs/) imported into a temporary database, and records written
through the store's API where a page needs what no archived run has (a capture, transfers)."""

from __future__ import annotations

import html
import json
import math
import random
import re

import pytest

from catnip import papers
from catnip.controller import fig2
from catnip.controller.run_queue import RunQueue
from catnip.models import validation
from catnip.models.validation_figures import figure_specs, predictions
from catnip.results import archive, burst_capture
from catnip.results.store import Store
from catnip.testbed import paths
from catnip.testbed.paths import REPO
from catnip.webui import figure_pages, forms, scenario_guide
from catnip.webui.app import create_app
from tests.test_burst_capture import _packet, _pcap

QUICK = "20261128-085938-quick-296b"
NEWCWV = "20261128-084852-newcwv-fig7-unlimited-a377"
SCHEMES = "20261128-085410-sd-schemes-b393"
HV, ANCH, OLD = "20260101-000000-hv-aaaa", "20260101-000000-anch-bbbb", "20260101-000000-old-cccc"


def _import(store: Store, run_id: str) -> None:
    document, sha = archive.read(REPO / "archive" / "runs" / f"{run_id}.catnip.json.gz")
    archive.import_run(store, document, source=run_id, sha256=sha)


def _queue_run(store: Store, run_id: str, clock: dict | None) -> None:
    """A one-point run with ten queue samples (engine clock) and progress rows (wall clock); with
    `clock`, the point's clock anchor (docs/database.md, "Clocks")."""
    store.create_run(run_id, "quick", "scenarios/quick.yaml", {"name": "quick"}, {}, 1, "abc", {}, {})
    store.create_point(run_id, 0, 0, {}, {"topology": {"clients": 1}, "workload": {"pages": [1], "rounds": 1}}, 1)
    store.add_queue_samples(run_id, 0, [("ctprs", "ctprs>ctprc", float(t), t, 1500 * t, 1000 * t, 0, 0, 0)
                                        for t in range(10)])
    for done in range(3):
        store.add_progress(run_id, 0, float(done), "running workload", done, 3)
    if clock is not None:
        store.update_point(run_id, 0, environment=json.dumps({"clock": clock}))
    store.update_point(run_id, 0, status="done", finished=1.0)
    store.finish_run(run_id, "done")


def _transfers(store: Store) -> None:
    """A transfer measurement, Bernoulli loss and the CATNIP error model (as tests/test_models.py)."""
    scenario = {"kind": "transfers", "name": "hv", "path": {"mss": 1433, "rtt": 0.2, "wmax": 24, "min_rto": 1.0}}
    rng = random.Random(3)
    store.create_run(HV, "hv", "x", scenario, {}, 1, "abc", {}, {})
    for point, p_high in ((0, None), (1, 0.0)):
        store.create_point(HV, point, 0, {"profile": "reno2004", "p": 0.01, "p_high": p_high}, {}, 1)
        store.update_point(HV, point, realtime_ok=1, status="done")
        store.add_transfer_trials(HV, point, [
            {"profile": "reno2004", "p": 0.01, "p_high": p_high, "trial": t, "size": kb * 1024, "packets": 1,
             "latency": 0.2 * kb ** 0.5 + rng.random() * 0.1, "error": None} for kb in (1, 8, 50, 100) for t in range(5)])
    store.finish_run(HV, "done")


def _capture(store: Store, db) -> str:
    """A bottleneck capture for point 0 of the archived newCWV run, inside its run folder: the
    planned bursts (from its samples) one segment a millisecond, a second apart."""
    warmup, plan, port = burst_capture.plan_of(store, NEWCWV, 0)
    mss, isn = 1460, 5000
    packets, offset = [(1.0, _packet(isn, 0, syn=True, sport=port))], warmup
    for k, (size, _) in enumerate(plan):
        for j in range(math.ceil(size / mss)):
            packets.append((2.0 + k + j / 1000, _packet(isn + 1 + offset + j * mss, min(mss, size - j * mss), sport=port)))
        offset += size
    folder = paths.runs_dir(db) / NEWCWV
    folder.mkdir(parents=True)
    _pcap(folder / "point0-bottleneck.pcap", packets)
    store.update_point(NEWCWV, 0, capture=str(folder / "point0-bottleneck.pcap"))
    return str(folder / "point0-bottleneck.pcap")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plots")
    db = tmp / "catnip.db"
    with Store(db) as store:
        for run_id in (QUICK, NEWCWV, SCHEMES):
            _import(store, run_id)
        _transfers(store)
        _queue_run(store, ANCH, None)  # its anchor is set here, from the point's own start
        start = store.point(ANCH, 0)["started"]
        # The engine started its clock 1 s after the point's start: engine t -> t + 1.
        store.update_point(ANCH, 0, environment=json.dumps({"clock": {
            "wall": start + 2.0, "monotonic": 500.0, "engine_clock_start": {"ctprs": 499.0}}}))
        _queue_run(store, OLD, None)
        _capture(store, db)
    queue = RunQueue(db, tmp / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=db, scenarios_dir=REPO / "scenarios", queue=queue)
    client = app.test_client()
    yield app, client
    queue.shutdown(timeout=5)


def _spec(page: str) -> list:
    return json.loads(re.search(r'id="figure-data" type="application/json">(.*?)</script>', page, re.S).group(1))


# --- the scenario page (finding 5) -----------------------------------------------------------------

def test_scenarios_are_grouped_by_paper_with_citation_duration_and_make_target(env):
    _, client = env
    page = client.get("/").get_data(as_text=True)
    headings = re.findall(r'<section class="paper-group" id="paper-([\w-]+)">\s*<h2>([^<]*)</h2>', page)
    # The registry's papers that claim a file, in its order, then Other.
    claimed = {name: p.scenario_files() for name, p in papers.PAPERS.items()}
    assert [h for h, _ in headings] == [n for n, files in claimed.items() if files] + ["other"]
    assert {"catnip", "newcwv", "tcpf", "servdiff"} <= {h for h, _ in headings}
    at = [page.index(f'id="paper-{h}"') for h, _ in headings] + [len(page)]
    group = {h: page[at[i]:at[i + 1]] for i, (h, _) in enumerate(headings)}
    for name, files in claimed.items():  # each file under the paper whose patterns list it (Paper.scenario_files)
        for f in files:
            assert f'id="scenario-{f.stem}"' in group[name], (name, f)
        if files:
            assert f"<h2>{html.escape(papers.PAPERS[name].title, quote=False)}</h2>" in group[name]
            assert html.escape(str(papers.PAPERS[name].citation), quote=False) in group[name].replace("&#34;", '"')
    assert "Hossain, G. Fairhurst" in group["newcwv"] and "IJCNC" in group["newcwv"]
    assert 'id="scenario-parking-lot"' in group["other"] and 'id="scenario-hysteresis-validation"' in page
    assert 'id="scenario-quick"' in group["catnip"]  # make run's scenario is CATNIP's (Fig. 3, Table II)

    def entry(name: str) -> str:
        start = page.index(f'id="scenario-{name}"')
        return page[start:page.index("</section>", start)]
    assert "expected duration: about 2 minutes (docs/testing.md)" in entry("quick")
    assert "<code>make run</code>" in entry("quick")
    assert "<code>make tcpf QUICK=1</code>" in entry("tcpf-quick")
    assert "<code>make sim-tables PERIOD=1</code>" in entry("catnip-sim-routers-period")
    assert "duration not measured" in entry("tree-small") and "make target" not in entry("tree-small")
    assert "<code>catnip report RUN --by-sender</code>" in entry("catnip-sim-fairness")  # backticks shown as code
    assert "`" not in entry("catnip-sim-fairness")
    assert "expected duration: 974 s" in entry("hysteresis-validation")
    assert "catnip model measure scenarios/transfers/hysteresis-validation.yaml" in entry("hysteresis-validation")
    assert "Start run" not in entry("hysteresis-validation")  # a transfer measurement is not a `catnip run`
    # No form offers a line its scenario refuses (newCWV's have no topology.clients).
    assert 'placeholder="topology.clients=20"' not in page
    assert 'placeholder="topology.bottleneck.buffer=' in entry("newcwv-fig5-pipeack")


def test_descriptions_show_code_spans_as_code():
    assert str(scenario_guide.code_spans("run `catnip report RUN` <b>now</b>")) == \
        "run <code>catnip report RUN</code> &lt;b&gt;now&lt;/b&gt;"
    assert str(scenario_guide.code_spans("`<script>`")) == "<code>&lt;script&gt;</code>"
    assert str(scenario_guide.code_spans("no span ` here")) == "no span ` here"


def test_a_description_with_backticks_is_rendered_with_code(env, tmp_path):
    (tmp_path / "bt.yaml").write_text((REPO / "scenarios" / "quick.yaml").read_text().replace(
        "description: >", "description: >\n  Read it with `catnip report RUN`.", 1))
    app = create_app(db=env[0].config["CATNIP_DB"], scenarios_dir=tmp_path,
                     queue=RunQueue(env[0].config["CATNIP_DB"], tmp_path / "l", machine_busy=lambda: True))
    page = app.test_client().get("/").get_data(as_text=True)
    assert "Read it with <code>catnip report RUN</code>." in page and "`catnip report RUN`" not in page
    app.extensions["catnip_queue"].shutdown(timeout=5)


def _entries() -> dict[str, scenario_guide.Entry]:
    return {e.rel: e for g in scenario_guide.SHARED.get(REPO / "scenarios") for e in g.entries}


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "scenarios").glob("*.yaml")))
def test_every_placeholder_passes_the_forms_validation(name):
    entry = _entries()[f"{name}.yaml"]
    assert entry.runnable and entry.placeholder, f"{entry.rel}: no placeholder that validates"
    req, errors = forms.parse_run_request({"scenario": entry.file.name, "overrides": entry.placeholder},
                                          REPO / "scenarios")
    assert not errors and req is not None, (entry.placeholder, errors)


def test_every_scenario_file_is_on_the_page_once():
    files = sorted(p.relative_to(REPO / "scenarios").as_posix() for p in (REPO / "scenarios").rglob("*.yaml"))
    listed = sorted(_entries())
    assert listed == files


# --- paper figures (finding 4) ----------------------------------------------------------------------

def test_burst_sequence_figure_is_the_clis(env):
    app, client = env
    r = client.get(f"/runs/{NEWCWV}/figures/burst-seq?size=any&nth=2")
    assert r.status_code == 200
    page = r.get_data(as_text=True)
    with Store(app.config["CATNIP_DB"]) as store:
        want, chosen = burst_capture.figure_spec(store, NEWCWV, None, None, 2)
    assert _spec(page) == [["fig10", json.loads(json.dumps(want))]]
    assert f"catnip burst-seq {NEWCWV} --size any --idle any --nth 2" in page
    assert f"point 0 ({chosen[0][1]}): burst {chosen[0][2].index}" in page
    # The run page links to it; the quick run's says why it has none.
    assert f'href="/runs/{NEWCWV}/figures/burst-seq"' in client.get(f"/runs/{NEWCWV}").get_data(as_text=True)
    quick = client.get(f"/runs/{QUICK}").get_data(as_text=True)
    assert "newCWV Fig. 10: <span" in quick and "captured its bottleneck (run.capture: true)" in quick


@pytest.mark.parametrize("query, status, message", [
    ("nth=x", 400, "nth is which burst of the cell"),
    ("size=huge", 400, "huge"),
    ("idle=soon", 400, "soon"),
    ("size=1KB&nth=0", 200, "has no burst number 0 of that cell"),
])
def test_burst_sequence_bad_queries(env, query, status, message):
    _, client = env
    r = client.get(f"/runs/{NEWCWV}/figures/burst-seq?{query}")
    assert r.status_code == status and message in r.get_data(as_text=True).replace("&#39;", "'")


def test_burst_sequence_without_data_says_why(env):
    app, client = env
    page = client.get(f"/runs/{QUICK}/figures/burst-seq").get_data(as_text=True)
    assert "No figure:</strong> run " + QUICK + " has no captured point (set run.capture: true)" in page
    assert client.get("/runs/nope-1/figures/burst-seq").status_code == 404
    assert client.get("/runs/..%2Fx/figures/burst-seq").status_code in (400, 404)
    # A capture recorded outside the run's folder is not read.
    with Store(app.config["CATNIP_DB"]) as store:
        keep = store.point(NEWCWV, 0)["capture"]
        store.update_point(NEWCWV, 0, capture="/etc/passwd")
    try:
        page = client.get(f"/runs/{NEWCWV}/figures/burst-seq?size=any").get_data(as_text=True)
        assert "recorded outside the run&#39;s folder: not read" in page
    finally:
        with Store(app.config["CATNIP_DB"]) as store:
            store.update_point(NEWCWV, 0, capture=keep)


def test_model_figures_are_the_clis(env):
    app, client = env
    page = client.get(f"/runs/{HV}/figures/models?samples=100").get_data(as_text=True)
    with Store(app.config["CATNIP_DB"]) as store:
        cells = validation.cells(store.transfer_trials(HV))
    want = figure_specs(cells, predictions(cells, {"mss": 1433, "rtt": 0.2, "wmax": 24, "min_rto": 1.0}, 0.1, 100))
    got = _spec(page)
    assert [n for n, _ in got] == ["fig3-reno2004-p0.01", "fig4-reno2004-p0.01", "fig6-reno2004-p0.01",
                                   "fig6-long-reno2004-p0.01"]
    assert got == json.loads(json.dumps([[n, s] for n, s in want]))
    assert f"catnip model validate {HV} --out DIR --delack 100ms --samples 100" in page
    assert f'href="/runs/{HV}/figures/models"' in client.get(f"/runs/{HV}").get_data(as_text=True)


@pytest.mark.parametrize("query, status, message", [
    ("samples=5", 400, "samples is a whole number from 100 to 20,000"),
    ("samples=100000000", 400, "samples is a whole number"),
    ("delack=slow", 400, "slow"),
    ("include_late=yes", 400, "include_late is '1' or left out"),
])
def test_model_figures_bad_queries(env, query, status, message):
    _, client = env
    r = client.get(f"/runs/{HV}/figures/models?{query}")
    assert r.status_code == status and message in r.get_data(as_text=True).replace("&#39;", "'")


def test_model_figures_of_a_run_that_is_no_transfer_measurement_say_why(env):
    _, client = env
    r = client.get(f"/runs/{QUICK}/figures/models")
    assert r.status_code == 200 and "is not a transfer measurement" in r.get_data(as_text=True)
    assert client.get("/runs/nope-1/figures/models").status_code == 404


def test_fig2_page_and_the_figures_index(env):
    _, client = env
    page = client.get("/figures/fig2").get_data(as_text=True)
    assert "catnip fig2 --out docs/figures/fig2-senders.svg" in page and 'href="/figures/fig2.svg"' in page
    # Drawn from the series kept in docs/figures/ by the function that drew the file.
    results, rtt = fig2.read_data(REPO / "docs/figures/fig2-senders.json")
    assert _spec(page) == [["fig2", json.loads(json.dumps(fig2.figure(results, rtt)))]]
    svg = client.get("/figures/fig2.svg")
    assert svg.status_code == 200 and svg.mimetype == "image/svg+xml"
    assert svg.data == (REPO / "docs/figures/fig2-senders.svg").read_bytes()
    index = client.get("/figures").get_data(as_text=True)
    assert f'href="/runs/{NEWCWV}/figures/burst-seq"' in index and f'href="/runs/{HV}/figures/models"' in index
    assert f'/runs/{QUICK}/figures' not in index
    nav = client.get("/").get_data(as_text=True)
    assert 'href="/plot">Plot</a>' in nav and 'href="/figures">Paper figures</a>' in nav


# Hand-made series of `catnip fig2` (s since the sender's first data segment, segment index), 100 ms
# RTT: Reno's bursts 1, 2, 4, 7, the 7 over 6 ms; RBPLW's last 7 paced over 60 ms; ECA 1, 2, 4, 4, 3;
# ECA+RBPLW one segment.
FIG2_SERIES = {
    "catnip_reno": [(0.0, 0), (0.1, 1), (0.1002, 2), (0.2, 3), (0.2001, 4), (0.2002, 5), (0.2003, 6)]
    + [(0.3 + k / 1000, 7 + k) for k in range(7)],
    "catnip_rbplw": [(0.0, 0), (0.1, 1), (0.1002, 2), (0.2, 3), (0.2001, 4), (0.2002, 5), (0.2003, 6)]
    + [(0.3 + k / 100, 7 + k) for k in range(7)],
    "catnip_eca": [(0.0, 0), (0.1, 1), (0.1002, 2), (0.2, 3), (0.2001, 4), (0.2002, 5), (0.2003, 6),
                   (0.3, 7), (0.3001, 8), (0.3002, 9), (0.3003, 10), (0.4, 11), (0.4001, 12), (0.4002, 13)],
    "catnip_ecarbplw": [(0.0, 0)]}


def test_fig2_page_draws_the_series_catnip_fig2_kept(env, tmp_path, monkeypatch):
    """The Fig. 2 page is drawn from the data file `catnip fig2` writes beside its figure: each
    sender's panel is its stored segments (ms, index), and its bursts are counted from them."""
    _, client = env
    data = fig2.write_data(tmp_path / "fig2.json", FIG2_SERIES, 80.0, tmp_path / "fig2.svg")
    assert data == fig2.data_path(tmp_path / "fig2.svg")
    monkeypatch.setattr(figure_pages, "FIG2_DATA", data)
    page = client.get("/figures/fig2").get_data(as_text=True)
    (name, spec), = _spec(page)
    assert name == "fig2" and [t["name"] for t in spec["data"]] == ["(a) Reno", "(b) RBPLW", "(c) ECA", "(d) ECA+RBPLW"]
    reno, rbplw, eca, both = spec["data"]
    assert reno["x"] == [0.0, 100.0, 100.2, 200.0, 200.1, 200.2, 200.3, 300.0, 301.0, 302.0, 303.0, 304.0, 305.0, 306.0]
    assert reno["y"] == list(range(14)) and rbplw["x"][-7:] == [300.0, 310.0, 320.0, 330.0, 340.0, 350.0, 360.0]
    assert eca["y"] == list(range(14)) and both["x"] == [0.0] and both["y"] == [0]
    assert "RTT 80 ms" in spec["layout"]["title"]["text"]
    rows = re.findall(r"<tr><td>(.*?)</td><td>(\d+)</td><td>(.*?)</td><td>(.*?)</td></tr>", page)
    assert rows == [("(a) Reno", "14", "1, 2 (0.2 ms), 4 (0.3 ms), 7 (6.0 ms)", "1, 2, 4, 7"),
                    ("(b) RBPLW", "14", "1, 2 (0.2 ms), 4 (0.3 ms), 7 (60.0 ms)", "1, 2, 4, then the last 7 paced"),
                    ("(c) ECA", "14", "1, 2 (0.2 ms), 4 (0.3 ms), 4 (0.3 ms), 3 (0.2 ms)", "1, 2, 4, 4, 3"),
                    ("(d) ECA+RBPLW", "1", "1", "1, 2, 4, 4, then the last 3 paced")]
    assert "half the round trip (40 ms)" in page and 'id="figure-note"' not in page

    # No data file, or one that is not fig2's: no figure, and the page says why.
    monkeypatch.setattr(figure_pages, "FIG2_DATA", tmp_path / "none.json")
    page = client.get("/figures/fig2").get_data(as_text=True)
    assert _spec(page) == [] and "none.json is not in this checkout" in html.unescape(page)
    doc = json.loads(data.read_text())
    doc["senders"][0]["points"][0] = [-1, 0]
    data.write_text(json.dumps(doc))
    monkeypatch.setattr(figure_pages, "FIG2_DATA", data)
    page = html.unescape(client.get("/figures/fig2").get_data(as_text=True))
    assert _spec(page) == [] and "catnip_reno's points must be [seconds >= 0, segment index] pairs" in page


# --- the plot view (finding 4, Flent's plots) ----------------------------------------------------

def test_plot_of_several_runs_one_trace_a_point_since_each_points_start(env):
    app, client = env
    r = client.get(f"/plot?run={ANCH}&run={NEWCWV}&series=queue")
    assert r.status_code == 200
    (name, spec), = _spec(r.get_data(as_text=True))
    assert [t["name"] for t in spec["data"]] == [f"{ANCH} · 0: single point", f"{NEWCWV} · 0: Reno",
                                                 f"{NEWCWV} · 1: newCWV"]
    assert spec["layout"]["xaxis"]["title"]["text"] == "s since the point's start"
    # ANCH: the engine started 1 s after the point: its sample at engine t lies at t + 1 (the first is a base).
    assert spec["data"][0]["x"] == [float(t + 1) for t in range(1, 10)] and spec["data"][0]["y"] == list(range(1, 10))
    with Store(app.config["CATNIP_DB"]) as store:
        p = store.point(NEWCWV, 1)
        clock = json.loads(p["environment"])["clock"]
        first = store.queue_samples(NEWCWV, 1)[1]
    want = first["t"] + clock["engine_clock_start"][first["router"]] - clock["monotonic"] + clock["wall"] - p["started"]
    assert spec["data"][2]["x"][0] == pytest.approx(want, abs=1e-3)


def test_plot_points_and_app_series(env):
    _, client = env
    r = client.get(f"/plot?run={NEWCWV}&series=progress&point={NEWCWV}:1")
    (_, spec), = _spec(r.get_data(as_text=True))
    assert [t["name"] for t in spec["data"]] == [f"{NEWCWV} · 1: newCWV"]
    page = client.get(f"/plot?run={SCHEMES}").get_data(as_text=True)
    apps = re.findall(r'<option value="(app:[^"]+)"', page)
    assert apps and all(a.count(":") == 2 for a in apps)
    (_, spec), = _spec(client.get(f"/plot?run={SCHEMES}&series={apps[0]}").get_data(as_text=True))
    assert spec["data"] and spec["data"][0]["mode"] == "markers"


def test_plot_of_a_point_without_clock_anchor_says_so(env):
    _, client = env
    page = client.get(f"/plot?run={OLD}&series=queue").get_data(as_text=True)
    assert "no clock anchor recorded" in page and "(own clock)" in page


@pytest.mark.parametrize("query, message", [
    ("run=nope-1&series=queue", "run='nope-1': no such run"),
    (f"run={QUICK}&series=bogus", "series='bogus' is not a series"),
    (f"run={QUICK}&series=app:x:y", "the chosen runs have no rows of it; they have: queue,"),
    (f"run={HV}&series=queue", "they have: none"),
    (f"run={QUICK}&point={QUICK}:9&series=queue", f"run {QUICK} has no point 9"),
    (f"run={QUICK}&point=other:1&series=queue", "write RUN:N for a point N of one of the chosen runs"),
    ("run=../etc&series=queue", "run="),
    ("&".join(f"run=r{i}" for i in range(13)) + "&series=queue", "at most 12 runs"),
])
def test_plot_bad_choices_are_400_with_the_reason(env, query, message):
    _, client = env
    r = client.get(f"/plot?{query}")
    assert r.status_code == 400, r.status_code
    assert message in r.get_data(as_text=True).replace("&#39;", "'")


def test_plot_picker_without_a_choice(env):
    _, client = env
    page = client.get("/plot").get_data(as_text=True)
    assert f'<option value="{QUICK}"' in page and 'id="figure-plot"' not in page
    page = client.get(f"/plot?run={QUICK}").get_data(as_text=True)
    assert '<option value="queue">' in page and f'value="{QUICK}:0"' in page and 'id="figure-plot"' not in page


# --- one time origin on the run page (finding 10) --------------------------------------------------

def test_run_page_charts_share_the_points_start_as_origin(env):
    app, client = env
    page = client.get(f"/runs/{ANCH}").get_data(as_text=True)
    data = json.loads(re.search(r'<script id="run-data" type="application/json">(.*?)</script>', page, re.S).group(1))
    s = data["series"]["0"]
    assert s["t"] == [float(t + 1) for t in range(1, 10)]
    with Store(app.config["CATNIP_DB"]) as store:
        start = store.point(ANCH, 0)["started"]
        want = [round(r["t"] - start, 2) for r in store.progress(ANCH, 0)]
    assert s["progress_t"] == want
    assert {layout["xaxis"]["title"]["text"] for layout in data["liveLayouts"].values()} == {"s since the point's start"}
    assert 'id="unanchored"' not in page
    old = client.get(f"/runs/{OLD}").get_data(as_text=True)
    assert 'id="unanchored"' in old and "recorded no clock anchor" in old
