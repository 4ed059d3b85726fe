"""Repetitions pooled: one Table II-layout table per sweep assignment over all its repetitions
(`run.repetitions`, seeds seed + 1000 * rep), with bottleneck loss summed over them.

A repetition counts only if its point finished (`done`); with `realtime_only`, repetitions whose
point did not keep real time are left out as well, and both kinds of exclusion are counted, so a
pooled mean never silently mixes in runs the emulation could not keep exact.
"""

from __future__ import annotations

import json
from typing import Any

from controller.scenario import point_label
from results.report import _fmt, _page_row, loss_summary
from results.store import Store
from workloads.pages import catnip_pages


def _find(store: Store, run_id: str):
    run = store.find_run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id!r} in {store.path} (see `catnip list`)")
    return run


def _groups(store: Store, runs: list, realtime_only: bool) -> list[dict[str, Any]]:
    """The points of `runs` grouped by sweep assignment, in order of first appearance; each group
    lists its members as (run id, point) and what it left out, and pools their pages and loss."""
    groups: dict[str, dict[str, Any]] = {}
    for run in runs:
        for pt in store.points(run["id"]):
            key = json.dumps(json.loads(pt["assignment"]), sort_keys=True)
            g = groups.setdefault(key, {"assignment": json.loads(pt["assignment"]), "members": [], "real_time": [],
                                        "excluded_not_done": [], "excluded_not_real_time": []})
            member = (run["id"], pt["point"])
            if pt["status"] != "done":
                g["excluded_not_done"].append(member)
            elif realtime_only and not pt["realtime_ok"]:  # unknown (None) is not known to be real time
                g["excluded_not_real_time"].append(member)
            else:
                g["members"].append(member)
                g["real_time"].append(pt["realtime_ok"])
    for g in groups.values():
        durations: dict[int, list[float]] = {}
        failed: dict[int, int] = {}
        stats = []
        for run_id, point in g["members"]:
            for p in store.pages(run_id, point):
                if p["error"]:
                    failed[p["page"]] = failed.get(p["page"], 0) + 1
                else:
                    durations.setdefault(p["page"], []).append(p["duration"])
            stats.extend(store.link_stats(run_id, point))
        g["table"] = [_page_row(page, durations.get(page.number, []), failed.get(page.number, 0))
                      for page in catnip_pages() if page.number in durations or page.number in failed]
        g["loss"] = loss_summary(stats)
        g["label"] = point_label(g["assignment"], "single point")
    return list(groups.values())


def pooled_report(store: Store, run_id: str, realtime_only: bool = False) -> dict[str, Any]:
    run = _find(store, run_id)
    out = []
    for g in _groups(store, [run], realtime_only):
        out.append({"assignment": g["assignment"], "label": g["label"], "table": g["table"],
                    "points": [p for _, p in g["members"]],
                    "excluded_not_done": [p for _, p in g["excluded_not_done"]],
                    "excluded_not_real_time": [p for _, p in g["excluded_not_real_time"]],
                    "bottleneck": g["loss"].get("bottleneck-data")})
    return {"run_id": run["id"], "name": run["name"], "realtime_only": realtime_only, "groups": out}


def pooled_runs_report(store: Store, run_ids: list[str], realtime_only: bool = False) -> dict[str, Any]:
    """Several runs of one scenario (e.g. with different seeds) as one: a point per sweep
    assignment over every run's points with it, in the shape of `results.report.run_report` so
    Table XI (`results.compare`) can divide by it. A point keeps real time only if all it pools
    did. Raises KeyError for an unknown run, ValueError for no runs or runs of different scenarios."""
    runs = [_find(store, r) for r in run_ids]
    if not runs:
        raise ValueError("no runs to pool")
    names = sorted({r["name"] for r in runs})
    if len(names) > 1:
        raise ValueError(f"runs of different scenarios cannot be pooled: {', '.join(names)}")
    points = []
    for i, g in enumerate(_groups(store, runs, realtime_only)):
        flags = g["real_time"]
        # Kept real time only if every pooled point did; unknown if any is unknown.
        realtime_ok = None if not flags or None in flags else all(map(bool, flags))
        points.append({"point": i, "rep": 0, "assignment": g["assignment"], "table": g["table"], "loss": g["loss"],
                       "realtime_ok": realtime_ok,
                       "members": g["members"], "excluded_not_done": g["excluded_not_done"],
                       "excluded_not_real_time": g["excluded_not_real_time"]})
    status = "done" if all(r["status"] == "done" for r in runs) else "incomplete"
    return {"run_id": "+".join(r["id"] for r in runs), "name": runs[0]["name"], "status": status, "points": points}


def render_text(report: dict[str, Any]) -> str:
    out = [f"Run {report['run_id']} ({report['name']}): repetitions pooled per sweep point"
           + (", only repetitions that kept real time" if report["realtime_only"] else "")]
    for g in report["groups"]:
        out.append("")
        out.append(f"{g['label']}: {len(g['points'])} repetition(s) pooled (points {g['points']})")
        if g["excluded_not_done"]:
            out.append(f"  left out, did not finish: points {g['excluded_not_done']}")
        if g["excluded_not_real_time"]:
            out.append(f"  left out, real time not kept: points {g['excluded_not_real_time']}")
        if not g["table"]:
            continue
        out.append(f"  {'Page':>4} {'N':>5} {'Min':>7} {'Median':>7} {'Max':>7} {'Mean':>7} {'+-95%':>6}"
                   f" {'SDev':>7} {'Fail':>4}")
        for r in g["table"]:
            out.append(f"  {r['page']:>4} {r['n']:>5} {_fmt(r.get('min')):>7} {_fmt(r.get('median')):>7}"
                       f" {_fmt(r.get('max')):>7} {_fmt(r.get('mean')):>7} {_fmt(r.get('ci95')):>6}"
                       f" {_fmt(r.get('sdev')):>7} {r['failed']:>4}")
        b = g["bottleneck"]
        if b:
            out.append(f"  Bottleneck loss: {100 * b['loss']:.2f}% ({b['dropped']} of {b['arrived']} packets)"
                       + "".join(f", {name} {100 * c['loss']:.2f}%" for name, c in sorted(b["by_class"].items())))
    return "\n".join(out)
