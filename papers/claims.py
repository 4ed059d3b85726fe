"""The reproduction report (issue 46, item 6): every paper's claims, ours beside theirs, the verdict
and the cause where our docs found one. One source, two views: docs/report.md's generated region
(`report=claims`, results/doc_regions.py, written by `catnip docs build`) and the dashboard's
/report page (webui/report_page.py) both render `report()`.

Each paper declares its claims once, as data, in its folder (papers/NAME/claims.py, named by
`Paper.claims`): a `Claim` holds the claim as the paper states it, the paper's number with where
the paper gives it (table, figure, section), the doc section of ours that measures and judges it,
the verdict (one of VERDICTS) and the cause as that doc gives it. Verdicts and causes are
judgements taken from our docs, never computed here.

"Ours" is never typed: a claim whose measuring runs are kept in archive/ names them and a layout
(`Measure`), and the figure is computed from the layout's table over the archived runs, points
that did not keep real time left out (issue 46, item 3). A claim without such runs says "not
archived" and points to its doc section, where the runs it rests on are named.
"""

from __future__ import annotations

import importlib
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from catnip.results import doc_regions, docs_archive, layouts
from catnip.results.table import Table

VERDICTS = ("agrees", "direction only", "disagrees", "not run")
NOT_ARCHIVED = "not archived"


class ClaimsError(ValueError):
    """Claims data that cannot be reported: an unknown verdict, a doc section that does not exist, a
    run not in the archive, a layout that cannot be built. The message is one line saying which."""


@dataclass(frozen=True)
class Figure:
    """What a claim's measure computed: the text shown as ours, and the points behind it."""
    text: str
    kept: int        # points (or compared pairs of points) used: every one kept real time
    left_out: tuple[str, ...] = ()  # the points left out because they did not keep real time


@dataclass(frozen=True)
class Measure:
    """How ours is computed: the layout `layout` over `runs` (its run arguments, as `catnip report
    --layout` takes them: each an archived run id, or ids joined by '+' where the layout pools), and
    `figure`, which reads the claim's number off the layout's table. `what` says in words what the
    figure is and in which configuration. No runs: not archived yet."""
    layout: str
    runs: tuple[str, ...]
    figure: Callable[[Table], Figure]
    what: str

    def run_ids(self) -> list[str]:
        return list(dict.fromkeys(r for arg in self.runs for r in arg.split("+") if r))


@dataclass(frozen=True)
class Claim:
    key: str          # unique within its paper
    claim: str        # as the paper states it (paraphrased, its numbers as printed)
    paper: str        # the paper's number, as printed
    where: str        # where the paper gives it: table, figure, section
    section: str      # the heading of the section of `doc` that measures and judges it
    verdict: str      # one of VERDICTS, as that section judges it
    cause: str = ""   # the cause, as our doc gives it (short); "" where it found none
    cause_section: str = ""  # the heading giving the cause, when not `section`
    doc: str = ""     # our doc (default: the paper's docs page)
    measure: Measure | None = None
    note: str = ""    # how far the verdict goes, as that section qualifies it (short), shown with it


@dataclass(frozen=True)
class Row:
    """A claim as both views show it."""
    claim: Claim
    doc: str
    ours: str                  # the figure from archived runs, or NOT_ARCHIVED
    provenance: str            # the runs, their scenarios, seeds, commits and real time; or the doc section
    anchor: str                # the section's anchor in the doc (GitHub's heading slug)
    cause_anchor: str


@dataclass
class PaperReport:
    paper: object              # papers.registry.Paper
    rows: list[Row] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {v: sum(1 for r in self.rows if r.claim.verdict == v) for v in VERDICTS}

    @property
    def heading(self) -> str:
        """The paper's heading in both views: its short name, and its authors and year."""
        c = self.paper.citation
        return f"{self.paper.short_name} ({c.authors}, {c.year})" if c else self.paper.short_name

    @property
    def archived(self) -> int:
        return sum(1 for r in self.rows if r.ours != NOT_ARCHIVED)


