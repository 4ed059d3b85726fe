"""Sweep points against one base point of the same runs, the comparisons CATNIP's text makes in
sections V-B to V-F: CATNIP-Good against DropTail (Tables VIII-X: "20-80%" lower mean, "60-90%"
lower standard deviation), each sender against Reno (Tables II-VII).

Per page: the point's mean over the base's (below 1.00 faster) with the 95% interval of that ratio
(delta method; an interval that leaves out 1.00 is the usual test of a difference at 95%), the
ratio of standard deviations, and whether the two means' own 95% intervals are apart (stricter:
apart intervals imply a difference at well beyond 95%; overlapping ones do not imply none). Input is a pooled report (results/pooled.py), so seeds and repetitions count as samples.
"""

from __future__ import annotations

from typing import Any

from catnip.results.compare import rel_var
from catnip.results.samples import ratio_ci95
from catnip.results.report import loss_table


def _rows(point: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {r["page"]: r for r in point["table"] if r.get("mean")}


def against(report: dict[str, Any], base: int = 0) -> dict[str, Any]:
    """Every point of `report` but `base` against point `base` (indices of the pooled report: sweep
    values in the order they first appear in its runs). Raises ValueError for a base outside the
    report's points or one without pages."""
    points = report["points"]
    if not 0 <= base < len(points):
        raise ValueError(f"pooled point #{base} does not exist: the pooled report has #0 to #{len(points) - 1}")
    ref = _rows(points[base])
    if not ref:
        raise ValueError(f"pooled point #{base} ({points[base]['label']}) has no completed pages to compare with")
    losses = {r["point"]: r for r in loss_table(report)}
    columns = []
    for p in points:
        if p["point"] == base:
            continue
        mine = _rows(p)
        pages = []
        for page in sorted(set(mine) & set(ref)):
            a, b = mine[page], ref[page]
            ratio = a["mean"] / b["mean"]
            va, vb = rel_var(a), rel_var(b)
            pages.append({
                "page": page, "relative": ratio,
                "relative_ci95": None if va is None or vb is None else ratio_ci95(ratio, va, a["n"], vb, b["n"]),
                # One page has no spread to compare.
                "sdev_relative": a["sdev"] / b["sdev"] if a["n"] > 1 and b["n"] > 1 and b["sdev"] else None,
                "apart": (a["ci95"] is not None and b["ci95"] is not None
                          and abs(a["mean"] - b["mean"]) > a["ci95"] + b["ci95"]),
            })
        columns.append({"point": p["point"], "label": p["label"], "realtime_ok": p["realtime_ok"],
                        "members": len(p["members"]), "pages": pages,
                        "faster": sum(r["relative"] < 1 for r in pages),
                        "sdev_lower": sum(r["sdev_relative"] is not None and r["sdev_relative"] < 1 for r in pages),
                        "apart_faster": [r["page"] for r in pages if r["apart"] and r["relative"] < 1],
                        "apart_slower": [r["page"] for r in pages if r["apart"] and r["relative"] > 1],
                        # The usual test of a difference: the ratio's own interval leaves out 1.00.
                        "ratio_below_one": [r["page"] for r in pages if r["relative_ci95"] is not None
                                            and r["relative"] + r["relative_ci95"] < 1],
                        "ratio_above_one": [r["page"] for r in pages if r["relative_ci95"] is not None
                                            and r["relative"] - r["relative_ci95"] > 1],
                        "loss": losses.get(p["point"])})
    return {"run_id": report["run_id"], "name": report["name"], "base": base, "base_label": points[base]["label"],
            "pages": sorted({r["page"] for col in columns for r in col["pages"]}),
            "base_members": len(points[base]["members"]), "base_loss": losses.get(base), "columns": columns}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}"


def _loss_text(row: dict[str, Any] | None) -> str:
    if not row:
        return "-"
    return f"{_pct(row['loss'])}/{_pct(row['high_loss'])}/{_pct(row['low_loss'])}%"


def _sides(faster: list[int], slower: list[int]) -> str:
    parts = ([f"faster on pages {faster}"] if faster else []) + ([f"slower on pages {slower}"] if slower else [])
    return ", ".join(parts) or "no page"


def render_text(c: dict[str, Any]) -> str:
    cols = c["columns"]
    out = [f"Against #{c['base']} ({c['base_label']}, {c['base_members']} repetition(s)): each page's mean over"
           " the base's, +-95%; below 1.00 faster; * where the two means' 95% intervals are apart"]
    out += [f"  #{col['point']}: {col['label']}, {col['members']} repetition(s)"
            + ("" if col["realtime_ok"] is not False else " (real time NOT kept)") for col in cols]
    w = 14
    out.append("")
    out.append(f"{'Page':>4} " + " ".join(f"{'#' + str(col['point']) + ' mean':>{w}} {'sdev':>5}" for col in cols))
    for page in c["pages"]:
        cells = []
        for col in cols:
            r = next((x for x in col["pages"] if x["page"] == page), None)
            if r is None:
                cells.append(f"{'-':>{w}} {'-':>5}")
                continue
            ci = "" if r["relative_ci95"] is None else f"+-{r['relative_ci95']:.2f}"
            mean = f"{r['relative']:.2f}{ci}{'*' if r['apart'] else ' '}"
            sdev = "-" if r["sdev_relative"] is None else f"{r['sdev_relative']:.2f}"
            cells.append(f"{mean:>{w}} {sdev:>5}")
        out.append(f"{page:>4} " + " ".join(cells))
    out.append("")
    for col in cols:
        n = len(col["pages"])
        out.append(f"#{col['point']}: faster on {col['faster']} of {n} pages, sdev lower on {col['sdev_lower']} of {n};"
                   f" ratio interval leaves out 1.00: {_sides(col['ratio_below_one'], col['ratio_above_one'])};"
                   f" means' intervals apart: {_sides(col['apart_faster'], col['apart_slower'])};"
                   f" bottleneck loss all/high/low {_loss_text(col['loss'])}")
    out.append(f"#{c['base']} (base): bottleneck loss all/high/low {_loss_text(c['base_loss'])}")
    return "\n".join(out)
