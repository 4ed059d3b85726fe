"""The figure builders (results/figures.py): one colour and one name per sweep point in every chart
of a run, named series (models, senders) coloured alike in every figure, readable log axes with
"(log)" in their titles, specs Plotly accepts, and static files (SVG, PDF, PNG) written from the
same specs through kaleido and a local Chromium."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from types import SimpleNamespace as NS

import plotly.graph_objects as go
import pytest

from catnip.results import figures
from catnip.results.labels import point_label
from catnip.results.store import Store
from catnip.testbed.paths import REPO

SVG = "{http://www.w3.org/2000/svg}"
ASSIGNMENTS = ({"router.policy": "fifo"}, {"router.policy": "catnip_good"}, {"router.policy": "<b>red</b>"})


@pytest.fixture
def run(tmp_path):
    """A finished three-point run: pages with known times, queue samples and progress per point."""
    store = Store(tmp_path / "t.db")
    store.create_run("r1", "quick", "x", {"name": "quick"}, {}, 1, "abc", {}, {})
    for point, assignment in enumerate(ASSIGNMENTS):
        store.create_point("r1", point, 0, assignment, {"topology": {"clients": 1}}, 1)
        durations = [0.05 * (point + 1) * 1.5 ** k for k in range(12)]  # 0.05 s to ~6 s: two decades and more
        store.add_transfers("r1", point, [], [
            {"client": "c0", "server": "v1", "page": 1 + k % 3, "round": k, "start": 0.0, "end": d, "duration": d,
             "objects": 1, "bytes": 1000} for k, d in enumerate(durations)])
        store.add_queue_samples("r1", point, [("ctprs", "ctprs>ctprc", t, t % 5, 1500, 125_000 * t, t, t // 2,
                                               t - t // 2) for t in range(6)])
        for t in range(3):
            store.add_progress("r1", point, float(t), "running workload", t, 3)
    points = [{"point": p, "assignment": a} for p, a in enumerate(ASSIGNMENTS)]
    report = {"points": [dict(p, table=[{"page": 1, "mean": 1.0 + p["point"], "sdev": 0.1}]) for p in points]}
    yield store, points, report
    store.close()


def _traces_by_point(fig):
    """{point number: [(trace name, colour), ...]} from the names "N: label"."""
    out: dict[int, list] = {}
    for t in fig["data"]:
        c = (t.get("marker") or {}).get("color") or (t.get("line") or {}).get("color")
        out.setdefault(int(t["name"].split(":")[0]), []).append((t["name"], c))
    return out


# --- colours and names ---------------------------------------------------------------------------
def test_colour_is_stable_across_processes_and_distinct():
    """A point's colour is its number's; a series' colour depends on its name only, the same in
    another interpreter (no per-process hash salt), and the named series are told apart."""
    assert [figures.color(n) for n in range(10)] == list(figures.PALETTE)
    assert len(set(figures.PALETTE)) == 10 and figures.color(13) == figures.color(3)
    names = ["rtt20ms", "flow a", "some tag", "(no tag)"]
    code = ("import json, sys; from results.figures import color; "
            f"print(json.dumps([color(n) for n in {names!r}]))")
    other = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert other.stdout.strip() == str([figures.color(n) for n in names]).replace("'", '"')
    for family in (("Reno measured", "CATNIP measured", "Hysteresis", "Sikdar", "Cardwell-00", "Partial CATNIP"),
                   ("Reno", "RBPLW", "ECA", "ECA+RBPLW"),
                   ("cwnd", "pipeACK (max filter)", "pipeACK sample per round")):
        assert len({figures.color(n) for n in family}) == len(family), family
    for bad in (1.5, True, None):
        with pytest.raises(TypeError, match="point number or a series name"):
            figures.color(bad)


def test_a_point_has_one_name_and_colour_in_every_chart_of_its_run(run):
    store, points, report = run
    rows = {p["point"]: figures.bottleneck_series(store.queue_samples("r1", p["point"]),
                                                  store.progress("r1", p["point"])) for p in points}
    labelled = [{"point": p["point"], "label": point_label(p["assignment"])} for p in points]
    charts = [figures.page_time_bars(report), figures.page_time_cdf(store, "r1", points),
              figures.page_time_ccdf(store, "r1", points), figures.page_time_distribution(store, "r1", points),
              *figures.bottleneck_charts(labelled, rows).values()]
    for fig in charts:
        by_point = _traces_by_point(fig)
        assert sorted(by_point) == [0, 1, 2], fig["layout"]["title"]
        for point, traces in by_point.items():
            want = figures.point_name(point, ASSIGNMENTS[point])
            for name, c in traces:
                assert c == figures.color(point) and name.startswith(want), (fig["layout"]["title"], name, c)
    # The live view's series carries the colour the page draws with (read from the rows' point).
    assert [rows[p]["color"] for p in (0, 1, 2)] == [figures.color(p) for p in (0, 1, 2)]
    # A sweep value is shown as written, not as markup.
    assert figures.point_name(2, ASSIGNMENTS[2]) == "2: &lt;b&gt;red&lt;/b&gt;"


def test_named_series_keep_their_colour_across_figures():
    fig3 = figures.latency_chart("Reno", [figures.Series("Reno measured", [(1, 0.2), (8, 0.5)], [0.01, 0.02],
                                                         measured=True),
                                          figures.Series("Hysteresis", [(1, 0.3), (8, 0.6)])])
    fig6 = figures.latency_chart("CATNIP", [figures.Series("CATNIP measured", [(1, 0.2)], [0.01], measured=True),
                                            figures.Series("Reno measured", [(1, 0.25)], [0.01], measured=True)])
    colours = {}
    for fig in (fig3, fig6):
        for t in fig["data"]:
            c = (t.get("marker") or {}).get("color") or t["line"]["color"]
            assert colours.setdefault(t["name"], c) == c == figures.color(t["name"])
    assert fig3["data"][0]["error_y"]["array"] == [0.01, 0.02]
    from catnip.controller import fig2
    spec = fig2.figure({"catnip_reno": [(0.0, 0), (0.1, 1)], "catnip_eca": [(0.0, 0)]}, 100.0)
    assert [t["marker"]["color"] for t in spec["data"]] == [figures.color(k) for k in ("Reno", "RBPLW", "ECA",
                                                                                         "ECA+RBPLW")]
    assert spec["data"][0]["x"] == [0.0, 100.0] and spec["data"][1]["x"] == []  # ms; no segments: an empty panel
    newcwv = NS(points=[NS(group=NS(point=4, label="x", sender=NS(label=lambda: "newcwv")), bins={0: 1e6, 1: 2e6})],
                width=1.0, app="ftp")
    assert figures.ftp_chart(newcwv)["data"][0]["line"]["color"] == figures.color(4)


# --- log axes --------------------------------------------------------------------------------------
def test_log_axes_are_readable_and_say_log(run):
    store, points, _ = run
    cdf, ccdf = figures.page_time_cdf(store, "r1", points), figures.page_time_ccdf(store, "r1", points)
    apps = figures.app_ccdf_chart({"app": "telnet", "metric": "echo_delay", "units": ["s"], "curves": [
        {"tag": None, "x": [0.1 * k for k in range(1, 201)], "y": [1 - k / 200 for k in range(200)]}]})
    for axis in (cdf["layout"]["xaxis"], ccdf["layout"]["xaxis"], ccdf["layout"]["yaxis"], apps["layout"]["yaxis"]):
        assert axis["type"] == "log" and axis["title"]["text"].endswith(" (log)"), axis
        # Labels at powers of ten only, small ones as 1e-3: Plotly's default adds 2s and 5s between.
        assert axis["dtick"] == 1 and axis["exponentformat"] == "e" and "tickvals" not in axis, axis
    assert cdf["layout"]["xaxis"]["ticksuffix"] == " s"
    assert cdf["layout"]["yaxis"].get("type") != "log" and "(log)" not in cdf["layout"]["yaxis"]["title"]["text"]
    # The dashboard's CCDF button switches to exactly the CCDF figure's data and axis.
    button = figures.page_time_distribution(store, "r1", points)["layout"]["updatemenus"][0]["buttons"][1]
    assert button["label"] == "CCDF (log)"
    assert button["args"][0]["y"] == [t["y"] for t in ccdf["data"]] and button["args"][1]["yaxis"] == ccdf["layout"]["yaxis"]


@pytest.mark.parametrize("values, unit, ticks, text", [
    ([0.3, 0.45, 0.8], "s", [0.4, 0.6, 0.8], ["0.4 s", "0.6 s", "0.8 s"]),  # one 1-2-5 value inside: evenly spaced
    ([0.31, 0.39], "ms", [0.32, 0.34, 0.36, 0.38], ["0.32 ms", "0.34 ms", "0.36 ms", "0.38 ms"]),  # none inside
    ([0.15, 0.3, 0.9], "s", [0.2, 0.5], ["0.2 s", "0.5 s"]),   # less than two powers of ten: 1-2-5
    ([0.0002, 0.0009], "", [0.0002, 0.0005], ["2e-4", "5e-4"]),  # small values in 1e-3 style
])
def test_log_axis_over_a_narrow_range_still_has_labels(values, unit, ticks, text):
    axis = figures.log_axis("delay", values, unit)
    assert axis["type"] == "log" and axis["title"]["text"] == "delay (log)" and "dtick" not in axis
    assert len(axis["tickvals"]) >= 2 and all(min(values) <= v <= max(values) for v in axis["tickvals"]), axis
    assert set(ticks) <= set(axis["tickvals"])
    if text:
        assert [axis["ticktext"][axis["tickvals"].index(v)] for v in ticks] == text


def test_every_builder_gives_a_figure_plotly_accepts(run):
    """Plotly's schema check (what export runs first): no builder carries a key Plotly does not know."""
    store, points, report = run
    rows = {p["point"]: figures.bottleneck_series(store.queue_samples("r1", p["point"]), []) for p in points}
    specs = [figures.page_time_bars(report), figures.page_time_distribution(store, "r1", points),
             figures.page_time_ccdf(store, "r1", points),
             *figures.bottleneck_charts([{"point": p["point"], "label": "x"} for p in points], rows).values(),
             figures.app_ccdf_chart({"app": "a", "metric": "m", "units": [None], "curves": [
                 {"tag": "t", "x": [1, 2], "y": [0.5, 0.0]}]}),
             figures.app_goodput_chart({"app": "a", "units": ["bit/s"], "cov": None, "series": [
                 {"flow": None, "t": [0, 1], "value": [1, 2]}]}),
             figures.latency_chart("t", [figures.Series("Sikdar", [(1, 2)])]),
             figures.sequence_panels([("a", 0, [(0.0, 0)]), ("b", 1, [])], title="t")]
    for spec in specs:
        go.Figure(spec)
    with pytest.raises(ValueError, match="colour"):
        go.Figure({"data": [{"type": "scatter", "colour": "red"}]})  # the check does catch a misspelt key


