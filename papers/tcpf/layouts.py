"""The TCP-friendly marking paper's Tables 4-7 as a report layout (tcpf-tables), moved here from
results/layouts.py with its name, table and text unchanged; the cells are analysis.py, the paper's
numbers published.py (docs/reproduction-tcpf.md)."""

from __future__ import annotations

from catnip.papers.tcpf import analysis as tcpf_mod
from catnip.papers.tcpf import published as tcpf_paper
from catnip.results import layouts
from catnip.results.store import Store
from catnip.results.table import Column, Table
from catnip.results.layouts import FRACTION, RATIO, LayoutError

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


@layouts.layout("tcpf-tables", "Timeouts, loss, goodput and its C.O.V. per marker and dropper, beside the paper's",
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
    return layouts.make_table("tcpf-tables", list(run_ids), TCPF_COLUMNS, rows, notes, source=(results, notes))
