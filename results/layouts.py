"""Report layouts, registered per paper table: each is a function (store, run ids...) returning a
typed `Table` (columns with a type and a unit, rows of values), which text, CSV and JSON render
alike, so the numbers come from one aggregation. A layout reproducing a paper table may register
its own text renderer (`text`), given the data it built the rows from (`Table.source`): the text
of `catnip report RUN` and `catnip compare` is that renderer's, unchanged.

    @layout("my-table", "What it shows", "Paper, Table N")
    def my_table(store, run_id) -> Table: ...

`catnip report --layouts` lists them, `catnip report RUN --layout NAME [--json|--csv]` prints one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from catnip.results import compare as compare_mod
from catnip.results import newcwv as newcwv_mod
from catnip.results import pooled as pooled_mod
from catnip.results import report as report_mod
from catnip.results import servdiff as servdiff_mod
from catnip.results import study as study_mod
from catnip.results import tcpf as tcpf_mod
from catnip.results import tcpf_paper
from catnip.results.samples import summaries
from catnip.results.table import Column, Table, render_csv, render_generic_text, render_json
from catnip.results.store import Store
from catnip.results.labels import run_labels

@dataclass(frozen=True)
class Layout:
    name: str
    title: str
    paper: str
    build: Callable[..., Table]
    min_runs: int
    max_runs: int | None
    text: Callable[[Any], str] | None


LAYOUTS: dict[str, Layout] = {}


class UnknownLayout(LookupError):
    pass


class LayoutError(ValueError):
    """A layout that does not apply to the runs given (the wrong kind or number of runs)."""


def layout(name: str, title: str, paper: str, runs: tuple[int, int | None] = (1, 1),
           text: Callable[[Any], str] | None = None):
    """Registers a layout function (store, *run_ids) -> Table; `runs` the least and most run ids
    it takes (None: no most); `text` renders the table's `source` in the paper's own layout."""
    def register(fn: Callable[..., Table]) -> Callable[..., Table]:
        if name in LAYOUTS:
            raise ValueError(f"layout {name!r} registered twice")
        LAYOUTS[name] = Layout(name, title, paper, fn, runs[0], runs[1], text)
        return fn
    return register


def get(name: str) -> Layout:
    if name not in LAYOUTS:
        raise UnknownLayout(f"unknown layout {name!r}; the layouts are: {', '.join(LAYOUTS)}")
    return LAYOUTS[name]


def build(name: str, store: Store, *run_ids: str) -> Table:
    """Layout `name` of the runs. Raises UnknownLayout, LayoutError (wrong number or kind of runs),
    KeyError (an unknown run) or ValueError (runs that do not go together)."""
    lay = get(name)
    n = len(run_ids)
    if n < lay.min_runs or (lay.max_runs is not None and n > lay.max_runs):
        want = (f"{lay.min_runs}" if lay.max_runs == lay.min_runs else
                f"{lay.min_runs} or more" if lay.max_runs is None else f"{lay.min_runs} to {lay.max_runs}")
        raise LayoutError(f"layout {name} takes {want} run id(s), not {n}")
    return lay.build(store, *run_ids)


def _table(name: str, run_ids: list[str] | tuple[str, ...], columns: list[Column], rows: list[tuple],
           notes: list[str] = (), source: Any = None) -> Table:
    lay = LAYOUTS[name]
    return Table(name, lay.title, lay.paper, tuple(run_ids), tuple(columns), tuple(tuple(r) for r in rows),
                 tuple(notes), source)


def render_text(table: Table) -> str:
    """The layout's own text where it has one (the paper's layout), else aligned columns."""
    lay = LAYOUTS.get(table.layout)
    if lay is not None and lay.text is not None and table.source is not None:
        return lay.text(table.source)
    return render_generic_text(table)


RENDERERS: dict[str, Callable[[Table], str]] = {"text": render_text, "json": render_json, "csv": render_csv}


# --- the layouts ----------------------------------------------------------------------------
def _one_run(store: Store, run_id: str, name: str, pages: bool = True):
    if "+" in run_id:
        raise LayoutError(f"layout {name} takes one run, not {run_id!r}: pooled runs are `catnip report"
                          f" {run_id} --pool`")
    run = store.find_run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id!r} in {store.path} (see `catnip list`)")
    if pages and json.loads(run["scenario"]).get("kind") == "transfers":
        raise LayoutError(f"run {run['id']} is a transfer measurement: `catnip model validate {run['id']}` reports it")
    return run


SECONDS = {"type": "float", "unit": "s"}


@layout("catnip-table-ii", report_mod.TABLE_II_TITLE, report_mod.TABLE_II_PAPER, text=report_mod.render_text)
def catnip_table_ii(store: Store, run_id: str) -> Table:
    """Per point and page: connections, bytes, completed pages, min/median/max/mean/sdev and 95%
    interval of the download time, failed pages, bottleneck loss (what `catnip report RUN` shows)."""
    run = _one_run(store, run_id, "catnip-table-ii")
    return report_mod.table_ii_from_report(report_mod.run_report(store, run["id"]))


PKTS = {"type": "int", "unit": "pkt"}
FRACTION = {"type": "float", "unit": "1", "fmt": "%"}


@layout("catnip-loss", "Packet loss at the bottleneck by priority", "CATNIP Tables IV, VII, X",
        text=report_mod.render_loss_table)
def catnip_loss(store: Store, run_id: str) -> Table:
    """Per point: packets offered to the bottleneck queue, drops and loss, in all and for high
    (AF11) and low priority. RUN1+RUN2 pools runs of one scenario per sweep point."""
    if "+" in run_id:
        rep = pooled_mod.pooled_runs_report(store, compare_mod.split_run_ids(run_id))
    else:
        rep = report_mod.run_report(store, _one_run(store, run_id, "catnip-loss")["id"])
    columns = [Column("point", "int"), Column("label", "str"), Column("sent", **PKTS), Column("drops", **PKTS),
               Column("loss", **FRACTION), Column("high_sent", **PKTS), Column("high_drops", **PKTS),
               Column("high_loss", **FRACTION), Column("low_sent", **PKTS), Column("low_drops", **PKTS),
               Column("low_loss", **FRACTION), Column("realtime_ok", "bool")]
    rows = [tuple(r[c.name] for c in columns) for r in report_mod.loss_table(rep)]
    return _table("catnip-loss", [rep["run_id"]], columns, rows, source=rep)


RATIO = {"type": "float", "unit": "1", "fmt": ".2f"}


@layout("catnip-table-xi", "Page download times relative to a baseline run", "CATNIP Table XI",
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
    return _table("catnip-table-xi", [baseline, *runs], columns, rows, source=cmp)


@layout("app-metrics", "Application metrics per point", "samples of any application")
def app_metrics(store: Store, run_id: str) -> Table:
    """Per point, application, metric and tag: samples, errors (counted, not averaged), mean with
    its 95% interval (Student t), sdev, p50/p90/p99, min and max, in the unit of each row."""
    run = _one_run(store, run_id, "app-metrics", pages=False)
    by_unit = {"type": "float", "unit_from": "unit"}
    columns = [Column("point", "int"), Column("label", "str"), Column("app", "str"), Column("metric", "str"),
               Column("tag", "str"), Column("unit", "str"), Column("n", "int"), Column("errors", "int"),
               *(Column(name, **by_unit) for name in ("mean", "ci95", "sdev", "p50", "p90", "p99", "min", "max"))]
    rows = []
    points = store.points(run["id"])
    names = run_labels(run, points)
    for pt in points:
        label = names[pt["point"]]
        for s in summaries(store, run["id"], pt["point"], by_tag=True):
            rows.append((pt["point"], label, s.app, s.metric, s.tag, s.unit, s.n, s.errors, s.mean, s.ci95, s.sdev,
                         s.p50, s.p90, s.p99, s.min, s.max))
    notes = ["Errors are counted, not averaged; ci95 is the half-width of the mean's 95% interval (Student t)."]
    if not rows:
        notes.insert(0, f"No application samples recorded in run {run['id']}.")
    return _table("app-metrics", [run["id"]], columns, rows, notes)


# --- the newCWV paper (results/newcwv.py; docs/reports-newcwv.md) -----------------------------------
SEGMENTS = {"type": "float", "unit": "segments", "fmt": ".2f"}
NEWCWV_PAPER = "newCWV"  # Hossain and Fairhurst, IJCNC 15(4), 2023


def _newcwv(build: Callable[[], Any]) -> Any:
    try:
        return build()
    except newcwv_mod.NoData as exc:
        raise LayoutError(str(exc)) from None


GAIN_COLUMNS = [
    Column("comparison", "str"), Column("newcwv_point", "int"), Column("baseline_point", "int"),
    Column("newcwv_sender", "str"), Column("baseline_sender", "str"), Column("context", "str"),
    Column("host_tag", "str"), Column("size", "int", "B"), Column("idle", "float", "s", fmt="g"),
    Column("runs", "int"), Column("pairs", "int"), Column("bursts_baseline", "int"), Column("bursts_newcwv", "int"),
    Column("failed_baseline", "int"), Column("failed_newcwv", "int"), Column("unpaired", "int"),
    Column("mean_baseline", **SECONDS), Column("mean_newcwv", **SECONDS),
    Column("gain", **FRACTION), Column("gain_ci95", **FRACTION), Column("gain_rom", **FRACTION),
    Column("gain_rom_ci95", **FRACTION), Column("interval", "str"),
    Column("cwnd_baseline", **SEGMENTS), Column("cwnd_newcwv", **SEGMENTS), Column("realtime_ok", "bool")]


@layout("newcwv-gain", "newCWV's gain over the baseline per burst size and idle period",
        f"{NEWCWV_PAPER} Figs 7-8, Tables 2-3", runs=(1, None), text=newcwv_mod.render_gain_text)
def newcwv_gain(store: Store, *run_ids: str) -> Table:
    """Per (newCWV point, baseline point) and cell: paired bursts, failures, mean times, the gain
    (mean of (Tr - Tc)/Tr, paper section 4.1) and the ratio of means with 95% intervals (over the
    runs given, one per seed; over the bursts with one run), burst-start cwnd of each sender."""
    rep = _newcwv(lambda: newcwv_mod.gain_report(store, run_ids))
    rows = []
    for c in rep.comparisons:
        for g in c.cells:
            p = g.paired
            rows.append((c.label, c.newcwv.point, c.baseline.point, c.newcwv.sender.label(), c.baseline.sender.label(),
                         c.newcwv.context_label, g.cell.host_tag, g.cell.size, g.cell.idle, g.runs, len(p.pairs),
                         p.bursts_baseline, p.bursts_newcwv, p.failed_baseline, p.failed_newcwv, p.unpaired,
                         g.mean_baseline, g.mean_newcwv, g.gain, g.gain_ci95, g.gain_rom, g.gain_rom_ci95, g.interval,
                         g.cwnd_baseline, g.cwnd_newcwv, c.realtime_ok))
    notes = [("gain = mean over paired bursts of (Tr - Tc)/Tr; gain_rom = (mean Tr - mean Tc)/mean Tr; ci95 are"
              " half-widths, over the runs ('runs') or over one run's bursts ('bursts'); docs/reports-newcwv.md")]
    return _table("newcwv-gain", rep.run_ids, GAIN_COLUMNS, rows, notes + rep.notes, source=rep)


LOSS_COLUMNS = [
    Column("point", "int"), Column("label", "str"), Column("sender", "str"), Column("host_tag", "str"),
    Column("size", "int", "B"), Column("idle", "float", "s", fmt="g"), Column("runs", "int"), Column("bursts", "int"),
    Column("failed", "int"), Column("retrans_mean", **SEGMENTS), Column("retrans_ci95", **SEGMENTS),
    Column("interval", "str"), Column("retrans_total", **SEGMENTS), Column("bottleneck_drops", **PKTS),
    Column("bottleneck_arrived", **PKTS), Column("bottleneck_loss", **FRACTION), Column("realtime_ok", "bool")]


@layout("newcwv-loss", "Retransmitted segments per burst, and bottleneck drops, per sender",
        f"{NEWCWV_PAPER} Fig. 9", runs=(1, None), text=newcwv_mod.render_loss_text)
def newcwv_loss(store: Store, *run_ids: str) -> Table:
    """Per point and cell: the burst server's retransmitted segments per burst (burst_retrans) with
    a 95% interval, failed bursts; and the point's drops at the bottleneck's data direction (the
    engine's counters, as catnip-loss reads them), the same in each of the point's rows."""
    rep = _newcwv(lambda: newcwv_mod.loss_report(store, run_ids))
    rows = [(p.group.point, p.group.label, p.group.sender.label(), c.cell.host_tag, c.cell.size, c.cell.idle, c.runs,
             c.bursts, c.failed, c.mean, c.ci95, c.interval, c.total, p.drops, p.arrived, p.loss,
             p.group.realtime_ok(p.runs))
            for p in rep.points for c in p.cells]
    return _table("newcwv-loss", rep.run_ids, LOSS_COLUMNS, rows, rep.notes, source=rep)


TRACE_COLUMNS = [
    Column("point", "int"), Column("label", "str"), Column("flow", "str"), Column("t", "float", "s", fmt=".4f"),
    Column("event", "str"), Column("cwnd", "int", "segments"), Column("ssthresh", "int", "segments"),
    Column("pipeack", **SEGMENTS), Column("pipeack_sample", **SEGMENTS), Column("pipeack_bytes", "int", "B"),
    Column("sample_bytes", "int", "B"), Column("mss", "int", "B")]


@layout("newcwv-trace", "newCWV's cwnd and pipeACK over time", f"{NEWCWV_PAPER} Fig. 5",
        text=newcwv_mod.render_trace_text)
def newcwv_trace(store: Store, run_id: str) -> Table:
    """Per point, connection and traced event: seconds since the point's first event, cwnd,
    ssthresh, pipeACK (the max filter) and the round's pipeACK sample in segments of the
    scenario's MSS (and in bytes)."""
    rep = _newcwv(lambda: newcwv_mod.trace_report(store, run_id))
    rows = [(p.group.point, p.group.label, r.flow, r.t, r.event, r.cwnd, r.ssthresh, p.segments(r.pipeack_bytes),
             p.segments(r.sample_bytes), r.pipeack_bytes, r.sample_bytes, p.mss)
            for p in rep.points for r in p.rows]
    return _table("newcwv-trace", [rep.run_id], TRACE_COLUMNS, rows, rep.notes, source=rep)


def ftp_table(rep: newcwv_mod.FtpReport) -> Table:
    """The ftp-throughput table of a report (any bin width): a row per bin, then the summaries."""
    columns = [Column("row", "str"), Column("t", "float", "s", fmt="g"), Column("unit", "str")]
    columns += [Column(f"p{p.group.point} {p.group.sender.slug()}", "float", unit_from="unit", fmt=".6g")
                for p in rep.points]
    rows: list[tuple] = [("bin", k * rep.width, "bit/s", *(p.bins.get(k) for p in rep.points))
                         for k in range(rep.n_bins())]
    for name, unit, get in (("mean", "bit/s", lambda p: p.mean), ("mean_ci95", "bit/s", lambda p: p.mean_ci95),
                            ("ratio_to_baseline", "1", lambda p: p.ratio),
                            ("http_goodput_during_bursts", "bit/s", lambda p: p.http_rate),
                            ("ftp_goodput_during_bursts", "bit/s", lambda p: p.ftp_rate_bursts),
                            ("jain_during_bursts", "1", lambda p: p.jain)):
        rows.append((name, None, unit, *(get(p) for p in rep.points)))
    notes = [f"p{p.group.point}: {p.group.sender.label()} ({p.group.label})"
             + (f", baseline point {p.baseline_point}" if p.baseline_point is not None else "") for p in rep.points]
    notes.append(f"bins of {rep.width:g} s from the FTP flows' launch: each flow's mean goodput over the iperf3"
                 " intervals starting in the bin, summed over flows, mean over runs; docs/reports-newcwv.md")
    return _table("ftp-throughput", rep.run_ids, columns, rows, notes + rep.notes, source=rep)


@layout("ftp-throughput", "The FTP flow's throughput over time per sender", f"{NEWCWV_PAPER} Fig. 11",
        runs=(1, None), text=newcwv_mod.render_ftp_text)
def ftp_throughput(store: Store, *run_ids: str) -> Table:
    """The bulk application's goodput binned over time (bins of its iperf3 interval), one column
    per point; then each point's mean (95% interval over runs), its ratio to the baseline point's,
    and Jain's index of the FTP and HTTP goodputs while the bursts were under way."""
    return ftp_table(_newcwv(lambda: newcwv_mod.ftp_throughput(store, run_ids)))


# --- the TCP-friendly marking paper (results/tcpf.py; docs/reproduction-tcpf.md) ---------------
KBPS = {"type": "float", "unit": "KB/s", "fmt": ".3f"}
TCPF_COLUMNS = [
    Column("profile", "str"), Column("config", "str"), Column("tcp", "str"), Column("red", "str"),
    Column("case", "str"), Column("flows", "int"), Column("points", "int"),
    Column("timeouts", "float", fmt=".1f"), Column("timeouts_ci95", "float", fmt=".1f"),
    Column("paper_timeouts", "int"),
    Column("loss", **FRACTION), Column("loss_ci95", **FRACTION), Column("paper_loss", **FRACTION),
    Column("goodput", **KBPS), Column("goodput_ci95", **KBPS), Column("paper_goodput", **KBPS),
    Column("cov", **RATIO), Column("cov_ci95", **RATIO), Column("paper_cov", **RATIO),
    Column("recoveries", "float", fmt=".1f"), Column("lost_retransmits", "float", fmt=".1f"),
    Column("realtime_ok", "bool"), Column("point_ids", "str")]


@layout("tcpf-tables", "Timeouts, loss, goodput and its C.O.V. per marker and dropper, beside the paper's",
        "TCP-friendly marking, Tables 4-7", runs=(1, None), text=tcpf_mod.render_text)
def tcpf_tables(store: Store, *run_ids: str) -> Table:
    """Per TCP profile, configuration (Table 2), case (Table 3) and number of flows: the points
    pooled (seeds, repetitions, runs given), the mean and Student-t 95% interval of the timeouts,
    the loss at the bottleneck, the mean per-flow goodput (KB/s) and its C.O.V. over the bulk
    application's measured window, and the paper's numbers. A TailDrop cell has a row in both
    configurations of its TCP (it has no RED parameters)."""
    try:
        results, notes = tcpf_mod.cells(store, list(run_ids))
    except tcpf_mod.NotTcpf as exc:
        raise LayoutError(str(exc)) from None
    rows = []
    for r in results:
        configs = r.cell.configs() or ["-"]
        for config in configs:
            p = tcpf_paper.paper(config, r.cell.case, r.cell.flows)
            rows.append((r.cell.profile, config, r.cell.tcp, r.cell.tuning or "any", r.cell.case, r.cell.flows,
                         len(r.points), r.mean("timeouts"), r.ci95("timeouts"), p[0] if p else None,
                         r.mean("loss"), r.ci95("loss"), p[1] / 100 if p else None,
                         r.mean("goodput"), r.ci95("goodput"), p[2] if p else None,
                         r.mean("cov"), r.ci95("cov"), p[3] if p else None,
                         r.mean("recoveries"), r.mean("lost_retransmits"), r.realtime_ok,
                         " ".join(f"{q.run_id}/{q.point}" for q in r.points)))
    notes = ["window metrics: timeouts = senders' TcpExtTCPTimeouts; loss = bottleneck drops / arrivals;"
             " goodput = receiver bytes per second per flow (KB = 1000 B); cov = pstdev / mean over flows;"
             " recoveries = SACK + NewReno recovery episodes; lost_retransmits = retransmissions found lost"
             " and re-sent without an RTO; docs/reproduction-tcpf.md", *notes]
    return _table("tcpf-tables", list(run_ids), TCPF_COLUMNS, rows, notes, source=(results, notes))


# --- Nouredine and Tobagi's service differentiation (results/servdiff.py; docs/reports-servdiff.md) -----
SERVDIFF_PAPER = "Nouredine-Tobagi"  # Computer Networks 40 (2002) 19-43


def _servdiff(build: Callable[[], Any]) -> Any:
    try:
        return build()
    except servdiff_mod.NoData as exc:
        raise LayoutError(str(exc)) from None


def _estimate_columns(name: str, unit: str, fmt: str | None) -> list[Column]:
    return [Column(name, "float", unit, fmt=fmt), Column(f"{name}_ci95", "float", unit, fmt=fmt)]


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


@layout("servdiff", "Interactive quality per scheme: pages over 5/10 s, echoes over 150 ms, FTP probes, loss per"
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
    """The servdiff table of a report (results.servdiff.table)."""
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
    return _table("servdiff", list(rep.run_ids), _servdiff_columns(), rows, list(rep.notes), source=rep)


SERVDIFF_FAIR_COLUMNS = [
    Column("scheme", "str"), Column("runs", "str"), Column("reps", "int"), Column("tag", "str"),
    Column("flows", "int"), Column("failed", "int"), Column("fair_share", "float", "bit/s", fmt=".6g"),
    *_estimate_columns("ratio", "1", ".3f"), Column("ratio_min", **RATIO), Column("ratio_max", **RATIO),
    *_estimate_columns("cov", "1", ".3f"), Column("samples", "int"), Column("sample_interval", "float", "s", fmt="g")]


@layout("servdiff-fair", "Long FTP throughput / fair share and its C.O.V. per RTT class",
        f"{SERVDIFF_PAPER} Figs 16-17", runs=(1, None), text=servdiff_mod.render_fair_text)
def servdiff_fair(store: Store, *run_ids: str) -> Table:
    """Per scheme and RTT class (and over all its flows): the long FTP (bulk) flows, the fair share
    (bottleneck rate / flows), each flow's throughput over it and the C.O.V. of its goodput
    samples, averaged over the class's flows and then over repetitions (95% interval)."""
    return servdiff_fair_table(_servdiff(lambda: servdiff_mod.fair_share(store, run_ids)))


def servdiff_fair_table(rep: servdiff_mod.FairShareReport) -> Table:
    """The servdiff-fair table of a report (results.servdiff.fair_share)."""
    rows = [(c.scheme.label, "+".join(c.scheme.runs), len(c.scheme.members), c.tag or "all", c.flows, c.failed,
             c.fair_share, c.ratio.value, c.ratio.ci95, c.ratio_min, c.ratio_max, c.cov.value, c.cov.ci95, c.samples,
             c.interval) for c in rep.classes]
    return _table("servdiff-fair", list(rep.run_ids), SERVDIFF_FAIR_COLUMNS, rows, list(rep.notes), source=rep)


# --- the CATNIP gap study (results/study.py; docs/reproduction.md "The gap, factor by factor") -----
STUDY_COLUMNS = [
    Column("context", "str"), Column("scheme", "str"), Column("side", "str"), Column("seeds", "int"),
    Column("left_out", "int"), *_estimate_columns("loss", "1", "%"), *_estimate_columns("high_loss", "1", "%"),
    *_estimate_columns("low_loss", "1", "%"), *_estimate_columns("page_mean", "s", ".3f"),
    *_estimate_columns("vs_today", "1", ".3f"), *_estimate_columns("vs_fifo", "1", ".3f")]


@layout("catnip-study", "The gap study: loss and relative page times per factor, side and buffer, over seeds",
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
    return _table("catnip-study", rep.run_ids, STUDY_COLUMNS, rows, rep.notes, source=rep)
