"""Report layouts: the generic machinery. Each layout is a function (store, run ids...) returning a
typed `Table` (columns with a type and a unit, rows of values), which text, CSV and JSON render
alike, so the numbers come from one aggregation. A layout reproducing a paper table may register
its own text renderer (`text`), given the data it built the rows from (`Table.source`): the text
of `catnip report RUN` and `catnip compare` is that renderer's, unchanged.

    @layout("my-table", "What it shows", "Paper, Table N")
    def my_table(store, run_id) -> Table: ...

The layouts of any run (app-metrics) are here; a paper's are in its folder (papers/NAME/layouts.py),
registered when the papers are (`import catnip.papers`: papers/__init__.py, one line a paper), so
the CLI and the dashboard, which import it, find them here by name.
`catnip report --layouts` lists them, `catnip report RUN --layout NAME [--json|--csv]` prints one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from catnip.results.report import point_report
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
    realtime_only: bool = False  # it uses only points that kept real time (the docs say which it left out)


LAYOUTS: dict[str, Layout] = {}


class UnknownLayout(LookupError):
    pass


class LayoutError(ValueError):
    """A layout that does not apply to the runs given (the wrong kind or number of runs)."""


def layout(name: str, title: str, paper: str, runs: tuple[int, int | None] = (1, 1),
           text: Callable[[Any], str] | None = None, realtime_only: bool = False):
    """Registers a layout function (store, *run_ids) -> Table; `runs` the least and most run ids
    it takes (None: no most); `text` renders the table's `source` in the paper's own layout;
    `realtime_only`: the layout itself leaves out every point that did not keep real time."""
    def register(fn: Callable[..., Table]) -> Callable[..., Table]:
        if name in LAYOUTS:
            raise ValueError(f"layout {name!r} registered twice")
        LAYOUTS[name] = Layout(name, title, paper, fn, runs[0], runs[1], text, realtime_only)
        return fn
    return register


def get(name: str) -> Layout:
    if name not in LAYOUTS:
        raise UnknownLayout(f"unknown layout {name!r}; the layouts are: {', '.join(LAYOUTS)}"
                            + ("" if len(LAYOUTS) > 1 else " (the papers' are registered by `import catnip.papers`)"))
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


def make_table(name: str, run_ids: list[str] | tuple[str, ...], columns: list[Column], rows: list[tuple],
           notes: list[str] = (), source: Any = None) -> Table:
    """A table of the registered layout `name`: its title and paper, these runs, columns and rows."""
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


# --- what layouts share -------------------------------------------------------------------
def one_run(store: Store, run_id: str, name: str, pages: bool = True):
    """The stored run of a layout that takes one (an id or its prefix): not pooled, not a transfer
    measurement where the layout reads pages."""
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
PKTS = {"type": "int", "unit": "pkt"}
FRACTION = {"type": "float", "unit": "1", "fmt": "%"}
RATIO = {"type": "float", "unit": "1", "fmt": ".2f"}


def estimate_columns(name: str, unit: str, fmt: str | None) -> list[Column]:
    """A value and the half-width of its 95% interval (`NAME`, `NAME_ci95`)."""
    return [Column(name, "float", unit, fmt=fmt), Column(f"{name}_ci95", "float", unit, fmt=fmt)]


# --- the layouts of any run -------------------------------------------------------------------
@layout("app-metrics", "Application metrics per point", "samples of any application")
def app_metrics(store: Store, run_id: str) -> Table:
    """Per point, application, metric and tag: samples, errors (counted, not averaged), mean with
    its 95% interval (Student t), sdev, p50/p90/p99, min and max, in the unit of each row."""
    run = one_run(store, run_id, "app-metrics", pages=False)
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
    return make_table("app-metrics", [run["id"]], columns, rows, notes)


# --- two runs against each other's intervals (docs/equivalence.md) ------------------------------
def _estimates(store: Store, run, point_row) -> dict[tuple, tuple[str, float, float | None, int]]:
    """Every figure of a point that has a 95% interval over its own samples: each application
    metric per tag, and each web page's download time (Table II); key -> (unit, mean, ci95, n)."""
    point = point_row["point"]
    out: dict[tuple, tuple[str, float, float | None, int]] = {}
    for s in summaries(store, run["id"], point, by_tag=True):
        if s.mean is not None:
            out[(point, s.app, s.metric, s.tag or "")] = (s.unit, s.mean, s.ci95, s.n)
    for r in point_report(store, run["id"], point_row)["table"]:
        if r.get("mean") is not None:
            out[(point, "web", "page_time", f"page {r['page']}")] = ("s", r["mean"], r.get("ci95"), r["n"])
    return out


