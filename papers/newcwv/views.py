"""The newCWV paper's run-page view: its charts for a run whose points have burst samples, and the
paper's numbers beside ours (published.py) for each comparison's gain grid."""

from __future__ import annotations

from typing import Any

from catnip.papers.newcwv import analysis as newcwv_mod
from catnip.papers.newcwv import published as pub
from catnip.results import figures
from catnip.results.store import Store


def charts(store: Store, run_id: str, page: dict[str, Any]) -> dict[str, Any] | None:
    """The gain grid of each comparison as heat maps, the cwnd/pipeACK trace (Fig. 5) and the FTP
    throughput (Fig. 11) where the run has them, and the layouts that apply (for their downloads);
    None for a run without burst samples. `page["apps"]`: each point's application summaries."""
    metrics = {(s["app"], s["metric"]) for a in page.get("apps", {}).values() for s in a["summaries"]}
    if not any(m == "burst_time" for _, m in metrics):
        return None
    out: dict[str, Any] = {"gain": [], "trace": [], "ftp": None, "layouts": ["newcwv-gain", "newcwv-loss"],
                           "notes": [], "paper": [], "citation": pub.CITATION, "not_in_text": pub.NOT_IN_TEXT}
    try:
        rep = newcwv_mod.gain_report(store, [run_id])
        out["gain"] = [m for c in rep.comparisons for m in figures.gain_heatmaps(c)]
        out["paper"] = [beside_paper(c) for c in rep.comparisons]
        out["notes"] += rep.notes
    except (newcwv_mod.NoData, KeyError) as exc:
        out["notes"].append(str(exc.args[0]))
    if any(a == newcwv_mod.TRACE_APP for a, _ in metrics):
        out["trace"] = figures.trace_charts(newcwv_mod.trace_report(store, run_id))
        out["layouts"].append("newcwv-trace")
    if any(m == "goodput" for _, m in metrics):
        try:
            out["ftp"] = figures.ftp_chart(newcwv_mod.ftp_throughput(store, [run_id]))
            out["layouts"].append("ftp-throughput")
        except newcwv_mod.NoData:
            pass  # goodput of another application: no FTP flow of the bulk kind
    return out


def _setup(c: Any) -> tuple[bool, bool, bool]:
    """(paced, cross traffic, rate-limited) of a comparison's newCWV point: its sender's pacing, a
    bulk (FTP) application beside the bursts, a bottleneck of 10 Mbit/s or less (the paper's
    congested path is 2 Mbit/s; its uncongested one has no limit)."""
    record = c.newcwv.record
    bottleneck = record.direction("bottleneck-data")
    rate = bottleneck.rate_bps if bottleneck is not None else 0
    return c.newcwv.sender.pacing != "off", bool(record.apps("bulk")), 0 < rate <= 10_000_000


def _ours(cells: list[Any], level: pub.Level) -> dict[str, Any]:
    """Our cells' gains (percent) over the level's burst sizes: lowest and highest, or their mean."""
    gains = [100 * g.gain for g in cells if g.gain is not None
             and (not level.sizes_kb or (g.cell.size % 1024 == 0 and g.cell.size // 1024 in level.sizes_kb))]
    if not gains:
        return {"text": "no cells", "inside": None}
    if level.stat == "range":
        lo, hi = min(gains), max(gains)
        inside = level.low <= lo and hi <= level.high
        return {"text": f"{lo:.1f}% to {hi:.1f}% ({_cells(len(gains))})", "inside": inside}
    mean = sum(gains) / len(gains)
    tolerance = 5.0 if level.low == level.high else 0.0  # "about X%": within 5 points
    inside = level.low - tolerance <= mean <= level.high + tolerance
    return {"text": f"{mean:.1f}% (mean of {_cells(len(gains))})", "inside": inside}


def _cells(n: int) -> str:
    return f"{n} cell" if n == 1 else f"{n} cells"


def beside_paper(c: Any) -> dict[str, Any]:
    """The paper's experiment matching a comparison's setup and, per number its text gives, ours."""
    ref = pub.reference_for(*_setup(c))
    return {"comparison": c.label, "reference": ref.name, "section": ref.section, "setup": ref.setup,
            "rows": [{"what": lv.what, "printed": lv.printed, "where": lv.where, **_ours(c.cells, lv)}
                     for lv in ref.levels]}
