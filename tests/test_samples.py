"""Per-sample application metrics (Store.add_samples, results/samples.py) and the report layouts
built on them and on the paper tables (results/layouts.py, `catnip report --apps/--layout`).
Expected numbers are computed by hand in the comments."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from click.testing import CliRunner

from catnip.cli.main import main
from catnip.results import table as tables
from catnip.results import compare, layouts, report, samples
from catnip.results.samples import MetricSummary
from catnip.results.store import Store


def _telnet(value, t, tag="rtt80ms", error=None, flow="f1"):
    return {"app": "telnet", "metric": "echo_delay", "host": "c1", "peer": "s1", "flow": flow, "tag": tag,
            "t": t, "value": value, "unit": "s", "error": error}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "db") as s:
        s.create_run("r1", "apps", "x", {"name": "apps"}, {}, 1, "abc", {}, {})
        s.create_point("r1", 0, 0, {"app.rate": 1}, {}, 1)
        s.create_point("r1", 1, 0, {"app.rate": 2}, {}, 1)
        # telnet echo delays: rtt80ms 1, 2, 3, 4 (+ one timeout); rtt20ms 10
        s.add_samples("r1", 0, [_telnet(3.0, 3.0), _telnet(1.0, 1.0), _telnet(4.0, 4.0), _telnet(2.0, 2.0),
                                _telnet(None, 5.0, error="timeout"), _telnet(10.0, 6.0, tag="rtt20ms")])
        # bulk goodput per interval: flow a 10, 20 (mean 15); flow b 40, 50 (mean 45); one errored sample
        s.add_samples("r1", 0, [
            {"app": "bulk", "metric": "goodput", "flow": "b", "t": 1.0, "value": 50.0, "unit": "bit/s"},
            {"app": "bulk", "metric": "goodput", "flow": "a", "t": 1.0, "value": 20.0, "unit": "bit/s"},
            {"app": "bulk", "metric": "goodput", "flow": "a", "t": 0.0, "value": 10.0, "unit": "bit/s"},
            {"app": "bulk", "metric": "goodput", "flow": "b", "t": 0.0, "value": 40.0, "unit": "bit/s"},
            {"app": "bulk", "metric": "goodput", "flow": "b", "t": 2.0, "unit": "bit/s", "error": "reset"},
            {"app": "bulk", "metric": "goodput", "flow": "c", "value": 99.0, "unit": "bit/s"}])  # no t
        yield s


# --- the table ------------------------------------------------------------------------------
def test_samples_round_trip_with_missing_keys_null(store):
    store.add_samples("r1", 1, [{"app": "ftp", "metric": "file_time", "value": 0.5}])
    (row,) = store.samples("r1", 1)
    assert dict(row) == {"run_id": "r1", "point": 1, "app": "ftp", "metric": "file_time", "host": None,
                         "peer": None, "flow": None, "tag": None, "t": None, "value": 0.5, "unit": None, "error": None}
    assert [r["t"] for r in store.samples("r1", 0, app="telnet")] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert len(store.samples("r1", 0, metric="goodput")) == 6
    assert store.samples("r1", 0, app="telnet", metric="goodput") == []
    assert store.samples("r2", 0) == [] and store.samples("r1", 1, app="telnet") == []


@pytest.mark.parametrize("row, message", [
    ({"app": "ftp", "metric": "file_time", "vlaue": 1.0}, "unknown keys \\['vlaue'\\]"),
    ({"metric": "file_time", "value": 1.0}, "app and metric are required"),
    ({"app": "ftp", "value": 1.0}, "app and metric are required"),
])
def test_bad_samples_are_refused_whole(store, row, message):
    with pytest.raises(ValueError, match=message):
        store.add_samples("r1", 1, [{"app": "ftp", "metric": "file_time", "value": 2.0}, row])
    assert store.samples("r1", 1) == []  # not even the good row before it


# --- statistics -----------------------------------------------------------------------------
def test_percentile_interpolates_between_order_statistics():
    v = [1.0, 2.0, 3.0, 4.0]
    # position q (n - 1): 0.5 * 3 = 1.5 -> 2.5; 0.9 * 3 = 2.7 -> 3.7; 0.99 * 3 = 2.97 -> 3.97
    assert samples.percentile(v, 0.5) == 2.5
    assert samples.percentile(v, 0.9) == pytest.approx(3.7)
    assert samples.percentile(v, 0.99) == pytest.approx(3.97)
    assert samples.percentile(v, 0) == 1.0 and samples.percentile(v, 1) == 4.0
    assert samples.percentile([7.0], 0.9) == 7.0
    with pytest.raises(ValueError):
        samples.percentile([], 0.5)


def _t_cdf(x: float, df: int, steps: int = 2000) -> float:
    """P(T <= x), x > 0, by Simpson's rule on the density (independent of the table)."""
    def pdf(u):
        return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
                        - (df + 1) / 2 * math.log1p(u * u / df))
    h = x / steps
    total = pdf(0) + pdf(x) + sum((4 if i % 2 else 2) * pdf(i * h) for i in range(1, steps))
    return 0.5 + total * h / 3


