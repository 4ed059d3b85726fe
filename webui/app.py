"""The Flask dashboard: scenarios and a form to start runs, live run views, reports, comparisons.

It reads the results database and writes one thing into it, a run's free-text note (webui/notes.py,
through results/run_notes.py); runs are `catnip run` children of the controller's run queue
(controller/run_queue.py), which it only asks. It only draws what
results/ computes: report tables (results/report.py), the Table XI comparison
(results/compare.py), plot data (results/figures.py), and the applications' per-sample metrics
(results/samples.py: summaries, CCDFs, per-flow time series, C.O.V.; the `app-metrics` layout of
results/layouts.py for downloads; every registered layout of a run as CSV, JSON or text). A
paper's own sections of a run page are its views (papers/NAME/: a data function and a partial in
its folder): this module names no paper, it asks the papers' registry which views apply to a run
(papers.views_of) and renders each partial, loaded from its paper's folder (`_PaperTemplates`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import asdict
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterator

import yaml
from jinja2 import BaseLoader, ChoiceLoader, TemplateNotFound
from flask import (Flask, Response, abort, current_app, g, jsonify, redirect, render_template, request,
                   send_file, url_for)
from flask_wtf.csrf import CSRFError, CSRFProtect
from werkzeug.exceptions import HTTPException

from catnip.controller import recover, skeleton
from catnip.controller.run_queue import LIVE, RunQueue
from catnip import papers
from catnip.papers import registry as paper_registry
from catnip.spec.record import PointRecord, RecordError
from catnip.models import validation
from catnip.results import compare as compare_mod
from catnip.results import contrast as contrast_mod
from catnip.results import figures, labels, layouts
from catnip.results import pooled as pooled_mod
from catnip.results import report as report_mod
from catnip.results import samples as samples_mod
from catnip.results import point_record, run_ids
from catnip.results.import_schema import MAX_INDEX, STATUSES
from catnip.results.store import Store, StoreVersionError
from catnip.testbed import paths
from catnip.webui import figure_pages, forms, hosts, notes, plots, report_page, runlist, scenario_guide, timebase


def create_app(db: Path | None = None, scenarios_dir: Path | None = None, queue: RunQueue | None = None,
               secret_key: bytes | None = None, allowed_hosts: frozenset[str] | None = None) -> Flask:
    """`allowed_hosts`: the Host names answered (webui/hosts.py; loopback names when None)."""
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=secret_key or os.urandom(32),
        CATNIP_DB=Path(db or paths.database()),
        CATNIP_SCENARIOS=Path(scenarios_dir or paths.REPO / "scenarios"),
        WTF_CSRF_TIME_LIMIT=None,  # a page left open overnight can still cancel its run
        MAX_CONTENT_LENGTH=64 * 1024,
        SSE_POLL=1.0,
        SSE_MAX_SECONDS=6 * 3600,
        # Each live view holds a server thread for as long as it is open (webui/server.py has 16):
        # past this many, a live view is refused (503) and pages keep their threads.
        SSE_MAX_STREAMS=10,
    )
    app.extensions["catnip_streams"] = threading.BoundedSemaphore(app.config["SSE_MAX_STREAMS"])
    app.extensions["catnip_stopping"] = threading.Event()  # set by the server: live views end
    app.extensions["catnip_pages"] = _PageCache()
    app.extensions["catnip_guide"] = scenario_guide.SHARED  # the scenario page's groups (issue 48)
    app.extensions["catnip_queue"] = queue or RunQueue(app.config["CATNIP_DB"], paths.data_dir() / "dashboard")
    app.jinja_env.loader = ChoiceLoader([app.jinja_env.loader, _PaperTemplates()])
    CSRFProtect(app)
    _register(app)
    app.wsgi_app = hosts.HostGuard(app.wsgi_app, allowed_hosts or hosts.allowed_names())
    return app


def _queue() -> RunQueue:
    return current_app.extensions["catnip_queue"]


def _store() -> Store:
    if "store" not in g:
        g.store = Store(current_app.config["CATNIP_DB"])
    return g.store


def _check_run_id(run_id: str) -> str:
    # The one validator of every id (results/run_ids.py): '.', '..' and hidden names never reach a path.
    why = run_ids.problem(run_id)
    if why is not None:
        abort(400, description=why)
    return run_id


class _PageCache:
    """Rendered pages of runs that no longer change, by a key naming what they show; a page asked
    for by many at once is built once, the others wait for it (100 concurrent GETs of one run page
    each built it: up to 22 s each, issue 47). Holds at most `size` pages, the least recent dropped."""

    def __init__(self, size: int = 8):
        self.size = size
        self.lock = threading.Lock()
        self.pages: OrderedDict[Any, str] = OrderedDict()
        self.building: dict[Any, threading.Event] = {}

    def get(self, key: Any, build: Callable[[], str]) -> str:
        with self.lock:
            if key in self.pages:
                self.pages.move_to_end(key)
                return self.pages[key]
            event = self.building.get(key)
            mine = event is None
            if mine:
                event = self.building[key] = threading.Event()
        if not mine:
            event.wait(300)
            with self.lock:
                if key in self.pages:
                    return self.pages[key]
            return build()  # the first builder failed: this request says why itself
        try:
            page = build()
            with self.lock:
                self.pages[key] = page
                while len(self.pages) > self.size:
                    self.pages.popitem(last=False)
            return page
        finally:
            with self.lock:
                self.building.pop(key).set()


# Tables whose rows a run page shows; their count and last rowid tell a page still current.
_SHOWN_TABLES = ("pages", "objects", "samples", "queue_samples", "progress", "link_stats", "transfer_trials")


def _run_page_key(store: Store, run: sqlite3.Row) -> tuple:
    """What a finished run's page depends on: its runs row but the note (put in on each request,
    webui/notes.py), its points rows, and how many rows (and the last rowid) each table shows holds
    for it, so a record added later is a new page."""
    db = store.db
    points = [tuple(p) for p in store.points(run["id"])]
    counts = tuple(tuple(db.execute(f'SELECT count(*), max(rowid) FROM "{t}" WHERE run_id=?', (run["id"],)).fetchone())
                   for t in _SHOWN_TABLES)
    shown = tuple(v for k, v in zip(run.keys(), run) if k != "note")
    return (str(store.path), shown, tuple(points), counts)


def _provenance(run: sqlite3.Row) -> list[dict[str, Any]]:
    """Where an imported run came from, newest import first (runs.imported and its `earlier`)."""
    try:
        mark = json.loads(run["imported"]) if "imported" in run.keys() and run["imported"] else None
    except ValueError:
        return []
    out = []
    while isinstance(mark, dict) and len(out) < 16:
        out.append(mark)
        mark = mark.get("earlier")
        if isinstance(mark, str):
            try:
                mark = json.loads(mark)
            except ValueError:
                break
    return out


def _capture_in_folder(run: sqlite3.Row, recorded: str, folder: Path) -> Path | None:
    """The file a point's recorded capture names inside the run's `folder` here, or None when it
    names none. A run recorded here: the recorded path itself. An imported run: the path named
    the machine it came from, so only its part inside the run's folder there is kept (below its
    recorded folder, or below runs/ID of an id it had), read inside the folder here; a path
    outside, or climbing out with '..', names nothing."""
    marks = _provenance(run)
    if not marks:
        return Path(recorded)
    path = PurePosixPath(recorded)
    for mark in marks:
        for base in (mark.get("run_folder"), ):
            if isinstance(base, str) and base:
                try:
                    rel = path.relative_to(PurePosixPath(base))
                except ValueError:
                    continue
                if rel.parts and ".." not in rel.parts:
                    return folder / rel
        old = mark.get("run_id")
        parts = path.parts
        for i in range(len(parts) - 2, -1, -1):
            if parts[i] == "runs" and parts[i + 1] == old:
                rel = PurePosixPath(*parts[i + 2:]) if parts[i + 2:] else None
                if rel is not None and ".." not in rel.parts:
                    return folder / rel
                break
    return None


def _is_time(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e11


def _listed(run: sqlite3.Row) -> dict[str, Any]:
    """A run as the runs page lists it. A database filled before imports were checked may hold a
    start or end that is no time ("yesterday", issue 47): the run is listed without a duration
    instead of the page failing for every run."""
    row = dict(run)
    if not (_is_time(row["started"]) and _is_time(row["finished"])):
        row["finished"] = None
    return row


def _records(store: Store, run) -> dict[int, Any]:
    """Each point's resolved record as the run page shows it (results/point_record.summary), or
    why it has none to show."""
    out: dict[int, Any] = {}
    for p in store.points(run["id"]):
        try:
            out[p["point"]] = point_record.summary(point_record.record_of(run, p))
        except RecordError as exc:
            out[p["point"]] = {"error": str(exc)}
    return out


def _planned_pages(record: PointRecord) -> int:
    """Pages a point's web applications planned, from its resolved record (issue 43: what ran is the
    record's, not the stored scenario's): per web application its clients x the pages of one session
    x its rounds, its parameters read by the web application's own schema (spec.apps.spec_of), as
    its progress counted them (workloads/apps/web.py `expected`). 0 (open-ended, as the point's
    progress says) when one runs for a duration, when the point runs another application, or when
    the parameters do not read (a record imported from elsewhere may hold anything)."""
    from catnip.spec.apps import spec_of
    if not record.applications or any(a.kind != "web" for a in record.applications):
        return 0
    total = 0
    for app in record.applications:
        try:
            sp = spec_of("web").model_validate(app.params)
            if sp.duration is not None:
                return 0
            total += len(app.clients) * len(sp.session_pages()) * sp.rounds
        except (ValueError, KeyError, TypeError):
            return 0
    return total


def _error(status: int, title: str, message: str):
    if request.accept_mimetypes.best == "application/json" or request.path.endswith((".json", "/events")):
        return jsonify(error=message), status
    return render_template("error.html", status=status, title=title, message=message), status


def _point_summaries(store: Store, run_id: str) -> list[dict[str, Any]]:
    latest = {r["point"]: r for r in store.latest_progress(run_id)}
    run = store.run(run_id)
    out = []
    for p in store.points(run_id):
        pr = latest.get(p["point"])
        if pr:
            done, total, elapsed = pr["pages_done"], pr["pages_total"], pr["elapsed"]
        else:  # recorded before progress was stored, or a transfer measurement: count what is stored
            wl = json.loads(p["resolved"])
            wl = wl if isinstance(wl, dict) else {}
            if "sizes_kb" not in wl:  # a point of a scenario: what it planned is its record's
                try:
                    total = _planned_pages(point_record.record_of(run, p))
                except RecordError:  # neither stored nor plannable again: its total is unknown
                    total = 0
                done = sum(1 for r in store.pages(run_id, p["point"]) if not r["error"])
            else:  # a transfer measurement's loss point (controller/transfers.py) has no point record
                # (one line it builds from its TransferScenario, not a graph): its plan is the
                # resolved transfer scenario it stored, sizes and trials per size
                sizes, trials = wl.get("sizes_kb", []), wl.get("trials", 0)
                total = len(sizes) * trials if isinstance(sizes, list) and isinstance(trials, int) else 0
                done = sum(1 for r in store.transfer_trials(run_id) if r["point"] == p["point"] and not r["error"])
            elapsed = (p["finished"] or p["started"] or 0) - (p["started"] or 0)
        eta = elapsed / done * (total - done) if done and total and p["status"] == "running" else None
        phase = pr["phase"] if pr and p["status"] == "running" else ("starting" if p["status"] == "running"
                                                                      else p["status"])
        out.append({"point": p["point"], "label": labels.label_of(run, p),
                    "status": p["status"], "phase": phase,
                    "pages_done": done, "pages_total": total, "elapsed": round(elapsed, 1),
                    "eta": None if eta is None else round(eta)})
    return out


class _PointSamples:
    """A store's `samples` for one point, read once: results/samples.py asks for the same rows once
    per summary, tag, series and C.O.V.; filtering the point's rows (ordered by app, metric, t,
    rowid) by app and metric gives exactly what Store.samples returns."""

    def __init__(self, store: Store, run_id: str, point: int):
        self.run_id, self.point = run_id, point
        self.rows = store.samples(run_id, point)
        self.by_metric: dict[tuple[str, str], list] = {}
        for r in self.rows:
            self.by_metric.setdefault((r["app"], r["metric"]), []).append(r)

    def samples(self, run_id: str, point: int, app: str | None = None, metric: str | None = None) -> list:
        if (run_id, point) != (self.run_id, self.point):
            raise ValueError(f"samples of run {self.run_id} point {self.point} asked for {run_id} point {point}")
        if app is not None and metric is not None:
            return self.by_metric.get((app, metric), [])
        return [r for r in self.rows if (app is None or r["app"] == app) and (metric is None or r["metric"] == metric)]


def _app_metrics(store: Store, run_id: str, point: int) -> dict[str, Any] | None:
    """A point's application metrics as results/samples.py computes them, or None when the point
    has no samples (runs recorded before applications, or a point that measured nothing):
    `summaries` (a MetricSummary per app, metric, tag and unit), `ccdf` (per app and metric, one
    exact CCDF per tag) and `goodput` (per app with a `goodput` metric: each flow's samples over
    time, t in seconds since the app's first goodput sample at the point, and the C.O.V. of the
    per-flow means across flows)."""
    view = _PointSamples(store, run_id, point)
    summaries = samples_mod.summaries(view, run_id, point, by_tag=True)
    if not summaries:
        return None
    metrics: dict[tuple[str, str], dict[str, Any]] = {}
    for s in summaries:  # sorted by app, metric, tag (None first), unit
        m = metrics.setdefault((s.app, s.metric), {"app": s.app, "metric": s.metric, "units": [], "tags": []})
        if s.unit not in m["units"]:
            m["units"].append(s.unit)
        if s.tag not in m["tags"]:
            m["tags"].append(s.tag)
    ccdf = []
    for (app, metric), m in metrics.items():
        curves = []
        for tag in m["tags"]:
            if tag is None and len(m["tags"]) > 1:
                # ccdf_for(tag=None) pools every tag: the untagged samples' own curve is their CCDF.
                pts = samples_mod.ccdf(r["value"] for r in view.samples(run_id, point, app, metric)
                                       if r["tag"] is None and r["error"] is None and r["value"] is not None)
            else:
                pts = samples_mod.ccdf_for(view, run_id, point, app, metric, tag)
            if pts:
                curves.append({"tag": tag, "x": [x for x, _ in pts], "y": [y for _, y in pts]})
        ccdf.append({"app": app, "metric": metric, "units": m["units"], "curves": curves})
    goodput = []
    for (app, metric), m in metrics.items():
        if metric != "goodput":
            continue
        series = samples_mod.timeseries(view, run_id, point, app, metric)
        t0 = min((pts[0][0] for pts in series.values() if pts), default=None)
        goodput.append({"app": app, "units": m["units"], "t0": t0,
                        "flows": len(samples_mod.per_flow_means(view, run_id, point, app, metric)),
                        "cov": samples_mod.cov_across_flows(view, run_id, point, app, metric),
                        "series": [{"flow": flow, "t": [t - t0 for t, _ in pts], "value": [v for _, v in pts]}
                                   for flow, pts in series.items()]})
    return {"summaries": [asdict(s) for s in summaries], "ccdf": ccdf, "goodput": goodput}


def _settings(run: sqlite3.Row) -> dict[str, Any]:
    """What a run ran but its seed (results/pooled.run_settings), with its name and its sweep. Runs
    that agree on it are seeds of one experiment."""
    return {**pooled_mod.run_settings(run), "name": run["name"], "sweep": json.loads(run["sweep"] or "{}")}


def _compare_sides(store: Store, req: forms.CompareRequest) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The sides of a comparison, oldest first (by their earliest run's start), and the baseline:
    the one asked for, else the oldest (the reference run is the one made first, as default TCP
    with FIFO routers in Table XI; the runs page lists newest first). Aborts 404 for an unknown
    run, 400 when fewer than two sides are left or the baseline is not one side."""
    rows: dict[str, sqlite3.Row] = {}
    for rid in (i for side in req.groups for i in side):
        row = store.run(rid)  # the exact id: results/ also takes an id's prefix
        if row is None:
            abort(404, description=f"no run {rid!r} in {store.path}; the runs page lists every run")
        rows[rid] = row
    groups = [list(side) for side in req.groups]
    if req.pool_seeds:
        # Sides whose runs all share one setting (seed aside) merge into one; a side the URL pooled
        # by hand with mixed settings stays as it was asked.
        merged: dict[Any, list[str]] = {}
        for side in groups:
            keys = {json.dumps(_settings(rows[i]), sort_keys=True) for i in side}
            merged.setdefault(next(iter(keys)) if len(keys) == 1 else tuple(side), []).extend(side)
        groups = list(merged.values())
    if len(groups) < 2:
        abort(400, description="choose at least two runs on the runs page"
              + (" that differ in more than the seed: pooled, the ticked runs are one side"
                 " (tick runs of another setting too, or use Pool seeds)" if req.pool_seeds and req.groups[1:] else ""))

    def started(side: list[str]) -> tuple[bool, float, str]:
        times = [rows[i]["started"] for i in side if rows[i]["started"] is not None]
        return (not times, min(times, default=0.0), side[0])  # an unknown start sorts last

    groups.sort(key=started)
    sides = []
    for side in groups:
        members = [rows[i] for i in side]
        seeds = [r["seed"] for r in members]
        sides.append({"spec": "+".join(side), "ids": side, "names": sorted({r["name"] for r in members}),
                      "started": min((r["started"] for r in members if r["started"] is not None), default=None),
                      "seeds": seeds, "repeated_seeds": sorted({x for x in seeds if seeds.count(x) > 1}),
                      "differences": pooled_mod.settings_differences(members) if len(members) > 1 else []})
    base = sides[0]
    if req.baseline is not None:
        base = next((s for s in sides if set(req.baseline) <= set(s["ids"])), None)
        if base is None:
            abort(400, description=f"baseline {'+'.join(req.baseline)} is not one of the compared sides: "
                                   + ", ".join(s["spec"] for s in sides))
    return sides, base


