"""The newCWV paper's reports from stored samples (Hossain and Fairhurst; docs/reproduction-newcwv.md):
the gain of the newCWV sender over the baseline per (burst size, idle period) cell (Figs 7-8,
Tables 2-3), retransmissions per burst and bottleneck drops (Fig. 9), cwnd and pipeACK over time
(Fig. 5) and the FTP flow's throughput (Fig. 11). Plain functions over the store returning
dataclasses; papers/newcwv/ turns them into tables (text, CSV, JSON: layouts.py) and the run page's
charts (views.py). docs/reports-newcwv.md says how to read each and gives the formulas.

Runs. Every function takes one or more runs of ONE scenario: one run per seed, so the runs are
the repetitions the 95% intervals come from. Points are matched across runs by their sweep
assignment (as results/pooled.py does); only points that finished (`done`) count, the others are
listed in the notes.

Senders. A point's sender is what the burst application's servers ran, read from the point's
record (spec/record.py: their namespaces' TCP settings): congestion control, pacing and pacing
ratio, slow start after idle. A newCWV point (spec.senders.NEWCWV) is compared with every baseline
point (any other congestion control) whose other assignments are the same: the assignment's leaves
that do not choose the burst servers' sender (`tcp.groups.GROUP.{congestion_control, pacing,
pacing_ratio, slow_start_after_idle, newcwv...}`, and `tcp.congestion_control` where it is the
congestion control those servers ran).

Gain (paper section 4.1): Gain = mean over paired bursts of (Tr - Tc)/Tr, Tr the baseline's
burst time and Tc newCWV's; beside it the ratio of means (mean Tr - mean Tc)/mean Tr over the
same pairs. Bursts are paired by their order in time within a cell, per client host and run
(docs/reproduction-newcwv.md, gap 9): the k-th burst of a cell at the baseline point with the k-th of the
same cell at the newCWV point, both drawn in the same order from the same seed. A pair with a
failed burst (an error, e.g. a timeout) on either side is dropped; failures and bursts without a
partner are counted. Estimates pool every pair of every run; the 95% interval is over the runs
(Student t on the per-run estimates, runs - 1 degrees of freedom) when two or more runs have
pairs in the cell, else over the bursts of the one run (a paired t interval; for the ratio of
means its linearisation, the ratio estimator's variance).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from catnip.results.report import loss_summary
from catnip.results.samples import ci95, t975
from catnip.results.point_record import record_of
from catnip.results.store import Store
from catnip.spec.record import PointRecord, RecordError
from catnip.spec import senders
from catnip.results.labels import label_of, point_label

DEFAULT_MSS = 1460  # bytes: MTU 1500 less 40 bytes of IPv4 and TCP headers (topology.mss unset)
TIMESTAMP_OPTION = 12  # bytes of TCP options in every segment with timestamps (RFC 7323: 10, padded to 12)
SENDER_FIELDS = ("congestion_control", "pacing", "pacing_ratio", "slow_start_after_idle", "newcwv")
TRACE_APP = "sender"  # controller/point.py records the newCWV trace under this application name


class NoData(ValueError):
    """The runs do not hold what a report needs (no burst application, different scenarios...)."""


# --- runs, points and senders -------------------------------------------------------------------
@dataclass(frozen=True)
class Sender:
    """The burst servers' sender at a point."""
    congestion_control: str
    pacing: str = "off"                        # off | internal | fq
    pacing_ratio: int | None = None            # percent of cwnd/SRTT, when pacing
    slow_start_after_idle: bool | None = None  # as the servers ran it; None: not known

    @property
    def is_newcwv(self) -> bool:
        return self.congestion_control == senders.NEWCWV

    def pacing_text(self) -> str:
        return "pacing off" if self.pacing == "off" else f"pacing {self.pacing} {self.pacing_ratio}%"

    @property
    def restart_not_default(self) -> bool:
        """Slow start after idle set against this sender's default (on, but off for the senders that
        keep their window over idle: spec.senders.KEEP_CWND_OVER_IDLE), so a label must say it."""
        default = self.congestion_control not in senders.KEEP_CWND_OVER_IDLE
        return self.slow_start_after_idle is not None and self.slow_start_after_idle != default

    def label(self) -> str:
        extra = "" if not self.restart_not_default else \
            f", slow start after idle {'on' if self.slow_start_after_idle else 'off'}"
        return f"{self.congestion_control}, {self.pacing_text()}{extra}"

    def slug(self) -> str:
        """A short name fit for a CSV header: cc, "+pace-MODE-RATIO" when paced."""
        return self.congestion_control + ("" if self.pacing == "off" else f"+pace-{self.pacing}-{self.pacing_ratio}")


def apps_of(record: PointRecord, kind: str) -> list[dict[str, Any]]:
    """The parameters of a point's applications of a kind, as it ran them."""
    return [a.params for a in record.apps(kind)]


def instance(app: dict[str, Any]) -> str:
    return app.get("name") or app["kind"]


def _group_tcp(record: PointRecord, group: str | None) -> dict[str, Any]:
    """The TCP settings a group's hosts ran (its first host's); without a group, the first host's."""
    tcp = record.group_tcp(group) if group else None
    if tcp is None:
        if not record.hosts:
            raise NoData("a point whose record has no hosts")
        tcp = record.hosts[0].tcp
    return tcp


