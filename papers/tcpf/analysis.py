"""The TCP-friendly marking paper's Tables 4-7 from our runs (docs/reproduction-tcpf.md).

Each point of an `edge_bottleneck` run with a bulk application measuring over a window is one
sample of a table cell. The cell comes from the point's resolved record (what its engines and
hosts ran: spec/record.py), never from its label or its scenario's fields:

* case (Table 3): the marker on the bottleneck's data direction (`tcpf` protecting
  retransmissions: TCPF; not protecting them: TCPF(O); `token_marker`: TB; none: NoMark) and the
  bottleneck's policy (frio, rio, fred, droptail, red);
* configuration (Table 2): SACK or Reno from `tcp.sack`; good or mistuned RED from the OUT
  maximum threshold (Table 1: 200 KB good, 30 KB mistuned). TailDrop has no RED parameters, so
  one TailDrop point belongs to both configurations of its TCP (A and C, or B and D);
* flows: senders x flows per sender of the bulk application;
* the TCP profile (`tcp.profile`): the period one and the modern default are separate series.

The metrics (section 6.1), over the bulk application's measured window:

* timeouts: the senders' RTOs (TcpExtTCPTimeouts, summed over the sending hosts);
* loss: packets dropped over packets arrived at the bottleneck's data direction (window_link);
* goodput: the mean over flows of the bytes the receiving application got per second, in KB/s
  (1 KB = 1000 bytes, so 100 x 11.421 KB/s is 9.1 Mbit/s on the paper's 10 Mbit/s link);
* C.O.V.: the standard deviation over the mean of the per-flow goodputs (population standard
  deviation: the flows are the whole population of the point).

Cells pool their points (seeds, repetitions, runs): the mean and its Student-t 95% interval.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from catnip.papers.tcpf import published as tcpf_paper
from catnip.results.samples import ci95
from catnip.results.point_record import record_of
from catnip.results.store import Store
from catnip.spec.record import AppRecord, PointRecord, RecordError

GOOD_OUT_MAX_TH = 200 * 1024      # Table 1, OUT max threshold, good (KB as the scenarios write it)
MISTUNED_OUT_MAX_TH = 30 * 1024   # Table 1, OUT max threshold, mistuned
METRICS = ("timeouts", "loss", "goodput", "cov")


class NotTcpf(ValueError):
    """A run or point that is not one of the paper's experiments."""


@dataclass(frozen=True)
class Cell:
    profile: str
    tcp: str            # "SACK" or "Reno"
    tuning: str | None  # "good", "mistuned", None for TailDrop (either), or "other"
    case: str
    flows: int

    def configs(self) -> list[str]:
        """The paper's configurations (Table 2) this cell belongs to."""
        return [c for c, (tcp, tuning) in tcpf_paper.CONFIGS.items()
                if tcp == self.tcp and (self.tuning is None or tuning == self.tuning)]


@dataclass
class PointResult:
    run_id: str
    point: int
    rep: int
    cell: Cell
    timeouts: int | None
    loss: float | None       # fraction
    goodput: float | None    # KB/s per flow, mean
    cov: float | None
    flows_measured: int
    realtime_ok: bool
    status: str
    # Why the timeouts are what they are: loss recovery episodes the senders entered (SACK or
    # NewReno fast recovery) and retransmissions they found lost again and re-sent without an RTO.
    recoveries: int | None = None
    lost_retransmits: int | None = None


@dataclass
class CellResult:
    cell: Cell
    points: list[PointResult] = field(default_factory=list)

    def values(self, metric: str) -> list[float]:
        return [getattr(p, metric) for p in self.points if getattr(p, metric) is not None]

    def mean(self, metric: str) -> float | None:
        v = self.values(metric)
        return statistics.fmean(v) if v else None

    def ci95(self, metric: str) -> float | None:
        v = self.values(metric)
        return ci95(statistics.stdev(v), len(v)) if len(v) > 1 else None

    @property
    def realtime_ok(self) -> bool:
        return all(p.realtime_ok for p in self.points)


def _bytes(threshold) -> int | None:
    return threshold.get("bytes") if isinstance(threshold, dict) else None


def _measured_bulk(record: PointRecord) -> AppRecord:
    bulk = [a for a in record.apps("bulk") if a.params.get("measure_for")]
    if len(bulk) != 1:
        raise NotTcpf("not one bulk application with a measured window")
    return bulk[0]