# The engine's DSCP classes (docs/engine.md) as the drops chart's legend names them.
CLASS_NAMES = {"high": "AF11", "low": "AF12", "lowest": "AF13", "other": "unmarked/other"}


def _drop_classes(point: dict[str, Any]) -> dict[str, str | None] | None:
    """What the live drops chart's two series of a point counted, from the classes that reached its
    bottleneck (server->client) by its final counters: `high` names AF11 (None when no AF11 packet
    arrived: the series is not drawn), `rest` the other classes that arrived. None while a point
    has no final counters (a running point): the page then says "AF11" and "not AF11"."""
    data = (point.get("loss") or {}).get("bottleneck-data")
    if not data or not data.get("arrived"):
        return None
    seen = [c for c in CLASS_NAMES if c in data["by_class"]] + sorted(c for c in data["by_class"] if c not in CLASS_NAMES)
    rest = [CLASS_NAMES.get(c, c) for c in seen if c != "high"]
    return {"high": "AF11" if "high" in seen else None, "rest": ", ".join(rest) or None}


def _sdev_clipped(spec: dict[str, Any]) -> dict[str, Any]:
    """The page-time bars with each -1 sdev bar stopped at 0 s where the mean minus one sdev falls
    below it (a download time is never negative), and a note on the chart saying how many were."""
    clipped = total = 0
    for trace in spec["data"]:
        err = trace.get("error_y") or {}
        up = err.get("array") or []
        down = [min(e, y) if isinstance(e, (int, float)) and isinstance(y, (int, float)) else e
                for e, y in zip(up, trace.get("y") or [])]
        total += len(up)
        n = sum(1 for e, d in zip(up, down) if d != e)
        if n:
            err.update(symmetric=False, arrayminus=down)
            clipped += n
    if clipped:  # under the title, clear of the tool bar at the top right
        margin = spec["layout"].setdefault("margin", {})
        margin["t"] = max(margin.get("t", 40), 62)
        spec["layout"].setdefault("annotations", []).append({
            "text": f"{clipped} of {total} sdev bars clipped at 0 s (mean - sdev < 0; a page time is never negative)",
            "xref": "paper", "yref": "paper", "x": 0, "y": 1, "xanchor": "left", "yanchor": "bottom", "yshift": 4,
            "showarrow": False, "font": {"size": 12, "color": "#555"}, "name": "sdev-clipped"})
    return spec


