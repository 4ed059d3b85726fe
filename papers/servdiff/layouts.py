"""Nouredine and Tobagi's report layouts (servdiff, servdiff-fair), moved here from
results/layouts.py with their names, tables and texts unchanged; the reports are analysis.py
(docs/reports-servdiff.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from catnip.papers.servdiff import analysis as servdiff_mod
from catnip.results import layouts
from catnip.results.store import Store
from catnip.results.table import Column, Table
from catnip.results.layouts import PKTS, RATIO, LayoutError
from catnip.results.layouts import estimate_columns as _estimate_columns

SERVDIFF_PAPER = "Nouredine-Tobagi"  # Computer Networks 40 (2002) 19-43


def _servdiff(build: Callable[[], Any]) -> Any:
    try:
        return build()
    except servdiff_mod.NoData as exc:
        raise LayoutError(str(exc)) from None


SERVDIFF_STATS = {  # the row's statistic: (column, unit, text format, its sample and failure count columns)
    "http1.0_over_5s": ("h10_over_5s", "1", "%", ("h10_pages", "h10_failed")),
    "http1.0_over_10s": ("h10_over_10s", "1", "%", None),
    "http1.1_over_5s": ("h11_over_5s", "1", "%", ("h11_pages", "h11_failed")),
    "http1.1_over_10s": ("h11_over_10s", "1", "%", None),
    "echo_over_150ms": ("echo_over_150ms", "1", "%", ("echoes", "echo_failed")),
    "echo_p90": ("echo_p90", "s", ".4f", None), "echo_p99": ("echo_p99", "s", ".4f", None),
    "ftp_probe_p50": ("ftp_probe_p50", "s", ".3f", ("ftp_probe_files", "ftp_probe_failed")),
    "ftp_probe_p90": ("ftp_probe_p90", "s", ".3f", None)}
SERVDIFF_LEVELS = ("all", "high", "med", "low", "reverse")


def _servdiff_columns() -> list[Column]:
    columns = [Column("scheme", "str"), Column("runs", "str"), Column("reps", "int"), Column("tag", "str"),
               Column("web_pages", "str")]
    for name, unit, fmt, counts in SERVDIFF_STATS.values():
        if counts:
            columns += [Column(counts[0], "int"), Column(counts[1], "int")]
        columns += _estimate_columns(name, unit, fmt)
    for level in SERVDIFF_LEVELS:
        prefix = "loss" if level == "all" else f"{level}_loss"
        columns += [Column(f"{prefix}_arrived", **PKTS), Column(f"{prefix}_dropped", **PKTS),
                    *_estimate_columns(prefix, "1", "%")]
    return columns + [Column("realtime_ok", "bool")]


@layouts.layout("servdiff", "Interactive quality per scheme: pages over 5/10 s, echoes over 150 ms, FTP probes, loss per"
        " drop level", f"{SERVDIFF_PAPER} section 1 limits, Figs 2-4, 7-9, 12-15", runs=(1, None),
        text=servdiff_mod.render_text)
def servdiff(store: Store, *run_ids: str) -> Table:
    """Per scheme (sweep point, or run; RUN1+RUN2 pools seeds) over every tag, then per tag (RTT
    class): the fraction of HTTP/1.0 and HTTP/1.1 pages above 5 s and 10 s (probe pages where
    marked), of Telnet echoes above 150 ms and their 90th/99th percentiles, the FTP probes' median
    and 90th percentile, each with its samples and 95% interval over repetitions; the bottleneck's
    loss overall, per drop level (HIGH/MED/LOW) and in the reverse direction in the every-tag row."""
    return servdiff_table(_servdiff(lambda: servdiff_mod.table(store, run_ids)))


def servdiff_table(rep: servdiff_mod.TableReport) -> Table:
    """The servdiff table of a report (analysis.table)."""
    rows = []
    for r in rep.rows:
        row: list[Any] = [r.scheme.label, "+".join(r.scheme.runs), len(r.scheme.members), r.tag or "all", r.web_pages]
        for key, (_, _, _, counts) in SERVDIFF_STATS.items():
            c = r.stats[key]
            if counts:
                row += [c.n, c.failed]
            row += [c.est.value, c.est.ci95]
        for level in SERVDIFF_LEVELS:
            c = r.loss.get(level)
            row += [None] * 4 if c is None else [c.arrived, c.dropped, c.est.value, c.est.ci95]
        rows.append((*row, r.scheme.realtime_ok))
    return layouts.make_table("servdiff", list(rep.run_ids), _servdiff_columns(), rows, list(rep.notes), source=rep)


SERVDIFF_FAIR_COLUMNS = [
    Column("scheme", "str"), Column("runs", "str"), Column("reps", "int"), Column("tag", "str"),
    Column("flows", "int"), Column("failed", "int"), Column("fair_share", "float", "bit/s", fmt=".6g"),
    *_estimate_columns("ratio", "1", ".3f"), Column("ratio_min", **RATIO), Column("ratio_max", **RATIO),
    *_estimate_columns("cov", "1", ".3f"), Column("samples", "int"), Column("sample_interval", "float", "s", fmt="g")]


@layouts.layout("servdiff-fair", "Long FTP throughput / fair share and its C.O.V. per RTT class",
        f"{SERVDIFF_PAPER} Figs 16-17", runs=(1, None), text=servdiff_mod.render_fair_text)
def servdiff_fair(store: Store, *run_ids: str) -> Table:
    """Per scheme and RTT class (and over all its flows): the long FTP (bulk) flows, the fair share
    (bottleneck rate / flows), each flow's throughput over it and the C.O.V. of its goodput
    samples, averaged over the class's flows and then over repetitions (95% interval)."""
    return servdiff_fair_table(_servdiff(lambda: servdiff_mod.fair_share(store, run_ids)))


def servdiff_fair_table(rep: servdiff_mod.FairShareReport) -> Table:
    """The servdiff-fair table of a report (analysis.fair_share)."""
    rows = [(c.scheme.label, "+".join(c.scheme.runs), len(c.scheme.members), c.tag or "all", c.flows, c.failed,
             c.fair_share, c.ratio.value, c.ratio.ci95, c.ratio_min, c.ratio_max, c.cov.value, c.cov.ci95, c.samples,
             c.interval) for c in rep.classes]
    return layouts.make_table("servdiff-fair", list(rep.run_ids), SERVDIFF_FAIR_COLUMNS, rows, list(rep.notes), source=rep)
