"""The CATNIP gap study (docs/reproduction.md, "The gap, factor by factor"): runs of
scenarios/catnip-study-sim.yaml or catnip-study-wan.yaml, one per seed, read as one table.

Each point of those scenarios is a `scheme` (one TCP or workload factor set toward the paper's,
`iw`, or all of them, `period`, or all but one, `period-iw`) on one side: FIFO (DropTail, or the
WAN table's baseline `base-*`) or CATNIP (CATNIP-Good routers, or partial SPM `spm-*`), in one
context (the other sweep values: Table XI's router buffer). Per point and seed:

* the bottleneck's loss, in all and for high (AF11) and low priority (CATNIP Tables IV, VII, X);
* its page times relative to the same side's `today` point of the same context and seed (the mean
  over pages of the per-page mean ratio, as Table XI's Mean row: results/compare.py);
* on the CATNIP side, its page times relative to the FIFO side's point of the same scheme (Table
  XI's own ratio, under that scheme's TCP).

Over seeds: the mean and Student-t 95% interval of each. A seed's point counts only if it
finished (`done`) and kept real time; a ratio also needs its reference point to; what was left
out is counted per row. Whether the factors add up: per context and side, the sum of each factor's
change of loss alone against the change of all of them together (`period` against `today`).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from catnip.results import report as report_mod
from catnip.results.samples import ci95
from catnip.results.store import Store

SIDES = ("fifo", "catnip")
SIDE_PREFIX = {"base-": "fifo", "spm-": "catnip"}  # catnip-study-wan.yaml's scheme names
TODAY, PERIOD = "today", "period"
METRICS = ("loss", "high_loss", "low_loss", "page_mean", "vs_today", "vs_fifo")


class NoStudy(ValueError):
    """Runs that are not seeds of one study scenario."""


@dataclass(frozen=True)
class Estimate:
    value: float | None
    ci95: float | None
    n: int


def estimate(values: Sequence[float | None]) -> Estimate:
    """Mean and Student-t 95% half-width over seeds (none from one seed)."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return Estimate(None, None, 0)
    return Estimate(statistics.fmean(vals), ci95(statistics.stdev(vals), len(vals)) if len(vals) > 1 else None,
                    len(vals))


@dataclass(frozen=True)
class Key:
    context: str   # the other sweep values, e.g. "topology.bottleneck.buffer=64KB" ("" when none)
    factor: str    # the scheme without its side prefix: today, iw, ..., period, period-iw
    side: str      # fifo | catnip


@dataclass
class Row:
    key: Key
    seeds: list[int] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)   # "seed 2: not real time", ...
    est: dict[str, Estimate] = field(default_factory=dict)


@dataclass
class StudyReport:
    name: str
    run_ids: list[str]
    rows: list[Row]
    notes: list[str]
    loss_by_seed: dict[int, dict[Key, float]] = field(default_factory=dict)  # the points that count

    def row(self, context: str, factor: str, side: str) -> Row | None:
        return next((r for r in self.rows if r.key == Key(context, factor, side)), None)

    @property
    def contexts(self) -> list[str]:
        return list(dict.fromkeys(r.key.context for r in self.rows))

    @property
    def factors(self) -> list[str]:
        return list(dict.fromkeys(r.key.factor for r in self.rows))


def _side(assignment: dict[str, Any]) -> tuple[str, str]:
    """(side, factor) of a point: the scheme's prefix (WAN), else the router policy (sim)."""
    scheme = str(assignment.get("scheme", ""))
    for prefix, side in SIDE_PREFIX.items():
        if scheme.startswith(prefix):
            return side, scheme[len(prefix):]
    policy = assignment.get("router.policy")
    kind = policy.get("kind") if isinstance(policy, dict) else policy
    return ("catnip" if str(kind or "").startswith("catnip") else "fifo"), scheme


def _context(assignment: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(assignment.items()) if k not in ("scheme", "router.policy"))


def _page_ratio(mine: dict[int, float], ref: dict[int, float]) -> float | None:
    """Mean over the pages both have of mine / ref (Table XI's Mean row)."""
    ratios = [mine[p] / ref[p] for p in mine if ref.get(p)]
    return statistics.fmean(ratios) if ratios else None


def applies(store: Store, run_id: str) -> bool:
    """A run of a study scenario with both ends (`today` and `period`), whose table stands alone."""
    schemes = {_side(json.loads(p["assignment"]))[1] for p in store.points(run_id)}
    return {TODAY, PERIOD} <= schemes


