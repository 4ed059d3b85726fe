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


# --- the newCWV paper (results/newcwv.py) ------------------------------------------------------------
def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _short(text: str, n: int = 48) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def _esc(text: str) -> str:
    """Plotly reads a few HTML tags in titles, names and hover text: labels from a scenario (sweep
    values, host tags) are shown as written."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# Red where newCWV took longer (a negative gain), white at 0, blue where it was faster.
GAIN_COLORS = [[0.0, "#b2182b"], [0.5, "#f7f7f7"], [1.0, "#2166ac"]]


def gain_heatmaps(comparison: Any) -> list[dict[str, Any]]:
    """newCWV's gain per cell of one comparison (a results.newcwv.Comparison) as heat maps like
    the paper's Figs 7-8: burst size (rows) x idle period (columns), colour = the gain (mean of
    (Tr - Tc)/Tr, in %), the value printed in each cell, its 95% interval, the ratio of means and
    the pairs on hover. One map per client host tag (one for untagged hosts)."""
    out = []
    for tag in sorted({c.cell.host_tag for c in comparison.cells}):
        cells = {(c.cell.size, c.cell.idle): c for c in comparison.cells if c.cell.host_tag == tag}
        sizes, idles = sorted({s for s, _ in cells}), sorted({i for _, i in cells})
        z, text, hover = [], [], []
        for s in sizes:
            zr, tr, hr = [], [], []
            for i in idles:
                c = cells.get((s, i))
                g = None if c is None else c.gain
                zr.append(None if g is None else round(100 * g, 2))
                tr.append(_pct(g))
                if c is None:
                    hr.append("no bursts")
                    continue
                ci = "" if c.gain_ci95 is None else f" ± {100 * c.gain_ci95:.1f} (95%, over {c.interval})"
                rom = "" if c.gain_rom is None else f"<br>ratio of means {_pct(c.gain_rom)}" + (
                    "" if c.gain_rom_ci95 is None else f" ± {100 * c.gain_rom_ci95:.1f}")
                hr.append(f"gain {_pct(g)}{ci}{rom}<br>{len(c.paired.pairs)} pairs, failed"
                          f" {c.paired.failed_baseline}/{c.paired.failed_newcwv} (baseline/newCWV)")
            z.append(zr)
            text.append(tr)
            hover.append(hr)
        ylabels = [f"{s // 1024} KB" if s % 1024 == 0 else f"{s} B" for s in sizes]
        title = _esc(comparison.label + (f" (client hosts {tag})" if tag else ""))
        out.append({"data": [{"type": "heatmap", "x": [f"{i:g} s" for i in idles], "y": ylabels, "z": z,
                              "text": text, "texttemplate": "%{text}", "customdata": hover,
                              "hovertemplate": "burst %{y}, idle %{x}<br>%{customdata}<extra></extra>",
                              "colorscale": GAIN_COLORS, "zmid": 0,
                              "colorbar": {"title": {"text": "gain of<br>newCWV %"}}}],
                    "layout": {"title": {"text": title, "x": 0.02, "xanchor": "left", "font": {"size": 13}},
                               "xaxis": {"title": {"text": "idle period"}, "type": "category"},
                               # sizes top down, as the text grid and the paper's tables list them
                               "yaxis": {"title": {"text": "burst size"}, "type": "category",
                                         "autorange": "reversed"},
                               "margin": {"t": 40, "r": 10}}})
    return out


def trace_charts(report: Any) -> list[dict[str, Any]]:
    """cwnd, pipeACK (the max filter) and the per-round pipeACK sample in segments against time,
    per point (a results.newcwv.TraceReport), as the paper's Fig. 5; a set of lines per connection."""
    out = []
    for p in report.points:
        flows = sorted({r.flow for r in p.rows})
        data = []
        for f in flows:
            rows = [r for r in p.rows if r.flow == f]
            name = "" if len(flows) == 1 else f" {_esc(f)}"
            data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv"}, "name": "cwnd" + name,
                         "x": [round(r.t, 4) for r in rows], "y": [r.cwnd for r in rows]})
            pa = [r for r in rows if r.pipeack_bytes is not None]
            data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "dash": "dash"},
                         "name": "pipeACK (max filter)" + name, "x": [round(r.t, 4) for r in pa],
                         "y": [round(p.segments(r.pipeack_bytes), 2) for r in pa]})
            sm = [r for r in rows if r.sample_bytes is not None]
            data.append({"type": "scatter", "mode": "markers", "marker": {"size": 5},
                         "name": "pipeACK sample per round" + name, "x": [round(r.t, 4) for r in sm],
                         "y": [round(p.segments(r.sample_bytes), 2) for r in sm]})
        out.append({"data": data, "layout": {
            "title": {"text": f"cwnd and pipeACK, point {p.group.point}: {_esc(_short(p.group.label))}", "x": 0.02,
                      "xanchor": "left", "font": {"size": 13}},
            "xaxis": {"title": {"text": "s since the first traced event"}},
            "yaxis": {"title": {"text": f"segments ({p.mss} B)"}, "rangemode": "tozero"},
            "margin": {"t": 40, "r": 10, "b": 90}, "legend": {"orientation": "h", "y": -0.3}}})
    return out


def ftp_chart(report: Any) -> dict[str, Any]:
    """The FTP flow's goodput over time, one line per point (a results.newcwv.FtpReport), as the
    paper's Fig. 11."""
    data = [{"type": "scatter", "mode": "lines", "line": {"shape": "hv"},
             "name": f"point {p.group.point}: {_esc(p.group.sender.label())}",
             "x": [k * report.width for k in sorted(p.bins)], "y": [round(p.bins[k] / 1e6, 4) for k in sorted(p.bins)]}
            for p in report.points]
    return {"data": data, "layout": {
        "title": {"text": f"FTP throughput ({_esc(report.app)}), bins of {report.width:g} s", "x": 0.02,
                  "xanchor": "left"},
        "xaxis": {"title": {"text": "s since the FTP flow started"}},
        "yaxis": {"title": {"text": "Mbit/s"}, "rangemode": "tozero"},
        "margin": {"t": 40, "r": 10, "b": 90}, "legend": {"orientation": "h", "y": -0.3}}}