@pytest.mark.parametrize("df", [*range(1, 41), 45, 60, 100, 1000])
def test_t_quantile_is_the_975th_percentile(df):
    assert _t_cdf(samples.t975(df), df) == pytest.approx(0.975, abs=2e-5)


def test_t_quantile_known_values():
    # Printed tables: t(0.975, 1) = 12.7062, t(0.975, 4) = 2.7764.
    assert samples.t975(1) == pytest.approx(12.7062, abs=1e-4) and samples.t975(4) == pytest.approx(2.7764, abs=1e-4)
    assert samples.t975(10 ** 7) == pytest.approx(1.96, abs=1e-4)
    assert samples.t975(math.inf) == pytest.approx(1.959964, abs=1e-6)
    with pytest.raises(ValueError):
        samples.t975(0)


def test_ratio_interval_is_student_t_at_the_welch_df():
    # Means 5 (n 2, sdev sqrt(32)) over 2 (n 3, sdev 1): ratio 2.5; squared CVs of the means
    # 32 / (2 * 25) = 0.64 and 1 / (3 * 4) = 1/12. Delta method: variance 2.5^2 (0.64 + 1/12),
    # parts 4.0 (df 1) and 0.5208 (df 2); Welch-Satterthwaite df = 4.5208^2 / (16 + 0.5208^2 / 2)
    # = 1.2666; t(0.975, 1.2666) = 7.845 (not 1.96): half-width 16.68.
    var_a, var_b = 6.25 * 0.64, 6.25 / 12
    df = (var_a + var_b) ** 2 / (var_a ** 2 / 1 + var_b ** 2 / 2)
    assert df == pytest.approx(1.2666, abs=1e-4)
    assert samples.welch_df([(var_a, 1), (var_b, 2)]) == pytest.approx(df)
    assert samples.ratio_ci95(2.5, 0.64, 2, 1 / 12, 3) == pytest.approx(16.68, abs=0.01)
    # One part is the plain mean's interval; no spread, no width.
    assert samples.half_width([(4.0 / 9, 8)]) == pytest.approx(samples.ci95(2.0, 9))
    assert samples.half_width([(0.0, 3), (0.0, 5)]) == 0.0


def test_ci95_is_student_t():
    # 1, 2, 3, 4: sdev sqrt(5/3) = 1.2910; t(0.975, 3) = 3.1824; 3.1824 * 1.2910 / 2 = 2.0543
    assert samples.ci95(math.sqrt(5 / 3), 4) == pytest.approx(2.0543, abs=1e-4)
    assert samples.ci95(1.0, 1) is None


