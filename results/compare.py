"""Comparison of runs in the layout of CATNIP Table XI: per-page mean download time of a run
relative to a baseline run (values below 1.0 favour the compared run), with the Mean and StdDev
of the relative values over the pages and the bottleneck's packet loss (CATNIP section V-F,
Table XI: CATNIP-Good relative to default Linux TCP with FIFO routers, per router buffer size).
"""

from __future__ import annotations

import statistics
from typing import Any

from catnip.results.pooled import pooled_runs_report
from catnip.results.report import point_name, run_report
from catnip.results.samples import half_width, ratio_parts
from catnip.results.store import Store


def _match(point: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any] | None:
    """The baseline point to divide by: same sweep values (and repetition), else same sweep
    values, else a single-point baseline, else the point with the same index."""
    pts = baseline["points"]
    for b in pts:
        if b["assignment"] == point["assignment"] and b["rep"] == point["rep"]:
            return b
    for b in pts:
        if b["assignment"] == point["assignment"]:
            return b
    if len(pts) == 1:
        return pts[0]
    return next((b for b in pts if b["point"] == point["point"]), None)


def _means(point: dict[str, Any] | None) -> dict[int, float]:
    return {r["page"]: r["mean"] for r in (point or {}).get("table", []) if r.get("mean") is not None}


def rel_var(row: dict[str, Any]) -> float | None:
    """Squared coefficient of variation of a page mean: sdev^2 / (n mean^2); None without a spread."""
    return row["sdev"] ** 2 / (row["n"] * row["mean"] ** 2) if row.get("mean") and row.get("n", 0) > 1 else None


def _rel_var(point: dict[str, Any] | None) -> dict[int, tuple[float, int]]:
    """Per page: (squared coefficient of variation of its mean, number of pages averaged)."""
    return {r["page"]: (v, r["n"]) for r in (point or {}).get("table", []) if (v := rel_var(r)) is not None}


def _loss(point: dict[str, Any] | None) -> float | None:
    data = (point or {}).get("loss", {}).get("bottleneck-data")
    return data["loss"] if data else None


def verdict(value: float | None, ci95: float | None, lower_is_better: bool = True) -> str | None:
    """'better' or 'worse' only when the 95% interval value +- ci95 lies wholly on one side of 1.00
    (no change); None when it includes 1.00 or there is no interval (a side measured once). For a
    ratio of times lower is better."""
    if value is None or ci95 is None:
        return None
    if value + ci95 < 1:
        return "better" if lower_is_better else "worse"
    if value - ci95 > 1:
        return "worse" if lower_is_better else "better"
    return None


def split_run_ids(spec: str) -> list[str]:
    ids = spec.split("+")
    if not all(ids):
        raise ValueError(f"{spec!r}: join run ids with single '+' signs, e.g. RUN1+RUN2")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{spec!r} names a run twice: its pages would count twice")
    return ids


def _excluded(reports: list[dict[str, Any]], why: str) -> list[dict[str, Any]]:
    """The pooled points the reports left out for `why`, each with its run and sweep label."""
    return [{"run_id": r["run_id"], "label": point_name(r, p), "member": m}
            for r in reports for p in r["points"] for m in p.get(why, [])]


def compare(store: Store, run_ids: list[str], realtime_only: bool = False) -> dict[str, Any]:
    """The first run is the baseline; every point of every other run gets a column. A run may be
    several run ids joined by '+' (the same scenario with other seeds). When any is, or with
    `realtime_only`, every run's points are pooled per sweep point (results/pooled.py), and the
    points left out (not finished, or not in real time) are listed.
    Raises KeyError naming an unknown run, ValueError for fewer than two runs or a bad '+' list."""
    if len(run_ids) < 2:
        raise ValueError("choose at least two runs: the first is the baseline")
    specs = [split_run_ids(r) for r in run_ids]
    pooled = realtime_only or any(len(ids) > 1 for ids in specs)
    if pooled:
        reports = [pooled_runs_report(store, ids, realtime_only) for ids in specs]
    else:
        reports = [run_report(store, ids[0]) for ids in specs]
    return compare_reports(reports, realtime_only, pooled)