def sender_of(record: PointRecord, group: str | None) -> Sender:
    """The sender a host group's hosts ran at a point (its record)."""
    tcp = _group_tcp(record, group)
    pacing = tcp["pacing"]
    return Sender(tcp["congestion_control"], pacing, None if pacing == "off" else tcp["pacing_ratio"],
                  tcp["slow_start_after_idle"])


def _flatten(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(f"{prefix}.{k}", v))
        return out
    return {prefix: value}


def context_of(assignment: dict[str, Any], record: PointRecord, group: str | None) -> dict[str, Any]:
    """A point's sweep assignment less what chooses the burst servers' sender: the leaves two points
    must share for one to be the other's baseline."""
    flat: dict[str, Any] = {}
    for key, value in assignment.items():
        flat.update(_flatten(key, value))
    chosen = [f"tcp.groups.{group}.{f}" for f in SENDER_FIELDS] if group else []
    # The default congestion control chooses the sender where the servers ran the one it sets.
    if not group or flat.get("tcp.congestion_control") == _group_tcp(record, group)["congestion_control"]:
        chosen.append("tcp.congestion_control")
    return {k: v for k, v in flat.items() if not any(k == c or k.startswith(c + ".") for c in chosen)}


@dataclass
class PointGroup:
    """One sweep assignment over the runs given: the point in each run that has it."""
    point: int                                   # its number in the first run that has it
    assignment: dict[str, Any]
    label: str
    record: PointRecord                          # what the first member ran (spec/record.py)
    sender: Sender
    context: str                                 # context_of as sorted JSON
    context_label: str
    members: dict[str, int] = field(default_factory=dict)        # run id -> point (done points only)
    realtime: dict[str, bool | None] = field(default_factory=dict)  # run id -> realtime_ok
    excluded: list[tuple[str, int, str]] = field(default_factory=list)  # (run, point, status) not done

    def realtime_ok(self, runs: Iterable[str] | None = None) -> bool | None:
        """Kept real time in every member (of `runs`): False if any did not, None if any is unknown."""
        flags = [self.realtime[r] for r in (self.members if runs is None else runs) if r in self.realtime]
        if not flags:
            return None
        if any(f is False for f in flags):
            return False
        return None if any(f is None for f in flags) else True


@dataclass
class RunSet:
    """Runs of one scenario with their points grouped by assignment."""
    run_ids: list[str]
    name: str
    groups: list[PointGroup]
    notes: list[str]


def load_runs(store: Store, run_ids: Sequence[str]) -> list[Any]:
    """The runs (ids or unambiguous prefixes), checked to be of one scenario of the general
    model. KeyError for an unknown run, NoData for runs that do not go together."""
    if not run_ids:
        raise NoData("no runs given")
    runs = []
    for rid in run_ids:
        if "+" in rid:
            raise NoData(f"{rid!r}: give the runs (one per seed) as separate arguments, not joined with '+'")
        run = store.find_run(rid)
        if run is None:
            raise KeyError(f"no run {rid!r} in {store.path} (see `catnip list`)")
        if json.loads(run["scenario"]).get("kind") == "transfers":
            raise NoData(f"run {run['id']} is a transfer measurement: `catnip model validate {run['id']}` reports it")
        runs.append(run)
    ids = [r["id"] for r in runs]
    if len(set(ids)) != len(ids):
        raise NoData(f"run {next(i for i in ids if ids.count(i) > 1)} is given twice")
    names = sorted({r["name"] for r in runs})
    if len(names) > 1:
        raise NoData(f"the runs are repetitions of one scenario, not of {', '.join(names)}")
    return runs


def point_groups(store: Store, runs: list[Any], group_of: Any) -> RunSet:
    """The points of `runs` grouped by assignment (in order of first appearance). `group_of(record)`
    names the host group whose sender a point is known by (None: the first host's)."""
    groups: dict[str, PointGroup] = {}
    notes: list[str] = []
    for run in runs:
        for pt in store.points(run["id"]):
            assignment = json.loads(pt["assignment"])
            key = json.dumps(assignment, sort_keys=True)
            g = groups.get(key)
            if g is None:
                try:
                    record = record_of(run, pt)
                except RecordError as exc:
                    raise NoData(str(exc)) from None
                host_group = group_of(record)
                context = context_of(assignment, record, host_group)
                g = groups[key] = PointGroup(pt["point"], assignment, label_of(run, pt), record,
                                             sender_of(record, host_group), json.dumps(context, sort_keys=True),
                                             point_label(context, json.loads(run["sweep"] or "{}"), default=""))
            if pt["status"] != "done":
                g.excluded.append((run["id"], pt["point"], pt["status"]))
                notes.append(f"run {run['id']} point {pt['point']} ({g.label}) left out: {pt['status']}")
                continue
            g.members[run["id"]] = pt["point"]
            g.realtime[run["id"]] = None if pt["realtime_ok"] is None else bool(pt["realtime_ok"])
    return RunSet([r["id"] for r in runs], runs[0]["name"], list(groups.values()), notes)


def burst_app(record: PointRecord) -> dict[str, Any] | None:
    found = apps_of(record, "burst")
    return found[0] if found else None


def _burst_group(record: PointRecord) -> str | None:
    app = burst_app(record)
    return app.get("servers") if app else None


def burst_runs(store: Store, run_ids: Sequence[str]) -> tuple[RunSet, str]:
    """The runs grouped by point, and the burst application's instance name (its first point's)."""
    runs = load_runs(store, run_ids)
    rs = point_groups(store, runs, _burst_group)
    apps = [burst_app(g.record) for g in rs.groups]
    if not any(apps):
        raise NoData(f"run(s) {', '.join(rs.run_ids)} have no burst application (the newCWV scenarios' bursts)")
    name = instance(next(a for a in apps if a))
    kinds = {instance(a) for a in apps if a}
    if len(kinds) > 1:
        rs.notes.append(f"burst applications named {', '.join(sorted(kinds))}: reporting {name}")
    return rs, name