MAX_STUDY_RUNS = 50  # the seeds (and parts) of one study; as /compare caps its runs

LAYOUT_FORMATS = {"csv": "text/csv", "json": "application/json", "txt": "text/plain"}


class _PaperTemplates(BaseLoader):
    """The partials of the registered papers' views, `papers/PAPER/FILE`, read from each paper's
    folder (papers/registry.py) when asked, so a paper registered after the app was made is found."""
    def get_source(self, environment, template):
        found = paper_registry.template_source(template)
        if found is None:
            raise TemplateNotFound(template)
        text, path = found
        mtime = path.stat().st_mtime
        return text, str(path), lambda: path.is_file() and path.stat().st_mtime == mtime


def _register(app: Flask) -> None:
    """Every route, error handler and template helper of the dashboard."""
    _register_errors(app)
    _register_runs(app)
    _register_run_page(app)
    _register_run_control(app)
    _register_downloads(app)
    _register_point_files(app)
    _register_views(app)
    _register_service(app)
    _register_filters(app)
    # The paper figures the CLI writes (burst-seq, fig2, model validate --out) and the plot view.
    figure_pages.register(app, _store, _check_run_id, _capture_in_folder)
    plots.register(app, _store)
    notes.register(app, _store, _check_run_id)  # a run's note: the run page's form, the runs page's column
    report_page.register(app)  # the reproduction report (docs/report.md's rows): papers/claims.py


