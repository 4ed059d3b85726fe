"""The CATNIP paper's report layouts (Tables II, IV/VII/X, XI) and the gap study's, moved here from
results/layouts.py with their names, tables and texts unchanged; the tables themselves are
results/report.py, compare.py and pooled.py, and the study's study.py."""

from __future__ import annotations

import json
from typing import Any

from catnip.results import compare as compare_mod
from catnip.results import layouts
from catnip.results import pooled as pooled_mod
from catnip.results import report as report_mod
from catnip.papers.catnip import published
from catnip.papers.catnip import study as study_mod
from catnip.papers.catnip.reference import point_setup
from catnip.results.point_record import record_of
from catnip.results.store import Store
from catnip.results.table import Column, Table

from catnip.results.layouts import FRACTION, PKTS, RATIO, SECONDS, LayoutError
from catnip.results.layouts import estimate_columns as _estimate_columns


@layouts.layout("catnip-table-ii", report_mod.TABLE_II_TITLE, report_mod.TABLE_II_PAPER, text=report_mod.render_text)
def catnip_table_ii(store: Store, run_id: str) -> Table:
    """Per point and page: connections, bytes, completed pages, min/median/max/mean/sdev and 95%
    interval of the download time, failed pages, bottleneck loss (what `catnip report RUN` shows)."""
    run = layouts.one_run(store, run_id, "catnip-table-ii")
    return report_mod.table_ii_from_report(report_mod.run_report(store, run["id"]))


@layouts.layout("catnip-loss", "Packet loss at the bottleneck by priority", "CATNIP Tables IV, VII, X",
        text=report_mod.render_loss_table)
def catnip_loss(store: Store, run_id: str) -> Table:
    """Per point: packets offered to the bottleneck queue, drops and loss, in all and for high
    (AF11) and low priority. RUN1+RUN2 pools runs of one scenario per sweep point."""
    if "+" in run_id:
        rep = pooled_mod.pooled_runs_report(store, compare_mod.split_run_ids(run_id))
    else:
        rep = report_mod.run_report(store, layouts.one_run(store, run_id, "catnip-loss")["id"])
    columns = [Column("point", "int"), Column("label", "str"), Column("sent", **PKTS), Column("drops", **PKTS),
               Column("loss", **FRACTION), Column("high_sent", **PKTS), Column("high_drops", **PKTS),
               Column("high_loss", **FRACTION), Column("low_sent", **PKTS), Column("low_drops", **PKTS),
               Column("low_loss", **FRACTION), Column("realtime_ok", "bool")]
    rows = [tuple(r[c.name] for c in columns) for r in report_mod.loss_table(rep)]
    return layouts.make_table("catnip-loss", [rep["run_id"]], columns, rows, source=rep)


@layouts.layout("catnip-table-xi", "Page download times relative to a baseline run", "CATNIP Table XI",
        runs=(2, None), text=compare_mod.render_text)
def catnip_table_xi(store: Store, baseline: str, *runs: str) -> Table:
    """Per compared point and page: the page's mean time over the baseline point's, with its 95%
    interval, and the column's mean and sdev over pages and bottleneck loss (what `catnip compare
    BASELINE RUNS...` shows; RUN1+RUN2 pools runs per sweep point)."""
    cmp = compare_mod.compare(store, [baseline, *runs])
    columns = [Column("run_id", "str"), Column("point", "int"), Column("label", "str"),
               Column("baseline_run_id", "str"), Column("baseline_point", "int"), Column("baseline_label", "str"),
               Column("page", "int"), Column("conns", "int"), Column("bytes", "int", "B"),
               Column("mean_time", **SECONDS), Column("baseline_mean_time", **SECONDS),
               Column("relative", **RATIO), Column("relative_ci95", **RATIO),
               Column("relative_mean", **RATIO), Column("relative_mean_ci95", **RATIO),
               Column("relative_sdev", **RATIO), Column("loss", **FRACTION), Column("baseline_loss", **FRACTION),
               Column("realtime_ok", "bool"), Column("baseline_realtime_ok", "bool")]
    base_id = cmp["baseline"]["run_id"]
    rows = []
    for c in cmp["columns"]:
        for pg in cmp["pages"]:
            page = pg["page"]
            rows.append((c["run_id"], c["point"], c["label"], base_id, c["baseline_point"], c["baseline_label"],
                         page, pg["conns"], pg["bytes"], c["mean_time"].get(page), c["baseline_mean_time"].get(page),
                         c["relative"].get(page), c["relative_ci95"].get(page), c["relative_mean"],
                         c["relative_mean_ci95"], c["relative_sdev"], c["loss"], c["baseline_loss"],
                         c["realtime_ok"], c["baseline_realtime_ok"]))
    return layouts.make_table("catnip-table-xi", [baseline, *runs], columns, rows, source=cmp)


