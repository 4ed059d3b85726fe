"""Nouredine and Tobagi's run-page view: their reports of a run of their experiments."""

from __future__ import annotations

from typing import Any

from catnip.papers.servdiff.layouts import servdiff_table
from catnip.results import servdiff as servdiff_mod
from catnip.results.store import Store


def reports(store: Store, run_id: str, page: dict[str, Any]) -> dict[str, Any] | None:
    """For a run of their experiments (results/servdiff.py: a point with telnet or ftp, or on the
    tree), else None: the CCDFs with the paper's limits, the fair-share figures where it has long
    FTP flows, and the servdiff table's every-tag rows."""
    if not servdiff_mod.applies(store, run_id):
        return None
    records = servdiff_mod.Records(store)  # each point's samples read once for the table and the figures
    out: dict[str, Any] = {"figures": [f.spec for f in servdiff_mod.run_figures(store, [run_id], records)],
                           "rows": [], "notes": [], "layouts": []}
    try:
        table = servdiff_table(servdiff_mod.table(store, [run_id], records))
        out["rows"] = [r for r in table.records() if r["tag"] == "all"]
        out["notes"] = list(table.notes)
        out["layouts"].append("servdiff")
    except servdiff_mod.NoData as exc:
        out["notes"].append(str(exc))
    try:
        servdiff_mod.fair_share(store, [run_id], records)
        out["layouts"].append("servdiff-fair")
    except servdiff_mod.NoData:
        pass  # no long FTP flows
    return out