def test_summaries_count_errors_apart(store):
    bulk, telnet = samples.summaries(store, "r1", 0)
    # telnet, tags pooled: 1, 2, 3, 4, 10 -> mean 4; deviations -3 -2 -1 0 6: squares 50, /4 -> sdev sqrt(12.5)
    assert telnet == MetricSummary(
        app="telnet", metric="echo_delay", unit="s", tag=None, n=5, errors=1, mean=4.0,
        ci95=pytest.approx(2.7764 * math.sqrt(12.5) / math.sqrt(5), rel=2e-5), sdev=pytest.approx(math.sqrt(12.5)),
        p50=3.0, p90=pytest.approx(7.6), p99=pytest.approx(9.76), min=1.0, max=10.0)  # p90: 4 + 0.6 * 6
    assert (bulk.app, bulk.n, bulk.errors, bulk.mean, bulk.unit) == ("bulk", 5, 1, 43.8, "bit/s")
    t20, t80 = [s for s in samples.summaries(store, "r1", 0, by_tag=True) if s.app == "telnet"]
    assert (t20.tag, t20.n, t20.mean, t20.sdev, t20.ci95, t20.p99) == ("rtt20ms", 1, 10.0, None, None, 10.0)
    assert (t80.tag, t80.n, t80.errors, t80.mean, t80.p50) == ("rtt80ms", 4, 1, 2.5, 2.5)
    assert t80.ci95 == pytest.approx(2.0543, abs=1e-4)
    assert samples.summaries(store, "r1", 1) == []


def test_a_metric_in_two_units_is_not_mixed(store):
    store.add_samples("r1", 1, [{"app": "ftp", "metric": "file_time", "value": 2.0, "unit": "s"},
                                {"app": "ftp", "metric": "file_time", "value": 500.0, "unit": "ms"}])
    assert [(s.unit, s.mean) for s in samples.summaries(store, "r1", 1)] == [("ms", 500.0), ("s", 2.0)]


def test_a_failed_sample_with_a_value_is_an_error_not_a_value(store):
    store.add_samples("r1", 1, [{"app": "ftp", "metric": "file_time", "t": 1.0, "value": 1.0, "unit": "s"},
                                {"app": "ftp", "metric": "file_time", "t": 2.0, "value": 100.0, "unit": "s",
                                 "error": "truncated"}])
    (s,) = samples.summaries(store, "r1", 1)
    assert (s.n, s.errors, s.mean, s.max) == (1, 1, 1.0, 1.0)
    assert samples.ccdf_for(store, "r1", 1, "ftp", "file_time") == [(1.0, 0.0)]
    assert samples.timeseries(store, "r1", 1, "ftp", "file_time") == {None: [(1.0, 1.0)]}


def test_only_errors_give_an_empty_summary(store):
    store.add_samples("r1", 1, [{"app": "ftp", "metric": "file_time", "error": "refused"}])
    (s,) = samples.summaries(store, "r1", 1)
    assert (s.n, s.errors, s.mean, s.p50, s.max) == (0, 1, None, None, None)


def test_ccdf_is_exact_on_the_sample():
    assert samples.ccdf([3.0, 1.0, 2.0, 2.0]) == [(1.0, 0.75), (2.0, 0.25), (3.0, 0.0)]
    assert samples.ccdf([5.0]) == [(5.0, 0.0)]
    assert samples.ccdf([]) == []


def test_ccdf_for_leaves_out_errors_and_filters_tags(store):
    assert samples.ccdf_for(store, "r1", 0, "telnet", "echo_delay", tag="rtt80ms") == \
        [(1.0, 0.75), (2.0, 0.5), (3.0, 0.25), (4.0, 0.0)]
    assert samples.ccdf_for(store, "r1", 0, "telnet", "echo_delay")[-2:] == [(4.0, 0.2), (10.0, 0.0)]


def test_timeseries_per_flow_sorted(store):
    assert samples.timeseries(store, "r1", 0, "bulk", "goodput") == {
        "a": [(0.0, 10.0), (1.0, 20.0)], "b": [(0.0, 40.0), (1.0, 50.0)]}  # c has no t; b's t=2 failed


