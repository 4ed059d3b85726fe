"""The CATNIP gap study's table (papers/catnip/study.py, layout catnip-study, the dashboard's /study)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from catnip.cli.main import main
from catnip.papers.catnip import study
from catnip.results import layouts
from catnip.results.store import Store


def _page(client: str, page: int, duration: float) -> dict:
    return {"client": client, "server": "ctpv1", "page": page, "round": 0, "start": 0, "end": 1,
            "duration": duration, "objects": 1, "bytes": 1, "error": None}


# (policy, scheme) -> (page 1 time, page 2 time, high drops of 100, low drops of 900); the seed
# adds its number to every time, so the ratios differ between seeds.
SIM = {("droptail", "today"): (2.0, 4.0, 0, 180), ("droptail", "iw"): (1.0, 2.0, 0, 90),
       ("droptail", "rto"): (2.0, 4.0, 0, 171), ("droptail", "period"): (1.0, 2.0, 0, 36),
       ("droptail", "period-iw"): (2.0, 4.0, 0, 72),
       ("catnip_good", "today"): (1.0, 2.0, 10, 170), ("catnip_good", "iw"): (0.5, 1.0, 5, 85),
       ("catnip_good", "rto"): (1.0, 2.0, 10, 160), ("catnip_good", "period"): (0.5, 1.0, 1, 35),
       ("catnip_good", "period-iw"): (1.0, 2.0, 2, 70)}


def _add_run(s: Store, run: str, seed: int, name: str = "catnip-study-sim", late: tuple = ()) -> None:
    s.create_run(run, name, "x", {"name": name}, {}, seed, "abc", {}, {})
    for point, ((policy, scheme), (t1, t2, hd, ld)) in enumerate(SIM.items()):
        s.create_point(run, point, 0, {"router.policy": {"kind": policy}, "scheme": scheme}, {}, seed)
        s.update_point(run, point, realtime_ok=0 if (policy, scheme) in late else 1, status="done")
        s.add_transfers(run, point, [], [_page(f"c{c}", pg, t + seed) for pg, t in ((1, t1), (2, t2))
                                         for c in range(3)])
        final = {"links": {"b": {"arrived": {"high": [100, 1], "low": [900, 9]}, "sent": {},
                                 "dropped": {"high": [hd, 0], "low": [ld, 0]}}}}
        s.add_link_stats(run, point, "r", final, {"b": "bottleneck-data"}, {}, {})


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "db"
    with Store(path) as s:
        _add_run(s, "s1", 1)
        _add_run(s, "s2", 2, late=(("droptail", "today"),))
        _add_run(s, "s3", 3)
    return path


def _ratio(mine: tuple, ref: tuple, seed: int) -> float:
    return ((mine[0] + seed) / (ref[0] + seed) + (mine[1] + seed) / (ref[1] + seed)) / 2


def test_study_rows_pool_seeds_and_leave_out_what_did_not_keep_real_time(db):
    with Store(db) as s:
        rep = study.study(s, ["s1", "s2", "s3"])
    assert rep.factors == ["today", "iw", "rto", "period", "period-iw"] and rep.contexts == [""]
    dt_today = rep.row("", "today", "fifo")
    assert dt_today.seeds == [1, 3] and dt_today.left_out == ["seed 2: not real time"]
    assert dt_today.est["loss"].value == pytest.approx(0.18) and dt_today.est["loss"].n == 2
    dt_iw = rep.row("", "iw", "fifo")
    assert dt_iw.seeds == [1, 2, 3]
    # Against 'today' only where today kept real time too: seeds 1 and 3.
    vs = dt_iw.est["vs_today"]
    want = [_ratio(SIM["droptail", "iw"], SIM["droptail", "today"], seed) for seed in (1, 3)]
    assert vs.n == 2 and vs.value == pytest.approx(sum(want) / 2)
    cg_iw = rep.row("", "iw", "catnip")
    assert cg_iw.est["high_loss"].value == pytest.approx(0.05) and cg_iw.est["low_loss"].value == pytest.approx(85 / 900)
    want = [_ratio(SIM["catnip_good", "iw"], SIM["droptail", "iw"], seed) for seed in (1, 2, 3)]
    assert cg_iw.est["vs_fifo"].n == 3 and cg_iw.est["vs_fifo"].value == pytest.approx(sum(want) / 3)
    assert cg_iw.est["vs_fifo"].ci95 > 0
    assert rep.row("", "iw", "fifo").est["vs_fifo"].n == 0  # FIFO against itself: no value


def test_additivity_note(db):
    with Store(db) as s:
        rep = study.study(s, ["s1", "s3"])
    note = next(n for n in rep.notes if n.startswith("fifo:"))
    # loss today 18%, period 3.6%; iw -9 points, rto -0.9 alone; period-iw 7.2% puts back 3.6 points
    assert "every period factor changes the loss by -14.40 points (n=2)" in note
    assert "alone add up to -9.90 (iw -9.00 (n=2), rto -0.90 (n=2))" in note
    assert "add up to -3.60 (iw -3.60 (n=2))" in note


def test_additivity_pairs_the_points_of_each_seed(tmp_path):
    # Seed 2's 'today' did not keep real time: its 'iw' must not be set against seed 1's 'today'.
    # Seed 1: today 18%, iw 9%; seed 2: iw 10% (today out). Paired: -9 from seed 1 only; the means
    # over all seeds would give 9.5 - 18 = -8.5.
    path = tmp_path / "db"
    with Store(path) as s:
        for run, seed, loss in (("a", 1, {"today": 180, "iw": 90, "period": 36}),
                                ("b", 2, {"today": 170, "iw": 100, "period": 40})):
            s.create_run(run, "catnip-study-sim", "x", {"name": "catnip-study-sim"}, {}, seed, "abc", {}, {})
            for point, (scheme, drops) in enumerate(loss.items()):
                s.create_point(run, point, 0, {"router.policy": {"kind": "droptail"}, "scheme": scheme}, {}, seed)
                s.update_point(run, point, realtime_ok=0 if (seed, scheme) == (2, "today") else 1, status="done")
                s.add_transfers(run, point, [], [_page("c1", 1, 1.0)])
                final = {"links": {"b": {"arrived": {"low": [1000, 9]}, "sent": {}, "dropped": {"low": [drops, 0]}}}}
                s.add_link_stats(run, point, "r", final, {"b": "bottleneck-data"}, {}, {})
        rep = study.study(s, ["a", "b"])
    note = next(n for n in rep.notes if n.startswith("fifo:"))
    assert "changes the loss by -14.40 points (n=1)" in note and "iw -9.00 (n=1)" in note


def test_study_refuses_what_is_not_one_study(db):
    with Store(db) as s:
        _add_run(s, "other", 4, name="catnip-study-wan")
        _add_run(s, "again", 1)
        s.create_run("plain", "web", "x", {"name": "web"}, {}, 5, "abc", {}, {})
        s.create_point("plain", 0, 0, {"router.policy": {"kind": "droptail"}}, {}, 5)
        with pytest.raises(study.NoStudy, match="different scenarios"):
            study.study(s, ["s1", "other"])
        with pytest.raises(study.NoStudy, match="runs s1 and again both have seed 1's point .* in real time"):
            study.study(s, ["s1", "again"])
        with pytest.raises(study.NoStudy, match="not a study scenario"):
            study.study(s, ["plain"])
        with pytest.raises(KeyError):
            study.study(s, ["nope"])


def test_wan_sides_come_from_the_scheme_prefix(tmp_path):
    path = tmp_path / "db"
    with Store(path) as s:
        s.create_run("w", "catnip-study-wan", "x", {"name": "catnip-study-wan"}, {}, 1, "abc", {}, {})
        for point, (buf, scheme, t) in enumerate([("64KB", "base-today", 2.0), ("64KB", "spm-today", 1.0),
                                                  ("64KB", "base-period", 4.0), ("64KB", "spm-period", 3.0),
                                                  ("128KB", "base-today", 1.0), ("128KB", "spm-today", 1.5)]):
            s.create_point("w", point, 0, {"topology.bottleneck.buffer": buf, "scheme": scheme}, {}, 1)
            s.update_point("w", point, realtime_ok=1, status="done")
            s.add_transfers("w", point, [], [_page("c1", 1, t)])
        rep = study.study(s, ["w"])
    assert rep.contexts == ["topology.bottleneck.buffer=64KB", "topology.bottleneck.buffer=128KB"]
    assert rep.row("topology.bottleneck.buffer=64KB", "period", "catnip").est["vs_fifo"].value == pytest.approx(0.75)
    assert rep.row("topology.bottleneck.buffer=64KB", "period", "fifo").est["vs_today"].value == pytest.approx(2.0)
    assert rep.row("topology.bottleneck.buffer=128KB", "today", "catnip").est["vs_fifo"].value == pytest.approx(1.5)


def test_layout_and_cli(db):
    with Store(db) as s:
        table = layouts.build("catnip-study", s, "s1", "s2", "s3")
    rec = {(r["context"], r["scheme"], r["side"]): r for r in table.records()}
    assert rec["", "today", "fifo"]["seeds"] == 2 and rec["", "today", "fifo"]["left_out"] == 1
    res = CliRunner().invoke(main, ["report", "s1", "s2", "s3", "--db", str(db), "--layout", "catnip-study"])
    assert res.exit_code == 0, res.output
    assert "CATNIP gap study catnip-study-sim: s1, s2, s3" in res.output
    assert "fifo today left out: seed 2: not real time" in res.output
    row = next(line for line in res.output.splitlines() if line.startswith("iw "))
    assert row.split()[1:5] == ["3/3", "9.00±0.00", "9.00±0.00", "5.00±0.00"]  # seeds, FIFO loss, CATNIP loss and its high


@pytest.fixture
def web(db, tmp_path):
    from catnip.controller.run_queue import RunQueue
    from catnip.webui.app import create_app
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    yield create_app(db=db, scenarios_dir=tmp_path, queue=queue).test_client()
    queue.shutdown(timeout=5)


def test_dashboard_study_page(web):
    res = web.get("/study?run=s1&run=s2&run=s3")
    assert res.status_code == 200, res.data[:400]
    html = res.get_data(as_text=True)
    rows = re.findall(r'<tr class="study-row"><td>(\S+)</td>\s*<td[^>]*>([^<]+)</td>(.*?)</tr>', html, re.S)
    assert [r[0] for r in rows] == ["today", "iw", "rto", "period", "period-iw"]
    today = dict((r[0], r) for r in rows)["today"]
    assert today[1] == "2 / 3"  # FIFO's seed 2 did not keep real time
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", today[2])
    assert cells[:2] == ["18.00% &plusmn;0.00", "18.00% &plusmn;0.00"]
    # CATNIP against FIFO: every seed's pages faster; coloured where the interval leaves out 1.00
    # (under 'iw', three seeds), not where it does not ('today', two seeds: 0.70 +- 0.79).
    assert today[2].rstrip().endswith('<td class="neutral">0.70 &plusmn;0.79</td>')
    iw = dict((r[0], r) for r in rows)["iw"]
    assert iw[2].rstrip().endswith('<td class="better">0.78 &plusmn;0.16</td>')
    assert "fifo today left out: seed 2: not real time" in html
    assert "/runs/s1/layouts/catnip-study.csv?run=s2&amp;run=s3" in html
    csv = web.get("/runs/s1/layouts/catnip-study.csv?run=s2&run=s3")
    assert csv.status_code == 200 and csv.get_data(as_text=True).startswith("context,scheme,side,seeds,left_out,loss,")
    assert 'id="study-link"' in web.get("/runs/s1").get_data(as_text=True)


@pytest.mark.parametrize("query, status, message", [
    ("", 400, "tick the runs of a study scenario"), ("?run=nope", 404, "no run"),
    ("?run=s1&run=x;rm", 400, "not a run id")])
def test_dashboard_study_rejects(web, query, status, message):
    res = web.get("/study" + query)
    assert res.status_code == status and message in res.get_data(as_text=True)


def test_a_seed_in_parts(tmp_path):
    # `catnip run --only` runs a study in parts: the parts of one seed are one seed.
    path = tmp_path / "db"
    with Store(path) as s:
        for run, schemes in (("p1", ("today", "period")), ("p2", ("iw",))):
            s.create_run(run, "catnip-study-sim", "x", {"name": "catnip-study-sim"}, {}, 1, "abc", {}, {})
            for point, scheme in enumerate(schemes):
                s.create_point(run, point, 0, {"router.policy": {"kind": "droptail"}, "scheme": scheme}, {}, 1)
                s.update_point(run, point, realtime_ok=1, status="done")
                s.add_transfers(run, point, [], [_page("c1", 1, 2.0 if scheme == "today" else 1.0)])
        rep = study.study(s, ["p1", "p2"])
    assert rep.row("", "iw", "fifo").seeds == [1]
    assert rep.row("", "iw", "fifo").est["vs_today"].value == pytest.approx(0.5)


def test_a_point_that_did_not_finish_may_be_run_again(tmp_path):
    # A run whose point failed, and a later run of that point alone (`--only`) for the same seed.
    path = tmp_path / "db"
    with Store(path) as s:
        for run, status, t in (("first", "failed", 9.0), ("again", "done", 1.0)):
            s.create_run(run, "catnip-study-sim", "x", {"name": "catnip-study-sim"}, {}, 1, "abc", {}, {})
            for point, scheme in enumerate(("today", "period")):
                s.create_point(run, point, 0, {"router.policy": {"kind": "droptail"}, "scheme": scheme}, {}, 1)
                s.update_point(run, point, realtime_ok=1, status=status if scheme == "period" else "done")
                s.add_transfers(run, point, [], [_page("c1", 1, t if scheme == "period" else 2.0)])
        with pytest.raises(study.NoStudy, match="seed 1's point .*'today'.* in real time"):
            study.study(s, ["first", "again"])  # 'today' finished in both
        s.update_point("again", 0, status="failed")
        rep = study.study(s, ["first", "again"])
    assert rep.row("", "period", "fifo").seeds == [1] and rep.row("", "period", "fifo").left_out == []
    assert rep.row("", "period", "fifo").est["vs_today"].value == pytest.approx(0.5)


def test_a_point_that_missed_real_time_may_be_run_again(tmp_path):
    # The later run's point stands for the one that missed real time, and the report says so; a
    # later one that missed it does not stand for one that kept it.
    path = tmp_path / "db"
    with Store(path) as s:
        for run, schemes, ok, t in (("first", ("today", "period"), {"today": 1, "period": 0}, 9.0),
                                    ("again", ("period",), {"period": 1}, 1.0), ("late", ("today",), {"today": 0}, 5.0)):
            s.create_run(run, "catnip-study-sim", "x", {"name": "catnip-study-sim"}, {}, 1, "abc", {}, {})
            for point, scheme in enumerate(schemes):
                s.create_point(run, point, 0, {"router.policy": {"kind": "droptail"}, "scheme": scheme}, {}, 1)
                s.update_point(run, point, realtime_ok=ok[scheme], status="done")
                s.add_transfers(run, point, [], [_page("c1", 1, t if scheme == "period" else 2.0)])
        rep = study.study(s, ["first", "again", "late"])
    row = rep.row("", "period", "fifo")
    assert row.seeds == [1] and row.left_out == [] and row.est["vs_today"].value == pytest.approx(0.5)
    assert "seed 1 fifo period: run again stands for run first's point (not real time)" in rep.notes
    assert rep.row("", "today", "fifo").seeds == [1]  # 'late' did not replace the real-time one