@layouts.layout("catnip-table-xi-beside", "Table XI's Mean, StdDev and loss rows per compared point, beside"
        " the paper's", "CATNIP Table XI", runs=(2, None), text=compare_mod.render_text, realtime_only=True)
def catnip_table_xi_beside(store: Store, baseline: str, *runs: str) -> Table:
    """Per compared point: its run's name, the bottleneck buffer it ran with (from the point's
    resolved record), Table XI's Mean (with its 95% interval) and StdDev rows, its own and the
    baseline's bottleneck loss; beside them the paper's Mean, StdDev and TCP Pkt Loss for that
    buffer (papers/catnip/published.py, Table XI), None for a buffer the paper did not run. Its
    text is `catnip compare --realtime-only`'s (the per-page Table XI). Only points that kept real time are used (issue 46: a claim rests on none that missed it):
    RUN1+RUN2 pools a run with a re-run of its late points, and a point with no member in real
    time (its own or its baseline's) has no value and realtime_ok not yes."""
    cmp = compare_mod.compare(store, [baseline, *runs], realtime_only=True)
    columns = [Column("run_id", "str"), Column("run_name", "str"), Column("label", "str"), Column("buffer_kb", "int", "KB"),
               Column("relative_mean", **RATIO), Column("relative_mean_ci95", **RATIO),
               Column("paper_mean", **RATIO), Column("relative_sdev", **RATIO), Column("paper_sdev", **RATIO),
               Column("loss", **FRACTION), Column("baseline_loss", **FRACTION), Column("paper_loss", **FRACTION),
               Column("realtime_ok", "bool"), Column("baseline_realtime_ok", "bool")]
    rows = []
    for c in cmp["columns"]:
        kb = _buffer_kb(store, c["run_id"], c["assignment"])
        paper = published.table_xi_column(kb) if kb is not None else None
        rows.append((c["run_id"], c["name"], c["label"], kb, c["relative_mean"], c["relative_mean_ci95"],
                     paper and paper["mean"], c["relative_sdev"], paper and paper["sdev"], c["loss"],
                     c["baseline_loss"], paper and paper["loss"], c["realtime_ok"], c["baseline_realtime_ok"]))
    return layouts.make_table("catnip-table-xi-beside", [baseline, *runs], columns, rows, source=cmp)


def _buffer_kb(store: Store, run_id: str, assignment: dict[str, Any]) -> int | None:
    """Table XI's buffer column (64-512 KB) of the point of `run_id` (its first id where runs are
    pooled) with this sweep assignment: the buffer its bottleneck was built with (the point's
    resolved record, 'bottleneck-data'), None for another buffer."""
    first = compare_mod.split_run_ids(run_id)[0]
    run = store.run(first)
    for p in store.points(first):
        if json.loads(p["assignment"]) == assignment:
            return point_setup(record_of(run, p))["buffer_kb"]
    return None


# --- the gap study (study.py; docs/reproduction.md "The gap, factor by factor") -----------------------
STUDY_COLUMNS = [
    Column("context", "str"), Column("scheme", "str"), Column("side", "str"), Column("seeds", "int"),
    Column("left_out", "int"), *_estimate_columns("loss", "1", "%"), *_estimate_columns("high_loss", "1", "%"),
    *_estimate_columns("low_loss", "1", "%"), *_estimate_columns("page_mean", "s", ".3f"),
    *_estimate_columns("vs_today", "1", ".3f"), *_estimate_columns("vs_fifo", "1", ".3f")]


@layouts.layout("catnip-study", "The gap study: loss and relative page times per factor, side and buffer, over seeds",
        "CATNIP Tables II-XI against the period TCP (docs/period-tcp.md)", runs=(1, None), text=study_mod.render_text)
def catnip_study(store: Store, *run_ids: str) -> Table:
    """Per context (Table XI's buffer), scheme and side (FIFO, CATNIP): the seeds that finished in
    real time and how many were left out; bottleneck loss in all, high and low; the mean page
    time; page times against the same side's `today` and, for CATNIP, against FIFO under the same
    scheme (the mean over pages of the per-page ratio); each a mean with its 95% interval over seeds."""
    try:
        rep = study_mod.study(store, run_ids)
    except study_mod.NoStudy as exc:
        raise LayoutError(str(exc)) from None
    return study_table(rep)