def test_cov_across_flows(store):
    # per-flow means a 15, b 45, c 99: mean 53; deviations -38, -8, 46: squares 1444 + 64 + 2116 = 3624
    assert samples.per_flow_means(store, "r1", 0, "bulk", "goodput") == {"a": 15.0, "b": 45.0, "c": 99.0}
    assert samples.cov_across_flows(store, "r1", 0, "bulk", "goodput") == pytest.approx(math.sqrt(3624 / 3) / 53)
    assert samples.cov_across_flows(store, "r1", 0, "bulk", "goodput", sample=True) == \
        pytest.approx(math.sqrt(3624 / 2) / 53)
    assert samples.cov([15.0, 45.0]) == 0.5  # mean 30, population sdev 15
    assert samples.cov_across_flows(store, "r1", 0, "telnet", "echo_delay") is None  # one flow
    assert samples.cov([0.0, 0.0]) is None and samples.cov([1.0]) is None


# --- layouts --------------------------------------------------------------------------------
def test_registry_and_unknown_names():
    # The layouts of any run (results/layouts.py) first, then each paper's in registration order (papers/).
    assert list(layouts.LAYOUTS)[:8] == ["app-metrics", "within-intervals", "within-intervals-summary",
                                         "catnip-table-ii", "catnip-loss", "catnip-table-xi", "catnip-table-xi-beside",
                                         "catnip-study"]
    with pytest.raises(layouts.UnknownLayout, match="app-metrics, within-intervals, within-intervals-summary, catnip-"):
        layouts.get("table-ii")
    with pytest.raises(ValueError, match="registered twice"):
        layouts.layout("app-metrics", "again", "none")(lambda store, run: None)


def test_tables_check_their_types():
    cols = (tables.Column("n", "int"), tables.Column("t", "float", "s"))
    tables.Table("x", "X", "p", ("r",), cols, ((1, 2), (None, 0.5)))
    with pytest.raises(TypeError, match="column n"):
        tables.Table("x", "X", "p", ("r",), cols, ((1.5, 2.0),))
    with pytest.raises(TypeError, match="column t"):
        tables.Table("x", "X", "p", ("r",), cols, ((1, True),))
    with pytest.raises(ValueError, match="2 columns"):
        tables.Table("x", "X", "p", ("r",), cols, ((1,),))
    with pytest.raises(ValueError):
        tables.Column("n", "integer")


def test_app_metrics_layout(store):
    table = layouts.build("app-metrics", store, "r1")
    recs = table.records()
    assert [(r["point"], r["app"], r["tag"], r["n"], r["errors"]) for r in recs] == [
        (0, "bulk", None, 5, 1), (0, "telnet", "rtt20ms", 1, 0), (0, "telnet", "rtt80ms", 4, 1)]
    assert recs[2]["label"] == "rate 1" and recs[2]["mean"] == 2.5 and recs[2]["unit"] == "s"
    mean = next(c for c in table.columns if c.name == "mean")
    assert mean.unit_from == "unit"
    rows = list(csv.DictReader(io.StringIO(tables.render_csv(table))))
    assert rows[2]["metric"] == "echo_delay" and float(rows[2]["p50"]) == 2.5 and rows[0]["tag"] == ""
    doc = json.loads(tables.render_json(table))
    assert doc["layout"] == "app-metrics" and doc["rows"] == json.loads(json.dumps(recs))
    assert {"name": "mean", "type": "float", "unit_from": "unit"} in doc["columns"]
    text = layouts.render_text(table)
    assert "echo_delay  rtt80ms  s" in text and "Errors are counted, not averaged" in text
    with pytest.raises(KeyError, match="no run 'nope'"):
        layouts.build("app-metrics", store, "nope")
    with pytest.raises(layouts.LayoutError, match="takes 1 run id"):
        layouts.build("app-metrics", store, "r1", "r1")