def _register_errors(app: Flask) -> None:
    """The store closed after each request, and the error pages."""
    @app.teardown_appcontext
    def close_store(exc):
        store = g.pop("store", None)
        if store is not None:
            store.close()

    @app.errorhandler(CSRFError)
    def csrf_error(exc: CSRFError):
        return _error(400, "Form expired or forged", f"{exc.description} Reload the page and submit the form again.")

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        return _error(exc.code or 500, exc.name, exc.description or exc.name)

    @app.errorhandler(sqlite3.Error)
    @app.errorhandler(StoreVersionError)
    def database_error(exc: Exception):
        return _error(503, "Database unavailable", f"cannot read {app.config['CATNIP_DB']}: {exc}")


def _register_runs(app: Flask) -> None:
    """The scenario page, starting runs and the run list."""
    def scenarios_page(errors: dict[str, str], form: Any) -> str:
        # Grouped by paper, with durations, make targets and placeholders (webui/scenario_guide.py).
        groups = app.extensions["catnip_guide"].get(app.config["CATNIP_SCENARIOS"])
        return render_template("scenarios.html", groups=groups, jobs=_queue().active(), errors=errors, form=form,
                               names=[e.file.name for g in groups for e in g.entries if e.runnable])

    @app.get("/")
    def scenarios():
        return scenarios_page({}, {})

    @app.post("/runs")
    def start_run():
        req, errors = forms.parse_run_request(request.form, app.config["CATNIP_SCENARIOS"])
        if errors:
            return scenarios_page(errors, request.form), 400
        run_id = skeleton.new_run_id(req.sweep.name)
        try:
            _queue().submit(run_id, req.scenario, req.overrides, req.seed, req.jobs)
        except RuntimeError as exc:
            abort(503, description=str(exc))
        return redirect(url_for("run_view", run_id=run_id), code=303)

    @app.get("/runs")
    def runs():
        # Filtered by validated query parameters (webui/runlist.py): paper, status, real time.
        try:
            chosen = runlist.run_filter(request.args)
        except ValueError as exc:
            abort(400, description=str(exc))
        store = _store()
        recover.close_abandoned_runs(store)
        counts, cache = runlist.point_counts(store.db), {}
        rows = [{**_listed(r), **runlist.provenance(r, app.config["CATNIP_SCENARIOS"], counts, cache)}
                for r in store.runs()]
        shown = [r for r in rows if chosen.keeps(r)]
        return render_template("runs.html", runs=shown, total=len(rows), chosen=chosen,
                               papers=[p for p in runlist.PAPER_NAMES if any(r["paper"] == p for r in rows)],
                               statuses=[s for s in STATUSES if any(r["status"] == s for r in rows)],
                               realtime=runlist.REALTIME,
                               jobs=[j for j in _queue().active() if store.run(j.run_id) is None])


