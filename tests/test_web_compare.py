"""The dashboard's compare page (`/compare`, Table XI's layout) through Flask's test client: the
baseline is the oldest ticked run unless another is chosen, ratios are the compared run's over the
baseline's (never inverted), each ratio shows its 95% interval and is coloured only when that
interval leaves out 1.00, sides can pool seeds (`A+B` or pool=seeds) and bad queries are a 400 page.

Runs are records written through the store's API with known start times and per-client page
times, so every ratio and interval can be worked out by hand.
"""

from __future__ import annotations

import re
import sqlite3

import pytest

from catnip.controller.run_queue import RunQueue
from catnip.results.store import Store
from catnip.webui.app import create_app

A, A2, B, B2, C = "20260102-a-seed1", "20260102-a-seed2", "20260102-b-seed1", "20260102-b-seed2", "20260102-c"
WAN = "20260102-wan"
# Per page, the three clients' download times (s). B takes twice A's time on every page; C
# overlaps A (its intervals include 1.00).
TIMES_A = {1: [0.9, 1.0, 1.1], 2: [1.8, 2.0, 2.2]}
TIMES_B = {p: [2 * t for t in ts] for p, ts in TIMES_A.items()}
TIMES_C = {1: [0.5, 1.0, 1.6], 2: [1.0, 2.1, 3.0]}


def _record(store: Store, run_id: str, times: dict[int, list[float]], *, seed: int = 1, policy: str = "droptail",
            name: str = "quick", run: dict | None = None) -> None:
    scenario = {"name": name, "seed": seed, "router": {"policy": {"kind": policy}}, **({"run": run} if run else {})}
    store.create_run(run_id, name, f"scenarios/{name}.yaml", scenario, {}, seed, "abc", {}, {})
    store.create_point(run_id, 0, 0, {}, {"topology": {"clients": 3}}, seed)
    store.add_transfers(run_id, 0, [], [{"client": f"c{c}", "server": "v1", "page": p, "round": 0, "start": 0.0,
                                         "end": d, "duration": d, "objects": 2, "bytes": 1000}
                                        for p, ts in times.items() for c, d in enumerate(ts)])
    store.update_point(run_id, 0, status="done", realtime_ok=1, finished=1.0)
    store.finish_run(run_id, "done")


@pytest.fixture
def client(tmp_path):
    db = tmp_path / "catnip.db"
    with Store(db) as store:
        # Written in an order unlike their start times: the page must order by start, not by writing.
        _record(store, C, TIMES_C)
        _record(store, B, TIMES_B, policy="catnip_good")
        _record(store, A, TIMES_A)
        _record(store, A2, TIMES_A, seed=2)
        _record(store, B2, TIMES_B, seed=2, policy="catnip_good")
        _record(store, WAN, TIMES_A, name="wan")
    with sqlite3.connect(db) as con:
        for run_id, started in [(A, 1000), (A2, 1500), (B, 2000), (B2, 2500), (C, 3000), (WAN, 3500)]:
            con.execute("UPDATE runs SET started=? WHERE id=?", (started, run_id))
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=db, scenarios_dir=tmp_path, queue=queue)
    yield app.test_client()
    queue.shutdown(timeout=5)


def _page(client, query: str) -> str:
    r = client.get(f"/compare?{query}")
    assert r.status_code == 200, r.get_data(as_text=True)[-2000:]
    return r.get_data(as_text=True)


def _cells(page: str) -> list[tuple[str, str, str, str]]:
    """The relative table's ratio cells: (class, value, interval text, column run ids) per row and column."""
    table = re.search(r'id="compare-relative">(.*?)</table>', page, re.S).group(1)
    return re.findall(r'<td class="ratio ([a-z]+)"[^>]*>([-0-9.]+)(?: <span class="ci">([^<]*)</span>)?</td>', table)


def _baseline(page: str) -> str:
    return re.sub(r"<[^>]+>", "", re.search(r'id="compare-baseline">Baseline: (<b>.*?</b>)', page, re.S).group(1))


