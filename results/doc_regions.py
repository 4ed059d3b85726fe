"""Generated regions of the docs: tables written from the archive of runs (results/docs_archive.py)
by the layouts `catnip report` uses (results/layouts.py), never typed (issue 46).

A region is two HTML comments, each on a line of its own, around the generated text:

    <!-- catnip:generated layout=catnip-table-ii runs=RUN_ID columns=page,n,mean,ci95 -->
    ...written by `catnip docs build`...
    <!-- /catnip:generated -->

Attributes (KEY=VALUE, separated by spaces; no value holds a space):
  layout   a registered layout (`catnip report --layouts`), given the runs
  runs     the layout's run arguments, separated by ','; each a run id, or ids joined by '+' where
           the layout pools runs; every id an archived run's whole id
  columns  the layout's columns to show, in this order (default: all)
  view     table (default: a Markdown table of the layout's typed rows, cells as `catnip report
           --layout NAME` prints them) or text (the layout's own text, as `catnip report` prints it)
  late     omit (default: rows whose realtime_ok, or any *_realtime_ok, is not yes are left out, and
           said to be) or mark (they stay, with their verdict column shown)
  decimals with view=table, numbers with a unit (seconds, bytes per second...) shown with this many
           decimals (0-9; default as results/table.py shows them: the layout's format, else 4
           significant digits)
  archive=contents (alone) is the archive's own table: its runs, their points and sizes.
  report=NAME (alone) is a report an upper layer registers in REPORTS: report=claims, the
           reproduction report (papers/claims.py: every registered paper's claims, ours computed
           from the archive beside theirs, the verdicts and causes), registered by `import catnip.papers`.

Each region starts with a line saying where it comes from: the layout, each run's scenario, seed,
git commit and date, how many points the runs have and how many kept real time, and which rows were
left out. `build` rewrites every region; `check` says which region differs and its first
differing line, or which run a region cites that is not archived.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from catnip.results import docs_archive
from catnip.results import layouts
from catnip.results.table import Table, _cell  # the cell text `catnip report --layout NAME` prints

START = re.compile(r"<!-- catnip:generated(?P<attrs>(?: [^ ]+)*) -->")
END = "<!-- /catnip:generated -->"
ATTRS = ("layout", "runs", "columns", "view", "late", "decimals", "archive", "report")
VIEWS = ("table", "text")
LATE = ("omit", "mark")
# report=NAME regions: NAME -> fn(region, db) giving its lines; registered from above (papers/claims.py
# registers "claims"), since results/ imports nothing of papers/ (docs/architecture.md, Layers).
REPORTS: dict[str, Callable[["Region", docs_archive.RunsDB], list[str]]] = {}


class RegionError(ValueError):
    """A region that cannot be generated; the message is one line naming the doc, line and why."""


@dataclass
class Region:
    doc: str        # the doc as messages name it (relative to the repository)
    start: int      # the line index (0-based) of the opening comment
    end: int        # the line index of the closing comment
    attrs: dict[str, str]

    def where(self) -> str:
        what = " ".join(f"{k}={v}" for k, v in self.attrs.items())
        return f"{self.doc}:{self.start + 1}: region {what}"


def _attrs(text: str, doc: str, line: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in text.split():
        key, eq, value = token.partition("=")
        if not eq or not value:
            raise RegionError(f"{doc}:{line}: region attribute {token!r} is not KEY=VALUE")
        if key not in ATTRS:
            raise RegionError(f"{doc}:{line}: region attribute {key!r} is not one of {', '.join(ATTRS)}")
        if key in out:
            raise RegionError(f"{doc}:{line}: region attribute {key} given twice")
        out[key] = value
    if "archive" in out:
        if out["archive"] != "contents" or len(out) > 1:
            raise RegionError(f"{doc}:{line}: archive=contents stands alone (the archive's own table)")
        return out
    if "report" in out:
        if len(out) > 1:
            raise RegionError(f"{doc}:{line}: report={out['report']} stands alone")
        if out["report"] not in REPORTS:
            raise RegionError(f"{doc}:{line}: report={out['report']} is not a registered report (registered:"
                              f" {', '.join(REPORTS) or 'none'}; `import catnip.papers` registers report=claims)")
        return out
    for key in ("layout", "runs"):
        if key not in out:
            raise RegionError(f"{doc}:{line}: region has no {key}= (a region needs layout= and runs=, or"
                              " archive=contents, or report=claims)")
    if out.get("view", "table") not in VIEWS:
        raise RegionError(f"{doc}:{line}: view={out['view']} is not one of {', '.join(VIEWS)}")
    if out.get("late", "omit") not in LATE:
        raise RegionError(f"{doc}:{line}: late={out['late']} is not one of {', '.join(LATE)}")
    for key in ("columns", "decimals"):
        if key in out and out.get("view", "table") != "table":
            raise RegionError(f"{doc}:{line}: {key}= goes with view=table only")
    if "decimals" in out and not (out["decimals"].isdigit() and len(out["decimals"]) == 1):
        raise RegionError(f"{doc}:{line}: decimals={out['decimals']} is not a whole number from 0 to 9")
    return out


def parse(doc: str, lines: list[str]) -> list[Region]:
    """The regions of a doc's lines, in order (markers in a fenced code block are not regions);
    RegionError for one not closed, nested, or an end without a start."""
    out: list[Region] = []
    open_at: int | None = None
    attrs: dict[str, str] = {}
    fence: str | None = None  # inside a code block (outside regions) a marker is an example, not a region
    for i, line in enumerate(lines):
        text = line.rstrip()
        if open_at is None and text.lstrip().startswith(("```", "~~~")):
            mark = text.lstrip()[:3]
            fence = mark if fence is None else (None if mark == fence else fence)
            continue
        if fence is not None:
            continue
        if text.startswith("<!-- catnip:generated"):
            m = START.fullmatch(text)
            if m is None:
                raise RegionError(f"{doc}:{i + 1}: a region's opening comment must be"
                                  " '<!-- catnip:generated KEY=VALUE ... -->' on a line of its own")
            if open_at is not None:
                raise RegionError(f"{doc}:{i + 1}: a region opens inside the region of line {open_at + 1}")
            open_at, attrs = i, _attrs(m["attrs"], doc, i + 1)
        elif text.startswith("<!-- /catnip:generated"):
            if text != END:
                raise RegionError(f"{doc}:{i + 1}: a region's closing comment must be exactly {END!r}")
            if open_at is None:
                raise RegionError(f"{doc}:{i + 1}: {END} without a region opened before it")
            out.append(Region(doc, open_at, i, attrs))
            open_at = None
    if open_at is not None:
        raise RegionError(f"{doc}:{open_at + 1}: region not closed (no {END} after it)")
    return out


def cited_runs(region: Region) -> list[str]:
    """Every run id the region cites, in order, once each."""
    ids: list[str] = []
    for arg in region.attrs.get("runs", "").split(","):
        for rid in arg.split("+"):
            if rid and rid not in ids:
                ids.append(rid)
    return ids


def _wrap(text: str) -> list[str]:
    """A paragraph in lines of at most 100 characters (as the docs are written): a changed word
    is then one changed line."""
    return textwrap.wrap(text, 100, break_long_words=False, break_on_hyphens=False)


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _verdict_columns(table: Table) -> list[int]:
    return [i for i, c in enumerate(table.columns) if c.name == "realtime_ok" or c.name.endswith("_realtime_ok")]


def markdown_table(table: Table, names: list[str], decimals: int | None = None) -> list[str]:
    """The columns `names` of a typed table as a Markdown table: units in the header, numbers right
    aligned, cells as results/table.py renders them (`decimals`: floats with a unit, other than
    percentages, with that many decimals)."""
    index = {c.name: i for i, c in enumerate(table.columns)}
    if decimals is not None:
        table = replace(table, columns=tuple(replace(c, fmt=f".{decimals}f") if c.type == "float" and c.unit
                                             and c.fmt != "%" else c for c in table.columns))
    cols = [table.columns[index[n]] for n in names]
    heads = [c.name + (f" ({c.unit})" if c.unit and c.unit != "1" else "") for c in cols]
    rule = ["---" if c.type in ("str", "json", "bool") else "---:" for c in cols]
    out = ["| " + " | ".join(heads) + " |", "|" + "|".join(rule) + "|"]
    for row in table.rows:
        out.append("| " + " | ".join(_md(_cell(table.columns[index[n]], row[index[n]])) for n in names) + " |")
    if not table.rows:
        out.append("| " + " | ".join(["(no rows)"] + ["" for _ in names[1:]]) + " |")
    return out


def _runs_line(db: docs_archive.RunsDB, ids: list[str]) -> tuple[str, int, int]:
    """'run ID (scenario, seed, git, date)' for each run; its points and how many kept real time."""
    parts, points, kept = [], 0, 0
    for rid in ids:
        e = db.entries[rid]
        parts.append(f"`{rid}` ({e['scenario']}, seed {e['seed']}, git {(e['git_rev'] or '?')[:12]}"
                     f"{'-dirty' if str(e['git_rev']).endswith('-dirty') else ''}, {(e['started'] or '?')[:10]})")
        points += len(e["points"])
        kept += sum(1 for p in e["points"] if p["realtime_ok"] is True)
    return "; ".join(parts), points, kept


def _late_points(db: docs_archive.RunsDB, ids: list[str]) -> list[str]:
    return [f"{rid} point {p['point']}" for rid in ids for p in db.entries[rid]["points"]
            if p["realtime_ok"] is not True]


def _layout_table(region: Region, db: docs_archive.RunsDB) -> Table:
    name = region.attrs["layout"]
    try:
        return layouts.build(name, db.store, *region.attrs["runs"].split(","))
    except (LookupError, ValueError) as exc:  # unknown layout, the wrong runs for it, runs that do not go together
        raise RegionError(f"{region.where()}: {str(exc).splitlines()[0]}") from None


def _render_layout(region: Region, db: docs_archive.RunsDB) -> list[str]:
    ids = cited_runs(region)
    for rid in ids:
        try:
            db.need(rid)
        except docs_archive.DocsArchiveError as exc:
            raise RegionError(f"{region.where()}: cites run {rid}, which cannot be read from the archive: {exc}"
                              ) from None
    table = _layout_table(region, db)
    view, late = region.attrs.get("view", "table"), region.attrs.get("late", "omit")
    runs, points, kept = _runs_line(db, ids)
    head = (f"Generated by `catnip docs build` from archive/ (layout `{table.layout}`, {table.paper}): "
            f"{'runs' if len(ids) > 1 else 'run'} {runs}. Points: {points}, {kept} kept real time.")
    verdicts = _verdict_columns(table)
    late_points = _late_points(db, ids)
    if late == "omit" and late_points and layouts.get(table.layout).realtime_only:
        head += f" Left out by the layout, which uses only points that kept real time: {', '.join(late_points)}."
    elif late == "omit" and late_points and (view == "text" or not verdicts):
        raise RegionError(f"{region.where()}: {', '.join(late_points)} did not keep real time and this"
                          f" {'text' if view == 'text' else 'layout'} cannot leave it out: late=mark shows it marked")
    if late == "mark" and late_points:
        head += f" Marked, not left out (they did not keep real time): {', '.join(late_points)}."
    if view == "text":
        return ["", *_wrap(head), "", "```text", *layouts.render_text(table).splitlines(), "```", ""]
    names = region.attrs["columns"].split(",") if "columns" in region.attrs else [c.name for c in table.columns]
    unknown = [n for n in names if n not in {c.name for c in table.columns}]
    if unknown:
        raise RegionError(f"{region.where()}: columns {', '.join(unknown)} are not the layout's (its columns: "
                          f"{', '.join(c.name for c in table.columns)})")
    if late == "omit" and verdicts:
        kept_rows = tuple(r for r in table.rows if all(r[i] is True for i in verdicts))
        left = len(table.rows) - len(kept_rows)
        if left:
            head += (f" Left out: {left} of {len(table.rows)} rows, whose points did not keep real time"
                     f" ({', '.join(late_points)}).")
        table = replace(table, rows=kept_rows, source=None)
    elif late == "mark":
        names += [table.columns[i].name for i in verdicts if table.columns[i].name not in names]
    decimals = int(region.attrs["decimals"]) if "decimals" in region.attrs else None
    notes = ["", *table.notes] if table.notes else []
    return ["", *_wrap(head), "", *markdown_table(table, names, decimals), *notes, ""]


def _render_contents(db: docs_archive.RunsDB) -> list[str]:
    entries = [db.entries[k] for k in sorted(db.entries)]
    total = sum(e["bytes"] for e in entries)
    out = ["", *_wrap(f"Generated by `catnip docs build` from archive/MANIFEST.json: {len(entries)} run(s),"
                      f" {total:,} bytes in all."), "",
           "| run | scenario | seed | git | engine | started | points | kept real time | bytes |",
           "|---|---|---:|---|---|---|---:|---:|---:|"]
    for e in entries:
        kept = sum(1 for p in e["points"] if p["realtime_ok"] is True)
        out.append(f"| `{e['run_id']}` | {_md(str(e['scenario']))} | {e['seed']} | {(e['git_rev'] or '?')[:12]}"
                   f"{'-dirty' if str(e['git_rev']).endswith('-dirty') else ''} | {(e['engine_sha256'] or '?')[:12]}"
                   f" | {e['started']} | {len(e['points'])} | {kept} | {e['bytes']:,} |")
    return [*out, ""]


def render(region: Region, db: docs_archive.RunsDB) -> list[str]:
    """The lines the region holds when it is what the archive gives."""
    if "archive" in region.attrs:
        return _render_contents(db)
    if "report" in region.attrs:
        return REPORTS[region.attrs["report"]](region, db)
    return _render_layout(region, db)


def doc_files(root: Path) -> list[Path]:
    """The docs whose regions are built and checked: README.md and every .md under docs/."""
    root = Path(root)
    found = [root / "README.md"] if (root / "README.md").is_file() else []
    return found + sorted((root / "docs").rglob("*.md"))


@dataclass
class Outcome:
    regions: int = 0
    docs: int = 0
    problems: list[str] = field(default_factory=list)      # what build cannot mend: syntax, runs, the archive
    differences: list[str] = field(default_factory=list)   # regions that are not what the archive gives
    changed: list[Path] = field(default_factory=list)      # docs build rewrote


def _name(doc: Path, root: Path) -> str:
    return str(doc.relative_to(root)) if doc.is_relative_to(root) else str(doc)


def _each_region(root: Path, files: list[Path] | None, write: bool) -> Outcome:
    root = Path(root).resolve()
    archive_dir = root / "archive"
    outcome = Outcome(problems=docs_archive.problems(archive_dir))
    try:
        db = docs_archive.RunsDB(archive_dir)
    except docs_archive.DocsArchiveError:  # an unreadable manifest: problems() has said why
        return outcome
    with db:
        for rid in sorted(db.entries):  # every archived file against its manifest entry
            try:
                db.need(rid)
            except docs_archive.DocsArchiveError as exc:
                outcome.problems.append(str(exc))
        for doc in files if files is not None else doc_files(root):
            doc = Path(doc).resolve()
            lines = doc.read_text().split("\n")
            try:
                regions = parse(_name(doc, root), lines)
            except RegionError as exc:
                outcome.problems.append(str(exc))
                continue
            outcome.docs += bool(regions)
            new = list(lines)
            for region in reversed(regions):  # from the end, so earlier regions keep their line numbers
                outcome.regions += 1
                try:
                    want = render(region, db)
                except RegionError as exc:
                    outcome.problems.append(str(exc))
                    continue
                have = lines[region.start + 1:region.end]
                if have != want:
                    new[region.start + 1:region.end] = want
                    outcome.differences.append(_first_difference(region, have, want))
            if write and new != lines:
                doc.write_text("\n".join(new))
                outcome.changed.append(doc)
    outcome.differences.reverse()  # in the docs' order
    return outcome


def _around(a: str, b: str) -> tuple[int, str, str]:
    """Where two lines first differ (1-based character) and each line around that place."""
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    lo = max(0, k - 50)
    return k + 1, ("..." if lo else "") + a[lo:k + 50], ("..." if lo else "") + b[lo:k + 50]


def _first_difference(region: Region, have: list[str], want: list[str]) -> str:
    for i, (a, b) in enumerate(zip(have, want)):
        if a != b:
            col, x, y = _around(a, b)
            return (f"{region.where()}: line {region.start + 2 + i} differs from the archive at character {col}:"
                    f" the doc has {x!r}, the archive gives {y!r}")
    line = region.start + 2 + min(len(have), len(want))
    if len(have) > len(want):
        return f"{region.where()}: line {line} is more than the archive gives: {have[len(want)][:160]!r}"
    return f"{region.where()}: the region ends at line {line}; the archive gives more: {want[len(have)][:160]!r}"


def check(root: Path, files: list[Path] | None = None) -> Outcome:
    """Every region of the docs against what the archive gives, and the archive against its manifest."""
    return _each_region(root, files, write=False)


def build(root: Path, files: list[Path] | None = None) -> Outcome:
    """Rewrites every region that differs from what the archive gives (`differences` says which);
    `problems` are what it could not mend."""
    return _each_region(root, files, write=True)