def study(store: Store, run_ids: Sequence[str]) -> StudyReport:
    """The study over its seeds (a run each, or several runs of a seed with other points). Raises KeyError for an unknown run, NoStudy for
    runs that are not one study scenario's seeds."""
    if not run_ids:
        raise NoStudy("choose the runs of a study scenario (one per seed)")
    reports, names = [], set()
    for rid in run_ids:
        run = store.find_run(rid)
        if run is None:
            raise KeyError(f"no run {rid!r} in {store.path} (see `catnip list`)")
        rep = report_mod.run_report(store, run["id"])
        reports.append(rep)
        names.add(rep["name"])
    if len(names) > 1:
        raise NoStudy(f"runs of different scenarios ({', '.join(sorted(names))}): a study pools the seeds of one")
    schemes = {_side(p["assignment"])[1] for r in reports for p in r["points"]}
    if not {TODAY, PERIOD} <= schemes:
        raise NoStudy(f"{reports[0]['name']} is not a study scenario: its points need schemes '{TODAY}' and"
                      f" '{PERIOD}' (scenarios/catnip-study-sim.yaml, catnip-study-wan.yaml)")
    # Per seed: every point's values, and whether it counts. A seed may come in several runs
    # (`catnip run --only` runs a study in parts), each point of it once; a point that did not
    # finish or keep real time may be run again in a later run, which then stands for it.
    seeds: dict[int, dict[Key, dict[str, Any]]] = {}
    where: dict[tuple[int, Key], str] = {}
    order: list[Key] = []
    replaced: list[str] = []
    for rep in reports:
        loss = {r["point"]: r for r in report_mod.loss_table(rep)}
        for p in rep["points"]:
            seed = rep["seed"] + 1000 * p["rep"]  # the point's own seed (controller/point_plan.py PointPlan.seed)
            points = seeds.setdefault(seed, {})
            side, factor = _side(p["assignment"])
            key = Key(_context(p["assignment"]), factor, side)
            if key not in order:
                order.append(key)
            why = ("not finished" if p["status"] != "done" else
                   "not real time" if not p["realtime_ok"] else None)
            if (seed, key) in where:
                old = points[key]["why"]
                if old is None and why is None:  # it would count twice
                    raise NoStudy(f"runs {where[seed, key]} and {rep['run_id']} both have seed {seed}'s"
                                  f" point {p['assignment']} in real time: give each seed's point once")
                if old is None or why == "not finished":
                    continue  # the one that counts, or the one that finished, stands
                replaced.append(f"seed {seed} {key.side} {key.factor}" + (f" ({key.context})" if key.context else "")
                                + f": run {rep['run_id']} stands for run {where[seed, key]}'s point ({old})")
            where[seed, key] = rep["run_id"]
            means = {r["page"]: r["mean"] for r in p["table"] if r.get("mean") is not None}
            lr = loss.get(p["point"], {})
            points[key] = {"why": why, "means": means, "loss": lr.get("loss"), "high_loss": lr.get("high_loss"),
                           "low_loss": lr.get("low_loss"),
                           "page_mean": statistics.fmean(means.values()) if means else None}
    per_seed = sorted(seeds.items())

    rows = [_row(key, per_seed) for key in order]
    rep = StudyReport(reports[0]["name"], [r["run_id"] for r in reports], rows, [])
    rep.loss_by_seed = {seed: {k: v["loss"] for k, v in points.items() if not v["why"] and v["loss"] is not None}
                        for seed, points in per_seed}
    rep.notes = additivity(rep) + [f"{r.key.side} {r.key.factor}"
                                   + (f" ({r.key.context})" if r.key.context else "")
                                   + f" left out: {'; '.join(r.left_out)}" for r in rows if r.left_out] + replaced
    return rep


def _row(key: Key, per_seed: list[tuple[int, dict[Key, dict[str, Any]]]]) -> Row:
    """One row of the study: the point's metrics over the seeds where it counts, and its page-time
    ratios against today's point and against the same factor under FIFO, per seed."""
    row, values = Row(key), {m: [] for m in METRICS}
    for seed, points in per_seed:
        me = points.get(key)
        if me is None:
            row.left_out.append(f"seed {seed}: no such point")
            continue
        if me["why"]:
            row.left_out.append(f"seed {seed}: {me['why']}")
            continue
        row.seeds.append(seed)
        for m in ("loss", "high_loss", "low_loss", "page_mean"):
            values[m].append(me[m])
        for metric, ref_key in (("vs_today", Key(key.context, TODAY, key.side)),
                                ("vs_fifo", Key(key.context, key.factor, "fifo"))):
            if metric == "vs_fifo" and key.side == "fifo":
                continue
            ref = points.get(ref_key)
            if ref is not None and not ref["why"]:
                values[metric].append(_page_ratio(me["means"], ref["means"]))
    row.est = {m: estimate(v) for m, v in values.items()}
    return row