def pairings(rs: RunSet) -> tuple[list[tuple[PointGroup, PointGroup]], list[str]]:
    """(newCWV point, baseline point) for every newCWV point and every baseline point with the
    same context; notes for newCWV points without one."""
    out, notes = [], []
    for new in (g for g in rs.groups if g.sender.is_newcwv):
        bases = [b for b in rs.groups if not b.sender.is_newcwv and b.context == new.context]
        if not bases:
            notes.append(f"point {new.point} ({new.label}): no baseline point (a sender other than {senders.NEWCWV})"
                         " with the same other assignments" + (f" ({new.context_label})" if new.context_label else ""))
        out += [(new, b) for b in bases]
    if not any(g.sender.is_newcwv for g in rs.groups):
        notes.append(f"no point's burst servers run {senders.NEWCWV}: nothing to compare")
    return out, notes


def comparison_label(new: Sender, base: Sender, context_label: str = "") -> str:
    """'catnip_newcwv vs reno, pacing off', or both senders in full when their pacing differs."""
    text = (f"{new.congestion_control} vs {base.congestion_control}, {new.pacing_text()}"
            if (new.pacing, new.pacing_ratio) == (base.pacing, base.pacing_ratio) and
            not new.restart_not_default and not base.restart_not_default
            else f"{new.label()} vs {base.label()}")
    return f"{text} [{context_label}]" if context_label else text


# --- bursts and cells -----------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class Cell:
    """A (burst size, idle period) cell; host_tag the client host's delay class when it has one."""
    size: int        # bytes
    idle: float      # seconds
    host_tag: str = ""


def parse_cell(tag: str | None) -> Cell | None:
    """The cell of a burst sample's tag "SIZEB/IDLEs" or "HOSTTAG/SIZEB/IDLEs" (workloads/apps/burst.py)."""
    if not tag:
        return None
    parts = tag.rsplit("/", 2)
    if len(parts) < 2 or not parts[-2].endswith("B") or not parts[-1].endswith("s"):
        return None
    try:
        return Cell(int(parts[-2][:-1]), float(parts[-1][:-1]), parts[0] if len(parts) == 3 else "")
    except ValueError:
        return None


def size_text(size: int) -> str:
    return f"{size // 1024} KB" if size % 1024 == 0 else f"{size} B"


@dataclass(frozen=True)
class Burst:
    client: str
    t: float | None
    time: float | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None and self.time is not None and self.time > 0


def bursts_by_cell(store: Store, run_id: str, point: int, app: str) -> dict[Cell, dict[str, list[Burst]]]:
    """A point's bursts per cell and client host, each list in order of time."""
    out: dict[Cell, dict[str, list[Burst]]] = {}
    for r in store.samples(run_id, point, app, "burst_time"):
        cell = parse_cell(r["tag"])
        if cell is None:
            continue
        out.setdefault(cell, {}).setdefault(r["host"] or "", []).append(Burst(r["host"] or "", r["t"], r["value"],
                                                                             r["error"]))
    for clients in out.values():
        for lst in clients.values():
            lst.sort(key=lambda b: (b.t is None, b.t or 0.0))
    return out


def values_by_cell(store: Store, run_id: str, point: int, app: str, metric: str) -> dict[Cell, list[float]]:
    """A point's values of one metric per cell (samples without an error)."""
    out: dict[Cell, list[float]] = {}
    for r in store.samples(run_id, point, app, metric):
        cell = parse_cell(r["tag"])
        if cell is not None and r["error"] is None and r["value"] is not None:
            out.setdefault(cell, []).append(r["value"])
    return out