def classify(record: PointRecord) -> Cell:
    """The cell of a point from its resolved record (module docstring): the bottleneck's data
    direction as its engine ran it, the senders' TCP as their namespaces got it. NotTcpf otherwise."""
    kind = record.topology.get("kind")
    if kind != "edge_bottleneck":
        raise NotTcpf(f"topology {kind!r} is not edge_bottleneck")
    bulk = _measured_bulk(record)
    data = record.direction("bottleneck-data")
    if data is None:
        raise NotTcpf("no bottleneck data direction in the record")
    markers = [e for e in data.edge if e.get("kind") in ("tcpf", "token_marker")]
    if len(markers) > 1:
        raise NotTcpf("more than one marker on the bottleneck")
    m = markers[0] if markers else None
    marker = ("NoMark" if m is None else "TB" if m["kind"] == "token_marker"
              else "TCPF" if m.get("protect_retransmissions", True) else "TCPF(O)")
    policy = data.policy
    dropper = {"frio": "FRIO", "rio": "RIO", "fred": "FRED", "droptail": "TailDrop", "red": "RED"}.get(policy["kind"])
    if dropper is None:
        raise NotTcpf(f"bottleneck policy {policy['kind']!r} is none of the paper's droppers")
    out_max = (_bytes(policy["levels"][-1]["max_th"]) if policy["kind"] in ("rio", "frio")
               else _bytes(policy.get("max_th")))
    tuning = (None if dropper == "TailDrop" else "good" if out_max == GOOD_OUT_MAX_TH
              else "mistuned" if out_max == MISTUNED_OUT_MAX_TH else "other")
    sender = record.host(bulk.clients[0]) if bulk.clients else None
    sack = sender.sysctls.get("net.ipv4.tcp_sack", 1) if sender else 1  # the kernel's default: on
    flows = len(bulk.clients) * bulk.params["flows_per_client"]
    return Cell(profile=record.tcp_profile or "default", tcp="SACK" if int(sack) else "Reno",
                tuning=tuning, case=f"{marker}+{dropper}", flows=flows)


def point_result(store: Store, run_id: str, row) -> PointResult:
    """The metrics of one point (module docstring). NotTcpf when it is not the paper's experiment."""
    try:
        record = record_of(store.run(run_id), row)
    except RecordError as exc:
        raise NotTcpf(str(exc)) from None
    cell = classify(record)
    instance = _measured_bulk(record).instance
    samples = [s for s in store.samples(run_id, row["point"], app=instance)
               if s["error"] is None and s["value"] is not None]
    nstat: dict[str, float] = {}
    for s in samples:
        if s["metric"] == "window_nstat":
            nstat[s["flow"]] = nstat.get(s["flow"], 0) + s["value"]
    link = [s for s in samples if s["metric"] == "window_link"]
    arrived = sum(s["value"] for s in link if s["flow"].startswith("arrived."))
    dropped = sum(s["value"] for s in link if s["flow"].startswith("dropped."))
    goodputs = [s["value"] / 8 / 1000 for s in samples if s["metric"] == "window_goodput"]  # bit/s -> KB/s
    mean = statistics.fmean(goodputs) if goodputs else None
    return PointResult(
        run_id=run_id, point=row["point"], rep=row["rep"], cell=cell,
        timeouts=int(nstat["TcpExtTCPTimeouts"]) if "TcpExtTCPTimeouts" in nstat else None,
        loss=dropped / arrived if link and arrived > 0 else None,
        goodput=mean,
        cov=statistics.pstdev(goodputs) / mean if mean else None,
        flows_measured=len(goodputs), realtime_ok=bool(row["realtime_ok"]), status=row["status"],
        recoveries=(int(nstat.get("TcpExtTCPSackRecovery", 0) + nstat.get("TcpExtTCPRenoRecovery", 0))
                    if nstat else None),
        lost_retransmits=int(nstat["TcpExtTCPLostRetransmit"]) if "TcpExtTCPLostRetransmit" in nstat else None)