def test_baseline_is_the_oldest_ticked_run_and_ratios_are_not_inverted(client):
    # The runs page sends ticked runs newest first: B (started 2000), then A (1000).
    page = _page(client, f"run={B}&run={A}")
    assert _baseline(page) == A and "the oldest of the compared runs" in page
    # Per page B's mean over A's: 2.00 both times (B takes twice as long), never 0.50.
    assert [(v, cls) for cls, v, _ in _cells(page)][:2] == [("2.00", "worse"), ("2.00", "worse")]
    # The same in any tick order.
    assert _cells(_page(client, f"run={A}&run={B}")) == _cells(page)
    # The loss rows have the names `catnip compare` (results/compare.py) and Table XI give them.
    assert ">TCP Pkt Loss</td>" in page and "Bottleneck pkt loss" not in page
    assert ">Baseline Pkt Loss</td>" in page and "Baseline pkt loss" not in page


def test_another_baseline_can_be_chosen_among_the_ticked(client):
    page = _page(client, f"run={B}&run={A}&baseline={B}")
    assert _baseline(page) == B and "chosen; the oldest is" in page
    assert [(v, cls) for cls, v, _ in _cells(page)][:2] == [("0.50", "better"), ("0.50", "better")]
    # The page links to each other side as baseline, keeping the ticked runs.
    links = re.findall(r'class="rebase" href="([^"]+)"', _page(client, f"run={C}&run={B}&run={A}"))
    assert sorted(links) == [f"/compare?run={A}&amp;run={B}&amp;run={C}&amp;baseline={r}" for r in (B, C)]


def test_each_ratio_shows_its_interval_and_is_coloured_only_when_it_leaves_out_one(client):
    page = _page(client, f"run={C}&run={B}&run={A}")
    cells = _cells(page)  # rows: page 1, page 2, Mean; columns: B, C (oldest first)
    # B over A, page 1: ratio 2; squared coefficients of variation of the means 0.1^2 / 3 and
    # 0.2^2 / (3 x 4), both 1/300: variance 4 x 2/300 = 0.0267, Welch df 4, t(0.975, 4) = 2.776:
    # 2.776 x 0.163 = 0.453, so [1.55, 2.45], clear of 1.00: slower, red.
    assert cells[0] == ("worse", "2.00", "[1.55, 2.45]")
    # C over A, page 1: 1.033 with spread 0.55 over 3 clients: [0.08, 1.99] includes 1.00: no colour.
    assert cells[1][0] == "neutral" and cells[1][1] == "1.03"
    lo, hi = map(float, cells[1][2].strip("[]").split(", "))
    assert lo < 1 < hi
    assert cells[3][0] == "neutral" and cells[3][1] == "1.02"  # C over A, page 2: 2.033 / 2.0
    assert cells[4][:2] == ("worse", "2.00") and cells[5][0] == "neutral"  # the Mean row, coloured alike
    # The interval is in the cell's text, not only in a tooltip.
    assert ">2.00 <span class=\"ci\">[1.55, 2.45]</span></td>" in page
    assert 'id="compare-legend"' in page and "the interval includes 1.00" in page


def test_interval_ends_keep_their_side_of_one(client):
    bound = client.application.jinja_env.filters["bound"]
    # A coloured cell's interval clears 1.00: its end must not read "1.00".
    assert [bound(v) for v in (1.004, 0.9962, 0.45321, 1.0, 2.454)] == ["1.004", "0.996", "0.45", "1.00", "2.45"]


def test_seeds_are_pooled_into_one_side(client):
    page = _page(client, f"run={B}%2B{B2}&run={A}%2B{A2}")
    assert _baseline(page) == f"{A}+{A2}"
    # Pooled, each side has 6 pages per page number: sdevs 0.089 and 0.179, squared coefficients
    # of variation 0.008 / 6 each: variance 4 x 0.00267 = 0.0107, Welch df 10, t(0.975, 10) =
    # 2.228: 2.228 x 0.103 = 0.230, narrower than one seed's 0.453.
    assert _cells(page)[0] == ("worse", "2.00", "[1.77, 2.23]")
    # A '+' typed into the URL (it arrives as a space) pools the same way.
    assert _cells(_page(client, f"run={B}+{B2}&run={A}+{A2}")) == _cells(page)
    assert f"{B}</a>+<a href=\"/runs/{B2}\">{B2}</a> (pooled per sweep point)" in page
    # Ticked one by one with pool=seeds: the runs that differ only in their seed make one side each.
    assert _cells(_page(client, f"run={B2}&run={B}&run={A2}&run={A}&pool=seeds")) == _cells(page)
    # Without it, four sides.
    assert len(_cells(_page(client, f"run={B2}&run={B}&run={A2}&run={A}"))) == 3 * 3


