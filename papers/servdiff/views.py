"""Nouredine and Tobagi's run-page view: their reports of a run of their experiments, and beside
each figure what the paper's text gives for it (published.py), with ours where the servdiff
table has the same quantity."""

from __future__ import annotations

from typing import Any

from catnip.papers.servdiff import analysis as servdiff_mod
from catnip.papers.servdiff import published as pub
from catnip.papers.servdiff.layouts import servdiff_table
from catnip.results.store import Store


def reports(store: Store, run_id: str, page: dict[str, Any]) -> dict[str, Any] | None:
    """For a run of their experiments (analysis.py: a point with telnet or ftp, or on the
    tree), else None: the CCDFs with the paper's limits, the fair-share figures where it has long
    FTP flows, and the servdiff table's every-tag rows."""
    if not servdiff_mod.applies(store, run_id):
        return None
    records = servdiff_mod.Records(store)  # each point's samples read once for the table and the figures
    found = servdiff_mod.run_figures(store, [run_id], records)
    out: dict[str, Any] = {"figures": [f.spec for f in found], "rows": [], "notes": [], "layouts": [],
                           "citation": pub.CITATION, "references": []}
    try:
        table = servdiff_table(servdiff_mod.table(store, [run_id], records))
        out["rows"] = [r for r in table.records() if r["tag"] == "all"]
        out["notes"] = list(table.notes)
        out["layouts"].append("servdiff")
    except servdiff_mod.NoData as exc:
        out["notes"].append(str(exc))
    out["references"] = [references(f.name, out["rows"]) for f in found]
    try:
        servdiff_mod.fair_share(store, [run_id], records)
        out["layouts"].append("servdiff-fair")
    except servdiff_mod.NoData:
        pass  # no long FTP flows
    return out


def references(figure: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper's figures a dashboard figure redraws, each with what the text gives for it and,
    where the servdiff table has that quantity, ours per scheme (its every-tag rows)."""
    out = []
    for ref in pub.FIGURES.get(figure, ()):
        given = [{"what": g.what, "printed": g.printed, "condition": g.condition, "unit": g.unit,
                  "ours": [{"scheme": r["scheme"], "value": r.get(g.stat)} for r in rows] if g.stat else []}
                 for g in ref.given]
        out.append({"figure": ref.figure, "section": ref.section, "shows": ref.shows, "given": given})
    return out
