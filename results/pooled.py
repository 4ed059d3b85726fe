"""Repetitions pooled: one Table II-layout table per sweep assignment over all its repetitions
(`run.repetitions`, seeds seed + 1000 * rep) and over several runs of one scenario (e.g. `--seed 2`
and `--seed 3`), with bottleneck loss summed over them.

A repetition counts only if its point finished (`done`); with `realtime_only`, repetitions whose
point did not keep real time are left out as well, and both kinds of exclusion are counted, so a
pooled mean never silently mixes in runs the emulation could not keep exact.
"""

from __future__ import annotations

import json
from typing import Any

from catnip.results.labels import label_of
from catnip.results.report import fmt_seconds, page_row, loss_summary
from catnip.results.store import Store
from catnip.workloads.pages import catnip_pages


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
            if key not in groups:  # labelled by its first point (results/labels.py)
                groups[key] = {"assignment": json.loads(pt["assignment"]), "label": label_of(run, pt), "members": [],
                               "real_time": [], "seeds": [], "excluded_not_done": [], "excluded_not_real_time": []}
            g = groups[key]
            member = (run["id"], pt["point"])
            if pt["status"] != "done":
                g["excluded_not_done"].append(member)
            elif realtime_only and not pt["realtime_ok"]:  # unknown (None) is not known to be real time
                g["excluded_not_real_time"].append(member)
            else:
                g["members"].append(member)
                g["real_time"].append(pt["realtime_ok"])
                g["seeds"].append(pt["seed"])
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
        g["table"] = [page_row(page, durations.get(page.number, []), failed.get(page.number, 0))
                      for page in catnip_pages() if page.number in durations or page.number in failed]
        g["loss"] = loss_summary(stats)
    return list(groups.values())


def pooled_runs_report(store: Store, run_ids: list[str], realtime_only: bool = False) -> dict[str, Any]:
    """Several runs of one scenario (e.g. with different seeds) as one: a point per sweep
    assignment over every run's points with it, in the shape of `results.report.run_report` so
    Table XI (`results.compare`) can divide by it. A point keeps real time only if all it pools
    did. Raises KeyError for an unknown run, ValueError for no runs or runs of different scenarios."""
    runs = [_find(store, r) for r in run_ids]
    if not runs:
        raise ValueError("no runs to pool")
    ids = [r["id"] for r in runs]
    if len(set(ids)) != len(ids):  # a prefix and the full id: its pages would count twice
        raise ValueError(f"{'+'.join(run_ids)} names run {next(i for i in ids if ids.count(i) > 1)} twice")
    kinds = {json.loads(r["scenario"]).get("kind") for r in runs}
    if "transfers" in kinds:
        raise ValueError("transfer measurements have no pages to pool: `catnip model validate RUN` reports them")
    names = sorted({r["name"] for r in runs})
    if len(names) > 1:
        raise ValueError(f"runs of different scenarios cannot be pooled: {', '.join(names)}")
    differ = settings_differences(runs)
    if differ:  # e.g. one run with --set tcp.profile=modern: not seeds of one experiment
        raise ValueError(f"runs {', '.join(ids)} cannot be pooled: they differ in more than the seed"
                         f" ({', '.join(differ[:5])}{', ...' if len(differ) > 5 else ''})")
    engines = _engines(runs)
    if len(engines) > 1:  # a fix in between changes what the runs measured: not one experiment's seeds
        raise ValueError(f"runs {', '.join(ids)} cannot be pooled: they ran different queue engines ("
                         + "; ".join(f"{h[:12]}: {', '.join(rs)}" for h, rs in sorted(engines.items()))
                         + "); run the older seeds again with this engine")
    points = []
    for i, g in enumerate(_groups(store, runs, realtime_only)):
        flags = g["real_time"]
        # Kept real time only if every pooled point did; unknown if any is unknown.
        realtime_ok = None if not flags or None in flags else all(map(bool, flags))
        points.append({"point": i, "rep": 0, "assignment": g["assignment"], "label": g["label"],
                       "table": g["table"], "loss": g["loss"],
                       "realtime_ok": realtime_ok,
                       "members": g["members"], "excluded_not_done": g["excluded_not_done"],
                       # The same seed twice replays the same random choices: not independent samples.
                       "repeated_seeds": sorted({x for x in g["seeds"] if g["seeds"].count(x) > 1}),
                       "excluded_not_real_time": g["excluded_not_real_time"]})
    status = "done" if all(r["status"] == "done" for r in runs) else "incomplete"
    return {"run_id": "+".join(r["id"] for r in runs), "name": runs[0]["name"], "status": status,
            "realtime_only": realtime_only, "runs": [r["id"] for r in runs], "points": points}