def _register_run_page(app: Flask) -> None:
    """A run's page: live while it runs, its report and figures when done."""
    @app.get("/runs/<run_id>")
    def run_view(run_id: str):
        _check_run_id(run_id)
        store, job = _store(), _queue().get(run_id)
        recover.close_abandoned_runs(store)
        run = store.run(run_id)
        if run is None and job is None:
            abort(404, description=f"no run {run_id!r} in {store.path}; the runs page lists every run")
        if run is not None and run["status"] != "running" and (job is None or job.state not in LIVE):
            # A run that has ended: the same page for everyone (no form, no token) until a record changes;
            # its note section (a form with this visitor's token) is put in on each request.
            key = (_run_page_key(store, run), None if job is None else json.dumps(job.to_dict(), sort_keys=True))
            page = app.extensions["catnip_pages"].get(key, lambda: _run_page(store, run_id, run, job))
            return notes.splice(page, run_id, run)
        return notes.splice(_run_page(store, run_id, run, job), run_id, run)

    def _run_page(store: Store, run_id: str, run: sqlite3.Row | None, job: Any) -> str:
        ctx: dict[str, Any] = {"run_id": run_id, "run": run, "job": job, "report": None, "series": {},
                               "figures": {}, "points": [], "resolved": {}, "records": {}, "capabilities": None,
                               "versions": None, "captures": []}
        ctx["transfers"] = None
        ctx["apps"] = {}
        ctx["app_figures"] = {}
        ctx["paper_views"] = []
        ctx["paper_figures"] = []
        ctx["unanchored"] = []
        ctx["realtime_why"] = {}
        ctx["drop_classes"] = {}
        ctx["usability"] = runlist.USABILITY
        if run is not None and json.loads(run["scenario"]).get("kind") == "transfers":
            ctx["transfers"] = validation.cells(store.transfer_trials(run_id))  # no pages, no bottleneck
        elif run is not None:
            rep = report_mod.run_report(store, run_id)
            ctx["report"] = rep
            ctx["points"] = _point_summaries(store, run_id)
            # Every chart's time in seconds since its point's start (webui/timebase.py), so side by side they line up.
            ctx["series"], ctx["unanchored"] = plots.run_series(store, run_id, run["status"] == "running")
            # A point that missed real time says why inline, and what that means for its numbers.
            limits = {p["point"]: runlist.max_late_fraction(p["resolved"]) for p in store.points(run_id)}
            ctx["realtime_why"] = {p["point"]: runlist.realtime_reasons(p["fidelity"], limits.get(p["point"], 0.001))
                                   for p in rep["points"] if p["realtime_ok"] is False}
            finished = [p for p in rep["points"] if p["table"]]
            ctx["drop_classes"] = {p["point"]: dc for p in rep["points"] if (dc := _drop_classes(p)) is not None}
            if finished:
                ctx["figures"] = {"bars": _sdev_clipped(figures.page_time_bars({"points": finished})),
                                  "cdf": figures.page_time_distribution(store, run_id, finished)}
        if run is not None:
            ctx["resolved"] = {p["point"]: yaml.safe_dump(json.loads(p["resolved"]), sort_keys=False)
                               for p in store.points(run_id)}
            ctx["records"] = _records(store, run)
            ctx["captures"] = [p["point"] for p in store.points(run_id) if p["capture"]]
            if ctx["report"] is not None:
                ctx["apps"] = {n: data for n in (p["point"] for p in store.points(run_id))
                               if (data := _app_metrics(store, run_id, n)) is not None}
                # The page draws these specs as they are (one plotting path: results/figures.py).
                ctx["app_figures"] = {n: {"ccdf": [figures.app_ccdf_chart(m) for m in d["ccdf"]],
                                          "goodput": [figures.app_goodput_chart(g) for g in d["goodput"]]}
                                      for n, d in ctx["apps"].items()}
                # Each registered paper's views that apply to the run (papers/), drawn by their partials.
                ctx["paper_views"] = papers.views_of(store, run_id, {"apps": ctx["apps"], "report": ctx["report"]})
            ctx["paper_figures"] = figure_pages.run_links(store, run)  # each with its page, or why it has none
            ctx["capabilities"] = json.loads(run["capabilities"] or "null")
            ctx["versions"] = json.loads(run["versions"] or "null")
        ctx["live"] = (job is not None and job.state in LIVE) or (run is not None and run["status"] == "running")
        # The live charts' layouts; the page fills in the data as it streams (results/figures.py).
        ctx["live_layouts"] = {k: f["layout"] for k, f in figures.bottleneck_charts([], {}, point_clock=True).items()}
        return render_template("run.html", **ctx)