def claims_of(paper) -> tuple[Claim, ...]:
    """A paper's claims (`Paper.claims`, the module holding CLAIMS), () when it declares none."""
    if not paper.claims:
        return ()
    module = importlib.import_module(paper.claims)
    return tuple(getattr(module, "CLAIMS", ()))


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(path: Path) -> list[str]:
    """The headings of a Markdown file (outside fenced code blocks), without their '#'s."""
    out, fence = [], None
    for line in path.read_text().splitlines():
        s = line.lstrip()
        if s.startswith(("```", "~~~")):
            fence = s[:3] if fence is None else (None if s[:3] == fence else fence)
            continue
        if fence is None and (m := re.match(r"#{1,6} +(.*?)\s*#*$", line)):
            out.append(m[1])
    return out


def problems(root: Path, papers: dict) -> list[str]:
    """What is wrong with the papers' claims data, one line each: a paper without claims, a key
    twice, an unknown verdict, a doc or doc section that does not exist, a layout not registered."""
    out: list[str] = []
    cache: dict[str, list[str]] = {}
    for paper in papers.values():
        claims = claims_of(paper)
        if not claims:
            out.append(f"paper {paper.name!r} declares no claims (Paper.claims, papers/{paper.name}/claims.py)")
        keys = [c.key for c in claims]
        for c in claims:
            where = f"paper {paper.name!r}, claim {c.key!r}"
            if keys.count(c.key) > 1:
                out.append(f"{where}: key given twice")
            if c.verdict not in VERDICTS:
                out.append(f"{where}: verdict {c.verdict!r} is not one of {', '.join(VERDICTS)}")
            if not c.claim.strip() or not c.paper.strip() or not c.where.strip():
                out.append(f"{where}: the claim, the paper's number and where the paper gives it are all needed")
            doc = c.doc or paper.docs
            if doc not in cache:
                cache[doc] = headings(root / doc) if (root / doc).is_file() else []
            if not (root / doc).is_file():
                out.append(f"{where}: doc {doc} does not exist")
                continue
            for s in (c.section, c.cause_section):
                if s and s not in cache[doc]:
                    out.append(f"{where}: {doc} has no section {s!r}")
            if c.cause_section and not c.cause:
                out.append(f"{where}: cause_section without a cause")
            if c.measure and c.measure.layout not in layouts.LAYOUTS:
                out.append(f"{where}: layout {c.measure.layout!r} is not registered")
    return out


def _runs_text(db: docs_archive.RunsDB, ids: list[str]) -> str:
    parts = []
    for rid in ids:
        e = db.entries[rid]
        parts.append(f"`{rid}` ({e['scenario']}, seed {e['seed']}, git {str(e['git_rev'] or '?')[:12]}"
                     f"{'-dirty' if str(e['git_rev']).endswith('-dirty') else ''}, {str(e['started'] or '?')[:10]})")
    return "; ".join(parts)


def _ours(paper, c: Claim, db: docs_archive.RunsDB) -> tuple[str, str]:
    doc = c.doc or paper.docs
    m = c.measure
    if m is None or not m.runs:
        return NOT_ARCHIVED, f"{doc}, \"{c.section}\" names the runs"
    ids = m.run_ids()
    for rid in ids:
        try:
            db.need(rid)
        except docs_archive.DocsArchiveError as exc:
            raise ClaimsError(f"paper {paper.name!r}, claim {c.key!r}: run {rid}: {exc}") from None
    try:
        table = layouts.build(m.layout, db.store, *m.runs)
    except (LookupError, ValueError) as exc:
        raise ClaimsError(f"paper {paper.name!r}, claim {c.key!r}: layout {m.layout}: {str(exc).splitlines()[0]}"
                          ) from None
    try:
        fig = m.figure(table)
    except ClaimsError as exc:
        raise ClaimsError(f"paper {paper.name!r}, claim {c.key!r}: {exc}") from None
    note = f"{m.what}; layout `{m.layout}` over run{'s' if len(ids) > 1 else ''} {_runs_text(db, ids)}"
    note += f"; {fig.kept} point(s) used, each in real time"
    if fig.left_out:
        note += f"; left out, not in real time: {', '.join(fig.left_out)}"
    return fig.text, note