@dataclass
class Paired:
    """The bursts of one cell at the baseline and newCWV points of one run, paired by order."""
    pairs: list[tuple[float, float]] = field(default_factory=list)   # (Tr, Tc) seconds
    bursts_baseline: int = 0
    bursts_newcwv: int = 0
    failed_baseline: int = 0
    failed_newcwv: int = 0
    unpaired: int = 0   # bursts beyond the other side's count (per client)

    def add(self, other: Paired) -> None:
        self.pairs += other.pairs
        for name in ("bursts_baseline", "bursts_newcwv", "failed_baseline", "failed_newcwv", "unpaired"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def pair_bursts(baseline: dict[str, list[Burst]], newcwv: dict[str, list[Burst]]) -> Paired:
    """Per client host, the k-th baseline burst with the k-th newCWV burst (lists in order of
    time); a pair with a failed side is dropped, its failure counted."""
    out = Paired()
    for client in sorted(set(baseline) | set(newcwv)):
        b, n = baseline.get(client, []), newcwv.get(client, [])
        out.bursts_baseline += len(b)
        out.bursts_newcwv += len(n)
        out.failed_baseline += sum(not x.ok for x in b)
        out.failed_newcwv += sum(not x.ok for x in n)
        out.unpaired += abs(len(b) - len(n))
        out.pairs += [(x.time, y.time) for x, y in zip(b, n) if x.ok and y.ok]
    return out


# --- the statistics -------------------------------------------------------------------------------
def mean_of_ratios(pairs: Sequence[tuple[float, float]]) -> float | None:
    """The paper's gain: the mean over pairs of (Tr - Tc)/Tr (section 4.1)."""
    return statistics.fmean((tr - tc) / tr for tr, tc in pairs) if pairs else None


def ratio_of_means(pairs: Sequence[tuple[float, float]]) -> float | None:
    """(mean Tr - mean Tc)/mean Tr over the same pairs."""
    if not pairs:
        return None
    mr = statistics.fmean(tr for tr, _ in pairs)
    return (mr - statistics.fmean(tc for _, tc in pairs)) / mr


def mean_of_ratios_ci(pairs: Sequence[tuple[float, float]]) -> float | None:
    """Half-width of the paired t interval of the mean of (Tr - Tc)/Tr over the bursts."""
    if len(pairs) < 2:
        return None
    return ci95(statistics.stdev((tr - tc) / tr for tr, tc in pairs), len(pairs))


def ratio_of_means_ci(pairs: Sequence[tuple[float, float]]) -> float | None:
    """Half-width of the 95% interval of 1 - mean Tc/mean Tr over the bursts: the ratio q = mean
    Tc/mean Tr linearised, q - q0 ~ mean(Tc - q0 Tr)/mean Tr, so its standard error is the sdev
    of e_i = (Tc_i - q Tr_i)/mean Tr over sqrt(n) (the ratio estimator's; it keeps the pairs'
    covariance), with Student t's n - 1 degrees of freedom."""
    n = len(pairs)
    if n < 2:
        return None
    mr = statistics.fmean(tr for tr, _ in pairs)
    q = statistics.fmean(tc for _, tc in pairs) / mr
    return t975(n - 1) * statistics.stdev((tc - q * tr) / mr for tr, tc in pairs) / math.sqrt(n)


def across_runs_ci(values: Sequence[float]) -> float | None:
    """Half-width of the Student t 95% interval of the mean of per-run values (None below two)."""
    return ci95(statistics.stdev(values), len(values)) if len(values) > 1 else None


def mean(values: Iterable[float]) -> float | None:
    v = list(values)
    return statistics.fmean(v) if v else None


def jain(values: Sequence[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n when one has all."""
    sq = sum(x * x for x in values)
    return sum(values) ** 2 / (len(values) * sq) if values and sq > 0 else None


# --- newcwv-gain ----------------------------------------------------------------------------------
@dataclass
class GainCell:
    cell: Cell
    runs: int                  # runs with pairs in this cell
    paired: Paired             # pooled over the runs
    mean_baseline: float | None
    mean_newcwv: float | None
    gain: float | None         # mean of (Tr - Tc)/Tr, a fraction
    gain_ci95: float | None
    gain_rom: float | None     # (mean Tr - mean Tc)/mean Tr
    gain_rom_ci95: float | None
    interval: str | None       # "runs" (t over per-run estimates) | "bursts" (paired t, one run) | None
    cwnd_baseline: float | None  # mean burst-start cwnd (segments)
    cwnd_newcwv: float | None


@dataclass
class Comparison:
    newcwv: PointGroup
    baseline: PointGroup
    label: str
    runs: list[str]            # runs where both points finished
    cells: list[GainCell]
    realtime_ok: bool | None


@dataclass
class GainReport:
    run_ids: list[str]
    name: str
    app: str
    comparisons: list[Comparison]
    notes: list[str]


def gain_cell(cell: Cell, per_run: list[Paired], cwnd_b: list[float], cwnd_n: list[float]) -> GainCell:
    pooled = Paired()
    for p in per_run:
        pooled.add(p)
    pairs = pooled.pairs
    with_pairs = [p.pairs for p in per_run if p.pairs]
    if len(with_pairs) > 1:
        interval = "runs"
        g_ci = across_runs_ci([mean_of_ratios(p) for p in with_pairs])
        r_ci = across_runs_ci([ratio_of_means(p) for p in with_pairs])
    elif len(pairs) > 1:
        interval, g_ci, r_ci = "bursts", mean_of_ratios_ci(pairs), ratio_of_means_ci(pairs)
    else:
        interval, g_ci, r_ci = None, None, None
    return GainCell(cell, len(with_pairs), pooled, mean(tr for tr, _ in pairs), mean(tc for _, tc in pairs),
                    mean_of_ratios(pairs), g_ci, ratio_of_means(pairs), r_ci, interval, mean(cwnd_b), mean(cwnd_n))


def gain_report(store: Store, run_ids: Sequence[str]) -> GainReport:
    """newCWV's gain over the baseline per cell, for every (newCWV point, baseline point) pair of
    the runs (Figs 7-8, Tables 2-3)."""
    rs, app = burst_runs(store, run_ids)
    pairs, notes = pairings(rs)
    comparisons = []
    for new, base in pairs:
        runs = [r for r in rs.run_ids if r in new.members and r in base.members]
        per_cell: dict[Cell, list[Paired]] = {}
        cwnd: dict[Cell, tuple[list[float], list[float]]] = {}
        for r in runs:
            b_cells = bursts_by_cell(store, r, base.members[r], app)
            n_cells = bursts_by_cell(store, r, new.members[r], app)
            for cell in set(b_cells) | set(n_cells):
                per_cell.setdefault(cell, []).append(pair_bursts(b_cells.get(cell, {}), n_cells.get(cell, {})))
            for side, pt in ((0, base.members[r]), (1, new.members[r])):
                for cell, vals in values_by_cell(store, r, pt, app, "burst_cwnd").items():
                    cwnd.setdefault(cell, ([], []))[side].extend(vals)
        cells = [gain_cell(c, per_cell[c], *cwnd.get(c, ([], []))) for c in sorted(per_cell)]
        missing = [c for c in cells if not c.paired.bursts_baseline or not c.paired.bursts_newcwv]
        label = comparison_label(new.sender, base.sender, new.context_label)
        if not runs:
            notes.append(f"{label}: no run where both point {new.point} and point {base.point} finished")
        for c in missing:
            side = "baseline" if not c.paired.bursts_baseline else "newCWV"
            notes.append(f"{label}: cell {size_text(c.cell.size)} / {c.cell.idle:g} s has no {side} bursts")
        rt = [new.realtime_ok(runs), base.realtime_ok(runs)]
        comparisons.append(Comparison(new, base, label, runs, cells,
                                      False if False in rt else None if None in rt else True))
    return GainReport(rs.run_ids, rs.name, app, comparisons, rs.notes + notes)


def _interval_text(runs: list[str], cells: list[GainCell]) -> str:
    kinds = {c.interval for c in cells if c.interval}
    if kinds == {"runs"}:
        return f"95% intervals over the {len(runs)} runs (Student t, {len(runs) - 1} df, on per-run estimates)"
    if kinds == {"bursts"}:
        return "one run: 95% intervals over the bursts (paired t interval)"
    return "95% intervals over runs where two or more runs have pairs, else over the bursts of one run"


SIZE_IDLE = "size \\ idle"


def _grid(cells: list[GainCell], value: Any, width: int = 15) -> list[str]:
    """Sizes as rows, idle periods as columns (the paper's Figs 7-8 and Tables 2-3); '-' where a
    cell has no value. `value(cell)` gives the text of a cell."""
    idles = sorted({c.cell.idle for c in cells})
    out = []
    for tag in sorted({c.cell.host_tag for c in cells}):
        if tag:
            out.append(f"  client hosts {tag}:")
        by = {(c.cell.size, c.cell.idle): c for c in cells if c.cell.host_tag == tag}
        out.append(f"  {SIZE_IDLE:>11}" + "".join(f"{f'{i:g} s':>{width}}" for i in idles))
        for size in sorted({s for s, _ in by}):
            out.append(f"  {size_text(size):>11}" + "".join(
                f"{(value(by[(size, i)]) if (size, i) in by else '-'):>{width}}" for i in idles))
    return out


def _pct(v: float | None, ci: float | None = None) -> str:
    if v is None:
        return "-"
    return f"{100 * v:.1f}%" + (f" ±{100 * ci:.1f}" if ci is not None else "")


def _num(v: float | None, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def render_gain_text(rep: GainReport) -> str:
    """One grid per comparison, sizes as rows and idle periods as columns, like the paper's."""
    out = [(f"newCWV gain over the baseline per (burst size, idle period) cell: {rep.name}, run(s)"
            f" {', '.join(rep.run_ids)} (Hossain and Fairhurst, Figs 7-8, Tables 2-3)")]
    for c in rep.comparisons:
        rt = {True: "kept real time", False: "real time NOT kept", None: "real time unknown"}[c.realtime_ok]
        out += ["", f"{c.label}: point {c.newcwv.point} vs baseline point {c.baseline.point}, {rt}",
                f"  {_interval_text(c.runs, c.cells)}", "",
                "  Gain: mean over paired bursts of (Tr - Tc)/Tr (paper section 4.1)"]
        out += _grid(c.cells, lambda g: _pct(g.gain, g.gain_ci95))
        out += ["", "  Gain: ratio of means (mean Tr - mean Tc)/mean Tr"]
        out += _grid(c.cells, lambda g: _pct(g.gain_rom, g.gain_rom_ci95))
        out += ["", "  Mean burst time (s), baseline / newCWV"]
        out += _grid(c.cells, lambda g: f"{_num(g.mean_baseline)} / {_num(g.mean_newcwv)}")
        out += ["", "  Pairs (failed bursts baseline/newCWV, unpaired)"]
        out += _grid(c.cells, lambda g: f"{len(g.paired.pairs)} ({g.paired.failed_baseline}/{g.paired.failed_newcwv},"
                                        f" {g.paired.unpaired})")
        out += ["", "  Burst-start cwnd (segments), baseline / newCWV"]
        out += _grid(c.cells, lambda g: f"{_num(g.cwnd_baseline, '.1f')} / {_num(g.cwnd_newcwv, '.1f')}")
    if rep.notes:
        out += [""] + rep.notes
    return "\n".join(out)


# --- newcwv-loss ----------------------------------------------------------------------------------
@dataclass
class LossCell:
    cell: Cell
    runs: int                 # runs with retransmission samples in the cell
    bursts: int               # bursts with a retransmission count
    failed: int               # bursts that failed (burst_time with an error)
    mean: float | None        # retransmitted segments per burst
    ci95: float | None
    interval: str | None      # "runs" | "bursts" | None
    total: float


@dataclass
class LossPoint:
    group: PointGroup
    runs: list[str]
    cells: list[LossCell]
    drops: int | None         # the bottleneck's drops (engine counters, data direction), over the runs
    arrived: int | None

    @property
    def loss(self) -> float | None:
        return self.drops / self.arrived if self.arrived else None


@dataclass
class LossReport:
    run_ids: list[str]
    name: str
    app: str
    points: list[LossPoint]
    notes: list[str]


def loss_report(store: Store, run_ids: Sequence[str]) -> LossReport:
    """Per point and cell, the retransmitted segments per burst (burst_retrans), and the
    bottleneck's drops per point (Fig. 9)."""
    rs, app = burst_runs(store, run_ids)
    points = []
    for g in rs.groups:
        runs = [r for r in rs.run_ids if r in g.members]
        per_run: dict[Cell, list[list[float]]] = {}
        failed: dict[Cell, int] = {}
        drops = arrived = None
        for r in runs:
            for cell, vals in values_by_cell(store, r, g.members[r], app, "burst_retrans").items():
                per_run.setdefault(cell, []).append(vals)
            for cell, clients in bursts_by_cell(store, r, g.members[r], app).items():
                failed[cell] = failed.get(cell, 0) + sum(not b.ok for lst in clients.values() for b in lst)
            data = loss_summary(store.link_stats(r, g.members[r])).get("bottleneck-data")
            if data is not None:
                drops, arrived = (drops or 0) + data["dropped"], (arrived or 0) + data["arrived"]
        cells = []
        for cell in sorted(set(per_run) | set(failed)):
            runs_vals = [v for v in per_run.get(cell, []) if v]
            pooled = [x for v in runs_vals for x in v]
            if len(runs_vals) > 1:
                interval, ci = "runs", across_runs_ci([statistics.fmean(v) for v in runs_vals])
            elif len(pooled) > 1:
                interval, ci = "bursts", ci95(statistics.stdev(pooled), len(pooled))
            else:
                interval, ci = None, None
            cells.append(LossCell(cell, len(runs_vals), len(pooled), failed.get(cell, 0), mean(pooled), ci, interval,
                                  float(sum(pooled))))
        points.append(LossPoint(g, runs, cells, drops, arrived))
    return LossReport(rs.run_ids, rs.name, app, points, rs.notes)


def render_loss_text(rep: LossReport) -> str:
    out = [(f"Retransmitted segments per burst and bottleneck drops: {rep.name}, run(s) {', '.join(rep.run_ids)}"
            " (Hossain and Fairhurst, Fig. 9)")]
    for p in rep.points:
        drops = ("no bottleneck counters" if p.arrived is None else
                 f"bottleneck drops {p.drops} of {p.arrived} packets ({_pct(p.loss)})")
        kinds = {c.interval for c in p.cells if c.interval}
        over = ("over the runs (Student t on per-run means)" if kinds == {"runs"} else
                "over the bursts of one run (Student t)" if kinds == {"bursts"} else "over runs, else bursts")
        out += ["", f"point {p.group.point}: {p.group.sender.label()} ({p.group.label}), {len(p.runs)} run(s), {drops}",
                f"  Retransmitted segments per burst: mean ±95% interval {over} (bursts counted)"]
        out += _grid(p.cells, lambda c: (f"{_num(c.mean, '.2f')}" + (f" ±{c.ci95:.2f}" if c.ci95 is not None else "")
                                         + f" ({c.bursts})"), width=18)
        if any(c.failed for c in p.cells):
            out += ["  Failed bursts"] + _grid(p.cells, lambda c: str(c.failed), width=18)
    if rep.notes:
        out += [""] + rep.notes
    return "\n".join(out)


# --- newcwv-trace ---------------------------------------------------------------------------------
@dataclass
class TraceRow:
    t: float                  # seconds since the point's first traced event
    flow: str
    event: str
    cwnd: int | None          # segments
    ssthresh: int | None      # segments (None: still the kernel's initial infinity)
    pipeack_bytes: int | None  # None while pipeACK is undefined
    sample_bytes: int | None   # the round's pipeACK sample, when the event took one


@dataclass
class TracePoint:
    group: PointGroup
    run_id: str
    mss: int
    t0: float | None          # CLOCK_MONOTONIC of the first event
    rows: list[TraceRow]

    def segments(self, v: int | None) -> float | None:
        return None if v is None else v / self.mss

    def summary(self) -> str:
        """Fig. 5's comparison in one line: how many rounds were sampled, at how many pipeACK stood
        above the round's own sample (an earlier, larger round held by the filter), the largest
        pipeACK and the largest cwnd with its time."""
        samples = [r for r in self.rows if r.sample_bytes is not None]
        held = sum(1 for r in samples if r.pipeack_bytes is not None and r.pipeack_bytes > r.sample_bytes)
        pipes = [r.pipeack_bytes for r in self.rows if r.pipeack_bytes is not None]
        top = max((r for r in self.rows if r.cwnd is not None), key=lambda r: r.cwnd, default=None)
        return (f"{len(samples)} pipeACK samples, pipeACK above the sample at {held};"
                f" largest pipeACK {_num(self.segments(max(pipes, default=None)), '.1f')} segments;"
                f" largest cwnd {_num(top.cwnd if top else None, 'd')} segments"
                + (f" at {top.t:.2f} s" if top else ""))


@dataclass
class TraceReport:
    run_id: str
    name: str
    points: list[TracePoint]
    notes: list[str]


def mss_of(record: PointRecord, group: str | None) -> int:
    """The payload bytes of a full segment, the unit of cwnd: the point's MSS (topology.mss, else
    Linux's for MTU 1500) less the 12 bytes of the timestamp option where the group's hosts ran
    with timestamps (the default), as the kernel's mss_cache is."""
    hosts = record.hosts_of(group) if group else record.hosts
    stamps = hosts[0].sysctls.get("net.ipv4.tcp_timestamps", 1) if hosts else 1
    return int(record.topology.get("mss") or DEFAULT_MSS) - (TIMESTAMP_OPTION if int(stamps) else 0)


def trace_report(store: Store, run_id: str) -> TraceReport:
    """cwnd, pipeACK and its per-round sample over time per point and connection, from the newCWV
    trace (application "sender", controller/point.py), pipeACK in segments of the scenario's MSS
    (Fig. 5)."""
    runs = load_runs(store, [run_id])
    rs = point_groups(store, runs, _burst_group)
    rid = rs.run_ids[0]
    points, notes = [], list(rs.notes)
    for g in rs.groups:
        if rid not in g.members:
            continue
        events: dict[tuple[str, float, str], dict[str, Any]] = {}
        for r in store.samples(rid, g.members[rid], TRACE_APP):
            if r["t"] is None or r["error"] is not None:
                continue
            e = events.setdefault((r["flow"] or "", r["t"], r["tag"] or ""), {})
            e[r["metric"]] = None if r["value"] is None else int(r["value"])
        if not events:
            continue
        t0 = min(t for _, t, _ in events)
        rows = [TraceRow(t - t0, flow, ev, v.get("cwnd"), v.get("ssthresh"), v.get("pipeack"), v.get("pipeack_sample"))
                for (flow, t, ev), v in sorted(events.items(), key=lambda kv: (kv[0][0], kv[0][1]))]
        points.append(TracePoint(g, rid, mss_of(g.record, _burst_group(g.record)), t0, rows))
    if not points:
        notes.insert(0, f"run {rid} has no newCWV trace (set tcp.groups.GROUP.newcwv.trace: true; samples of"
                        f" application '{TRACE_APP}')")
    return TraceReport(rid, rs.name, points, notes)


def render_trace_text(rep: TraceReport) -> str:
    out = [f"newCWV cwnd and pipeACK over time: {rep.name}, run {rep.run_id} (Hossain and Fairhurst, Fig. 5)"]
    for p in rep.points:
        out += ["", f"point {p.group.point}: {p.group.label}; pipeACK in segments of {p.mss} bytes",
                f"  {p.summary()}",
                f"  {'flow':<22} {'t (s)':>9} {'event':<13} {'cwnd':>5} {'ssthr':>5} {'pipeACK':>8} {'sample':>7}"]
        for r in p.rows:
            out.append(f"  {r.flow:<22} {r.t:>9.3f} {r.event:<13} {_num(r.cwnd, 'd'):>5} {_num(r.ssthresh, 'd'):>5}"
                       f" {_num(p.segments(r.pipeack_bytes), '.1f'):>8} {_num(p.segments(r.sample_bytes), '.1f'):>7}")
    if rep.notes:
        out += [""] + rep.notes
    return "\n".join(out)


# --- ftp-throughput -------------------------------------------------------------------------------
@dataclass
class FtpPoint:
    group: PointGroup
    runs: list[str]
    bins: dict[int, float]        # bin index -> FTP goodput (bit/s): flows summed, mean over runs
    mean: float | None            # FTP goodput over the whole flow (bit/s), mean over runs
    mean_ci95: float | None       # over runs (two or more)
    ratio: float | None           # mean / the baseline point's mean
    baseline_point: int | None
    http_rate: float | None       # the bursts' goodput while they were under way (bit/s)
    ftp_rate_bursts: float | None  # the FTP goodput over the same instants (bit/s)
    jain: float | None            # Jain's index of the two (mean over runs)


@dataclass
class FtpReport:
    run_ids: list[str]
    name: str
    app: str
    width: float                  # seconds per bin
    points: list[FtpPoint]
    notes: list[str]

    def n_bins(self) -> int:
        return 1 + max((k for p in self.points for k in p.bins), default=-1)


Series = dict[str, list[tuple[float, float]]]  # per flow, (t, bit/s) in order of t


def _goodput_rows(store: Store, run_id: str, point: int, app: str) -> tuple[Series, float | None]:
    """Each FTP flow's (t, bit/s) per interval, and the instant its flows were launched (the
    earliest `start` sample, else the earliest interval)."""
    flows: Series = {}
    for r in store.samples(run_id, point, app, "goodput"):
        if r["error"] is None and r["value"] is not None and r["t"] is not None:
            flows.setdefault(r["flow"] or "", []).append((r["t"], r["value"]))
    starts = [r["t"] for r in store.samples(run_id, point, app, "start") if r["t"] is not None]
    t0 = min(starts) if starts else min((t for v in flows.values() for t, _ in v), default=None)
    return {f: sorted(v) for f, v in flows.items()}, t0


def binned(flows: Series, t0: float, width: float) -> dict[int, float]:
    """Per bin [t0 + k width, t0 + (k + 1) width): each flow's mean goodput over its intervals
    starting in the bin, summed over the flows that have one."""
    out: dict[int, float] = {}
    for pts in flows.values():
        per: dict[int, list[float]] = {}
        for t, v in pts:
            per.setdefault(max(0, math.floor((t - t0) / width + 1e-9)), []).append(v)
        for k, vals in per.items():
            out[k] = out.get(k, 0.0) + statistics.fmean(vals)
    return out


def during_bursts(flows: Series, interval: float,
                  bursts: list[tuple[float, float, int]]) -> tuple[float | None, float | None]:
    """(HTTP goodput, FTP goodput) while the bursts were under way: the bursts' bytes over their
    summed times, and the FTP flows' goodput averaged over the same instants (each interval
    weighted by its overlap with each burst, flows summed)."""
    busy = sum(d for _, d, _ in bursts)
    if busy <= 0:
        return None, None
    http = sum(8 * size for _, _, size in bursts) / busy
    ftp_bits = 0.0
    for t, d, _ in bursts:
        for pts in flows.values():
            covered = bits = 0.0
            for s, v in pts:
                overlap = min(t + d, s + interval) - max(t, s)
                if overlap > 0:
                    covered += overlap
                    bits += overlap * v
            if covered > 0:
                ftp_bits += bits / covered * d  # the flow's mean rate over the burst, for the burst's time
    return http, ftp_bits / busy


def ftp_throughput(store: Store, run_ids: Sequence[str], width: float | None = None) -> FtpReport:
    """The bulk (FTP) flow's goodput over time per point, in bins of `width` seconds (default:
    the largest iperf3 interval of the points), its mean, the ratio of its mean to the baseline
    point's, and Jain's fairness index of the FTP and HTTP goodputs while bursts were under way
    (Fig. 11)."""
    runs = load_runs(store, run_ids)
    rs = point_groups(store, runs, _burst_group)
    bulk = [apps_of(g.record, "bulk") for g in rs.groups]
    if not any(bulk):
        raise NoData(f"run(s) {', '.join(rs.run_ids)} have no bulk application (the FTP flow)")
    app = instance(next(b for b in bulk if b)[0])
    intervals = [float(b[0].get("interval") or 1.0) for b in bulk if b]
    if width is None:
        width = max(intervals)
    if not width > 0:
        raise NoData(f"a bin width must be above 0 s, not {width:g}")
    burst = next((instance(a) for g in rs.groups if (a := burst_app(g.record))), None)
    notes = list(rs.notes)
    points = []
    for g, b in zip(rs.groups, bulk):
        if not b:
            continue
        interval = float(b[0].get("interval") or 1.0)
        runs_in = [r for r in rs.run_ids if r in g.members]
        series, means, jains, https, ftps = [], [], [], [], []
        for r in runs_in:
            flows, t0 = _goodput_rows(store, r, g.members[r], app)
            if t0 is None:
                continue
            series.append(binned(flows, t0, width))
            means.append(sum(statistics.fmean(v for _, v in pts) for pts in flows.values() if pts))
            if burst is not None:
                bursts = []
                for cell, clients in bursts_by_cell(store, r, g.members[r], burst).items():
                    bursts += [(x.t, x.time, cell.size) for lst in clients.values() for x in lst
                               if x.ok and x.t is not None]
                http, ftp = during_bursts(flows, interval, bursts)
                if http is not None and ftp is not None:
                    https.append(http)
                    ftps.append(ftp)
                    jains.append(jain([http, ftp]))
        bins = {k: statistics.fmean(s[k] for s in series if k in s) for k in sorted({k for s in series for k in s})}
        points.append(FtpPoint(g, runs_in, bins, mean(means), across_runs_ci(means), None, None, mean(https),
                               mean(ftps), mean(j for j in jains if j is not None)))
    if burst is not None:
        bases = [p for p in points if not p.group.sender.is_newcwv and p.mean is not None]
        for q in points:
            found = ([b for b in bases if b.group.context == q.group.context] if q.group.sender.is_newcwv
                     else [q] if q in bases else [])
            if len(found) > 1:
                notes.append(f"point {q.group.point}: baseline points {', '.join(str(b.group.point) for b in found)}"
                             f" share its other assignments; its ratio is to point {found[0].group.point}")
            if found and q.mean is not None:
                q.baseline_point, q.ratio = found[0].group.point, q.mean / found[0].mean
    else:
        notes.append("no burst application: the points' senders, and so the baseline, are not known")
    if any(w != width for w in intervals):
        shown = ", ".join(f"{w:g}" for w in sorted(set(intervals)))
        notes.append(f"bins of {width:g} s; the iperf3 intervals are {shown} s")
    return FtpReport(rs.run_ids, rs.name, app, width, points, notes)


def render_ftp_text(rep: FtpReport) -> str:
    out = [(f"FTP throughput over time: {rep.name}, run(s) {', '.join(rep.run_ids)}, application {rep.app},"
            f" bins of {rep.width:g} s (Hossain and Fairhurst, Fig. 11)"), ""]
    heads = [f"p{p.group.point} {p.group.sender.slug()}" for p in rep.points]
    w = max([14] + [len(h) + 2 for h in heads])
    out.append(f"  {'t (s)':>8}" + "".join(f"{h:>{w}}" for h in heads) + "   (Mbit/s)")
    for k in range(rep.n_bins()):
        out.append(f"  {k * rep.width:>8g}" + "".join(
            f"{_num(p.bins[k] / 1e6 if k in p.bins else None, '.3f'):>{w}}" for p in rep.points))
    out.append("")
    for p in rep.points:
        ci = f" ±{p.mean_ci95 / 1e6:.3f}" if p.mean_ci95 is not None else ""
        ratio = (f", {p.ratio:.3f} of baseline point {p.baseline_point}'s" if p.ratio is not None else "")
        fair = (f"; while bursts were under way HTTP {p.http_rate / 1e6:.3f} and FTP {p.ftp_rate_bursts / 1e6:.3f}"
                f" Mbit/s, Jain's index {p.jain:.3f}" if p.jain is not None else "")
        out.append(f"  point {p.group.point} ({p.group.sender.label()}; {len(p.runs)} run(s)): FTP mean"
                   f" {_num(p.mean / 1e6 if p.mean is not None else None)}{ci} Mbit/s{ratio}{fair}")
    if rep.notes:
        out += [""] + rep.notes
    return "\n".join(out)