def _register_run_control(app: Flask) -> None:
    """A running run's live events, and its cancel."""
    @app.get("/runs/<run_id>/events")
    def run_events(run_id: str):
        _check_run_id(run_id)
        if _store().run(run_id) is None and _queue().get(run_id) is None:
            abort(404, description=f"no run {run_id!r}")
        db, poll, limit = app.config["CATNIP_DB"], app.config["SSE_POLL"], app.config["SSE_MAX_SECONDS"]
        queue, streams = _queue(), app.extensions["catnip_streams"]
        if not streams.acquire(blocking=False):
            abort(503, description=f"{app.config['SSE_MAX_STREAMS']} live views are open already;"
                                   " close one, or reload this page for the state so far")
        # Released when the server closes the response: the stream ended, or the browser went away.
        response = Response(_event_stream(db, queue, run_id, poll, limit, app.extensions["catnip_stopping"]),
                            mimetype="text/event-stream", headers={"Cache-Control": "no-cache",
                                                                   "X-Accel-Buffering": "no"})
        response.call_on_close(streams.release)
        return response

    @app.post("/runs/<run_id>/cancel")
    def cancel_run(run_id: str):
        _check_run_id(run_id)
        try:
            message = _queue().cancel(run_id)
        except KeyError:
            run = _store().run(run_id)
            if run is None:
                abort(404, description=f"no run {run_id!r}")
            abort(409, description=f"run {run_id} was not started from this dashboard ({run['status']});"
                                   " stop it where it runs (Ctrl-C), or with `catnip clean` if that process is gone")
        if request.accept_mimetypes.best == "application/json":
            return jsonify(message=message)
        return redirect(url_for("run_view", run_id=run_id), code=303)


def _register_downloads(app: Flask) -> None:
    """A run's report, applications, layouts and capture as files."""
    @app.get("/runs/<run_id>/report.<fmt>")
    def run_download(run_id: str, fmt: str):
        _check_run_id(run_id)
        if fmt not in ("csv", "json"):
            abort(404, description=f"no {fmt!r} download; reports come as .csv or .json")
        try:
            rep = report_mod.run_report(_store(), run_id)
        except KeyError as exc:
            abort(404, description=exc.args[0])
        body = report_mod.render_csv(rep) if fmt == "csv" else report_mod.render_json(rep)
        return Response(body, mimetype="text/csv" if fmt == "csv" else "application/json",
                        headers={"Content-Disposition": f'attachment; filename="{run_id}.{fmt}"'})

    @app.get("/runs/<run_id>/apps.<fmt>")
    def apps_download(run_id: str, fmt: str):
        # The `app-metrics` layout of every point, as `catnip report RUN --apps --csv/--json` writes it.
        _check_run_id(run_id)
        if fmt not in ("csv", "json"):
            abort(404, description=f"no {fmt!r} download; application metrics come as .csv or .json")
        if _store().run(run_id) is None:  # the exact id: layouts also take an id's prefix
            abort(404, description=f"no run {run_id!r}")
        try:
            table = layouts.build("app-metrics", _store(), run_id)
        except (KeyError, layouts.LayoutError) as exc:
            abort(404, description=str(exc.args[0]))
        return Response(layouts.RENDERERS[fmt](table), mimetype="text/csv" if fmt == "csv" else "application/json",
                        headers={"Content-Disposition": f'attachment; filename="{run_id}-apps.{fmt}"'})

    @app.get("/runs/<run_id>/layouts/<name>.<fmt>")
    def layout_download(run_id: str, name: str, fmt: str):
        # Any registered layout of the run (results/layouts.py), as `catnip report RUN --layout NAME`
        # writes it; `?run=ID` (repeatable) adds runs for the layouts that take several (the seeds).
        _check_run_id(run_id)
        if name not in layouts.LAYOUTS:
            abort(404, description=f"no layout {name[:60]!r}; the layouts are: {', '.join(layouts.LAYOUTS)}")
        if fmt not in LAYOUT_FORMATS:
            abort(404, description=f"no {fmt[:20]!r} download; layouts come as .csv, .json or .txt")
        try:
            more = [r for r in forms.run_ids(request.args.getlist("run")) if r != run_id]
        except ValueError as exc:
            abort(400, description=str(exc))
        store = _store()
        for rid in (run_id, *more):
            if store.run(rid) is None:  # the exact id: layouts also take an id's prefix
                abort(404, description=f"no run {rid!r}")
        try:
            table = layouts.build(name, store, run_id, *more)
        except KeyError as exc:
            abort(404, description=str(exc.args[0]))
        except ValueError as exc:  # LayoutError too: the wrong number or kind of runs
            abort(400, description=str(exc))
        body = layouts.render_text(table) if fmt == "txt" else layouts.RENDERERS[fmt](table)
        return Response(body, mimetype=LAYOUT_FORMATS[fmt],
                        headers={"Content-Disposition": f'attachment; filename="{run_id}-{name}.{fmt}"'})