def report(db: docs_archive.RunsDB, root: Path, papers: dict) -> list[PaperReport]:
    """Every registered paper's claims with ours computed from the archive `db`; ClaimsError naming
    the first problem of the claims data (problems()) or of a claim's runs."""
    bad = problems(root, papers)
    if bad:
        raise ClaimsError(bad[0] + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))
    out = []
    for paper in papers.values():
        rep = PaperReport(paper)
        for c in claims_of(paper):
            ours, provenance = _ours(paper, c, db)
            rep.rows.append(Row(c, c.doc or paper.docs, ours, provenance, slug(c.section),
                                slug(c.cause_section or c.section)))
        out.append(rep)
    return out


# --- reading a claim's number off a layout's table ------------------------------------------------

def _index(table: Table) -> dict[str, int]:
    return {c.name: i for i, c in enumerate(table.columns)}


def _in_real_time(table: Table, row: tuple) -> bool:
    idx = _index(table)
    return all(row[i] is True for n, i in idx.items() if n == "realtime_ok" or n.endswith("_realtime_ok"))


def table_xi(value: str, buffers: tuple[int, ...]) -> Callable[[Table], Figure]:
    """catnip-table-xi-beside's figure at the buffers (KB) of Table XI asked for, per buffer of the
    first compared run: `value` "relative_mean" (the Mean row: the mean over pages of CATNIP's page
    mean over the baseline's, with its 95% interval) or "baseline_loss" (the baseline's bottleneck
    loss, Table XI's TCP Pkt Loss). A point's buffer is the layout's `buffer_kb`, the one the point's
    bottleneck was built with, as its resolved record says (papers/catnip/layouts.py; issue 43: what
    ran is read from the record, never from a label); a layout without that column is a
    ClaimsError. A buffer whose point or baseline point missed real time is left out."""
    def figure(table: Table) -> Figure:
        idx = _index(table)
        if "buffer_kb" not in idx:
            raise ClaimsError(f"layout {table.layout} has no buffer_kb column (each point's buffer from its"
                              f" record): Table XI's figure reads catnip-table-xi-beside")
        first = table.rows[0][idx["run_id"]] if table.rows else None
        per: dict[int, tuple] = {}
        for r in table.rows:
            kb = r[idx["buffer_kb"]]
            if r[idx["run_id"]] == first and kb in buffers:
                per.setdefault(kb, r)
        parts, left = [], []
        for kb in sorted(per):
            r = per[kb]
            if not _in_real_time(table, r):
                left.append(f"{kb} KB")
            elif value == "relative_mean":
                parts.append(f"{kb} KB: {r[idx['relative_mean']]:.2f} ±{r[idx['relative_mean_ci95']]:.2f}")
            else:
                parts.append(f"{kb} KB: {100 * r[idx['baseline_loss']]:.2f}%")
        missing = [f"{kb} KB" for kb in buffers if kb not in per]
        text = "; ".join(parts) or "no point in real time"
        if missing:
            text += f" (not in the runs: {', '.join(missing)})"
        return Figure(text, len(parts), tuple(left))
    return figure


def newcwv_gain(cells: tuple[tuple[int, float], ...]) -> Callable[[Table], Figure]:
    """newcwv-gain's gain (mean of per-burst gains, ±95%) at the (size KB, idle s) cells asked for."""
    def figure(table: Table) -> Figure:
        idx = _index(table)
        parts, left = [], []
        for kb, idle in cells:
            rows = [r for r in table.rows if r[idx["size"]] == kb * 1024 and r[idx["idle"]] == idle]
            for r in rows:
                if not _in_real_time(table, r):
                    left.append(f"{kb} KB after {idle:g} s")
                else:
                    parts.append(f"{kb} KB after {idle:g} s: {100 * r[idx['gain']]:.1f}% ±{100 * r[idx['gain_ci95']]:.1f}")
        return Figure("; ".join(parts) or "no cell in real time", len(parts), tuple(left))
    return figure


