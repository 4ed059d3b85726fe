"""The newCWV paper's report layouts (Figs 5, 7-9, 11, Tables 2-3), moved here from
results/layouts.py with their names, tables and texts unchanged; the reports are analysis.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from catnip.papers.newcwv import analysis as newcwv_mod
from catnip.results import layouts
from catnip.results.store import Store
from catnip.results.table import Column, Table
from catnip.results.layouts import FRACTION, PKTS, SECONDS, LayoutError

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


@layouts.layout("newcwv-gain", "newCWV's gain over the baseline per burst size and idle period",
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
    return layouts.make_table("newcwv-gain", rep.run_ids, GAIN_COLUMNS, rows, notes + rep.notes, source=rep)


LOSS_COLUMNS = [
    Column("point", "int"), Column("label", "str"), Column("sender", "str"), Column("host_tag", "str"),
    Column("size", "int", "B"), Column("idle", "float", "s", fmt="g"), Column("runs", "int"), Column("bursts", "int"),
    Column("failed", "int"), Column("retrans_mean", **SEGMENTS), Column("retrans_ci95", **SEGMENTS),
    Column("interval", "str"), Column("retrans_total", **SEGMENTS), Column("bottleneck_drops", **PKTS),
    Column("bottleneck_arrived", **PKTS), Column("bottleneck_loss", **FRACTION), Column("realtime_ok", "bool")]


@layouts.layout("newcwv-loss", "Retransmitted segments per burst, and bottleneck drops, per sender",
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
    return layouts.make_table("newcwv-loss", rep.run_ids, LOSS_COLUMNS, rows, rep.notes, source=rep)


TRACE_COLUMNS = [
    Column("point", "int"), Column("label", "str"), Column("flow", "str"), Column("t", "float", "s", fmt=".4f"),
    Column("event", "str"), Column("cwnd", "int", "segments"), Column("ssthresh", "int", "segments"),
    Column("pipeack", **SEGMENTS), Column("pipeack_sample", **SEGMENTS), Column("pipeack_bytes", "int", "B"),
    Column("sample_bytes", "int", "B"), Column("mss", "int", "B")]


@layouts.layout("newcwv-trace", "newCWV's cwnd and pipeACK over time", f"{NEWCWV_PAPER} Fig. 5",
        text=newcwv_mod.render_trace_text)
def newcwv_trace(store: Store, run_id: str) -> Table:
    """Per point, connection and traced event: seconds since the point's first event, cwnd,
    ssthresh, pipeACK (the max filter) and the round's pipeACK sample in segments of the
    scenario's MSS (and in bytes)."""
    rep = _newcwv(lambda: newcwv_mod.trace_report(store, run_id))
    rows = [(p.group.point, p.group.label, r.flow, r.t, r.event, r.cwnd, r.ssthresh, p.segments(r.pipeack_bytes),
             p.segments(r.sample_bytes), r.pipeack_bytes, r.sample_bytes, p.mss)
            for p in rep.points for r in p.rows]
    return layouts.make_table("newcwv-trace", [rep.run_id], TRACE_COLUMNS, rows, rep.notes, source=rep)


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
    return layouts.make_table("ftp-throughput", rep.run_ids, columns, rows, notes + rep.notes, source=rep)


@layouts.layout("ftp-throughput", "The FTP flow's throughput over time per sender", f"{NEWCWV_PAPER} Fig. 11",
        runs=(1, None), text=newcwv_mod.render_ftp_text)
def ftp_throughput(store: Store, *run_ids: str) -> Table:
    """The bulk application's goodput binned over time (bins of its iperf3 interval), one column
    per point; then each point's mean (95% interval over runs), its ratio to the baseline point's,
    and Jain's index of the FTP and HTTP goodputs while the bursts were under way."""
    return ftp_table(_newcwv(lambda: newcwv_mod.ftp_throughput(store, run_ids)))
