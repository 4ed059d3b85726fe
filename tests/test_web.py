"""The dashboard's routes through Flask's test client: every page, downloads, live events, and
bad input (unknown run, bad override, missing CSRF token) answered with a 4xx and a message.

Runs here are records written through the store's API (what a run writes), so the pages can be
checked against known numbers; starting real runs from the browser is tests/test_dashboard_browser.py.
The run queue here is told the machine is busy, so a submitted run waits and never starts.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil

import pytest

from catnip.controller.run_queue import RunQueue
from catnip.results import table as tables
from catnip.results.store import Store
from catnip.testbed.paths import REPO
from catnip.webui.app import create_app

BASE, OTHER = "20260101-000000-base-aaaa", "20260101-010000-other-bbbb"


def _record_run(store: Store, run_id: str, durations: dict[int, float], dropped: int, *, high: bool = False) -> None:
    """A finished one-point run: 3 clients x the given pages with the given download times."""
    store.create_run(run_id, "quick", "scenarios/quick.yaml", {"name": "quick"}, {}, 1, "abc123", {"kernel": "x"},
                     {"root": True})
    resolved = {"topology": {"clients": 3}, "workload": {"pages": sorted(durations), "rounds": 1}}
    store.create_point(run_id, 0, 0, {}, resolved, 1)
    pages = [{"client": f"c{c}", "server": "v1", "page": p, "round": 0, "start": 0.0, "end": d, "duration": d,
              "objects": 2, "bytes": 1000} for c in range(3) for p, d in durations.items()]
    store.add_transfers(run_id, 0, [], pages)
    cls = "high" if high else "other"
    final = {"links": {"ctprs>ctprc": {"arrived": {cls: [1000, 1_000_000]}, "sent": {cls: [1000 - dropped, 0]},
                                       "dropped": {cls: [dropped, 0]}, "max_queue_pkts": 10,
                                       "max_queue_bytes": 15000}}}
    store.add_link_stats(run_id, 0, "ctprs", final, {"ctprs>ctprc": "bottleneck-data"}, {}, {})
    store.add_queue_samples(run_id, 0, [("ctprs", "ctprs>ctprc", t, t % 7, 1500 * (t % 7), 187_500 * t, t, t // 2,
                                         t - t // 2) for t in range(0, 10)])
    for t in range(5):
        store.add_progress(run_id, 0, float(t), "running workload", 2 * t, 6)
    store.update_point(run_id, 0, status="done", realtime_ok=1, finished=1.0)
    store.finish_run(run_id, "done")


@pytest.fixture
def env(tmp_path):
    db = tmp_path / "catnip.db"
    with Store(db) as store:
        _record_run(store, BASE, {1: 2.0, 2: 4.0}, dropped=100)
        _record_run(store, OTHER, {1: 1.0, 2: 5.0}, dropped=50, high=True)
    scen = tmp_path / "scenarios"
    scen.mkdir()
    shutil.copy(REPO / "scenarios" / "quick.yaml", scen / "quick.yaml")
    (scen / "broken.yaml").write_text("name: broken\ntopology: {clients: many}\n")
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=db, scenarios_dir=scen, queue=queue)
    app.config["SSE_POLL"] = 0.01
    client = app.test_client()
    client.environ_base["HTTP_ORIGIN"] = "http://localhost"  # as a browser on the dashboard's own page sends it
    yield app, client, queue
    queue.shutdown(timeout=5)


def _token(client, url: str = "/") -> str:
    page = client.get(url).get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def test_scenarios_page_lists_files_with_description_and_errors(env):
    _, client, _ = env
    page = client.get("/").get_data(as_text=True)
    assert "quick" in page and "Table II layout" in page and "Start run" in page
    assert "broken" in page and "does not validate" in page and "topology.clients" in page


def test_start_without_csrf_token_is_refused(env):
    _, client, queue = env
    r = client.post("/runs", data={"scenario": "quick"})
    assert r.status_code == 400
    assert "CSRF token is missing" in r.get_data(as_text=True)
    assert queue.jobs() == []


@pytest.mark.parametrize("form, field, message", [
    ({"scenario": "quick", "overrides": "topology.clients=many"}, "overrides", "topology.clients"),
    ({"scenario": "quick", "overrides": "rm -rf /"}, "overrides", "key=value"),
    ({"scenario": "quick", "overrides": "topology.bottleneck.rate=fast"}, "overrides", "not a rate"),
    ({"scenario": "quick", "seed": "-3"}, "seed", "not a seed"),
    ({"scenario": "quick", "jobs": "0"}, "jobs", "points at once: a whole number from 1 to"),
    ({"scenario": "quick", "jobs": "2; rm -rf /"}, "jobs", "points at once"),
    ({"scenario": "../etc/passwd"}, "scenario", "unknown scenario"),
    ({"scenario": "nope"}, "scenario", "choose one of: broken, quick"),
])
def test_bad_run_requests_show_the_error_next_to_the_field(env, form, field, message):
    _, client, queue = env
    r = client.post("/runs", data={**form, "csrf_token": _token(client)})
    assert r.status_code == 400
    page = r.get_data(as_text=True)
    shown = re.search(rf'id="error-{field}">(.*?)</', page, re.S)
    assert shown and message in shown.group(1), page[-2000:]
    assert queue.jobs() == []


def test_started_run_waits_for_the_machine_and_can_be_cancelled(env):
    _, client, queue = env
    r = client.post("/runs", data={"scenario": "quick", "overrides": "topology.clients=2\n", "seed": "5",
                                   "csrf_token": _token(client)})
    assert r.status_code == 303
    run_id = r.headers["Location"].rsplit("/", 1)[1]
    job = queue.get(run_id)
    assert job.overrides == ["topology.clients=2"] and job.seed == 5 and job.jobs == 1
    assert job.argv(REPO / "x.db")[2:5] == ["catnip.cli.main", "run", str(job.scenario)]
    assert "--jobs" not in job.argv(REPO / "x.db")
    for _ in range(100):
        if job.state == "waiting":
            break
        import time
        time.sleep(0.02)
    assert job.state == "waiting"
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert "waiting for the machine" in page and "Cancel run" in page
    r = client.post(f"/runs/{run_id}/cancel", data={"csrf_token": _token(client, f"/runs/{run_id}")})
    assert r.status_code == 303 and job.state == "cancelled"
    assert "cancelled" in client.get(f"/runs/{run_id}").get_data(as_text=True)


def test_a_run_can_ask_for_points_side_by_side(env, monkeypatch):
    _, client, queue = env
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    r = client.post("/runs", data={"scenario": "quick", "jobs": "2", "csrf_token": _token(client)})
    assert r.status_code == 303
    job = queue.get(r.headers["Location"].rsplit("/", 1)[1])
    assert job.jobs == 2 and job.argv(REPO / "x.db")[-2:] == ["--jobs", "2"]
    queue.cancel(job.run_id)


def test_cancel_needs_csrf_and_a_known_run(env):
    _, client, _ = env
    assert client.post(f"/runs/{BASE}/cancel").status_code == 400
    token = _token(client)
    r = client.post("/runs/20990101-nope/cancel", data={"csrf_token": token})
    assert r.status_code == 404 and "no run" in r.get_data(as_text=True)
    r = client.post(f"/runs/{BASE}/cancel", data={"csrf_token": token})
    assert r.status_code == 409 and "not started from this dashboard" in r.get_data(as_text=True)


def test_runs_page_lists_runs_for_comparison(env):
    _, client, _ = env
    page = client.get("/runs").get_data(as_text=True)
    assert page.count('name="run"') == 2 and BASE in page and OTHER in page


def test_run_page_shows_the_report_series_and_figures(env):
    _, client, _ = env
    r = client.get(f"/runs/{BASE}")
    page = r.get_data(as_text=True)
    assert r.status_code == 200
    assert "real time kept" in page and "10.00%" in page  # 100 of 1000 dropped
    table = re.search(r'class="report-table">(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r"<tr><td>(\d+)</td><td>(\d+)</td><td>([\d,]+)</td><td>(\d+)</td>", table)
    assert rows == [("1", "3", "4,945", "3"), ("2", "2", "56,434", "3")]  # Table II conns and bytes, 3 clients
    data = json.loads(re.search(r'<script id="run-data" type="application/json">(.*?)</script>', page, re.S).group(1))
    s = data["series"]["0"]
    assert s["queue_pkts"] == [1, 2, 3, 4, 5, 6, 0, 1, 2]
    assert s["throughput_mbps"] == [1.5] * 9  # 187,500 B per second
    assert s["pages_done"] == [0, 2, 4, 6, 8]
    assert data["figures"]["bars"]["data"][0]["y"] == [2.0, 4.0]
    assert data["figures"]["cdf"]["data"][0]["y"][-1] == 1.0


def test_run_page_shows_how_crowded_a_side_by_side_point_was(env):
    app, client, _ = env
    with Store(app.config["CATNIP_DB"]) as store:
        store.update_point(OTHER, 0, fidelity={
            "late_events": 3, "engine_events": 6000, "late_fraction": 0.0005, "max_late_us": 1900,
            "late_threshold_us": 1000, "kernel_queue_drops": 0, "cpu_busy_fraction": 0.37,
            "concurrency": {"jobs": 2, "room": 0.5, "settle_s": 30, "beside_at_start": 1,
                            "cpu_busy_before_start": 0.24}})
    page = " ".join(client.get(f"/runs/{OTHER}").get_data(as_text=True).split())
    assert "Side by side (--jobs 2): started beside 1 running point(s), machine CPU busy 24% just before" in page
    assert "Side by side" not in " ".join(client.get(f"/runs/{BASE}").get_data(as_text=True).split())


def test_unknown_and_malformed_run_ids(env):
    _, client, _ = env
    r = client.get("/runs/20990101-missing")
    assert r.status_code == 404 and "the runs page lists every run" in r.get_data(as_text=True)
    r = client.get("/runs/bad%20id!")
    assert r.status_code == 400 and "is not a run id" in r.get_data(as_text=True)
    assert client.get("/runs/20990101-missing/events").status_code == 404


def test_downloads(env):
    _, client, _ = env
    r = client.get(f"/runs/{BASE}/report.csv")
    assert r.status_code == 200 and "attachment" in r.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(r.get_data(as_text=True))))
    assert [(row["page"], float(row["mean"])) for row in rows] == [("1", 2.0), ("2", 4.0)]
    rep = client.get(f"/runs/{BASE}/report.json").get_json()
    assert rep["points"][0]["loss"]["bottleneck-data"]["dropped"] == 100
    assert client.get(f"/runs/{BASE}/report.xml").status_code == 404
    r = client.get(f"/runs/{BASE}/points/0/capture.pcap")
    assert r.status_code == 404 and "run.capture: true" in r.get_data(as_text=True)


def _record_sweep(store: Store, run_id: str, seed: int, realtime: tuple[int, int] = (1, 1)) -> None:
    """A two-point router sweep (droptail, catnip_good): 3 clients, page 1 in 2.0 s and 1.0 s (+- 0.1)."""
    store.create_run(run_id, "routers", "scenarios/x.yaml", {"name": "routers"}, {}, seed, "abc", {}, {})
    for point, (policy, mean) in enumerate([("droptail", 2.0), ("catnip_good", 1.0)]):
        store.create_point(run_id, point, 0, {"router.policy": {"kind": policy}}, {}, seed)
        store.add_transfers(run_id, point, [], [{"client": f"c{c}", "server": "v1", "page": 1, "round": 0,
                                                 "start": 0.0, "end": 1.0, "duration": mean + 0.1 * (c - 1),
                                                 "objects": 2, "bytes": 1000} for c in range(3)])
        store.update_point(run_id, point, status="done", realtime_ok=realtime[point])
    store.finish_run(run_id, "done")


def test_pooled_ratio_spanning_one_is_not_coloured(env):
    """Ratios whose 95% interval includes 1.00 show no colour, however far the mean is from 1.00."""
    app, client, _ = env
    with Store(app.config["CATNIP_DB"]) as store:
        for run_id, seed in (("wide-1", 1), ("wide-2", 2)):
            store.create_run(run_id, "routers", "scenarios/x.yaml", {"name": "routers"}, {}, seed, "abc", {}, {})
            for point, policy in enumerate(("droptail", "catnip_good")):
                store.create_point(run_id, point, 0, {"router.policy": {"kind": policy}}, {}, seed)
                # point 1 is 10% slower on average, with a spread that leaves the ratio's interval around 1
                durations = [1.0, 2.0, 3.0] if point == 0 else [1.1, 2.2, 3.3]
                store.add_transfers(run_id, point, [], [{"client": f"c{c}", "server": "v1", "page": 1, "round": 0,
                                                         "start": 0.0, "end": 1.0, "duration": d, "objects": 2,
                                                         "bytes": 1000} for c, d in enumerate(durations)])
                store.update_point(run_id, point, status="done", realtime_ok=1)
            store.finish_run(run_id, "done")
    table = re.search(r'id="pooled-against">(.*?)</table>',
                      client.get("/pooled?run=wide-1&run=wide-2").get_data(as_text=True), re.S).group(1)
    assert '<td class="neutral">1.10' in table, table


def test_pooled_seeds_page(env):
    app, client, _ = env
    with Store(app.config["CATNIP_DB"]) as store:
        _record_sweep(store, "seed-1", 1)
        _record_sweep(store, "seed-2", 2, realtime=(1, 0))
    page = client.get("/pooled?run=seed-1&run=seed-2").get_data(as_text=True)
    assert "Against #0 DropTail" in page
    table = re.search(r'id="pooled-against">(.*?)</table>', page, re.S).group(1)
    # 1.0 over 2.0, 6 pages each with sdev 0.089: delta-method variance 0.25 (0.008/6 + 0.008/24) = 0.000417,
    # Welch-Satterthwaite df 7.35, t(0.975, 7.35) = 2.34: 2.34 x 0.0204 = 0.048
    assert "<td>1</td>" in table and ">0.50 &plusmn;0.05*</td><td>1.00</td>" in table, table
    assert '<td class="better">0.50' in table, "an interval wholly below 1.00 is coloured faster"
    assert "faster [1]" in table
    # Only real-time points: seed-2's catnip_good is out, 3 pages left, the interval widens:
    # variance 0.25 (0.01/3 + 0.008/24) = 0.000917, df 2.41, t(0.975, 2.41) = 3.67: 3.67 x 0.0303 = 0.11
    page = client.get("/pooled?run=seed-1&run=seed-2&realtime_only=1").get_data(as_text=True)
    assert ">0.50 &plusmn;0.11*</td>" in page and "left out, real time not kept: 1" in page
    page = client.get("/pooled?run=seed-1&run=seed-2&against=1").get_data(as_text=True)
    assert "Against #1" in page and ">2.00 &plusmn;" in page
    assert client.get("/pooled?run=seed-1&against=x").status_code == 400
    assert client.get("/pooled?run=seed-1&against=7").status_code == 200  # no such point: said on the page
    assert "No comparison: pooled point #7 does not exist" in client.get("/pooled?run=seed-1&against=7").get_data(
        as_text=True)
    assert client.get("/pooled").status_code == 400
    assert client.get("/pooled?run=seed-1&run=20990101-missing").status_code == 404
    r = client.get(f"/pooled?run=seed-1&run={BASE}")  # another scenario
    assert r.status_code == 400 and "cannot be pooled" in r.get_data(as_text=True)
    assert 'formaction="/pooled"' in client.get("/runs").get_data(as_text=True)


def test_compare_gives_table_xi_relative_times(env):
    _, client, _ = env
    page = client.get(f"/compare?run={BASE}&run={OTHER}").get_data(as_text=True)
    table = re.search(r'id="compare-relative">(.*?)</table>', page, re.S).group(1)
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", table)]
    # Every client took the same time: intervals of width 0, so each ratio off 1.00 is coloured.
    assert cells[:4] == ["1", "3", "4,945", "0.50 [0.50, 0.50]"]   # 1.0 / 2.0
    assert cells[4:8] == ["2", "2", "56,434", "1.25 [1.25, 1.25]"]  # 5.0 / 4.0
    assert "0.88 [0.88, 0.88]" in cells and "5.00%" in cells        # mean of relatives; OTHER's loss
    assert 'class="ratio better"' in table and 'class="ratio worse"' in table
    assert client.get(f"/compare?run={BASE}").status_code == 400
    r = client.get(f"/compare?run={BASE}&run=20990101-missing")
    assert r.status_code == 404 and "20990101-missing" in r.get_data(as_text=True)
    assert client.get("/compare?run=a;b&run=c").status_code == 400


def test_events_of_a_finished_run_end_the_stream(env):
    _, client, _ = env
    body = client.get(f"/runs/{BASE}/events").get_data(as_text=True)
    events = re.findall(r"event: (\w+)\ndata: (.*)\n\n", body)
    assert [e for e, _ in events] == ["update", "end"]
    update = json.loads(events[0][1])
    assert update["reset"] and update["status"] == "done" and update["points"][0]["pages_done"] == 8
    assert update["series"]["0"]["queue_pkts"][:3] == [1, 2, 3]


def test_health_and_bundled_plotly(env):
    _, client, _ = env
    assert client.get("/healthz").get_json()["ok"] is True
    r = client.get("/static/vendor/plotly.min.js")
    assert r.status_code == 200 and len(r.data) > 1_000_000 and b"plotly" in r.data[:2000].lower()
    r.close()


def test_compare_text_has_table_xi_layout(env):
    from catnip.results import compare as compare_mod
    app, _, _ = env
    with Store(app.config["CATNIP_DB"]) as store:
        text = compare_mod.render_text(compare_mod.compare(store, [BASE, OTHER]))
    lines = text.splitlines()
    assert lines[3].split()[:3] == ["Page", "Conns", "Bytes"]
    # The fixture's clients all took the same time: the intervals are 0.
    assert lines[4].split() == ["1", "3", "4,945", "0.50+-0.00"] and lines[5].split() == ["2", "2", "56,434", "1.25+-0.00"]
    assert lines[6].split() == ["Mean", "0.88+-0.00"] and lines[8].split() == ["TCP", "Pkt", "Loss", "5.00%"]


def test_confidence_intervals_by_hand():
    from catnip.results import samples
    # Student t from a printed table: t(0.975, 15) = 2.1314, t(0.975, 16) = 2.1199.
    assert samples.ci95(2.0, 16) == pytest.approx(2.1314 * 2 / 4, abs=1e-4)
    assert samples.ci95(2.0, 1) is None
    # ratio 2 of means of 11 samples each, squared coefficients of variation of the means 0.01 and
    # 0.03: variance 4 (0.01 + 0.03) = 0.16, Welch df 0.16^2 / ((0.04^2 + 0.12^2) / 10) = 16
    assert samples.ratio_ci95(2.0, 0.01, 11, 0.03, 11) == pytest.approx(2.1199 * 0.4, abs=1e-4)


def test_loss_table_splits_by_priority(env):
    from catnip.results import report as report_mod
    app, _, _ = env
    with Store(app.config["CATNIP_DB"]) as store:
        base, other = report_mod.run_report(store, BASE), report_mod.run_report(store, OTHER)
    (b,), (o,) = report_mod.loss_table(base), report_mod.loss_table(other)
    assert (b["sent"], b["drops"], b["high_sent"], b["low_sent"], b["low_drops"]) == (1000, 100, 0, 1000, 100)
    assert b["high_loss"] is None and b["low_loss"] == 0.1
    assert (o["high_sent"], o["high_drops"], o["high_loss"], o["low_sent"]) == (1000, 50, 0.05, 0)
    assert "5.00%" in report_mod.render_loss_table(other)
    # Sweep values sharing a long prefix keep their whole labels (catnip_eca, catnip_ecarbplw).
    for cc, name in (("catnip_eca", "ECA"), ("catnip_ecarbplw", "ECA+RBPLW")):
        other["points"][0]["assignment"] = {"tcp.congestion_control": cc}
        other["points"][0].pop("label", None)  # made again from the assignment (results/labels.py)
        assert f"{name} " in report_mod.render_loss_table(other).splitlines()[3]


def test_a_transfer_measurement_shows_its_latencies(env):
    app, client, _ = env
    run_id = "20260101-020000-hv-cccc"
    with Store(app.config["CATNIP_DB"]) as store:
        store.create_run(run_id, "hv", "scenarios/transfers/x.yaml", {"kind": "transfers", "name": "hv"}, {}, 1,
                         "abc", {}, {})
        store.create_point(run_id, 0, 0, {"profile": "reno2004", "p": 0.01, "p_high": None}, {}, 1)
        store.add_transfer_trials(run_id, 0, [
            {"profile": "reno2004", "p": 0.01, "p_high": None, "trial": t, "size": 8192, "packets": 6,
             "latency": lat, "error": None} for t, lat in enumerate((0.6, 0.8, 1.0))])
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    table = re.search(r'id="transfer-table">(.*?)</table>', page, re.S).group(1)
    cells = re.findall(r"<td>([^<]*)</td>", table)
    assert cells == ["reno2004", "0.01", "-", "8", "3", "0.800", "0.497", "0"]  # t(0.975, 2) = 4.3027: x 0.2 / sqrt(3)
    assert f"catnip model validate {run_id}" in page
    assert client.get("/runs").status_code == 200
    assert client.get(f"/runs/{run_id}/events?once=1").status_code == 200


# --- application metrics (the `samples` table) -------------------------------------------------
APPS = "20260102-000000-apps-dddd"
TAG = "<b>x</b>"  # a tag that is markup: must be shown as text everywhere


def _record_apps(store: Store, run_id: str = APPS) -> None:
    """A finished two-point run of two applications (no pages): point 0 has telnet echo delays in two
    RTT classes (one timed out) and bulk goodput of two flows over time; point 1 recorded no samples."""
    store.create_run(run_id, "apps", "scenarios/apps.yaml", {"name": "apps"}, {}, 1, "abc", {}, {})
    for point in (0, 1):
        store.create_point(run_id, point, 0, {"app.rate": point + 1}, {"topology": {}}, 1)
    echo = [("rtt20ms", 0.02), ("rtt20ms", 0.05), ("rtt20ms", 0.03), ("rtt20ms", 0.04), (TAG, 0.2), (TAG, 0.1),
            (TAG, 0.3)]
    store.add_samples(run_id, 0, [{"app": "telnet", "metric": "echo_delay", "host": "c1", "flow": f"e{i}", "tag": tag,
                                   "t": 10.0 + i, "value": v, "unit": "s"} for i, (tag, v) in enumerate(echo)]
                      + [{"app": "telnet", "metric": "echo_delay", "tag": "rtt20ms", "t": 20.0, "unit": "s",
                          "error": "timeout"}])
    # goodput: flow a 4, 5, 6 Mbit/s (mean 5), flow b 1, 3 (mean 2): C.O.V. 1.5 / 3.5
    goodput = [("a", "rtt20ms", 100.0, 4e6), ("a", "rtt20ms", 101.0, 5e6), ("a", "rtt20ms", 102.0, 6e6),
               ("b", TAG, 100.5, 1e6), ("b", TAG, 101.5, 3e6)]
    store.add_samples(run_id, 0, [{"app": "bulk", "metric": "goodput", "flow": f, "tag": tag, "t": t, "value": v,
                                   "unit": "bit/s"} for f, tag, t, v in goodput])
    for point in (0, 1):
        store.update_point(run_id, point, status="done", realtime_ok=1)
    store.finish_run(run_id, "done")


@pytest.fixture
def apps_env(env):
    app, client, _ = env
    with Store(app.config["CATNIP_DB"]) as store:
        _record_apps(store)
    return app, client


def _fmt(v) -> str:
    return "-" if v is None else format(v, ".4g")


def test_run_page_shows_application_metrics_per_point(apps_env):
    from catnip.results import samples
    app, client = apps_env
    r = client.get(f"/runs/{APPS}")
    assert r.status_code == 200
    page = r.get_data(as_text=True)
    section = re.search(r'<div class="apps" id="apps-0">(.*?)<div class="charts">', page, re.DOTALL).group(1)
    table = re.search(r'<table class="apps-table">(.*?)</table>', section, re.DOTALL).group(1)
    rows = [re.findall(r"<td>([^<]*)</td>", tr) for tr in re.findall(r"<tr>(<td>.*?)</tr>", table, re.DOTALL)]
    with Store(app.config["CATNIP_DB"]) as store:
        expected = samples.summaries(store, APPS, 0, by_tag=True)
    assert [(s.app, s.metric, s.tag) for s in expected] == [
        ("bulk", "goodput", TAG), ("bulk", "goodput", "rtt20ms"), ("telnet", "echo_delay", TAG),
        ("telnet", "echo_delay", "rtt20ms")]
    assert rows == [[s.app, s.metric, s.tag.replace("<", "&lt;").replace(">", "&gt;"), s.unit, str(s.n), str(s.errors),
                     *(_fmt(v) for v in (s.mean, s.ci95, s.p50, s.p90, s.p99, s.max))] for s in expected]
    # by hand: rtt20ms echo delays 0.02..0.05: mean 0.035, the timeout counted as an error
    assert rows[3][4:7] == ["4", "1", "0.035"]
    # goodput: the C.O.V. of the per-flow means, 1.5 / 3.5
    assert re.search(r"C\.O\.V\. across flows of each flow's mean goodput\s*<strong>0\.429</strong> \(2 flows\)",
                     section)
    data = json.loads(re.search(r'<script id="apps-data" type="application/json">(.*?)</script>', page, re.DOTALL).group(1))
    assert set(data) == {"0"}  # point 1 recorded no samples: no section
    assert 'id="apps-1"' not in page and 'id="point-1"' in page
    assert [f'apps-ccdf-0-{i}' in page for i in range(3)] == [True, True, False]
    assert 'id="apps-goodput-0-0"' in page and 'id="apps-goodput-0-1"' not in page


def test_application_names_are_escaped(apps_env):
    app, client = apps_env
    with Store(app.config["CATNIP_DB"]) as store:
        store.add_samples(APPS, 1, [{"app": "<script>alert(1)</script>", "metric": "a&b<i>", "tag": TAG, "value": 1.0}])
    page = client.get(f"/runs/{APPS}").get_data(as_text=True)
    assert TAG not in page and "<script>alert" not in page and "<i>" not in page
    assert "<td>&lt;b&gt;x&lt;/b&gt;</td>" in page and "<td>a&amp;b&lt;i&gt;</td>" in page
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>" in page
    data = re.search(r'<script id="apps-data" type="application/json">(.*?)</script>', page, re.DOTALL).group(1)
    # The specs name the tag as Plotly must show it (entities: Plotly reads a few HTML tags in names),
    # and nothing in them can close the script element.
    assert '"name": "\\u0026lt;b\\u0026gt;x\\u0026lt;/b\\u0026gt;"' in data  # &lt;b&gt;x&lt;/b&gt;, JSON-escaped
    assert "<b>" not in data and "</" not in data


def test_points_without_samples_render_as_before(env):
    _, client, _ = env
    page = client.get(f"/runs/{BASE}").get_data(as_text=True)
    assert "Applications" not in page and "apps-data" not in page and 'class="apps"' not in page
    assert client.get(f"/runs/{BASE}/points/0/apps.json").get_json()["summaries"] == []


def test_application_metrics_json(apps_env):
    from catnip.results import samples
    app, client = apps_env
    r = client.get(f"/runs/{APPS}/points/0/apps.json")
    assert r.status_code == 200 and r.mimetype == "application/json"
    got = r.get_json()
    assert (got["run_id"], got["point"], got["label"]) == (APPS, 0, "rate 1")
    with Store(app.config["CATNIP_DB"]) as store:
        assert got["summaries"] == [json.loads(json.dumps(s.__dict__)) for s in samples.summaries(store, APPS, 0, True)]
        ccdf = {(m["app"], m["metric"]): {c["tag"]: list(zip(c["x"], c["y"])) for c in m["curves"]}
                for m in got["ccdf"]}
        assert ccdf == {(a, m): {tag: samples.ccdf_for(store, APPS, 0, a, m, tag) for tag in ("rtt20ms", TAG)}
                        for a, m in (("bulk", "goodput"), ("telnet", "echo_delay"))}
        # rtt20ms by hand: 0.02 0.03 0.04 0.05, the timeout left out
        assert ccdf["telnet", "echo_delay"]["rtt20ms"] == [(0.02, 0.75), (0.03, 0.5), (0.04, 0.25), (0.05, 0.0)]
        (g,) = got["goodput"]
        assert g["app"] == "bulk" and g["flows"] == 2 and g["units"] == ["bit/s"] and g["t0"] == 100.0
        assert g["cov"] == pytest.approx(samples.cov_across_flows(store, APPS, 0, "bulk", "goodput"))
        assert g["cov"] == pytest.approx(1.5 / 3.5)
    assert g["series"] == [{"flow": "a", "t": [0.0, 1.0, 2.0], "value": [4e6, 5e6, 6e6]},
                           {"flow": "b", "t": [0.5, 1.5], "value": [1e6, 3e6]}]
    empty = client.get(f"/runs/{APPS}/points/1/apps.json").get_json()
    assert (empty["label"], empty["summaries"], empty["ccdf"], empty["goodput"]) == ("rate 2", [], [], [])


def test_untagged_samples_have_their_own_ccdf(apps_env):
    from catnip.results import samples
    app, client = apps_env
    with Store(app.config["CATNIP_DB"]) as store:
        store.create_point(APPS, 2, 0, {}, {}, 1)
        store.add_samples(APPS, 2, [{"app": "ftp", "metric": "file_time", "tag": tag, "value": v, "unit": "s"}
                                    for tag, v in ((None, 1.0), (None, 2.0), ("big", 8.0), ("big", 9.0))])
        pooled = samples.ccdf_for(store, APPS, 2, "ftp", "file_time")
    (m,) = client.get(f"/runs/{APPS}/points/2/apps.json").get_json()["ccdf"]
    curves = {c["tag"]: list(zip(c["x"], c["y"])) for c in m["curves"]}
    # ccdf_for(tag=None) pools every tag; the untagged curve is of the untagged samples only
    assert len(pooled) == 4 and curves == {None: [(1.0, 0.5), (2.0, 0.0)], "big": [(8.0, 0.5), (9.0, 0.0)]}


@pytest.mark.parametrize("url, status, message", [
    (f"/runs/{APPS}/points/7/apps.json", 404, "has no point 7"),
    (f"/runs/{APPS}/points/x/apps.json", 404, "not found"),
    (f"/runs/{APPS}/points/-1/apps.json", 404, "not found"),
    ("/runs/20990101-missing/points/0/apps.json", 404, "no run"),
    ("/runs/bad%20id!/points/0/apps.json", 400, "is not a run id"),
    ("/runs/20260102/apps.csv", 404, "no run"),  # a prefix of APPS: URLs name runs exactly
    ("/runs/bad%20id!/apps.csv", 400, "is not a run id"),
    (f"/runs/{APPS}/apps.xml", 404, "come as .csv or .json"),
])
def test_application_metrics_bad_requests(apps_env, url, status, message):
    _, client = apps_env
    r = client.get(url)
    assert r.status_code == status
    text = r.get_json()["error"] if url.endswith(".json") else r.get_data(as_text=True)  # JSON errors for .json
    assert message in text.lower() and "Traceback" not in text, text


def test_application_metrics_csv_is_the_app_metrics_layout(apps_env):
    from catnip.results import layouts
    app, client = apps_env
    r = client.get(f"/runs/{APPS}/apps.csv")
    assert r.status_code == 200 and r.mimetype == "text/csv"
    assert r.headers["Content-Disposition"] == f'attachment; filename="{APPS}-apps.csv"'
    with Store(app.config["CATNIP_DB"]) as store:
        assert r.get_data(as_text=True) == tables.render_csv(layouts.build("app-metrics", store, APPS))
    rows = list(csv.DictReader(io.StringIO(r.get_data(as_text=True))))
    assert [(row["point"], row["app"], row["metric"], row["tag"], row["n"], row["errors"]) for row in rows] == [
        ("0", "bulk", "goodput", TAG, "2", "0"), ("0", "bulk", "goodput", "rtt20ms", "3", "0"),
        ("0", "telnet", "echo_delay", TAG, "3", "0"), ("0", "telnet", "echo_delay", "rtt20ms", "4", "1")]
    assert float(rows[3]["mean"]) == pytest.approx(0.035) and float(rows[1]["mean"]) == pytest.approx(5e6)
    js = client.get(f"/runs/{APPS}/apps.json").get_json()
    assert js["layout"] == "app-metrics" and len(js["rows"]) == 4
    page = client.get(f"/runs/{APPS}").get_data(as_text=True)
    assert f'href="/runs/{APPS}/apps.csv"' in page and f'href="/runs/{APPS}/points/0/apps.json"' in page


def test_a_finished_run_page_is_built_once_for_concurrent_readers(env, monkeypatch):
    # Issue 47: 100 concurrent GETs of one run page each built it (up to 22 s each).
    import threading
    import time

    from catnip.results import report as report_mod
    app, _, _ = env
    cache = app.extensions["catnip_pages"]
    readers = 20
    arrived, builds = [], []
    real_get, real_report = cache.get, report_mod.run_report

    def counting_get(key, build):
        arrived.append(1)
        return real_get(key, build)

    def report_once_all_arrived(*args, **kwargs):
        builds.append(1)
        deadline = time.monotonic() + 30
        while len(arrived) < readers and time.monotonic() < deadline:  # every reader is asking by now
            time.sleep(0.01)
        return real_report(*args, **kwargs)

    monkeypatch.setattr(cache, "get", counting_get)
    monkeypatch.setattr(report_mod, "run_report", report_once_all_arrived)
    bodies: list[bytes] = []

    def read() -> None:
        r = app.test_client().get(f"/runs/{BASE}")
        assert r.status_code == 200
        bodies.append(r.data)

    threads = [threading.Thread(target=read) for _ in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    # One page for all, but the note form's token, each reader's own (webui/notes.py puts it in on each request).
    same = {re.sub(rb'name="csrf_token" value="[^"]+"', b'name="csrf_token"', body) for body in bodies}
    assert len(bodies) == readers and len(same) == 1 and len(set(bodies)) == readers and len(arrived) == readers
    assert len(builds) == 1
    # A record added to the run is a new page; a running run is never kept.
    with Store(app.config["CATNIP_DB"]) as store:
        store.add_transfers(BASE, 0, [], [{"client": "c9", "server": "s1", "page": 1, "round": 0, "start": 0.0,
                                           "end": 9.0, "duration": 9.0, "objects": 1, "bytes": 10}])
        store.create_run("live", "quick", "x", {}, {}, 1, "abc", {}, {})
    page = app.test_client().get(f"/runs/{BASE}").data
    assert len(builds) == 2 and page != bodies[0]
    for _ in range(2):
        assert app.test_client().get("/runs/live").status_code == 200
    assert len(builds) == 4  # each GET of the running run built its page