def servdiff_stat(tag: str, stats: tuple[tuple[str, str], ...]) -> Callable[[Table], Figure]:
    """servdiff's statistics (column, how it reads) in the rows of `tag` (an RTT class, or "all"),
    per scheme: seconds with 2 decimals, fractions as percentages."""
    def figure(table: Table) -> Figure:
        idx = _index(table)
        units = {c.name: c.unit for c in table.columns}
        parts, left = [], []
        for r in table.rows:
            if r[idx["tag"]] != tag:
                continue
            if not _in_real_time(table, r):
                left.append(str(r[idx["scheme"]]))
                continue
            cells = []
            for col, words in stats:
                v = r[idx[col]]
                cells.append(f"{words} {'-' if v is None else (f'{v:.2f} s' if units[col] == 's' else f'{100 * v:.1f}%')}")
            parts.append(f"{r[idx['scheme']]}: {', '.join(cells)}")
        return Figure("; ".join(parts) or "no scheme in real time", len(parts), tuple(left))
    return figure


# --- the Markdown view (docs/report.md) -------------------------------------------------------------

def _md(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(reports: list[PaperReport], doc_dir: str = "docs") -> list[str]:
    """The report as Markdown lines, links relative to `doc_dir` (where docs/report.md is)."""
    def link(doc: str, section: str, anchor: str) -> str:
        rel = posixpath.relpath(doc, doc_dir or ".")
        return f"[{doc}, \"{_md(section)}\"]({rel}#{anchor})"

    total = sum(len(r.rows) for r in reports)
    out = ["", f"Generated by `catnip docs build` from the papers' claims (papers/*/claims.py) and archive/: "
               f"{total} claims of {len(reports)} papers, {sum(r.archived for r in reports)} of them with ours"
               f" computed from archived runs.", "",
           "| paper | claims | " + " | ".join(VERDICTS) + " | ours from archived runs |",
           "|---|---:|" + "---:|" * len(VERDICTS) + "---:|"]
    for rep in reports:
        counts = rep.counts()
        out.append(f"| [{_md(rep.paper.short_name)}](#{slug(rep.heading)}) | {len(rep.rows)} | "
                   + " | ".join(str(counts[v]) for v in VERDICTS) + f" | {rep.archived} |")
    for rep in reports:
        p = rep.paper
        out += ["", f"## {rep.heading}", "", _md(str(p.citation)) + "." if p.citation else "(no paper to cite)", "",
                "| claim | where (paper) | paper | ours | verdict | cause (our docs) | measured and judged in |",
                "|---|---|---|---|---|---|---|"]
        for r in rep.rows:
            c = r.claim
            ours = r.ours if r.ours == NOT_ARCHIVED else f"{r.ours} ({r.provenance})"
            cause = _md(c.cause) + (f" ({link(r.doc, c.cause_section, r.cause_anchor)})" if c.cause_section else "")
            verdict = f"**{c.verdict}**" + (f": {_md(c.note)}" if c.note else "")
            out.append(f"| {_md(c.claim)} | {_md(c.where)} | {_md(c.paper)} | {_md(ours)} | {verdict} |"
                       f" {cause or '-'} | {link(r.doc, c.section, r.anchor)} |")
    return [*out, ""]



def _region(region: doc_regions.Region, db: docs_archive.RunsDB) -> list[str]:
    """docs/report.md's `report=claims` region: the report of the papers registered, from the
    archive being checked; the repository is the archive's parent (the claims cite its docs)."""
    from catnip.papers.registry import PAPERS
    try:
        reports = report(db, db.dir.parent, PAPERS)
    except ClaimsError as exc:
        raise doc_regions.RegionError(f"{region.where()}: {exc}") from None
    return markdown(reports, posixpath.dirname(region.doc))


doc_regions.REPORTS["claims"] = _region