def _register_point_files(app: Flask) -> None:
    """A point's application metrics and its packet capture."""
    @app.get(f"/runs/<run_id>/points/<int(max={MAX_INDEX}):point>/apps.json")
    def point_apps(run_id: str, point: int):
        # One point's application metrics: what its Applications section shows.
        _check_run_id(run_id)
        store = _store()
        if store.run(run_id) is None:
            abort(404, description=f"no run {run_id!r}")
        row = store.point(run_id, point)
        if row is None:
            abort(404, description=f"run {run_id} has no point {point}")
        data = _app_metrics(store, run_id, point) or {"summaries": [], "ccdf": [], "goodput": []}
        return jsonify(run_id=run_id, point=point, label=labels.label_of(store.run(run_id), row),
                       **data)

    @app.get(f"/runs/<run_id>/points/<int(max={MAX_INDEX}):point>/capture.pcap")
    def run_capture(run_id: str, point: int):
        _check_run_id(run_id)
        run = _store().run(run_id)
        row = _store().point(run_id, point) if run is not None else None
        if row is None or not row["capture"]:
            abort(404, description=f"run {run_id} point {point} has no packet capture (set run.capture: true)")
        # Only a file inside the run's own folder (runs/ID beside the database), symlinks resolved: a record
        # pointing elsewhere, or a link out of the folder, is refused; an imported run's path is read
        # inside its folder here (_capture_in_folder).
        folder = (paths.runs_dir(app.config["CATNIP_DB"]) / run_id).resolve()
        inside = _capture_in_folder(run, row["capture"], folder)
        path = inside.resolve() if inside is not None else None
        if path is None or not path.is_relative_to(folder):
            abort(403, description=f"the capture of run {run_id} point {point} is recorded outside the run's"
                                   f" folder {folder}: not served")
        try:  # the resolved path, opened without following a link swapped in since, nor waiting on a FIFO
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            abort(404, description=f"the capture of run {run_id} point {point} is no longer on disk")
        file = os.fdopen(fd, "rb")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            file.close()
            abort(404, description=f"the capture of run {run_id} point {point} is not a regular file")
        return send_file(file, mimetype="application/vnd.tcpdump.pcap", as_attachment=True,
                         download_name=f"{run_id}-point{point}.pcap")


def _register_views(app: Flask) -> None:
    """Views over several runs, the bundled Plotly and the health check."""
    @app.get("/compare")
    def compare():
        # Table XI: each side's page means over the baseline's. A side is a run or runs pooled
        # (`A+B`, or ticked seeds with pool=seeds), the baseline the oldest side unless ?baseline=.
        try:
            req = forms.compare_request(request.args)
        except ValueError as exc:
            abort(400, description=str(exc))
        store = _store()
        sides, base = _compare_sides(store, req)
        others = [s for s in sides if s is not base]
        try:
            table = compare_mod.compare(store, [base["spec"], *(s["spec"] for s in others)], req.realtime_only)
        except KeyError as exc:
            abort(404, description=exc.args[0])
        except ValueError as exc:  # runs of different scenarios pooled, or transfer runs
            abort(400, description=str(exc))
        return render_template("compare.html", cmp=table, sides=sides, base=base, oldest=sides[0],
                               specs=[s["spec"] for s in sides], realtime_only=req.realtime_only,
                               paper_views=papers.views_of(store, base["spec"], {"compare": table}, "compare"))

    @app.get("/pooled")
    def pooled_view():
        # Runs of one scenario (seeds) pooled per sweep point, each point against one (results/contrast.py).
        try:
            ids = forms.run_ids(request.args.getlist("run"))
            base = forms.point_index(request.args.get("against"))
        except ValueError as exc:
            abort(400, description=str(exc))
        if not ids:
            abort(400, description="tick one or more runs of one scenario on the runs page")
        realtime_only = request.args.get("realtime_only") == "1"
        try:
            rep = pooled_mod.pooled_runs_report(_store(), ids, realtime_only)
        except KeyError as exc:
            abort(404, description=exc.args[0])
        except ValueError as exc:
            abort(400, description=str(exc))
        against, note = None, None
        if len(rep["points"]) > 1:
            try:
                against = contrast_mod.against(rep, base)
            except ValueError as exc:
                note = str(exc)
        return render_template("pooled.html", rep=rep, ids=ids, base=base, realtime_only=realtime_only,
                               loss=report_mod.loss_table(rep), against=against, note=note)

    @app.get("/study")
    def study_view():
        # The CATNIP gap study over its seeds (papers/catnip/study.py): one run per seed of a study scenario.
        # A study that cannot be shown says why on the study page itself, with what it takes.
        def refused(status: int, reason: str, ids: list[str] = ()):
            return render_template("study.html", error=reason, status=status, ids=list(ids), table=None,
                                   rep=None, rows={}), status
        try:
            ids = forms.run_ids(request.args.getlist("run"))
        except ValueError as exc:
            return refused(400, str(exc))
        if not ids:
            return refused(400, "tick the runs of a study scenario (one per seed) on the runs page")
        if len(ids) > MAX_STUDY_RUNS:
            return refused(400, f"{len(ids)} runs: a study page takes at most {MAX_STUDY_RUNS}", ids)
        try:
            table = layouts.build("catnip-study", _store(), *ids)
        except KeyError as exc:
            return refused(404, str(exc.args[0]), ids)
        except layouts.LayoutError as exc:
            return refused(400, str(exc), ids)
        return render_template("study.html", table=table, rep=table.source, ids=ids, error=None,
                               rows={(r["context"], r["scheme"], r["side"]): r for r in table.records()},
                               paper_views=papers.views_of(_store(), ids[0], {"study": table.source}, "study"))


