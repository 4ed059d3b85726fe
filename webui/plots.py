"""The plot view (issue 48, finding 4), as Flent's GUI plots a series of chosen test runs: pick
runs (and their points) and one series the database keeps, and see them on one chart, each
point of each run a trace, every trace in seconds since its point's start (webui/timebase.py).

The series (docs/database.md): the bottleneck's queue in packets and in bytes, its throughput and
its drops per interval (`queue_samples`, engine clock), the work done (`progress`, wall clock),
and every application metric a chosen run recorded (`samples`, monotonic clock: `app:APP:METRIC`).
The query is checked before anything is read: an unknown run, series or point is a 400 naming
it and what there is, never a 500.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from flask import Flask, abort, render_template, request

from catnip.results import figures, labels, run_ids
from catnip.results.store import Store
from catnip.webui import timebase

MAX_RUNS = 12     # runs on one chart
MAX_TRACES = 40   # points over all of them
LISTED_RUNS = 300  # runs the picker lists, newest first


@dataclass(frozen=True)
class Series:
    name: str
    title: str
    unit: str
    steps: bool = False
    markers: bool = False


# The bottleneck's and the progress' series: (name, title, unit, drawn as steps).
BUILT_IN = {s.name: s for s in (
    Series("queue", "Bottleneck queue (server→client)", "packets", steps=True),
    Series("queue_bytes", "Bottleneck queue (server→client)", "bytes", steps=True),
    Series("throughput", "Bottleneck throughput (server→client)", "Mbit/s"),
    Series("drops", "Bottleneck drops per interval (every class)", "packets"),
    Series("progress", "Work done (pages, or each application's unit)", "work units", steps=True))}
APP_SERIES = re.compile(r"app:([^:]{1,100}):([^:]{1,100})")


def available(store: Store, ids: list[str]) -> dict[str, Series]:
    """The series the runs have rows of: built-in ones with rows, then each app metric."""
    out: dict[str, Series] = {}
    marks = ",".join("?" * len(ids))
    for name, table in (("queue", "queue_samples"), ("progress", "progress")):
        if store.db.execute(f"SELECT 1 FROM {table} WHERE run_id IN ({marks}) LIMIT 1", ids).fetchone():
            keys = ("queue", "queue_bytes", "throughput", "drops") if name == "queue" else ("progress",)
            out.update({k: BUILT_IN[k] for k in keys})
    for r in store.db.execute(f"SELECT app, metric, min(unit) AS unit FROM samples WHERE run_id IN ({marks})"
                              " GROUP BY app, metric ORDER BY app, metric", ids).fetchall():
        name = f"app:{r['app']}:{r['metric']}"
        out[name] = Series(name, f"{r['app']}: {r['metric']}", r["unit"] or "", markers=True)
    return out


@dataclass
class PlotRequest:
    runs: list[str]
    series: str | None
    points: dict[str, set[int]]  # run -> the points asked for; a run not here: all its points


def plot_request(args: Any) -> PlotRequest:
    """`run` (repeatable), `series` (one), `point` (repeatable, `RUN:N`); ValueError naming the problem."""
    ids = list(dict.fromkeys(args.getlist("run")))
    for rid in ids:
        why = run_ids.problem(rid)
        if why is not None:
            raise ValueError(f"run={why}")
    if len(ids) > MAX_RUNS:
        raise ValueError(f"at most {MAX_RUNS} runs on one chart, got {len(ids)}")
    series = args.get("series", "").strip() or None
    if series is not None and series not in BUILT_IN and not APP_SERIES.fullmatch(series):
        raise ValueError(f"series={series[:60]!r} is not a series: one of {', '.join(BUILT_IN)},"
                         " or app:APP:METRIC for an application's metric")
    points: dict[str, set[int]] = {}
    for value in args.getlist("point"):
        rid, sep, n = value.rpartition(":")
        if not sep or rid not in ids or not re.fullmatch(r"\d{1,6}", n):
            raise ValueError(f"point={value[:60]!r}: write RUN:N for a point N of one of the chosen runs")
        points.setdefault(rid, set()).add(int(n))
    return PlotRequest(ids, series, points)


def _trace(store: Store, run_id: str, point: Any, series: Series) -> tuple[list[float], list[float], bool]:
    """x (seconds since the point's start), y, and whether x is exactly on that origin."""
    clock = timebase.clock_of(point)
    n = point["point"]
    if series.name == "progress":
        rows = store.progress(run_id, n)
        return [round(clock.wall(r["t"]), 3) for r in rows], [r["pages_done"] for r in rows], clock.started is not None
    if series.name in BUILT_IN:
        rows = store.queue_samples(run_id, n)
        exact = all(clock.engine_exact(r["router"]) for r in rows)
        if series.name == "queue_bytes":
            return [round(clock.engine(r["router"], r["t"]), 3) for r in rows], [r["queue_bytes"] for r in rows], exact
        s = figures.bottleneck_series(rows, [], origin=clock)
        key = {"queue": "queue_pkts", "throughput": "throughput_mbps"}.get(series.name)
        y = s[key] if key else [h + lo for h, lo in zip(s["drops_high"], s["drops_low"])]
        return s["t"], y, exact
    app, metric = APP_SERIES.fullmatch(series.name).groups()
    rows = [r for r in store.samples(run_id, n, app, metric) if r["value"] is not None]
    return [round(clock.monotonic(r["t"]), 3) for r in rows], [r["value"] for r in rows], clock.anchored


def chart(store: Store, req: PlotRequest, series: Series, rows: dict[str, Any]) -> tuple[dict, list[str]]:
    """The chart's spec and notes (traces not on the common origin, points with no rows)."""
    traces, notes = [], []
    for rid in req.runs:
        for p in store.points(rid):
            if rid in req.points and p["point"] not in req.points[rid]:
                continue
            x, y, exact = _trace(store, rid, p, series)
            name = f"{rid} · {p['point']}: {labels.label_of(rows[rid], p)}"
            if not x:
                notes.append(f"{rid} point {p['point']}: no {series.name} rows")
                continue
            if not exact:
                notes.append(f"{rid} point {p['point']}: no clock anchor recorded (runs before 2026-11-24), so its"
                             " times are on the clock they were recorded on, not since the point's start")
                name += " (own clock)"
            traces.append({"name": name, "x": x, "y": y, "steps": series.steps})
    return figures.series_chart(series.title, series.unit, traces, markers=series.markers), notes


def _check(store: Store, req: PlotRequest) -> tuple[dict[str, Any], dict[str, Series]]:
    """The runs' rows and the series they have; abort(400) for a run or point they do not have."""
    rows = {}
    for rid in req.runs:
        rows[rid] = store.run(rid)
        if rows[rid] is None:
            abort(400, description=f"run={rid!r}: no such run in {store.path}; the runs page lists every run")
    for rid, wanted in req.points.items():
        have = {p["point"] for p in store.points(rid)}
        missing = sorted(wanted - have)
        if missing:
            abort(400, description=f"run {rid} has no point {missing[0]}; its points are {sorted(have)}")
    if sum(len(req.points.get(r) or store.points(r)) for r in req.runs) > MAX_TRACES:
        abort(400, description=f"more than {MAX_TRACES} points on one chart: tick fewer points or runs")
    return rows, (available(store, req.runs) if req.runs else {})


def run_series(store: Store, run_id: str, running: bool) -> tuple[dict[int, dict[str, Any]], list[int]]:
    """The run page's bottleneck and progress series of every point, in seconds since the
    point's start, and the points drawn on their own clock (no anchor). A point of a running run
    whose environment (and anchor) is not recorded yet starts empty: the live stream sends its
    whole history once the anchor is there, so no chart mixes two origins."""
    series, unanchored = {}, []
    for p in store.points(run_id):
        n, clock = p["point"], timebase.clock_of(p)
        held = running and not clock.recorded
        series[n] = figures.bottleneck_series([] if held else store.queue_samples(run_id, n),
                                              [] if held else store.progress(run_id, n), origin=clock)
        if series[n]["t"] and not clock.anchored:
            unanchored.append(n)
    return series, unanchored


def register(app: Flask, store_of: Callable[[], Store]) -> None:
    @app.get("/plot")
    def plot_view():
        try:
            req = plot_request(request.args)
        except ValueError as exc:
            abort(400, description=str(exc))
        store = store_of()
        rows, have = _check(store, req)
        spec, notes = None, []
        if req.series is not None:
            if req.series not in have:
                abort(400, description=f"series={req.series[:100]!r}: the chosen runs have no rows of it; they have: "
                                       + (", ".join(have) or "none (no queue samples, progress or application samples)"))
            spec, notes = chart(store, req, have[req.series], rows)
        listed = store.runs()[:LISTED_RUNS]
        points = {rid: [(p["point"], labels.label_of(rows[rid], p)) for p in store.points(rid)] for rid in req.runs}
        return render_template("plots.html", req=req, listed=listed, have=have, points=points, spec=spec, notes=notes,
                               series=have.get(req.series) if req.series else None)