def study_table(rep: study_mod.StudyReport) -> Table:
    rows = []
    for r in rep.rows:
        row: list[Any] = [r.key.context, r.key.factor, r.key.side, len(r.seeds), len(r.left_out)]
        for m in study_mod.METRICS:
            row += [r.est[m].value, r.est[m].ci95]
        rows.append(row)
    return layouts.make_table("catnip-study", rep.run_ids, STUDY_COLUMNS, rows, rep.notes, source=rep)


# --- the router set of Tables VIII-X beside the paper (docs/reproduction.md) ---------------------------
@layouts.layout("catnip-loss-beside", "Packet loss at the bottleneck by priority, beside the paper's row",
        "CATNIP Tables IV, VII, X", text=report_mod.render_loss_table)
def catnip_loss_beside(store: Store, run_id: str) -> Table:
    """Per point: what its record says it ran (the web servers' sender as the paper names it, the
    bottleneck's policy), our loss at the bottleneck in all, high and low priority, and beside it
    the paper's row of Tables IV, VII or X for that sender and policy (papers/catnip/published.py),
    None where the paper prints no row for it (RED, CATNIP-RED: section V-D gives RED's loss only
    in words) or the point is not the simulation's setup (a WAN buffer in bytes, section V-G).
    Then the share of the packets offered to the bottleneck that were high priority (`high_share`:
    the paper's Table VII counts 19,126 of 48,126 for Reno/CATNIP-Good, the "about 40%" of section
    V-B; ours counts the control segments too, which ns-2's one-way agents did not send) and the
    share of the servers' data segments SPM marked high (`marked_high`, the marker's counters;
    None for a point without SPM)."""
    rep = report_mod.run_report(store, layouts.one_run(store, run_id, "catnip-loss-beside")["id"])
    run = store.run(rep["run_id"])
    setups = {p["point"]: point_setup(record_of(run, p)) for p in store.points(rep["run_id"])}
    marking = {p["point"]: p.get("marking") or {} for p in rep["points"]}
    columns = [Column("point", "int"), Column("label", "str"), Column("sender", "str"), Column("policy", "str"),
               Column("loss", **FRACTION), Column("high_loss", **FRACTION), Column("low_loss", **FRACTION),
               Column("paper_row", "str"), Column("paper_loss", **FRACTION), Column("paper_high_loss", **FRACTION),
               Column("paper_low_loss", **FRACTION), Column("high_share", **FRACTION), Column("marked_high", **FRACTION),
               Column("realtime_ok", "bool")]
    rows = []
    for r in report_mod.loss_table(rep):
        setup = setups[r["point"]]
        row = (published.loss_row(setup["sender"], setup["policy"])
               if setup["sender"] and setup["wan"] is None else None)
        rows.append((r["point"], r["label"], setup["sender"] or setup["cc"],
                     published.POLICY_NAMES.get(setup["policy"], setup["policy"]), r["loss"], r["high_loss"],
                     r["low_loss"], row and row.caption, row and row.loss_pct / 100,
                     row and row.high and row.high[2] / 100, row and row.low and row.low[2] / 100,
                     r["high_sent"] / r["sent"] if r["sent"] else None, marking[r["point"]].get("high_share"),
                     r["realtime_ok"]))
    return layouts.make_table("catnip-loss-beside", [rep["run_id"]], columns, rows, source=rep)


@layouts.layout("catnip-vs-first-point", "Page download times of each point relative to the run's first point",
        "CATNIP Tables V, VIII against II (sections V-B, V-C)", text=compare_mod.render_text)