def _register_service(app: Flask) -> None:
    """The bundled Plotly and the health check."""
    @app.get("/static/vendor/plotly.min.js")
    def plotly_js():
        # The plotly package ships its own bundle: the dashboard works offline, no CDN.
        import plotly
        return send_file(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", max_age=86400)

    @app.get("/healthz")
    def healthz():
        # Ok only if the pages can read runs: the database opens as they open it (schema
        # version and migrations included) and its runs table answers.
        db = app.config["CATNIP_DB"]
        try:
            with Store(db) as store:
                runs = store.db.execute("SELECT count(*) FROM runs").fetchone()[0]
        except (sqlite3.Error, OSError, StoreVersionError) as exc:
            return jsonify(ok=False, database=str(db), error=f"cannot open the database: {exc}"), 503
        return jsonify(ok=True, database=str(db), runs=runs, active_jobs=len(_queue().active()))


def _register_filters(app: Flask) -> None:
    """Template helpers."""
    # A ratio is coloured faster/slower only where its 95% interval leaves out 1.00 (compare, pooled).
    app.jinja_env.globals["ratio_verdict"] = compare_mod.verdict
    app.jinja_env.filters["code_spans"] = scenario_guide.code_spans  # `x` in descriptions as <code>x</code>

    @app.template_filter("pct")
    def pct(v: Any, digits: int = 2) -> str:
        return "-" if v is None else f"{100 * v:.{digits}f}%"

    @app.template_filter("num")
    def num(v: Any, digits: int = 3) -> str:
        return "-" if v is None else f"{v:.{digits}f}"

    @app.template_filter("sig")
    def sig(v: Any, digits: int = 4) -> str:
        # Application metrics span units (s, bit/s, B): significant digits, as `catnip report --apps`.
        return "-" if v is None else format(v, f".{digits}g")

    @app.template_filter("bound")
    def bound(v: float) -> str:
        # An interval's end, with digits enough to stay on its side of 1.00: a cell coloured
        # because its interval clears 1.00 never shows an end of "1.00".
        for digits in range(2, 7):
            text = f"{v:.{digits}f}"
            if (float(text) > 1, float(text) < 1) == (v > 1, v < 1):
                break
        return text

    @app.template_filter("when")
    def when(ts: float | None) -> str:
        # A time a database filled before imports were checked may hold anything: shown, not a 500.
        if not _is_time(ts) or not ts:
            return "-" if not ts else str(ts)[:40]
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _event_stream(db: Path, queue: RunQueue, run_id: str, poll: float, limit: float,
                  stopping: threading.Event) -> Iterator[str]:
    """Server-sent events: the run's progress and new bottleneck samples every `poll` seconds,
    then an `end` event once the run is over; nothing more once the server is `stopping`."""
    store = Store(db)
    last: dict[int, Any] = {}
    last_progress: dict[int, float] = {}
    clocks: dict[int, timebase.PointClock] = {}
    started = time.monotonic()
    first = True
    try:
        while time.monotonic() - started < limit and not stopping.is_set():
            job = queue.get(run_id)
            run = store.run(run_id)
            if run is not None and run["status"] == "running" and recover.close_abandoned_runs(store):
                run = store.run(run_id)  # its runner was killed mid-run: the stream ends too
            series = {}
            points = _point_summaries(store, run_id) if run is not None else []
            for p in points:
                n = p["point"]
                if n not in clocks or not clocks[n].anchored:
                    clocks[n] = timebase.clock_of(store.point(run_id, n))
                if not clocks[n].recorded and p["status"] == "running":
                    continue  # its clock anchor comes with its environment, before the workload: held till then
                prog = store.progress(run_id, n, last_progress.get(n))
                s = figures.bottleneck_series(store.queue_samples(run_id, n, (last.get(n) or {}).get("t")),
                                              prog, last.get(n), origin=clocks[n])
                last[n] = s.pop("last")
                if prog:
                    last_progress[n] = prog[-1]["t"]
                series[n] = s
            status = run["status"] if run is not None else (job.state if job else "unknown")
            # The first event carries the whole history (the page replaces its charts), later ones extend.
            payload = {"status": status, "job": job.to_dict() if job else None, "points": points, "series": series,
                       "reset": first}
            first = False
            yield f"event: update\ndata: {json.dumps(payload)}\n\n"
            job_live = job is not None and job.state in LIVE
            if not job_live and (run is None or run["status"] != "running"):
                yield f"event: end\ndata: {json.dumps({'status': status})}\n\n"
                return
            stopping.wait(poll)
    finally:
        store.close()