# --- the paper layouts reproduce what the report and compare commands print -----------------------
def _page(client, server, page, duration, error=None):
    return {"client": client, "server": server, "page": page, "round": 0, "start": 0, "end": 1,
            "duration": duration, "objects": 1, "bytes": 1, "error": error}


@pytest.fixture
def web_db(tmp_path):
    path = tmp_path / "web.db"
    with Store(path) as s:
        for run, scale in (("base", 1.0), ("fast", 0.5)):
            s.create_run(run, "web", "x", {"name": "web"}, {}, 1, "abc", {}, {})
            for point, buf in enumerate((10, 20)):
                s.create_point(run, point, 0, {"router.buffer": buf}, {}, 1)
                s.update_point(run, point, realtime_ok=int(point == 0), status="done")
                s.add_transfers(run, point, [], [_page(f"c{c}", "ctpv1", pg, scale * (pg + 0.1 * c + 0.05 * point))
                                                 for pg in (1, 2, 3) for c in range(3)]
                                + [_page("cx", "ctpv1", 2, None, "timeout")])
                final = {"links": {"b": {"arrived": {"high": [100, 1], "low": [900, 9]}, "sent": {},
                                         "dropped": {"high": [1, 0], "low": [29 + point, 0]}}}}
                s.add_link_stats(run, point, "r", final, {"b": "bottleneck-data"}, {}, {})
    return path


def _cli(*args):
    return CliRunner().invoke(main, ["report", *args])