def _natural(tag: str) -> tuple:
    """'page 2' before 'page 10'."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in tag.split())


def _compare(store: Store, run_a: str, run_b: str, name: str):
    """Two runs' figures against each other's intervals (per point matched by number): the runs,
    their points by number, the points in common, the rows of within-intervals and how many figures
    were left out (on one side only, without an interval on one side, or in different units)."""
    runs = [one_run(store, r, name, pages=False) for r in (run_a, run_b)]
    if runs[0]["id"] == runs[1]["id"]:
        raise LayoutError(f"layout {name} compares two different runs, not {runs[0]['id']} with itself")
    points = [{p["point"]: p for p in store.points(r["id"])} for r in runs]
    common = sorted(set(points[0]) & set(points[1]))
    if not common:
        raise LayoutError(f"runs {runs[0]['id']} and {runs[1]['id']} have no point number in common")
    labels = run_labels(runs[0], [points[0][n] for n in common])
    rows, one_sided = [], 0
    for n in common:
        a, b = (_estimates(store, run, pts[n]) for run, pts in zip(runs, points))
        verdicts = tuple(None if pts[n]["realtime_ok"] is None else bool(pts[n]["realtime_ok"]) for pts in points)
        for key in sorted(set(a) | set(b), key=lambda k: (*k[:3], _natural(k[3]))):
            if key not in a or key not in b or a[key][2] is None or b[key][2] is None or a[key][0] != b[key][0]:
                one_sided += 1
                continue
            (unit, ma, ca, na), (_, mb, cb, nb) = a[key], b[key]
            inside = abs(ma - mb) <= ca and abs(ma - mb) <= cb
            rows.append((n, labels[n], key[1], key[2], key[3], unit, na, ma, ca, mb, cb, nb, inside, *verdicts))
    return runs, points, common, rows, one_sided


@layout("within-intervals", "Two runs' figures, each mean against the other's 95% interval",
        "any two runs of one scenario (docs/equivalence.md)", runs=(2, 2))
def within_intervals(store: Store, run_a: str, run_b: str) -> Table:
    """Per point (matched by number), application metric and tag, and web page: run A's mean and
    95% half-width, run B's, and whether each mean lies inside the other's interval. Only figures
    with an interval on both sides are compared; the notes count them and those left out."""
    runs, _, _, rows, one_sided = _compare(store, run_a, run_b, "within-intervals")
    columns = [Column("point", "int"), Column("label", "str"), Column("app", "str"), Column("metric", "str"),
               Column("tag", "str"), Column("unit", "str"), Column("a_n", "int"),
               *(Column(name, "float", unit_from="unit") for name in ("a_mean", "a_ci95", "b_mean", "b_ci95")),
               Column("b_n", "int"), Column("inside", "bool"), Column("a_realtime_ok", "bool"),
               Column("b_realtime_ok", "bool")]
    held = sum(r[12] for r in rows)
    notes = [f"A = {runs[0]['id']}, B = {runs[1]['id']}. {len(rows)} figures compared, {held} with each mean inside"
             f" the other's 95% interval, {len(rows) - held} not; {one_sided} left out (on one side only, without"
             " an interval on one side, or in different units). The intervals are each run's own (Student t over"
             " its samples): they do not include how far a repeat of the same code moves."]
    return make_table("within-intervals", [r["id"] for r in runs], columns, rows, notes)


@layout("within-intervals-summary", "Pairs of runs: how many figures lie inside each other's 95% intervals",
        "any pairs of runs of one scenario (docs/equivalence.md)", runs=(2, None))
def within_intervals_summary(store: Store, *run_ids: str) -> Table:
    """Run ids taken in pairs (A1, B1, A2, B2, ...); per pair, what within-intervals counts: the
    figures with an interval on both sides (`compared`), those with each mean inside the other's
    interval (`inside`), those not (`outside`, and its share of `compared`), those left out; each
    run's git commit and whether the two are one commit (a repeat) or two (a change). A run's
    realtime_ok is yes when every point compared kept real time."""
    if len(run_ids) % 2:
        raise LayoutError(f"layout within-intervals-summary takes run ids in pairs (A1 B1 A2 B2 ...),"
                          f" not {len(run_ids)}")
    columns = [Column("pair", "int"), Column("a", "str"), Column("b", "str"), Column("a_git", "str"),
               Column("b_git", "str"), Column("same_commit", "bool"), Column("compared", "int"),
               Column("inside", "int"), Column("outside", "int"), Column("outside_share", **FRACTION),
               Column("left_out", "int"), Column("a_realtime_ok", "bool"), Column("b_realtime_ok", "bool")]
    rows, ids = [], []
    for i in range(0, len(run_ids), 2):
        runs, points, common, compared, one_sided = _compare(store, run_ids[i], run_ids[i + 1],
                                                             "within-intervals-summary")
        ids += [r["id"] for r in runs]
        held = sum(r[12] for r in compared)
        revs = [str(r["git_rev"] or "") for r in runs]
        shown = [(rev[:12] + ("-dirty" if rev.endswith("-dirty") else "")) or "?" for rev in revs]
        # A repeat is one commit twice, known and clean: a -dirty tree is no commit's.
        same = bool(revs[0]) and revs[0] == revs[1] and not revs[0].endswith("-dirty")
        kept = [all(pts[n]["realtime_ok"] is not None and bool(pts[n]["realtime_ok"]) for n in common)
                for pts in points]
        rows.append((i // 2 + 1, *ids[-2:], *shown, same, len(compared), held, len(compared) - held,
                     (len(compared) - held) / len(compared) if compared else None, one_sided, *kept))
    notes = ["Each pair's counts are those of `catnip report A B --layout within-intervals` (its notes): a figure is"
             " inside when each run's mean lies inside the other's 95% interval (Student t over that run's own"
             " samples); same_commit says whether the pair is a repeat of one commit or two commits."]
    return make_table("within-intervals-summary", ids, columns, rows, notes)