def additivity(rep: StudyReport) -> list[str]:
    """Per context and side: each factor's change of loss alone (X - today), their sum, and the
    change with all of them (period - today); and each factor's contribution to the period set
    (period - period-X). Every difference is taken within a seed, between points that both kept
    real time, then averaged over the seeds that have it (n beside it)."""
    out = []
    singles = [f for f in rep.factors if f not in (TODAY, PERIOD) and not f.startswith(PERIOD + "-")]

    def diff(ctx: str, side: str, a: str, b: str) -> tuple[float, int] | None:
        ds = [loss[Key(ctx, a, side)] - loss[Key(ctx, b, side)] for loss in rep.loss_by_seed.values()
              if Key(ctx, a, side) in loss and Key(ctx, b, side) in loss]
        return (statistics.fmean(ds), len(ds)) if ds else None

    def text(parts: dict[str, tuple[float, int]]) -> str:
        return ", ".join(f"{f} {100 * d:+.2f} (n={n})" for f, (d, n) in parts.items())

    for ctx in rep.contexts:
        for side in SIDES:
            total = diff(ctx, side, PERIOD, TODAY)
            if total is None:
                continue
            alone = {f: d for f in singles if (d := diff(ctx, side, f, TODAY))}
            removed = {f: d for f in singles if (d := diff(ctx, side, PERIOD, f"{PERIOD}-{f}"))}
            where = f"{side}{f' at {ctx}' if ctx else ''}"
            line = (f"{where}: every period factor changes the loss by {100 * total[0]:+.2f} points"
                    f" (n={total[1]})")
            if alone:
                line += (f"; the factors alone add up to {100 * sum(d for d, _ in alone.values()):+.2f}"
                         f" ({text(alone)})")
            if removed:
                line += (f"; taken out of the period set one at a time, their contributions add up to"
                         f" {100 * sum(d for d, _ in removed.values()):+.2f} ({text(removed)})")
            out.append(line)
    return out


def _est(e: Estimate | None, pct: bool) -> str:
    if e is None or e.value is None:
        return "-"
    if pct:
        return f"{100 * e.value:.2f}" + (f"±{100 * e.ci95:.2f}" if e.ci95 is not None else "")
    return f"{e.value:.2f}" + (f"±{e.ci95:.2f}" if e.ci95 is not None else "")


def render_text(rep: StudyReport) -> str:
    """One block per context: a row per scheme, FIFO and CATNIP side by side."""
    out = [f"CATNIP gap study {rep.name}: {', '.join(rep.run_ids)}",
           "Loss in % at the bottleneck; page times relative to the same side's 'today' point, and"
           " CATNIP's relative to FIFO's under the same scheme (Table XI's ratio); mean ±95% over seeds.", ""]
    heads = ["scheme", "seeds", "FIFO loss", "CATNIP loss", "high", "low", "FIFO/today", "CATNIP/today",
             "CATNIP/FIFO"]
    for ctx in rep.contexts:
        if ctx:
            out.append(ctx)
        cells = []
        for factor in rep.factors:
            f, c = rep.row(ctx, factor, "fifo"), rep.row(ctx, factor, "catnip")
            if f is None and c is None:
                continue
            ge = (lambda r, m: r.est.get(m) if r else None)
            seeds = f"{len(f.seeds) if f else 0}/{len(c.seeds) if c else 0}"
            cells.append([factor, seeds, _est(ge(f, "loss"), True), _est(ge(c, "loss"), True),
                          _est(ge(c, "high_loss"), True), _est(ge(c, "low_loss"), True),
                          _est(ge(f, "vs_today"), False), _est(ge(c, "vs_today"), False),
                          _est(ge(c, "vs_fifo"), False)])
        widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(heads)]
        out.append("  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(heads, widths))))
        out += ["  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))) for r in cells]
        out.append("")
    out += rep.notes
    return "\n".join(out).rstrip() + "\n"