def _csv_before_layouts(report: dict) -> str:
    """report.render_csv as it was before layouts existed (the reference for byte-for-byte CSV)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["run_id", "point", "rep", "assignment", "page", "conns", "bytes", "n", "min", "median", "max",
                "mean", "sdev", "failed", "bottleneck_loss", "realtime_ok", "ci95"])
    for p in report["points"]:
        data = p["loss"].get("bottleneck-data", {})
        for r in p["table"]:
            w.writerow([report["run_id"], p["point"], p["rep"], json.dumps(p["assignment"], sort_keys=True),
                        r["page"], r["conns"], r["bytes"], r["n"], r.get("min"), r.get("median"), r.get("max"),
                        r.get("mean"), r.get("sdev"), r["failed"], data.get("loss"), p["realtime_ok"], r.get("ci95")])
    return buf.getvalue()


def test_table_ii_layout_is_the_report(web_db):
    with Store(web_db) as s:
        rep = report.run_report(s, "base")
        table = layouts.build("catnip-table-ii", s, "base")
    assert layouts.render_text(table) == report.render_text(rep)
    assert [r["mean"] for r in table.records() if r["point"] == 0] == [r["mean"] for r in rep["points"][0]["table"]]
    assert table.column("failed") == [0, 1, 0, 0, 1, 0]
    res = _cli("base", "--db", str(web_db))
    assert res.exit_code == 0 and res.output == report.render_text(rep) + "\n"
    res = _cli("base", "--db", str(web_db), "--csv")
    assert report.render_csv(rep) == tables.render_csv(table) == _csv_before_layouts(rep)
    assert res.exit_code == 0 and res.output == _csv_before_layouts(rep).replace("\r\n", "\n")
    assert res.output.splitlines()[0].startswith("run_id,point,rep,assignment,page,conns,bytes,n,min,median")
    res = _cli("ba", "--db", str(web_db), "--json")  # an id prefix, as before
    assert json.loads(res.output)["points"][0]["table"][0]["mean"] == rep["points"][0]["table"][0]["mean"]


def test_loss_layout_is_the_loss_table(web_db):
    with Store(web_db) as s:
        rep = report.run_report(s, "base")
        table = layouts.build("catnip-loss", s, "base")
        pooled = layouts.build("catnip-loss", s, "base+fast")
    assert table.records() == report.loss_table(rep)
    # point 1: 1 + 30 drops of 1,000 packets; high 1 of 100, low 30 of 900
    assert table.column("loss") == [0.03, 0.031] and table.column("low_drops") == [29, 30]
    assert layouts.render_text(table) == report.render_loss_table(rep)
    assert pooled.column("sent") == [2000, 2000] and pooled.column("drops") == [60, 62]
    assert _cli("base", "--db", str(web_db), "--loss").output == report.render_loss_table(rep) + "\n"


def test_table_xi_layout_is_compare(web_db):
    with Store(web_db) as s:
        cmp = compare.compare(s, ["base", "fast"])
        table = layouts.build("catnip-table-xi", s, "base", "fast")
        with pytest.raises(layouts.LayoutError, match="2 or more"):
            layouts.build("catnip-table-xi", s, "base")
    assert layouts.render_text(table) == compare.render_text(cmp)
    # every page of "fast" took half the time of the same point of "base"
    assert table.column("relative") == pytest.approx([0.5] * 6)
    assert [(r["point"], r["page"], r["baseline_point"]) for r in table.records()][:4] == \
        [(0, 1, 0), (0, 2, 0), (0, 3, 0), (1, 1, 1)]
    assert table.column("mean_time")[0] == pytest.approx(0.55)  # 0.5 * (1 + 1.1 + 1.2) / 3
    assert table.column("baseline_mean_time")[:4] == pytest.approx([1.1, 2.1, 3.1, 1.15])
    res = CliRunner().invoke(main, ["compare", "base", "fast", "--db", str(web_db)])
    assert res.output.startswith(compare.render_text(cmp) + "\nColumns:")  # then the legend
    res2 = _cli("base", "fast", "--layout", "catnip-table-xi", "--db", str(web_db))
    assert res2.exit_code == 0 and res2.output == res.output


# --- CLI ------------------------------------------------------------------------------------
@pytest.fixture
def apps_db(store):
    return str(store.path)


def test_cli_apps_text_json_csv(apps_db):
    res = _cli("r1", "--apps", "--db", apps_db)
    assert res.exit_code == 0, res.output
    assert res.output.startswith("Application metrics per point") and "rtt80ms" in res.output
    res = _cli("r1", "--apps", "--json", "--db", apps_db)
    doc = json.loads(res.output)
    assert doc["layout"] == "app-metrics" and [r["n"] for r in doc["rows"]] == [5, 1, 4]
    res = _cli("r1", "--apps", "--csv", "--db", apps_db)
    assert [r["app"] for r in csv.DictReader(io.StringIO(res.output))] == ["bulk", "telnet", "telnet"]
    assert _cli("r1", "--layout", "app-metrics", "--csv", "--db", apps_db).output == res.output


def test_cli_lists_layouts():
    res = _cli("--layouts")
    assert res.exit_code == 0
    assert [line.split()[0] for line in res.output.splitlines()[1:]] == list(layouts.LAYOUTS)  # under a header
    assert [x["name"] for x in json.loads(_cli("--layouts", "--json").output)] == list(layouts.LAYOUTS)


@pytest.mark.parametrize("args, message", [
    (["r1", "--layout", "nope"], "unknown layout 'nope'; the layouts are: app-metrics, within-intervals,"
                                 " within-intervals-summary,"),
    (["r1", "--apps", "--loss"], "--loss and --apps: choose one view"),
    (["r1", "--apps", "--layout", "catnip-loss"], "--apps is --layout app-metrics"),
    (["r1", "r1"], "one RUN_ID, not 2"),
    ([], "Missing argument 'RUN_ID'"),
    (["r1", "--layouts"], "--layouts lists the layouts"),
    (["r1", "--layout", "catnip-table-xi"], "takes 2 or more run id(s), not 1"),
])
def test_cli_layout_errors(apps_db, args, message):
    res = _cli(*args, "--db", apps_db)
    assert res.exit_code == 2 and message in res.output, res.output


def test_cli_layout_unknown_run(apps_db):
    res = _cli("nope", "--apps", "--db", apps_db)
    assert res.exit_code == 1 and "no run 'nope'" in res.output
