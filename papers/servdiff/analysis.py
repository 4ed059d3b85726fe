"""Nouredine and Tobagi's reports ("Improving the performance of interactive TCP applications using
service differentiation", Computer Networks 40 (2002) 19-43; docs/reports-servdiff.md): how a
scheme serves the interactive applications, measured against the paper's own limits.

A scheme is one curve of the paper's figures: a sweep point of a run (e.g. one router policy or
marking), or a run. The runs given are the schemes compared; runs joined with '+' are seeds of one
scheme, and repetitions of one sweep point pool too (the points that share a sweep assignment).
Only finished points (`done`) count; the notes name the others.

What is counted, from the `samples` table (workloads/apps/):

* web: each web application's `page_time`, split by the instance's `http_version` (its resolved
  spec) and, where pages carry a page-set marker (`page_set_of`), into probe pages and the rest;
* telnet: `echo_delay` per keystroke;
* ftp: `file_time` per file; the FTP probes are the ftp instances of fixed-size files (`size`);
* bulk: the long FTP flows' `goodput` per interval and `window_goodput` / `flow_goodput` per flow.

Samples carry the host's RTT class as their tag (`rtt80ms` on topologies/tree.py); every view can
be narrowed to one tag. A failed sample (a page, echo or file that never completed) counts as
longer than any limit: it is in each fraction above a limit, in each CCDF (which then ends at the
failed fraction instead of 0), and a percentile that falls among the failures has no value.

Statistics over repetitions: each repetition (point of a run) gives a value; a scheme's value is
their mean, with a Student-t 95% interval when two or more pool; one repetition gives its own
value and no interval. The number of samples behind each value is reported beside it.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from catnip.results import compare as compare_mod
from catnip.results import figures
from catnip.results import pooled as pooled_mod
from catnip.results.report import loss_summary
from catnip.results.samples import ci95, cov
from catnip.results.point_record import record_of
from catnip.results.store import Store
from catnip.spec.record import PointRecord, RecordError
from catnip.results.labels import label_of

# The paper's interactivity limits (section 1, citing [33] and [7]; used again in section 3).
TELNET_ECHO_LIMIT = 0.150   # s: an echo within 150 ms
PAGE_LIMIT = 5.0            # s: a page within 5 s
PAGE_POOR = 10.0            # s: beyond 10 s quality is perceived as low
PAPER_TELNET_TAG = "rtt80ms"        # Figs 3 and 8 plot the connection of 80 ms RTT
PAPER_SAMPLE_INTERVAL = 2.0         # s: Fig. 17 samples the long FTP's throughput every 2 s

# Drop levels of the 3-level RED (section 4.2, reading notes 3.1.a): the engine's link counters
# per DSCP class (engine/src/packet.rs: AF11 high, AF12 low, AF13 lowest, the rest other) as
# the paper's HIGH, MED and LOW; unmarked packets are LOW (engine policy multired three_level).
LEVELS = {"high": ("high",), "med": ("low",), "low": ("lowest", "other")}
LEVEL_NAMES = {"all": "all packets", "high": "HIGH (AF11)", "med": "MED (AF12)", "low": "LOW (AF13 + unmarked)",
               "reverse": "reverse direction"}
DATA_ROLE, REVERSE_ROLE = "bottleneck-data", "bottleneck-ack"

# What each kind of sample is: the application kind and the metric.
WHAT = {"web": ("web", "page_time"), "telnet": ("telnet", "echo_delay"), "ftp-probe": ("ftp", "file_time"),
        "ftp": ("ftp", "file_time")}
HTTP_VERSIONS = ("1.0", "1.1")
PAGE_SETS = ("probe", "rest", "all")


class NoData(ValueError):
    """Runs that hold nothing this report can show (no samples of its applications, no flows)."""


# --- schemes: points of runs, pooled over repetitions and seeds ----------------------------------------
@dataclass(frozen=True)
class Member:
    """One repetition of a scheme: a finished point of a run."""
    run_id: str
    point: int
    rep: int
    seed: int | None
    realtime_ok: bool | None
    record: PointRecord = field(compare=False, repr=False)  # what it ran (spec/record.py)


@dataclass(frozen=True)
class Scheme:
    """A curve of the paper's figures: `key` its colour (figures.color), `label` its name, the
    runs given for it (seeds joined with '+') and the finished points it pools."""
    key: int
    label: str
    runs: tuple[str, ...]
    assignment: dict = field(compare=False)
    members: tuple[Member, ...]

    @property
    def realtime_ok(self) -> bool | None:
        """True when every repetition kept real time, False when one did not, else unknown."""
        flags = [m.realtime_ok for m in self.members]
        if any(f is False for f in flags):
            return False
        return None if not flags or None in flags else True


def _find(store: Store, run_id: str):
    run = store.find_run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id!r} in {store.path} (see `catnip list`)")
    return run


def schemes(store: Store, specs: Sequence[str]) -> tuple[list[Scheme], list[str]]:
    """The schemes of the runs given (module docstring) in order, and notes on the points left out.
    Raises KeyError for an unknown run, ValueError for runs that cannot be pooled or are given twice,
    NoData for runs without a finished point."""
    if not specs:
        raise NoData("no runs given")
    parsed, seen = [], set()
    for spec in specs:
        runs = [_find(store, i) for i in compare_mod.split_run_ids(spec)]
        for r in runs:
            if r["id"] in seen:
                raise ValueError(f"run {r['id']} is given twice: its samples would count twice")
            seen.add(r["id"])
            if json.loads(r["scenario"]).get("kind") == "transfers":
                raise NoData(f"run {r['id']} is a transfer measurement: `catnip model validate {r['id']}` reports it")
            if not applies(store, r["id"]):  # as the other papers' layouts refuse another paper's run
                raise NoData(f"no point of {r['id']} is a Nouredine and Tobagi experiment (a Telnet or FTP"
                             " application, or the tree topology)")
        if len(runs) > 1:
            names = sorted({r["name"] for r in runs})
            if len(names) > 1:
                raise ValueError(f"{spec}: runs of different scenarios cannot be pooled as seeds: {', '.join(names)}")
            differ = pooled_mod.settings_differences(runs)
            if differ:
                raise ValueError(f"{spec}: runs that differ in more than the seed cannot be pooled"
                                 f" ({', '.join(differ[:5])}{', ...' if len(differ) > 5 else ''})")
        parsed.append(runs)
    names = [runs[0]["name"] for runs in parsed]
    by_name = len(set(names)) == len(names)
    out: list[Scheme] = []
    notes: list[str] = []
    for runs in parsed:
        groups: dict[str, dict[str, Any]] = {}
        for run in runs:
            for pt in store.points(run["id"]):
                assignment = json.loads(pt["assignment"])
                key = json.dumps(assignment, sort_keys=True)
                if key not in groups:  # labelled by its first point (results/labels.py)
                    groups[key] = {"assignment": assignment, "members": [], "label": label_of(run, pt)}
                g = groups[key]
                if pt["status"] != "done":
                    notes.append(f"{run['id']} point {pt['point']}: left out, status {pt['status']}")
                    continue
                ok = None if pt["realtime_ok"] is None else bool(pt["realtime_ok"])
                try:
                    record = record_of(run, pt)
                except RecordError as exc:
                    notes.append(f"{run['id']} point {pt['point']}: left out ({exc})")
                    continue
                g["members"].append(Member(run["id"], pt["point"], pt["rep"], pt["seed"], ok, record))
        prefix = runs[0]["name"] if by_name else "+".join(r["id"] for r in runs)
        for g in groups.values():
            if not g["members"]:
                continue
            if len(parsed) == 1:
                label = g["label"] if g["assignment"] else runs[0]["name"]
                key = g["members"][0].point  # the point's colour in the run's other charts
            else:
                label = prefix if len(groups) == 1 and not g["assignment"] else \
                    f"{prefix}: {g['label']}"
                key = len(out)
            out.append(Scheme(key, label, tuple(r["id"] for r in runs), g["assignment"], tuple(g["members"])))
    if not out:
        raise NoData(f"no finished point in {', '.join(specs)}")
    return out, notes


# --- one point's records ---------------------------------------------------------------------------------
def is_probe(marker: Any) -> bool:
    """A page-set marker that names the paper's probe pages (section 2.2: the fixed page the probe
    sessions download): any marker containing 'probe' ('probe', 'probes'), or True."""
    return marker is True or (isinstance(marker, str) and "probe" in marker.lower())


class PointData:
    """One repetition's samples by (application instance, metric), read once, the kind and spec of
    each instance (its parameters in the point's record), and its pages' page-set markers."""

    def __init__(self, store: Store, member: Member):
        self.store, self.member = store, member
        self.specs = {a.instance: a.params for a in member.record.applications}
        self.rows: dict[tuple[str, str], list] = {}
        for r in store.samples(member.run_id, member.point):
            self.rows.setdefault((r["app"], r["metric"]), []).append(r)
        self._marks: dict[tuple[str, float], Any] | None = None

    def instances(self, kind: str) -> list[tuple[str, dict]]:
        return [(name, spec) for name, spec in self.specs.items() if spec["kind"] == kind]

    def _page_marks(self) -> dict[tuple[str, float], Any]:
        """(client, page start) -> the page's marker, where the pages table has a page_set column."""
        if self._marks is None:
            self._marks = {}
            if "page_set" in {c[1] for c in self.store.db.execute("PRAGMA table_info(pages)")}:
                for p in self.store.pages(self.member.run_id, self.member.point):
                    if p["page_set"] is not None:
                        self._marks[(p["client"], p["start"])] = p["page_set"]
        return self._marks

    def page_set_of(self, row, spec: dict) -> Any:
        """A page_time sample's page-set marker, wherever it is recorded: a `page_set` column of the
        sample, else of its row in the pages table (the same client and start), else the web
        instance's `page_set` in the point's record ('catnip', 'probe' or 'random', the web
        application's field) or `probe: true`; None when unmarked (runs recorded before page sets)."""
        if "page_set" in row.keys() and row["page_set"] is not None:
            return row["page_set"]
        mark = self._page_marks().get((row["host"], row["t"]))
        if mark is not None:
            return mark
        if spec.get("page_set") is not None:
            return spec["page_set"]
        return True if spec.get("probe") is True else None

    def selected(self, sel: Selection) -> list:
        """The sample rows a selection counts (failed ones included)."""
        kind, metric = WHAT[sel.what]
        out = []
        for name, spec in self.instances(kind):
            if sel.what == "web" and sel.http_version is not None and str(spec.get("http_version")) != sel.http_version:
                continue
            if sel.what == "ftp-probe" and spec.get("size") is None:
                continue
            for r in self.rows.get((name, metric), []):
                if sel.tag is not None and r["tag"] != sel.tag:
                    continue
                if sel.what == "web" and sel.pages != "all" and \
                        is_probe(self.page_set_of(r, spec)) != (sel.pages == "probe"):
                    continue
                out.append(r)
        return out

    def sample(self, sel: Selection) -> Sample:
        rows = self.selected(sel)
        ok = [float(r["value"]) for r in rows if r["error"] is None and r["value"] is not None]
        return Sample(tuple(sorted(ok)), len(rows) - len(ok))

    def has_probe_pages(self) -> bool:
        return any(is_probe(self.page_set_of(r, spec))
                   for name, spec in self.instances("web") for r in self.rows.get((name, "page_time"), []))

    def tags(self) -> set[str]:
        """The tags of the web, telnet and ftp samples."""
        return {r["tag"] for what in ("web", "telnet", "ftp") for r in self.selected(Selection(what))
                if r["tag"] is not None}


class Records:
    """Each repetition's PointData, read once for all the views built from them."""

    def __init__(self, store: Store):
        self.store = store
        self._points: dict[tuple[str, int], PointData] = {}

    def point(self, m: Member) -> PointData:
        key = (m.run_id, m.point)
        if key not in self._points:
            self._points[key] = PointData(self.store, m)
        return self._points[key]


# --- samples, CCDFs and estimates --------------------------------------------------------------------------
@dataclass(frozen=True)
class Selection:
    """What a CCDF or a table cell counts: `what` one of WHAT; for web, the HTTP version (None:
    both) and the page set ('probe', 'rest' or 'all'); a tag (None: every tag)."""
    what: str
    http_version: str | None = None
    pages: str = "all"
    tag: str | None = None

    def __post_init__(self) -> None:
        if self.what not in WHAT:
            raise ValueError(f"selection {self.what!r}: one of {', '.join(WHAT)}")
        if self.http_version not in (None, *HTTP_VERSIONS):
            raise ValueError(f"http_version {self.http_version!r}: one of {', '.join(HTTP_VERSIONS)}")
        if self.pages not in PAGE_SETS:
            raise ValueError(f"pages {self.pages!r}: one of {', '.join(PAGE_SETS)}")


@dataclass(frozen=True)
class Sample:
    """Completed values (sorted) and the failures, which count as longer than any of them."""
    values: tuple[float, ...]
    failed: int

    @property
    def n(self) -> int:
        return len(self.values) + self.failed

    def above(self, limit: float) -> float | None:
        """The fraction of samples longer than `limit` (failures included); None without samples."""
        if not self.n:
            return None
        return (sum(1 for v in self.values if v > limit) + self.failed) / self.n

    def quantile(self, q: float) -> float | None:
        """The q-quantile with the failures ranked last (type 7, as samples.percentile); None
        without samples, or where it falls among the failures (it would be a failure's time)."""
        if not 0 <= q <= 1:
            raise ValueError(f"quantile {q} outside [0, 1]")
        if not self.n:
            return None
        pos = q * (self.n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, self.n - 1)
        frac = pos - lo
        if lo >= len(self.values) or (frac > 0 and hi >= len(self.values)):
            return None
        v = self.values
        return v[lo] + (v[hi] - v[lo]) * frac if frac > 0 else v[lo]

    def ccdf(self) -> list[tuple[float, float]]:
        """The exact empirical CCDF: for each distinct completed value x, increasing, the fraction
        of samples strictly greater than x (failures are greater than all)."""
        out: list[tuple[float, float]] = []
        v = self.values
        for i, x in enumerate(v):
            if i + 1 < len(v) and v[i + 1] == x:
                continue
            out.append((x, (self.n - i - 1) / self.n))
        return out

    @staticmethod
    def pooled(parts: Iterable[Sample]) -> Sample:
        parts = list(parts)
        return Sample(tuple(sorted(x for p in parts for x in p.values)), sum(p.failed for p in parts))


@dataclass(frozen=True)
class Estimate:
    """A scheme's value: the mean over its repetitions of each one's value, the half-width of its
    Student-t 95% interval (None with one repetition), and how many repetitions had a value."""
    value: float | None
    ci95: float | None
    reps: int


def estimate(values: Iterable[float | None]) -> Estimate:
    v = [x for x in values if x is not None]
    if not v:
        return Estimate(None, None, 0)
    return Estimate(statistics.fmean(v), ci95(statistics.stdev(v), len(v)) if len(v) > 1 else None, len(v))


@dataclass(frozen=True)
class Cell:
    """A statistic of a scheme's samples: its estimate, and the samples behind it (pooled over the
    repetitions) of which `failed` never completed."""
    n: int
    failed: int
    est: Estimate


def cell(parts: Sequence[Sample], stat) -> Cell:
    """`stat` (Sample -> value) of each repetition's sample, as a Cell. Repetitions without samples
    are left out; one with samples but no value (a percentile among its failures) leaves the
    scheme without a value: the others' mean would hide its tail."""
    values = [stat(p) for p in parts if p.n]
    est = Estimate(None, None, 0) if None in values else estimate(values)
    return Cell(sum(p.n for p in parts), sum(p.failed for p in parts), est)


@dataclass(frozen=True)
class Curve:
    """One scheme's samples of one selection: per repetition, and pooled (what the CCDF draws)."""
    scheme: Scheme
    selection: Selection
    parts: tuple[Sample, ...]

    @property
    def pooled(self) -> Sample:
        return Sample.pooled(self.parts)


def curves(store: Store, specs: Sequence[str], sel: Selection, records: Records | None = None
           ) -> tuple[list[Curve], list[str]]:
    """Per scheme with samples of the selection, its curve; and the notes of the schemes."""
    records = records or Records(store)
    found, notes = schemes(store, specs)
    out = []
    for s in found:
        parts = tuple(records.point(m).sample(sel) for m in s.members)
        if any(p.n for p in parts):
            out.append(Curve(s, sel, parts))
    return out, notes


# --- the table (layout servdiff) --------------------------------------------------------------------------
@dataclass(frozen=True)
class LossCell:
    """Loss at one bottleneck direction and drop level: packets arrived and dropped (summed over
    the repetitions) and the estimate of dropped / arrived."""
    arrived: int
    dropped: int
    est: Estimate


def member_loss(store: Store, m: Member) -> dict[str, tuple[int, int]]:
    """(arrived, dropped) at the bottleneck of one repetition: 'all', 'high', 'med', 'low' on its
    data direction, 'reverse' for all packets of the other direction. Absent without counters."""
    roles = loss_summary(store.link_stats(m.run_id, m.point))
    out: dict[str, tuple[int, int]] = {}
    data = roles.get(DATA_ROLE)
    if data:
        out["all"] = (data["arrived"], data["dropped"])
        for level, classes in LEVELS.items():
            got = [data["by_class"].get(c, {"arrived": 0, "dropped": 0}) for c in classes]
            out[level] = (sum(c["arrived"] for c in got), sum(c["dropped"] for c in got))
    reverse = roles.get(REVERSE_ROLE)
    if reverse:
        out["reverse"] = (reverse["arrived"], reverse["dropped"])
    return out


@dataclass(frozen=True)
class Row:
    """A scheme's row, for every tag (tag None) or one: page, echo and FTP probe statistics
    (`stats`, keyed as row_stats gives them), and the loss per level (every-tag rows only)."""
    scheme: Scheme
    tag: str | None
    web_pages: str            # 'probes' (pages marked as probes) or 'all'
    stats: dict[str, Cell]
    loss: dict[str, LossCell]


def _tag_key(tag: str | None) -> tuple:
    """RTT classes by their RTT ('rtt20ms' before 'rtt200ms'), other tags by name."""
    if tag is None:
        return (0, 0.0, "")
    m = re.fullmatch(r"rtt(\d+(?:\.\d+)?)ms", tag)
    return (1, float(m.group(1)), tag) if m else (2, 0.0, tag)


def row_stats(parts: dict[str, list[Sample]]) -> dict[str, Cell]:
    """The table's statistics from each selection's samples per repetition."""
    return {
        "http1.0_over_5s": cell(parts["web1.0"], lambda s: s.above(PAGE_LIMIT)),
        "http1.0_over_10s": cell(parts["web1.0"], lambda s: s.above(PAGE_POOR)),
        "http1.1_over_5s": cell(parts["web1.1"], lambda s: s.above(PAGE_LIMIT)),
        "http1.1_over_10s": cell(parts["web1.1"], lambda s: s.above(PAGE_POOR)),
        "echo_over_150ms": cell(parts["telnet"], lambda s: s.above(TELNET_ECHO_LIMIT)),
        "echo_p90": cell(parts["telnet"], lambda s: s.quantile(0.9)),
        "echo_p99": cell(parts["telnet"], lambda s: s.quantile(0.99)),
        "ftp_probe_p50": cell(parts["ftp-probe"], lambda s: s.quantile(0.5)),
        "ftp_probe_p90": cell(parts["ftp-probe"], lambda s: s.quantile(0.9)),
    }


def loss_cells(per_member: list[dict[str, tuple[int, int]]]) -> dict[str, LossCell]:
    out = {}
    for level in ("all", *LEVELS, "reverse"):
        got = [m[level] for m in per_member if level in m]
        if got:
            out[level] = LossCell(sum(a for a, _ in got), sum(d for _, d in got),
                                  estimate(d / a if a else None for a, d in got))
    return out


@dataclass(frozen=True)
class TableReport:
    run_ids: tuple[str, ...]
    schemes: tuple[Scheme, ...]
    rows: tuple[Row, ...]
    notes: tuple[str, ...]


def table(store: Store, specs: Sequence[str], records: Records | None = None) -> TableReport:
    """Per scheme, a row over every tag, then one per tag (RTT class) its samples carry: the
    fractions of HTTP/1.0 and HTTP/1.1 pages above 5 s and 10 s (the probe pages where pages are
    marked, else all pages), of echoes above 150 ms and the echoes' 90th and 99th percentiles,
    the FTP probes' median and 90th percentile file time; in the every-tag row the bottleneck's
    loss overall, per drop level and in the reverse direction."""
    records = records or Records(store)
    found, notes = schemes(store, specs)
    rows = []
    for s in found:
        data = [records.point(m) for m in s.members]
        probes = any(d.has_probe_pages() for d in data)
        pages = "probe" if probes else "all"
        tags = sorted(set().union(*(d.tags() for d in data)), key=_tag_key)
        losses = [member_loss(store, m) for m in s.members]
        for tag in (None, *tags):
            sels = {"web1.0": Selection("web", "1.0", pages, tag), "web1.1": Selection("web", "1.1", pages, tag),
                    "telnet": Selection("telnet", tag=tag), "ftp-probe": Selection("ftp-probe", tag=tag)}
            parts = {k: [d.sample(sel) for d in data] for k, sel in sels.items()}
            rows.append(Row(s, tag, "probes" if probes else "all", row_stats(parts),
                            loss_cells(losses) if tag is None else {}))
    if not any(c.n for r in rows for c in r.stats.values()) and not any(r.loss for r in rows):
        raise NoData(f"no web, telnet or ftp samples and no bottleneck counters in {', '.join(specs)}")
    notes = [f"Limits (paper section 1): echo {TELNET_ECHO_LIMIT * 1000:g} ms, page {PAGE_LIMIT:g} s, poor page"
             f" {PAGE_POOR:g} s. Failed samples count as above every limit. Values: the mean over repetitions"
             " (runs joined with '+', repetitions of a sweep point), ± the Student-t 95% interval where two or more"
             " pool; n: the samples behind a value. Loss: bottleneck data direction per drop level (HIGH = AF11,"
             " MED = AF12, LOW = AF13 and unmarked), and the reverse direction. docs/reports-servdiff.md", *notes]
    return TableReport(tuple(specs), tuple(found), tuple(rows), tuple(notes))


def _v(est: Estimate, pct: bool = False, digits: int = 3) -> str:
    if est.value is None:
        return "-"
    scale, unit = (100, "%") if pct else (1, "")
    text = f"{scale * est.value:.{1 if pct else digits}f}{unit}"
    return text + (f"±{scale * est.ci95:.{1 if pct else digits}f}" if est.ci95 is not None else "")


def _q(c: Cell) -> str:
    """A percentile: 'failed' where it falls among failed samples (Sample.quantile)."""
    return "failed" if c.est.value is None and c.n else _v(c.est)


def render_text(rep: TableReport) -> str:
    """Four blocks as the paper's figures group them: web pages (Figs 2, 7, 12, 13), Telnet echoes
    (Figs 3, 8, 13), FTP probes (Fig. 15) and the bottleneck's loss per drop level. A tag's row
    is shown in a block only where that tag has samples of it (the CSV and JSON have every row)."""
    rows = rep.rows
    w = max([6] + [len(r.scheme.label) + 1 for r in rows])
    tw = max([3] + [len(r.tag or "all") for r in rows])
    slow = any(r.scheme.realtime_ok is False for r in rows)

    def name(r: Row) -> str:
        star = "*" if r.scheme.realtime_ok is False else ""
        return f"{r.scheme.label + star:<{w}} {r.tag or 'all':<{tw}}"

    def shown(key: str) -> list[Row]:
        return [r for r in rows if r.tag is None or r.stats[key].n]

    out = [f"Service differentiation (Nouredine and Tobagi 2002): {', '.join(rep.run_ids)}", ""]
    out.append(f"Web page download time above {PAGE_LIMIT:g} s and {PAGE_POOR:g} s (section 1; Figs 2, 7, 12, 13)")
    out.append(f"{'scheme':<{w}} {'tag':<{tw}} {'pages':<6} | {'HTTP/1.0 n':>10} {'>5 s':>12} {'>10 s':>12}"
               f" | {'HTTP/1.1 n':>10} {'>5 s':>12} {'>10 s':>12}")
    for r in [r for r in rows if r.tag is None or r.stats["http1.0_over_5s"].n or r.stats["http1.1_over_5s"].n]:
        s = r.stats
        out.append(f"{name(r)} {r.web_pages:<6} | {s['http1.0_over_5s'].n:>10} {_v(s['http1.0_over_5s'].est, True):>12}"
                   f" {_v(s['http1.0_over_10s'].est, True):>12} | {s['http1.1_over_5s'].n:>10}"
                   f" {_v(s['http1.1_over_5s'].est, True):>12} {_v(s['http1.1_over_10s'].est, True):>12}")
    out += ["", f"Telnet echo delay (s): above {TELNET_ECHO_LIMIT * 1000:g} ms, 90th and 99th percentiles"
            " (Figs 3, 8, 13)",
            f"{'scheme':<{w}} {'tag':<{tw}} | {'echoes':>8} {'failed':>6} {'>150 ms':>12} {'p90':>14} {'p99':>14}"]
    for r in shown("echo_over_150ms"):
        s = r.stats
        out.append(f"{name(r)} | {s['echo_over_150ms'].n:>8} {s['echo_over_150ms'].failed:>6}"
                   f" {_v(s['echo_over_150ms'].est, True):>12} {_q(s['echo_p90']):>14} {_q(s['echo_p99']):>14}")
    out += ["", "FTP probe file transfer time (s): median and 90th percentile (Figs 14-15)",
            f"{'scheme':<{w}} {'tag':<{tw}} | {'files':>8} {'failed':>6} {'median':>14} {'p90':>14}"]
    for r in shown("ftp_probe_p50"):
        s = r.stats
        out.append(f"{name(r)} | {s['ftp_probe_p50'].n:>8} {s['ftp_probe_p50'].failed:>6}"
                   f" {_q(s['ftp_probe_p50']):>14} {_q(s['ftp_probe_p90']):>14}")
    out += ["", "Bottleneck loss: dropped / arrived packets (data direction per drop level; reverse direction)",
            f"{'scheme':<{w}} | " + " | ".join(f"{LEVEL_NAMES[k]:>22}" for k in ("all", *LEVELS, "reverse"))]
    for r in rows:
        if r.tag is not None:
            continue
        star = "*" if r.scheme.realtime_ok is False else ""
        cells_ = []
        for k in ("all", *LEVELS, "reverse"):
            c = r.loss.get(k)
            cells_.append("-" if c is None else f"{_v(c.est, True)} of {c.arrived}")
        out.append(f"{r.scheme.label + star:<{w}} | " + " | ".join(f"{c:>22}" for c in cells_))
    out += [""] + (["* a repetition of this scheme did not keep real time."] if slow else []) + list(rep.notes)
    return "\n".join(out)


# --- fair share of long FTP flows (Figs 16-17) ---------------------------------------------------------------
@dataclass(frozen=True)
class FlowShare:
    """One long FTP flow of one repetition: its throughput (bit/s; the measured window's goodput
    where the bulk application has one, else the whole flow's), the fair share (bottleneck rate /
    flows at the point), their ratio, the C.O.V. of its goodput samples (those in the window) and
    the samples themselves (t, bit/s)."""
    scheme: Scheme
    member: Member
    app: str
    flow: str
    tag: str | None
    throughput: float | None
    fair_share: float | None
    ratio: float | None
    cov: float | None
    series: tuple[tuple[float, float], ...]
    interval: float | None
    error: str | None


def bottleneck_rate(store: Store, m: Member, role: str = DATA_ROLE) -> float | None:
    """The rate (bit/s) of the bottleneck's data direction as the point ran it (its record: the
    fastest direction of that role where a topology has several); None if it has none."""
    rates = [d.rate_bps for d in m.record.links if d.role == role and d.rate_bps]
    return float(max(rates)) if rates else None


def _natural(text: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def member_flows(store: Store, records: Records, scheme: Scheme, m: Member) -> list[FlowShare]:
    """The long FTP (bulk) flows of one repetition, every bulk instance's flows sharing the fair share."""
    data = records.point(m)
    flows: dict[tuple[str, str], dict[str, list]] = {}
    for name, _ in data.instances("bulk"):
        for metric in ("start", "flow_goodput", "window_goodput", "window_seconds", "goodput"):
            for r in data.rows.get((name, metric), []):
                if r["flow"] is not None:
                    flows.setdefault((name, r["flow"]), {}).setdefault(metric, []).append(r)
    if not flows:
        return []
    rate = bottleneck_rate(store, m)
    fair = None if rate is None else rate / len(flows)
    out = []
    for (app, flow), got in sorted(flows.items(), key=lambda kv: (kv[0][0], _natural(kv[0][1]))):
        ok = lambda metric: [r for r in got.get(metric, []) if r["error"] is None and r["value"] is not None]  # noqa: E731
        tags = [r["tag"] for metric in ("goodput", "window_goodput", "flow_goodput") for r in got.get(metric, [])]
        tag = next((t for t in tags if t is not None), None)
        errors = [r["error"] for r in got.get("flow_goodput", []) if r["error"] is not None]
        window, seconds = ok("window_goodput"), ok("window_seconds")
        series = sorted((r["t"], float(r["value"])) for r in ok("goodput") if r["t"] is not None)
        if window:
            throughput = float(window[0]["value"])
            lo = window[0]["t"]
            hi = lo + float(seconds[0]["value"]) if seconds else math.inf
            series = [(t, v) for t, v in series if lo <= t < hi]
        elif ok("flow_goodput"):
            throughput = float(ok("flow_goodput")[0]["value"])
        else:
            throughput = None
        gaps = [b[0] - a[0] for a, b in zip(series, series[1:])]
        out.append(FlowShare(scheme, m, app, flow, tag, throughput, fair,
                             None if throughput is None or not fair else throughput / fair,
                             cov(v for _, v in series), tuple(series), statistics.median(gaps) if gaps else None,
                             errors[0] if errors else None))
    return out


@dataclass(frozen=True)
class ClassShare:
    """A scheme's flows of one RTT class (tag None: all its flows): how many (and how many failed),
    the fair share (mean over repetitions), throughput / fair share and the C.O.V. (each the mean
    over the class's flows per repetition, then over repetitions), the least and greatest ratio of
    a flow, the goodput samples and their median spacing (s)."""
    scheme: Scheme
    tag: str | None
    flows: int
    failed: int
    fair_share: float | None
    ratio: Estimate
    cov: Estimate
    ratio_min: float | None
    ratio_max: float | None
    samples: int
    interval: float | None


@dataclass(frozen=True)
class FairShareReport:
    run_ids: tuple[str, ...]
    schemes: tuple[Scheme, ...]
    flows: tuple[FlowShare, ...]
    classes: tuple[ClassShare, ...]
    notes: tuple[str, ...]


def _mean(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return statistics.fmean(v) if v else None


def fair_share(store: Store, specs: Sequence[str], records: Records | None = None) -> FairShareReport:
    """Per scheme, each long FTP flow's throughput against its fair share and its C.O.V. (Fig. 16),
    per RTT class and over all flows. NoData when no scheme has bulk flows."""
    records = records or Records(store)
    found, notes = schemes(store, specs)
    flows: list[FlowShare] = []
    classes: list[ClassShare] = []
    for s in found:
        mine = [f for m in s.members for f in member_flows(store, records, s, m)]
        if not mine:
            continue
        flows += mine
        for m in s.members:
            if mine and bottleneck_rate(store, m) is None:
                notes.append(f"{m.run_id} point {m.point}: no bottleneck rate recorded or configured: no fair share")
        for tag in (None, *sorted({f.tag for f in mine if f.tag is not None}, key=_tag_key)):
            group = [f for f in mine if tag is None or f.tag == tag]
            per_member = [[f for f in group if f.member == m] for m in s.members]
            ratios = [f.ratio for f in group if f.ratio is not None]
            gaps = [f.interval for f in group if f.interval is not None]
            classes.append(ClassShare(
                s, tag, len(group), sum(1 for f in group if f.error or f.throughput is None),
                _mean(fs[0].fair_share for fs in per_member if fs),
                estimate(_mean(f.ratio for f in fs) for fs in per_member),
                estimate(_mean(f.cov for f in fs) for fs in per_member),
                min(ratios, default=None), max(ratios, default=None),
                sum(len(f.series) for f in group), statistics.median(gaps) if gaps else None))
    if not flows:
        raise NoData(f"no long FTP (bulk) flows in {', '.join(specs)}: the fair share needs a bulk application"
                     " (one flow per pair, as in the paper's Figs 16-17)")
    intervals = {round(c.interval, 3) for c in classes if c.tag is None and c.interval is not None}
    if intervals and intervals != {PAPER_SAMPLE_INTERVAL}:
        notes.append(f"goodput sampled every {', '.join(f'{i:g}' for i in sorted(intervals))} s; the paper's C.O.V."
                     f" is over samples every {PAPER_SAMPLE_INTERVAL:g} s (bulk application `interval: 2s`)")
    notes.insert(0, "ratio: throughput / fair share (bottleneck rate / flows at the point; application goodput"
                    " against the link rate, so headers keep it below 1 at a perfect share); cov: standard"
                    " deviation / mean of a flow's goodput samples (population); both the mean over the class's"
                    " flows, then over repetitions (± Student-t 95% where two or more pool);"
                    " docs/reports-servdiff.md")
    return FairShareReport(tuple(specs), tuple(found), tuple(flows), tuple(classes), tuple(notes))


def render_fair_text(rep: FairShareReport) -> str:
    """Fig. 16's numbers: per scheme and RTT class, throughput / fair share and the C.O.V."""
    w = max([6] + [len(c.scheme.label) for c in rep.classes])
    tw = max([3] + [len(c.tag or "all") for c in rep.classes])
    out = [f"Long FTP throughput against the fair share (Nouredine and Tobagi, Figs 16-17): {', '.join(rep.run_ids)}",
           "", f"{'scheme':<{w}} {'tag':<{tw}} | {'flows':>5} {'failed':>6} {'fair share':>12} {'ratio':>12}"
               f" {'min':>6} {'max':>6} {'C.O.V.':>12} {'samples':>8} {'every':>7}"]
    for c in rep.classes:
        fair = "-" if c.fair_share is None else f"{c.fair_share / 1000:.1f} kb/s"
        out.append(f"{c.scheme.label:<{w}} {c.tag or 'all':<{tw}} | {c.flows:>5} {c.failed:>6} {fair:>12}"
                   f" {_v(c.ratio):>12} {'-' if c.ratio_min is None else f'{c.ratio_min:.3f}':>6}"
                   f" {'-' if c.ratio_max is None else f'{c.ratio_max:.3f}':>6} {_v(c.cov):>12} {c.samples:>8}"
                   f" {'-' if c.interval is None else f'{c.interval:g} s':>7}")
    return "\n".join(out + ["", *rep.notes])


def default_flow(rep: FairShareReport) -> FlowShare:
    """Fig. 17's connection: in the first scheme, the first flow of the longest RTT class (the
    paper plots the 200 ms connection)."""
    first = sorted((f for f in rep.flows if f.scheme == rep.flows[0].scheme), key=lambda f: _natural(f.flow))
    # max keeps the first of equals: the lowest flow id of the longest RTT (untagged or other tags last)
    return max(first, key=lambda f: (_tag_key(f.tag)[0] == 1, _tag_key(f.tag)[1]))


# --- figures ----------------------------------------------------------------------------------------------------
FIGURES = {
    "web-1.0": "CCDF of HTTP/1.0 page download times, probes solid and the other pages dashed where marked"
               " (Figs 2 top, 4, 7, 12, 13)",
    "web-1.1": "CCDF of HTTP/1.1 page download times (Fig. 2 bottom)",
    "telnet": f"CCDF of Telnet echo delays (Figs 3, 8, 13; --tag {PAPER_TELNET_TAG} for the paper's connection)",
    "ftp-probes": "CCDF of the FTP probes' fixed-size file transfer times (Fig. 15)",
    "ftp-files": "CCDF of all FTP file transfer times (Fig. 9)",
    "fair-share": "long FTP throughput / fair share and C.O.V. per RTT class (Fig. 16)",
    "flow-throughput": "one long FTP flow's throughput over time, default the longest RTT's first (Fig. 17)",
}
PAGE_THRESHOLDS = ((PAGE_LIMIT, f"{PAGE_LIMIT:g} s"), (PAGE_POOR, f"{PAGE_POOR:g} s"))
ECHO_THRESHOLDS = ((TELNET_ECHO_LIMIT, f"{TELNET_ECHO_LIMIT * 1000:g} ms"),)


@dataclass(frozen=True)
class Figure:
    """A figure's Plotly spec (results/figures.py) and a line per curve saying what it holds."""
    name: str
    spec: dict
    lines: tuple[str, ...]


def scheme_loss(store: Store, scheme: Scheme) -> float | None:
    """The scheme's loss at the bottleneck's data direction (mean over repetitions), which labels
    each curve of the paper's Fig. 2."""
    found = loss_cells([member_loss(store, m) for m in scheme.members]).get("all")
    return None if found is None else found.est.value


def _curve_series(store: Store, c: Curve, dash: str | None = None, suffix: str = "") -> dict:
    p = c.pooled
    return {"name": c.scheme.label + suffix, "key": c.scheme.key, "points": p.ccdf(), "n": p.n, "failed": p.failed,
            "dash": dash, "loss": scheme_loss(store, c.scheme)}


def _describe(c: Curve, suffix: str = "", limits: Sequence[tuple[float, str]] = ()) -> str:
    p = c.pooled
    above = "".join(f", {100 * p.above(x):.1f}% above {label}" for x, label in limits if p.n)
    return f"{c.scheme.label}{suffix}: {p.n} samples ({p.failed} failed){above}"


def ccdf_figure(store: Store, specs: Sequence[str], name: str, tag: str | None = None,
                records: Records | None = None) -> Figure:
    """One of the CCDF figures (FIGURES), a curve per scheme; NoData when no scheme has samples."""
    records = records or Records(store)
    where = f", tag {tag}" if tag else ""
    series, lines = [], []
    if name in ("web-1.0", "web-1.1"):
        version = name.split("-")[1]
        everything, _ = curves(store, specs, Selection("web", version, "all", tag), records)
        for c in everything:
            data = [records.point(m) for m in c.scheme.members]
            if any(d.has_probe_pages() for d in data):
                for pages, dash, suffix in (("probe", None, " (probes)"), ("rest", "dash", " (other pages)")):
                    part = Curve(c.scheme, Selection("web", version, pages, tag),
                                 tuple(d.sample(Selection("web", version, pages, tag)) for d in data))
                    if part.pooled.n:
                        series.append(_curve_series(store, part, dash, suffix))
                        lines.append(_describe(part, suffix, PAGE_THRESHOLDS))
            else:
                series.append(_curve_series(store, c))
                lines.append(_describe(c, "", PAGE_THRESHOLDS))
        title, xtitle, limits = f"HTTP/{version} page download time{where}", "page download time", PAGE_THRESHOLDS
    elif name == "telnet":
        found, _ = curves(store, specs, Selection("telnet", tag=tag), records)
        series = [_curve_series(store, c) for c in found]
        lines = [_describe(c, "", ECHO_THRESHOLDS) for c in found]
        title, xtitle, limits = f"Telnet echo delay{where}", "echo delay", ECHO_THRESHOLDS
    elif name in ("ftp-probes", "ftp-files"):
        found, _ = curves(store, specs, Selection("ftp-probe" if name == "ftp-probes" else "ftp", tag=tag), records)
        series = [_curve_series(store, c) for c in found]
        lines = [_describe(c) for c in found]
        what = "FTP probe file transfer time" if name == "ftp-probes" else "FTP file transfer time (all files)"
        title, xtitle, limits = what + where, "file transfer time", ()
    else:
        raise ValueError(f"figure {name!r} is not a CCDF: one of web-1.0, web-1.1, telnet, ftp-probes, ftp-files")
    if not series:
        raise NoData(f"no samples for figure {name}{where} in {', '.join(specs)}")
    return Figure(name, figures.threshold_ccdf_chart(title, series, limits, xtitle), tuple(lines))


def fair_share_figure(store: Store, specs: Sequence[str], records: Records | None = None) -> Figure:
    """Fig. 16: per scheme and RTT class, throughput / fair share and the C.O.V."""
    rep = fair_share(store, specs, records)
    tags = sorted({c.tag for c in rep.classes if c.tag is not None}, key=_tag_key) or [None]
    series = []
    for s in rep.schemes:
        mine = {c.tag: c for c in rep.classes if c.scheme == s}
        if not mine:
            continue
        row = [mine.get(t) for t in tags]
        series.append({"name": s.label, "key": s.key,
                       "ratio": [None if c is None else c.ratio.value for c in row],
                       "ratio_ci95": [None if c is None else c.ratio.ci95 for c in row],
                       "cov": [None if c is None else c.cov.value for c in row]})
    lines = [f"{c.scheme.label} {c.tag or 'all'}: {c.flows} flows, ratio {_v(c.ratio)}, C.O.V. {_v(c.cov)}"
             for c in rep.classes]
    return Figure("fair-share", figures.fair_share_chart([t or "all flows" for t in tags], series), tuple(lines))


def flow_throughput_figure(store: Store, specs: Sequence[str], flow: str | None = None,
                           records: Records | None = None) -> Figure:
    """Fig. 17: the chosen flow's goodput over time in each scheme's first repetition, and its fair share."""
    rep = fair_share(store, specs, records)
    chosen = flow or default_flow(rep).flow
    series, lines = [], []
    for s in rep.schemes:
        mine = [f for f in rep.flows if f.scheme == s and f.member == s.members[0] and f.flow == chosen]
        if not mine:
            continue
        f = mine[0]
        t0 = f.series[0][0] if f.series else 0.0
        series.append({"name": s.label, "key": s.key, "t": [round(t - t0, 3) for t, _ in f.series],
                       "kbps": [round(v / 1000, 3) for _, v in f.series],
                       "fair_kbps": None if f.fair_share is None else f.fair_share / 1000})
        lines.append(f"{s.label}: flow {f.flow} ({f.tag or 'untagged'}) of {f.member.run_id} point {f.member.point}:"
                     f" {len(f.series)} samples, ratio {'-' if f.ratio is None else f'{f.ratio:.3f}'},"
                     f" C.O.V. {'-' if f.cov is None else f'{f.cov:.3f}'}")
    if not series:
        known = sorted({f.flow for f in rep.flows}, key=_natural)
        raise NoData(f"no flow {chosen!r} in {', '.join(specs)}; the flows: {', '.join(known[:12])}"
                     + (" ..." if len(known) > 12 else ""))
    tag = next((f.tag for f in rep.flows if f.flow == chosen and f.tag), None)
    title = f"Long FTP throughput of flow {chosen}" + (f" ({tag})" if tag else "")
    return Figure("flow-throughput", figures.flow_throughput_chart(title, series), tuple(lines))


def check_figure(name: str, tag: str | None = None, flow: str | None = None) -> None:
    """ValueError for a figure name not in FIGURES, or an option the figure does not take."""
    if name not in FIGURES:
        raise ValueError(f"figure {name!r}: one of {', '.join(FIGURES)}")
    if flow is not None and name != "flow-throughput":
        raise ValueError(f"--flow goes with the flow-throughput figure, not {name}")
    if tag is not None and name in ("fair-share", "flow-throughput"):
        raise ValueError(f"--tag does not apply to {name}: it shows every RTT class")


def figure(store: Store, specs: Sequence[str], name: str, tag: str | None = None, flow: str | None = None,
           records: Records | None = None) -> Figure:
    """A figure of FIGURES by name. ValueError for an unknown name or an option it does not take
    (check_figure), or runs that cannot be pooled; NoData when the runs have nothing to draw."""
    check_figure(name, tag, flow)
    if name == "fair-share":
        return fair_share_figure(store, specs, records)
    if name == "flow-throughput":
        return flow_throughput_figure(store, specs, flow, records)
    return ccdf_figure(store, specs, name, tag, records)


def applies(store: Store, run_id: str) -> bool:
    """A run of the paper's experiments: a point with a telnet or ftp application, or on the tree."""
    run = store.run(run_id)
    for pt in store.points(run_id):
        try:
            record = record_of(run, pt)
        except RecordError:
            continue  # a point that cannot say what it ran is no experiment of the paper's
        if record.topology.get("kind") == "tree" or record.apps("telnet") or record.apps("ftp"):
            return True
    return False


def run_figures(store: Store, specs: Sequence[str], records: Records | None = None) -> list[Figure]:
    """Every figure the runs have data for, in FIGURES' order; the Telnet CCDF also for the paper's
    80 ms RTT connection where samples carry that tag."""
    records = records or Records(store)
    out = []
    for name in FIGURES:
        try:
            out.append(figure(store, specs, name, records=records))
            if name == "telnet":
                out.append(figure(store, specs, name, PAPER_TELNET_TAG, records=records))
        except NoData:
            continue
    return out
