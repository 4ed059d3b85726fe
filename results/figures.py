"""Plot data for the dashboard: Plotly figure specs (plain dicts) and time series, computed here so
the browser only draws. Figures follow the papers: per-page mean download time with one standard
deviation (CATNIP Figs. 5-7), the distribution of page times (CDF and CCDF), and the bottleneck's
queue, throughput and drops over time.
"""

from __future__ import annotations

from typing import Any, Iterable

from spec.scenario import point_label
from results.store import Store


def page_time_bars(report: dict[str, Any]) -> dict[str, Any]:
    """Mean page download time per Web page with +-1 standard deviation, one bar group per point."""
    traces = []
    for p in report["points"]:
        rows = [r for r in p["table"] if r.get("mean") is not None]
        traces.append({"type": "bar", "name": point_label(p["assignment"], "run"), "x": [r["page"] for r in rows],
                       "y": [round(r["mean"], 4) for r in rows],
                       "error_y": {"type": "data", "array": [round(r["sdev"], 4) for r in rows], "visible": True}})
    return {"data": traces, "layout": {
        "title": {"text": "Mean page download time (+-1 sdev), as in CATNIP Figs. 5-7", "x": 0.02, "xanchor": "left"}, "barmode": "group",
        "xaxis": {"title": {"text": "Web page"}, "dtick": 1}, "yaxis": {"title": {"text": "seconds"}},
        "margin": {"t": 40, "r": 10}, "legend": {"orientation": "h"}}}


def page_time_distribution(store: Store, run_id: str, points: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Empirical CDF of completed page times per point; the page's buttons switch to a log CCDF."""
    traces = []
    for p in points:
        times = sorted(r["duration"] for r in store.pages(run_id, p["point"]) if not r["error"])
        n = len(times)
        if not n:
            continue
        traces.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv"},
                       "name": point_label(p["assignment"], "run"),
                       "x": [round(t, 4) for t in times], "y": [round((i + 1) / n, 5) for i in range(n)],
                       "ccdf": [round(1 - i / n, 5) for i in range(n)]})
    return {"data": traces, "layout": {
        "title": {"text": "Page download times: CDF", "x": 0.02, "xanchor": "left"}, "xaxis": {"title": {"text": "seconds"}, "type": "log"},
        "yaxis": {"title": {"text": "fraction of pages"}}, "margin": {"t": 40, "r": 10},
        "legend": {"orientation": "h"}}}


def bottleneck_series(samples: list[Any], progress: list[Any], previous: dict[str, Any] | None = None
                      ) -> dict[str, Any]:
    """Queue occupancy, throughput (Mbit/s) and drops per priority per interval at the bottleneck
    (server->client), and pages completed, from stored samples. `previous` is the last sample
    already sent (live streaming continues from it); the result carries the new one."""
    out: dict[str, Any] = {"t": [], "queue_pkts": [], "throughput_mbps": [], "drops_high": [], "drops_low": [],
                           "progress_t": [], "pages_done": []}
    prev = previous
    for s in samples:
        if prev is not None and s["t"] > prev["t"]:
            dt = s["t"] - prev["t"]
            out["t"].append(round(s["t"], 3))
            out["queue_pkts"].append(s["queue_pkts"])
            out["throughput_mbps"].append(round(((s["sent_bytes"] or 0) - (prev["sent_bytes"] or 0)) * 8 / dt / 1e6, 4))
            out["drops_high"].append((s["dropped_high"] or 0) - (prev["dropped_high"] or 0))
            out["drops_low"].append((s["dropped_low"] or 0) - (prev["dropped_low"] or 0))
        prev = {k: s[k] for k in ("t", "sent_bytes", "dropped_high", "dropped_low")}
    for p in progress:
        out["progress_t"].append(round(p["elapsed"], 2))
        out["pages_done"].append(p["pages_done"])
    out["last"] = prev
    return out