def catnip_vs_first_point(store: Store, run_id: str) -> Table:
    """Per point after the first: each page's mean time over the first point's (the sweep's first
    value: DropTail in the router set, as the paper compares each policy with DropTail), the mean of
    those ratios with its 95% interval, their sdev, their range, and how many pages are faster and
    slower, in all and with an interval clear of 1.00 (results/compare.py, as `catnip compare`
    computes Table XI's). Its text is the per-page table. `policy` and `baseline_policy` are the
    bottleneck's policy each point ran, from its resolved record (issue 43: not from its label)."""
    rep = report_mod.run_report(store, layouts.one_run(store, run_id, "catnip-vs-first-point")["id"])
    if len(rep["points"]) < 2:
        raise LayoutError(f"layout catnip-vs-first-point needs a run of two or more points; {run_id} has"
                          f" {len(rep['points'])}")
    run = store.run(rep["run_id"])
    policy = {p["point"]: point_setup(record_of(run, p))["policy"] for p in store.points(rep["run_id"])}
    first = rep["points"][0]
    cmp = compare_mod.compare_reports([{**rep, "points": [first]}, {**rep, "points": rep["points"][1:]}])
    cmp["title"] = (f"Relative download times: each point's page mean over the first point's"
                    f" ({report_mod.point_name(rep, first)}) in run {rep['run_id']}; below 1.00 the point is faster")
    columns = [Column("point", "int"), Column("label", "str"), Column("baseline_label", "str"),
               Column("policy", "str"), Column("baseline_policy", "str"), Column("relative_mean", **RATIO), Column("relative_mean_ci95", **RATIO),
               Column("relative_sdev", **RATIO), Column("relative_min", **RATIO), Column("relative_max", **RATIO),
               Column("pages", "int"), Column("pages_faster", "int"), Column("pages_faster_clear", "int"),
               Column("pages_slower_clear", "int"), Column("realtime_ok", "bool"),
               Column("baseline_realtime_ok", "bool")]
    rows = []
    for c in cmp["columns"]:
        ratios = list(c["relative"].values())
        verdicts = list(c["relative_verdict"].values())
        rows.append((c["point"], c["label"], c["baseline_label"], _policy_name(policy.get(c["point"])),
                     _policy_name(policy.get(c["baseline_point"])), c["relative_mean"], c["relative_mean_ci95"],
                     c["relative_sdev"], min(ratios, default=None), max(ratios, default=None), len(ratios),
                     sum(r < 1 for r in ratios), verdicts.count("better"), verdicts.count("worse"),
                     c["realtime_ok"], c["baseline_realtime_ok"]))
    return layouts.make_table("catnip-vs-first-point", [rep["run_id"]], columns, rows, source=cmp)


def _http_version(record) -> str | None:
    """The HTTP version the point's first web application ran, from its record (the detailed tables
    II-X are HTTP/1.0's; section V-F's HTTP/1.1 gives no table)."""
    web = record.apps("web")
    return str(web[0].params.get("http_version", "1.0")) if web else None


def _policy_name(kind: str | None) -> str | None:
    return None if kind is None else published.POLICY_NAMES.get(kind, kind)


@layouts.layout("catnip-pages-beside", "Page download times per point and page, beside the paper's table",
        "CATNIP Tables II, III, V, VI, VIII, IX")
def catnip_pages_beside(store: Store, run_id: str) -> Table:
    """Per point and page: what the point's record says it ran (the web servers' sender as the paper
    names it, the bottleneck's policy), our page times (pages completed, min, median, max, mean with
    its 95% interval, sdev, in seconds) and beside them the paper's row of the detailed table for
    that sender and policy (Tables II, III, V, VI, VIII, IX; papers/catnip/published.py): None where
    the paper prints no table for it (RED, CATNIP-RED: Fig. 7 draws them as bars, values not given)
    or the point is not the simulation's setup (a WAN buffer in bytes, section V-G; HTTP/1.1, whose
    section V-F gives no table)."""
    rep = report_mod.run_report(store, layouts.one_run(store, run_id, "catnip-pages-beside")["id"])
    run = store.run(rep["run_id"])
    records = {p["point"]: record_of(run, p) for p in store.points(rep["run_id"])}
    setups = {k: point_setup(r) for k, r in records.items()}
    columns = [Column("point", "int"), Column("label", "str"), Column("sender", "str"), Column("policy", "str"),
               Column("page", "int"), Column("n", "int"), Column("min", **SECONDS), Column("median", **SECONDS),
               Column("max", **SECONDS), Column("mean", **SECONDS), Column("ci95", **SECONDS),
               Column("sdev", **SECONDS), Column("paper_table", "str"), Column("paper_min", **SECONDS),
               Column("paper_median", **SECONDS), Column("paper_max", **SECONDS), Column("paper_mean", **SECONDS),
               Column("paper_sdev", **SECONDS), Column("realtime_ok", "bool")]
    rows = []
    for p in rep["points"]:
        setup = setups[p["point"]]
        paper = (published.page_table(setup["sender"], setup["policy"])
                 if setup["sender"] and setup["wan"] is None and _http_version(records[p["point"]]) == "1.0"
                 else None)
        for r in p["table"]:
            theirs = (paper.row(r["page"]) if paper else None) or {}
            rows.append((p["point"], report_mod.point_name(rep, p), setup["sender"] or setup["cc"],
                         _policy_name(setup["policy"]), r["page"], r["n"], r.get("min"), r.get("median"),
                         r.get("max"), r.get("mean"), r.get("ci95"), r.get("sdev"), paper and f"Table {paper.number}",
                         *(theirs.get(k) for k in published.STATS), p["realtime_ok"]))
    return layouts.make_table("catnip-pages-beside", [rep["run_id"]], columns, rows, source=rep)