def compare_reports(reports: list[dict[str, Any]], realtime_only: bool = False, pooled: bool = False) -> dict[str, Any]:
    """`compare` of reports already made (run_report's or pooled ones): the first is the baseline.
    A baseline narrowed to one of its points compares every point of a run against that one."""
    baseline = reports[0]
    pages: dict[int, dict[str, Any]] = {}
    for rep in reports:
        for p in rep["points"]:
            for r in p["table"]:
                pages.setdefault(r["page"], {"page": r["page"], "conns": r["conns"], "bytes": r["bytes"]})
    columns = []
    for rep in reports[1:]:
        for p in rep["points"]:
            base = _match(p, baseline)
            mine, theirs = _means(p), _means(base)
            relative = {page: mine[page] / theirs[page] for page in mine if theirs.get(page)}
            va, vb = _rel_var(p), _rel_var(base)
            parts = {page: ratio_parts(r, *va[page], *vb[page]) for page, r in relative.items()
                     if page in va and page in vb}
            relative_ci = {page: half_width(pp) for page, pp in parts.items()}
            values = list(relative.values())
            # The mean over k pages: the pages' variance parts summed, / k^2 (pages independent),
            # Student t at their Welch-Satterthwaite df.
            k = len(values)
            mean_ci = (half_width((v / k ** 2, df) for pp in parts.values() for v, df in pp)
                       if values and len(parts) == k else None)
            relative_mean = statistics.fmean(values) if values else None
            columns.append({
                "run_id": rep["run_id"], "name": rep["name"], "point": p["point"],
                "assignment": p["assignment"], "label": point_name(rep, p),
                "baseline_point": None if base is None else base["point"],
                "baseline_label": None if base is None else point_name(baseline, base),
                "mean_time": mine, "baseline_mean_time": theirs, "relative": relative,
                "relative_ci95": relative_ci, "relative_mean_ci95": mean_ci,
                "relative_mean": relative_mean,
                # Page times: a ratio below 1.00 is faster. Only an interval clear of 1.00 says which.
                "relative_verdict": {page: verdict(r, relative_ci.get(page)) for page, r in relative.items()},
                "relative_mean_verdict": verdict(relative_mean, mean_ci),
                "relative_sdev": statistics.stdev(values) if len(values) > 1 else None,
                "loss": _loss(p), "baseline_loss": _loss(base),
                "realtime_ok": p["realtime_ok"], "baseline_realtime_ok": None if base is None else base["realtime_ok"],
            })
    return {
        "realtime_only": realtime_only,
        "pooled": pooled,
        "excluded_not_real_time": _excluded(reports, "excluded_not_real_time"),
        "excluded_not_done": _excluded(reports, "excluded_not_done"),
        "baseline": {"run_id": baseline["run_id"], "name": baseline["name"], "status": baseline["status"]},
        "runs": [{"run_id": r["run_id"], "name": r["name"], "status": r["status"]} for r in reports],
        "pages": [pages[k] for k in sorted(pages)],
        "columns": columns,
    }


def render_text(cmp: dict[str, Any]) -> str:
    """The layout of Table XI: a row per page, a column per compared point, relative times."""
    cols = cmp["columns"]
    out = [cmp.get("title") or (f"Relative download times: each run's page mean over the baseline's"
                                f" ({cmp['baseline']['run_id']}); below 1.00 the compared run is faster (CATNIP Table XI)")]
    # Columns are numbered: a legend (catnip compare, the catnip-table-xi layout) gives each number's
    # whole run id and point label. A column is as wide as its label up to 24 characters, and a
    # longer label is cut with a mark: cut silently ("28 KB buffer" for 128 KB) it names another point.
    labels = [c["label"] if len(c["label"]) <= 24 else c["label"][:23] + "~" for c in cols]
    widths = [max(12, len(label)) for label in labels]

    def row(head: str, cells: list[str]) -> str:
        return head + " " + " ".join(f"{v:>{w}}" for v, w in zip(cells, widths))

    out += ["", row(f"{'Web':>4} {'Total':>5} {'Total':>8}", [f"#{i}" for i, _ in enumerate(cols, 1)]),
            row(f"{'Page':>4} {'Conns':>5} {'Bytes':>8}", labels)]
    for pg in cmp["pages"]:
        out.append(row(f"{pg['page']:>4} {pg['conns']:>5} {pg['bytes']:>8,}",
                       [_with_ci(c["relative"].get(pg["page"]), c["relative_ci95"].get(pg["page"])) for c in cols]))
    out.append(row(f"{'Mean':<19}", [_with_ci(c["relative_mean"], c["relative_mean_ci95"]) for c in cols]))
    out.append(row(f"{'StdDev':<19}", [_num(c["relative_sdev"]) for c in cols]))
    out.append(row(f"{'TCP Pkt Loss':<19}", [_pct(c["loss"]) for c in cols]))
    out.append(row(f"{'Baseline Pkt Loss':<19}", [_pct(c["baseline_loss"]) for c in cols]))
    out.append("(+- : 95% confidence interval of the ratio of page means, delta method over the clients' pages)")
    if cmp.get("pooled"):
        out.append("Runs joined by '+' are pooled per sweep point")
        if cmp["excluded_not_done"]:
            out.append(f"Left out, did not finish: {len(cmp['excluded_not_done'])}{_listed(cmp['excluded_not_done'])}")
    if cmp.get("realtime_only"):
        left = cmp["excluded_not_real_time"]
        out.append(f"Only points that kept real time: {len(left)} left out{_listed(left)}")
    flags = [c for c in cols if c["realtime_ok"] is False or c["baseline_realtime_ok"] is False]
    if flags:
        out.append(f"Real time NOT kept in {len(flags)} of {len(cols)} columns (run or baseline): see each run's fidelity")
    return "\n".join(out)


def _listed(left: list[dict[str, Any]]) -> str:
    return " (" + ", ".join(f"{r} point {p}" for r, p in (e["member"] for e in left)) + ")" if left else ""


def _with_ci(v: float | None, ci: float | None) -> str:
    return _num(v) if ci is None or v is None else f"{v:.2f}+-{ci:.2f}"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"