# --- static files ----------------------------------------------------------------------------------
def test_a_file_name_names_its_format(tmp_path):
    assert [figures.format_of(f"a/b.{e}") for e in ("svg", "PDF", "png")] == ["svg", "pdf", "png"]
    for bad in ("fig.jpg", "fig", "fig.svg.txt"):
        with pytest.raises(figures.ExportError) as exc:
            figures.save({"data": []}, tmp_path / bad)
        assert str(exc.value) == f"figure file {str(tmp_path / bad)!r}: the extension must be one of .svg, .pdf, .png"
    assert list(tmp_path.iterdir()) == []


def test_missing_chromium_is_named_in_one_line(tmp_path, monkeypatch):
    pytest.importorskip("kaleido", reason="figure export: the kaleido package is not installed")
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chromium"))
    assert figures.export_missing() == (f"no Chromium or Chrome found at BROWSER_PATH={tmp_path / 'no-such-chromium'}"
                                        " (Debian: apt-get install chromium)")
    with pytest.raises(figures.ExportError, match=r"^cannot write figures: no Chromium or Chrome found at") as exc:
        figures.save({"data": []}, tmp_path / "f.svg")
    assert "\n" not in str(exc.value) and list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The CCDF and a latency chart as SVG, PDF and PNG, in one export session."""
    missing = figures.export_missing()
    if missing:
        pytest.skip(f"figure export: {missing}")
    out = tmp_path_factory.mktemp("figs")
    store = Store(out / "t.db")
    store.create_run("r1", "quick", "x", {"name": "quick"}, {}, 1, "abc", {}, {})
    store.create_point("r1", 0, 0, {}, {}, 1)
    store.add_transfers("r1", 0, [], [{"client": "c0", "server": "v1", "page": 1, "round": k, "start": 0.0,
                                       "end": d, "duration": d, "objects": 1, "bytes": 1}
                                      for k, d in enumerate([0.04 * 1.6 ** k for k in range(14)])])
    ccdf = figures.page_time_ccdf(store, "r1", [{"point": 0, "assignment": {}}])
    store.close()
    chart = figures.latency_chart("Reno, p = 0.01 & <b>x</b>", [
        figures.Series("Reno measured", [(1, 0.25), (8, 0.6)], [0.01, 0.03], measured=True),
        figures.Series("Hysteresis", [(1, 0.3), (8, 0.7)])])
    paths = figures.save_all([(ccdf, out / "ccdf.svg"), (chart, out / "chart.svg"), (chart, out / "sub" / "chart.pdf"),
                              (chart, out / "chart.png")])
    return {p.name: p for p in paths}


def _texts(svg_path, cls):
    root = ET.parse(svg_path).getroot()
    assert root.tag == SVG + "svg"
    return ["".join(t.itertext()) for g in root.iter(SVG + "g") if g.get("class") == cls for t in g.iter(SVG + "text")]


def test_export_writes_svg_pdf_and_png(exported):
    root = ET.parse(exported["chart.svg"]).getroot()
    titles = ["".join(t.itertext()) for t in root.iter(SVG + "text") if t.get("class") == "gtitle"]
    assert titles == ["Reno, p = 0.01 & <b>x</b>"]  # escaped for Plotly, shown as written
    assert exported["chart.pdf"].read_bytes().startswith(b"%PDF-") and exported["chart.pdf"].parent.name == "sub"
    assert exported["chart.png"].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_exported_log_axes_show_powers_of_ten_with_units(exported):
    """What a reader sees on the CCDF: time labelled 0.1 s, 1 s, 10 s, the fraction 1, 0.1, 0.01:
    no 2s and 5s between them, and "(log)" in both axis titles."""
    root = ET.parse(exported["ccdf.svg"]).getroot()
    titles = {t.get("class"): "".join(t.itertext()) for t in root.iter(SVG + "text")
              if t.get("class") in ("xtitle", "ytitle")}
    assert titles == {"xtitle": "page download time (log)", "ytitle": "fraction of pages taking longer (log)"}
    assert _texts(exported["ccdf.svg"], "xtick") == ["0.1 s", "1 s", "10 s"]
    assert _texts(exported["ccdf.svg"], "ytick") == ["0.1", "1"]


def test_fig10_has_a_panel_per_captured_point_in_its_colour(monkeypatch):
    """newCWV Fig. 10 (`catnip burst-seq`): the chosen burst of each captured point, the point's
    number, sender and spread in its panel's title, drawn in the point's colour."""
    from catnip.results import burst_capture as bc
    store = NS(points=lambda run_id: [{"point": 0, "capture": "a.pcap"}, {"point": 1, "capture": None},
                                      {"point": 2, "capture": "c.pcap"}])
    bursts = {0: [bc.Burst(0, 81920, 1.0, [(0.0, 0), (0.001, 1)])],
              2: [bc.Burst(0, 81920, 1.0, [(0.0, 0), (0.048, 1)])]}
    monkeypatch.setattr(bc, "point_bursts", lambda s, r, point: bursts[point])
    monkeypatch.setattr(bc, "sender_label", lambda s, r, point: "newcwv" if point == 0 else "newcwv, paced (fq, 200%)")
    spec, chosen = bc.figure_spec(store, "r", 81920, 1.0, 0)
    assert [p for p, _, _ in chosen] == [0, 2]
    assert [t["marker"]["color"] for t in spec["data"]] == [figures.color(0), figures.color(2)]
    titles = [a["text"] for a in spec["layout"]["annotations"]]
    assert titles == ["<b>0: newcwv: 80 KB after 1 s, spread 1 ms</b>",
                      "<b>2: newcwv, paced (fq, 200%): 80 KB after 1 s, spread 48 ms</b>"]
    assert spec["data"][1]["x"] == [0.0, 48.0]
    if figures.export_missing() is None:  # `catnip burst-seq` writes this text as the .svg file
        text, _ = bc.figure(store, "r", 81920, 1.0, 0)
        root = ET.fromstring(text)
        assert ["".join(t.itertext()) for t in root.iter(SVG + "text") if t.get("class") == "annotation-text"] == \
            [t.removeprefix("<b>").removesuffix("</b>") for t in titles]