def test_a_seed_run_with_idle_cpus_kept_awake_pools_with_the_others(client, tmp_path):
    """run.keep_awake changes how the machine ran the points, not the experiment: pool=seeds
    merges such a run with its seeds, as `catnip compare A+B` pools them (results/pooled.py)."""
    a3 = "20260102-a-seed3"
    with Store(tmp_path / "catnip.db") as store:
        _record(store, a3, TIMES_A, seed=3, run={"keep_awake": True})
    assert len(_cells(_page(client, f"run={B}&run={A}&run={a3}&pool=seeds"))) == 3  # two sides: A+a3 and B
    assert len(_cells(_page(client, f"run={B}&run={A}&run={a3}"))) == 2 * 3


def test_pooled_runs_must_be_of_one_scenario(client):
    r = client.get(f"/compare?run={A}%2B{WAN}&run={B}")
    assert r.status_code == 400
    assert "runs of different scenarios cannot be pooled: quick, wan" in r.get_data(as_text=True)
    # One scenario with other settings is not seeds of one experiment: refused, as the CLI refuses it.
    r = client.get(f"/compare?run={A}%2B{B}&run={C}")
    assert r.status_code == 400
    assert "differ in more than the seed (router.policy.kind)" in r.get_data(as_text=True)
    page = _page(client, f"run={A}%2B{C}&run={B}")  # A and C: same settings, both seed 1
    assert "seed(s) 1 pooled more than once" in page  # the same seed twice is not two samples
    assert "pooled more than once" not in _page(client, f"run={A}%2B{A2}&run={C}")


@pytest.mark.parametrize("query, message", [
    (f"run={A}", "choose at least two runs"),
    (f"run={A}&run={A}", "choose at least two runs"),
    ("", "choose at least two runs"),
    (f"run={A}&run={B}&baseline={C}", f"baseline {C} is not one of the compared runs: {A}, {B}"),
    (f"run={A}&run={B}&baseline=x;y", "baseline='x;y': 'x;y' is not a run id"),
    ("run=a;b&run=c", "run='a;b': 'a;b' is not a run id"),
    (f"run={A}%2B%2B{A2}&run={B}", "join run ids with single '+' signs"),
    (f"run={A}%2B{A}&run={B}", "names a run twice"),
    (f"run={A}&run={A}%2B{A2}&run={B}", f"run {A} is in two of the compared sides"),
    (f"run={A}&run={B}&pool=yes", "pool is 'seeds' or left out, not 'yes'"),
    (f"run={A}&run={B}&realtime_only=2", "realtime_only is '1' or left out, not '2'"),
    (f"run={A}&run={A2}&pool=seeds", "differ in more than the seed"),
    (f"run={A}%2B{A2}&run={B}&baseline={A}%2B{B}", f"baseline {A}+{B} is not one of the compared sides"),
])
def test_bad_queries_are_a_400_page(client, query, message):
    r = client.get(f"/compare?{query}")
    body = r.get_data(as_text=True)
    assert r.status_code == 400 and 'id="error"' in body and "Traceback" not in body
    assert message in body.replace("&#39;", "'"), body[-1500:]


def test_unknown_run_is_a_404(client):
    r = client.get(f"/compare?run={A}&run=20990101-missing")
    assert r.status_code == 404 and "no run &#39;20990101-missing&#39;" in r.get_data(as_text=True)


def test_runs_page_says_the_oldest_is_the_baseline_and_offers_pooling(client):
    page = client.get("/runs").get_data(as_text=True)
    assert "the oldest ticked run is the baseline" in page
    assert 'name="pool" value="seeds"' in page and 'action="/compare"' in page
