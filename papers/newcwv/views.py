"""The newCWV paper's run-page view: its charts for a run whose points have burst samples."""

from __future__ import annotations

from typing import Any

from catnip.results import figures
from catnip.results import newcwv as newcwv_mod
from catnip.results.store import Store


def charts(store: Store, run_id: str, page: dict[str, Any]) -> dict[str, Any] | None:
    """The gain grid of each comparison as heat maps, the cwnd/pipeACK trace (Fig. 5) and the FTP
    throughput (Fig. 11) where the run has them, and the layouts that apply (for their downloads);
    None for a run without burst samples. `page["apps"]`: each point's application summaries."""
    metrics = {(s["app"], s["metric"]) for a in page.get("apps", {}).values() for s in a["summaries"]}
    if not any(m == "burst_time" for _, m in metrics):
        return None
    out: dict[str, Any] = {"gain": [], "trace": [], "ftp": None, "layouts": ["newcwv-gain", "newcwv-loss"],
                           "notes": []}
    try:
        rep = newcwv_mod.gain_report(store, [run_id])
        out["gain"] = [m for c in rep.comparisons for m in figures.gain_heatmaps(c)]
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