def _engines(runs) -> dict[str, list[str]]:
    """The queue engine builds the runs ran (the binary's SHA-256 each run stores in `versions`),
    with the runs of each; a run that stored none is left out."""
    found: dict[str, list[str]] = {}
    for r in runs:
        sha = json.loads(r["versions"] or "{}").get("engine_sha256")
        if sha:
            found.setdefault(sha, []).append(r["id"])
    return found


def members_text(members: list[tuple[str, int]], runs: list[str]) -> str:
    """`points [0, 2]` for one run; `r1 points [0], r2 points [0]` for several."""
    by_run: dict[str, list[int]] = {}
    for run_id, point in members:
        by_run.setdefault(run_id, []).append(point)
    if len(runs) == 1:
        return f"points {by_run.get(runs[0], [])}"
    return ", ".join(f"{run_id} points {pts}" for run_id, pts in by_run.items())


def render_text(report: dict[str, Any]) -> str:
    runs = report["runs"]
    what = "repetitions pooled per sweep point" if len(runs) == 1 else \
        f"{len(runs)} runs and their repetitions pooled per sweep point"
    out = [f"Run {report['run_id']} ({report['name']}): {what}"
           + (", only repetitions that kept real time" if report["realtime_only"] else "")]
    for g in report["points"]:
        out.append("")
        out.append(f"#{g['point']} {g['label']}: {len(g['members'])} repetition(s) pooled"
                   f" ({members_text(g['members'], runs)})")
        if g["repeated_seeds"]:
            out.append(f"  warning: seed(s) {g['repeated_seeds']} pooled more than once; runs with the same seed"
                       " replay the same random choices, so their pages are not independent samples")
        if g["excluded_not_done"]:
            out.append(f"  left out, did not finish: {members_text(g['excluded_not_done'], runs)}")
        if g["excluded_not_real_time"]:
            out.append(f"  left out, real time not kept: {members_text(g['excluded_not_real_time'], runs)}")
        if not g["table"]:
            continue
        out.append(f"  {'Page':>4} {'N':>5} {'Min':>7} {'Median':>7} {'Max':>7} {'Mean':>7} {'+-95%':>6}"
                   f" {'SDev':>7} {'Fail':>4}")
        for r in g["table"]:
            out.append(f"  {r['page']:>4} {r['n']:>5} {fmt_seconds(r.get('min')):>7} {fmt_seconds(r.get('median')):>7}"
                       f" {fmt_seconds(r.get('max')):>7} {fmt_seconds(r.get('mean')):>7} {fmt_seconds(r.get('ci95')):>6}"
                       f" {fmt_seconds(r.get('sdev')):>7} {r['failed']:>4}")
        b = g["loss"].get("bottleneck-data")
        if b:
            out.append(f"  Bottleneck loss: {100 * b['loss']:.2f}% ({b['dropped']} of {b['arrived']} packets)"
                       + "".join(f", {name} {100 * c['loss']:.2f}%" for name, c in sorted(b["by_class"].items())))
    return "\n".join(out)


# Settings of how this machine runs a point, not of the experiment: runs that differ in them are
# still seeds of one experiment. run.keep_awake only keeps idle CPUs from halting (docs/fidelity.md),
# so a point re-run with it after missing real time pools with the run it replaces.
MACHINE_ONLY = frozenset({"run.keep_awake"})


def run_settings(run) -> dict[str, Any]:
    """What a run ran but its seed, its sweep and MACHINE_ONLY, by dotted setting: its scenario
    with the overrides applied. Runs that agree on it are seeds of one experiment (their points
    pool by sweep assignment; the dashboard's pool=seeds merges them)."""
    scenario = {k: v for k, v in json.loads(run["scenario"] or "{}").items() if k not in ("seed", "sweep")}
    return {k: v for k, v in _flat(scenario).items() if k not in MACHINE_ONLY}


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {k: v for key, sub in value.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def settings_differences(runs) -> list[str]:
    """The dotted settings (run_settings) on which runs disagree."""
    flats = [run_settings(r) for r in runs]
    keys = sorted({k for f in flats for k in f})
    return [k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flats}) > 1]