def cells(store: Store, run_ids: list[str]) -> tuple[list[CellResult], list[str]]:
    """Every measured cell of the runs, in the paper's order, and notes on what was left out."""
    found: dict[Cell, CellResult] = {}
    notes: list[str] = []
    tcpf_points = 0
    for run_id in run_ids:
        for row in store.points(run_id):
            try:
                p = point_result(store, run_id, row)
            except NotTcpf as exc:
                notes.append(f"{run_id} point {row['point']}: left out ({exc})")
                continue
            tcpf_points += 1
            if row["status"] != "done":
                notes.append(f"{run_id} point {row['point']}: left out, status {row['status']}")
                continue
            if p.flows_measured < p.cell.flows:
                notes.append(f"{run_id} point {row['point']}: left out, {p.flows_measured} of {p.cell.flows}"
                             " flows measured")
                continue
            found.setdefault(p.cell, CellResult(p.cell)).points.append(p)
    if not tcpf_points:
        raise NotTcpf(f"no point of {', '.join(run_ids)} is a TCP-friendly marking experiment (an edge_bottleneck"
                      " topology with a bulk application measuring over a window)")
    order = {c: i for i, c in enumerate(tcpf_paper.CASES)}
    tunings = {"good": 0, None: 0, "mistuned": 1}  # TailDrop (None) among the good RED cases, in Table 3's order
    ordered = sorted(found.values(), key=lambda c: (c.cell.profile, c.cell.tcp != "SACK", tunings.get(c.cell.tuning, 2),
                                                    order.get(c.cell.case, 99), -c.cell.flows))
    return ordered, notes


def _fmt(v: float | None, ci: float | None, spec: str) -> str:
    if v is None:
        return "-"
    return f"{v:{spec}}" + (f"±{ci:{spec}}" if ci is not None else "")


def render_text(source: tuple[list[CellResult], list[str]]) -> str:
    """The paper's layout: one table per TCP profile and configuration, the seven cases as rows,
    100 and 50 flows as column groups; each cell ours (mean ± 95% interval over points) and the
    paper's in brackets. '*' marks a row with a point that did not keep real time."""
    results, notes = source
    out = []
    profiles = sorted({r.cell.profile for r in results})
    for profile in profiles:
        for config, (tcp, tuning) in tcpf_paper.CONFIGS.items():
            mine = {(r.cell.case, r.cell.flows): r for r in results
                    if r.cell.profile == profile and config in r.cell.configs()}
            if not mine:
                continue
            flows = sorted({f for _, f in mine}, reverse=True)
            out.append(f"Table {tcpf_paper.TABLE_OF[config]} (Config {config}: {tcp}, {tuning} RED), TCP profile"
                       f" {profile}: ours (paper)")
            head = f"{'case':<16}" + "".join(
                f"| {n} flows: {'timeouts':>15} {'loss %':>15} {'goodput KB/s':>19} {'C.O.V.':>13} " for n in flows)
            out.append(head)
            for case in tcpf_paper.CASES:
                cols = []
                star = False
                for n in flows:
                    r = mine.get((case, n))
                    p = tcpf_paper.paper(config, case, n)
                    if r is None:
                        cols.append(f"| {'':{len(str(n)) + 7}} {'-':>15} {'-':>15} {'-':>19} {'-':>13} ")
                        continue
                    star |= not r.realtime_ok
                    loss = r.mean("loss")
                    loss_ci = r.ci95("loss")
                    cells_ = [
                        _fmt(r.mean("timeouts"), r.ci95("timeouts"), ".0f") + (f" ({p[0]})" if p else ""),
                        _fmt(None if loss is None else 100 * loss, None if loss_ci is None else 100 * loss_ci, ".2f")
                        + (f" ({p[1]:.2f})" if p else ""),
                        _fmt(r.mean("goodput"), r.ci95("goodput"), ".3f") + (f" ({p[2]:.3f})" if p else ""),
                        _fmt(r.mean("cov"), r.ci95("cov"), ".2f") + (f" ({p[3]:.2f})" if p else "")]
                    cols.append(f"| n={len(r.points):<{len(str(n)) + 5}} {cells_[0]:>15} {cells_[1]:>15}"
                                f" {cells_[2]:>19} {cells_[3]:>13} ")
                out.append(f"{case + ('*' if star else ''):<16}" + "".join(cols))
            out.append("")
    others = [r for r in results if r.cell.tuning == "other"]
    for r in others:
        out.append(f"(a {r.cell.case} cell with RED thresholds other than Table 1's is in the CSV/JSON only)")
    out.append("n: points pooled (seeds, repetitions); ±: Student-t 95% interval over them; paper: Tables 4-7.")
    out.append("TailDrop has no RED parameters: its points appear in both configurations of their TCP.")
    out += notes
    return "\n".join(out)

