"""Every chart of the testbed as a Plotly figure spec (a plain dict), and static files written from
those same specs. The dashboard draws the specs (webui/static/run.js); `save` writes them as SVG,
PDF or PNG for papers and docs/figures (through kaleido, which drives a local Chromium), so a
figure in the docs and on the dashboard comes from one builder.

Figures follow the papers: per-page mean download time with one standard deviation (CATNIP Figs.
5-7), the distribution of page times (CDF and log CCDF), the bottleneck's queue, throughput and
drops over time, the applications' CCDFs and goodput, newCWV's gain maps, cwnd trace and FTP
throughput, the hysteresis paper's latency against size (Figs. 3, 4, 6) and sequence plots
(CATNIP Fig. 2, newCWV Fig. 10).

Conventions every builder follows:
- `color` gives a sweep point (by its number) or a named series (a model, a sender) its colour,
  and `point_name` a point's name, so a point looks the same in every chart of its run and a
  model in every figure;
- a log axis comes from `log_axis`: ticks at powers of ten only ("0.1", "1", "10"; "1e-3" when
  small) with the unit, or 1-2-5 ticks where the data span less than a decade, and "(log)" in the
  axis title.
"""

from __future__ import annotations

import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from catnip.results.labels import point_label
from catnip.results.store import Store

# Tableau 10: ten hues told apart on screen and in print.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")
# Series named in more than one figure get fixed, distinct colours (a hash could give two of one
# figure the same): the hysteresis paper's models and measurements, CATNIP Fig. 2's senders,
# newCWV's trace.
NAMED = {
    "Reno measured": PALETTE[0], "CATNIP measured": PALETTE[2], "Hysteresis": PALETTE[1],
    "Sikdar": PALETTE[4], "Cardwell-00": PALETTE[6], "Partial CATNIP": PALETTE[3],
    "Reno": PALETTE[0], "RBPLW": PALETTE[1], "ECA": PALETTE[4], "ECA+RBPLW": PALETTE[6],
    "cwnd": PALETTE[0], "pipeACK (max filter)": PALETTE[1], "pipeACK sample per round": PALETTE[2],
}


def color(key: int | str) -> str:
    """The colour of a sweep point (its number in the run: distinct for up to ten points, the same
    in every chart of the run) or of a named series (NAMED, else a stable hash of the name)."""
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise TypeError(f"a colour is keyed by a point number or a series name, not {key!r}")
    if isinstance(key, int):
        return PALETTE[key % len(PALETTE)]
    return NAMED.get(key) or PALETTE[zlib.crc32(key.encode()) % len(PALETTE)]


def _esc(text: str) -> str:
    """Plotly reads a few HTML tags in titles, names and hover text: labels from a scenario (sweep
    values, host tags) are shown as written."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def point_name(point: int, assignment: dict[str, Any], label: str | None = None) -> str:
    """A sweep point's name in every chart: its number and sweep values, as the run page's progress
    table shows it: `label`, the report's human label (results/labels.py), or one made from the
    assignment alone."""
    return _esc(f"{point}: {label or point_label(assignment)}")


def _tick(v: float) -> str:
    # As Plotly labels its own log ticks (exponentformat "e"): 1e-3 and below, and from 1e5, as exponents.
    if v != 0 and (abs(v) <= 1e-3 or abs(v) >= 1e5):
        mant, exp = f"{v:.3e}".split("e")
        return f"{mant.rstrip('0').rstrip('.')}e{int(exp)}"
    return f"{v:.6g}"


def log_axis(title: str, values: Iterable[float] = (), unit: str = "") -> dict[str, Any]:
    """A readable log axis: labels at powers of ten only (Plotly's default adds 2s and 5s between
    them), "1e-3" style below 0.001, the unit after each label, "(log)" in the title. Given the
    values it will show: where they span less than two powers of ten, labels at 1-2-5 steps (or
    evenly spaced ones) inside their range, so the axis never shows a single label or none."""
    suffix = f" {unit}" if unit else ""
    axis: dict[str, Any] = {"type": "log", "title": {"text": f"{title} (log)"}, "dtick": 1,
                            "exponentformat": "e", "ticksuffix": suffix,
                            # unlabelled marks at 2..9 times each power: readable between labels
                            "minor": {"ticks": "outside", "ticklen": 3, "dtick": "D1", "showgrid": False}}
    pos = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not pos:
        return axis
    lo, hi = min(pos), max(pos)
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if sum(1 for k in range(k0, k1 + 1) if lo <= 10.0 ** k <= hi) >= 2:
        return axis
    ticks = [m * 10.0 ** k for k in range(k0, k1 + 1) for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi]
    if len(ticks) < 2:
        # Narrower than one 1-2-5 step: two to five evenly spaced round values.
        raw = (hi - lo) / 4 or lo / 4
        mag = 10.0 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * (1 - 1e-9))
        ticks = [float(f"{i * step:.12g}") for i in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1)]
        ticks = ticks if len(ticks) >= 2 else sorted({lo, hi})
    axis.update(tickmode="array", tickvals=ticks, ticktext=[_tick(t) + suffix for t in ticks])
    del axis["dtick"]
    return axis


# Legends under the x axis title, across.
BELOW = {"orientation": "h", "y": -0.3, "yanchor": "top"}
# Legends at the chart's foot, across, for the run page's small boxes (640 x 300 px), whose
# legends may take several rows: anchored to the bottom of the whole figure (yref "container"),
# Plotly reserves the legend's height below the plot, and the x axis (FOOT_X: automargin) takes
# the room its tick labels and title need above it, however many rows the legend has. BELOW's
# fraction of the plot's height puts a legend of two rows or more over the x axis title once the
# plot shrinks (tests/test_dashboard_browser.py measures it).
FOOT = {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0, "xanchor": "left"}
FOOT_X = {"automargin": True}
# A goodput chart names its flows in a legend up to this many; more (a legend of 50 flows took the
# whole box) are named on hover, and the title gives their number.
MAX_LEGEND_FLOWS = 10


def _title(text: str, size: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"text": text, "x": 0.02, "xanchor": "left"}
    if size:
        out["font"] = {"size": size}
    return out


# --- web runs: the report's figures ---------------------------------------------------------------
def page_time_bars(report: dict[str, Any]) -> dict[str, Any]:
    """Mean page download time per Web page with +-1 standard deviation, one bar group per point."""
    traces = []
    for p in report["points"]:
        rows = [r for r in p["table"] if r.get("mean") is not None]
        traces.append({"type": "bar", "name": point_name(p["point"], p["assignment"], p.get("label")),
                       "marker": {"color": color(p["point"])}, "x": [r["page"] for r in rows],
                       "y": [round(r["mean"], 4) for r in rows],
                       "error_y": {"type": "data", "array": [round(r["sdev"], 4) for r in rows], "visible": True}})
    return {"data": traces, "layout": {
        "title": _title("Mean page download time (+-1 sdev), as in CATNIP Figs. 5-7"), "barmode": "group",
        "xaxis": {"title": {"text": "Web page"}, "dtick": 1}, "yaxis": {"title": {"text": "seconds"}},
        "margin": {"t": 40, "r": 10, "b": 90}, "legend": BELOW}}


def _page_times(store: Store, run_id: str, points: Iterable[dict[str, Any]]) -> list[tuple[dict, list[float]]]:
    out = []
    for p in points:
        times = sorted(r["duration"] for r in store.pages(run_id, p["point"]) if not r["error"])
        if times:
            out.append((p, times))
    return out


def _distribution(store: Store, run_id: str, points: Iterable[dict[str, Any]], ccdf: bool) -> dict[str, Any]:
    traces, xs, ys = [], [], []
    for p, times in _page_times(store, run_id, points):
        n = len(times)
        # CCDF: the fraction of pages taking longer than x, 1 at the first; its last point (0) has
        # no place on a log axis, so the curve ends at 1/n.
        y = [round(1 - i / n, 5) for i in range(n)] if ccdf else [round((i + 1) / n, 5) for i in range(n)]
        x = [round(t, 4) for t in times]
        traces.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "color": color(p["point"])},
                       "name": point_name(p["point"], p["assignment"], p.get("label")), "x": x, "y": y})
        xs += x
        ys += y
    kind = "CCDF" if ccdf else "CDF"
    yaxis = log_axis("fraction of pages taking longer", ys) if ccdf else {"title": {"text": "fraction of pages"}}
    return {"data": traces, "layout": {
        "title": _title(f"Page download times: {kind}"), "xaxis": log_axis("page download time", xs, "s"),
        "yaxis": yaxis, "margin": {"t": 40, "r": 10, "b": 90}, "legend": BELOW}}


def page_time_cdf(store: Store, run_id: str, points: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Empirical CDF of completed page times per point, time on a log axis."""
    return _distribution(store, run_id, list(points), ccdf=False)


def page_time_ccdf(store: Store, run_id: str, points: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Empirical CCDF (fraction of pages taking longer) per point, both axes log: the tail."""
    return _distribution(store, run_id, list(points), ccdf=True)


def page_time_distribution(store: Store, run_id: str, points: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The dashboard's distribution chart: the CDF, with Plotly buttons that switch it to the CCDF
    (page_time_ccdf's data and axes) and back."""
    points = list(points)
    cdf, ccdf = page_time_cdf(store, run_id, points), page_time_ccdf(store, run_id, points)

    def view(fig: dict[str, Any]) -> list[dict[str, Any]]:
        lay = fig["layout"]
        return [{"y": [t["y"] for t in fig["data"]]}, {"yaxis": lay["yaxis"], "title": lay["title"]}]
    cdf["layout"]["updatemenus"] = [{"type": "buttons", "direction": "left", "showactive": True, "active": 0,
                                     # under Plotly's tool bar (top right), above the plot
                                     "x": 1, "xanchor": "right", "y": 1.01, "yanchor": "bottom",
                                     "pad": {"b": 2}, "font": {"size": 11},
                                     "buttons": [{"label": "CDF", "method": "update", "args": view(cdf)},
                                                 {"label": "CCDF (log)", "method": "update", "args": view(ccdf)}]}]
    cdf["layout"]["margin"]["t"] = 70
    return cdf


# --- web runs: the bottleneck over time (live view) ------------------------------------------------
def bottleneck_series(samples: list[Any], progress: list[Any], previous: dict[str, Any] | None = None,
                      origin: Any = None) -> dict[str, Any]:
    """Queue occupancy, throughput (Mbit/s) and drops per priority per interval at the bottleneck
    (server->client), and pages completed, from stored samples. `previous` is the last sample
    already sent (live streaming continues from it); the result carries the new one. `color` is
    the point's colour (read from the rows' point) once it has rows: the live charts, drawn as
    data streams in, take it from here. Times are on the engine's clock (samples) and the point's
    watch loop (progress), or with `origin` (webui/timebase.py's PointClock: `engine(router, t)`
    and `wall(t)`) all in seconds since the point's start, so charts side by side line up."""
    out: dict[str, Any] = {"t": [], "queue_pkts": [], "throughput_mbps": [], "drops_high": [], "drops_low": [],
                           "progress_t": [], "pages_done": []}
    prev = previous
    for s in samples:
        if prev is not None and s["t"] > prev["t"]:
            dt = s["t"] - prev["t"]
            out["t"].append(round(s["t"] if origin is None else origin.engine(s["router"], s["t"]), 3))
            out["queue_pkts"].append(s["queue_pkts"])
            out["throughput_mbps"].append(round(((s["sent_bytes"] or 0) - (prev["sent_bytes"] or 0)) * 8 / dt / 1e6, 4))
            out["drops_high"].append((s["dropped_high"] or 0) - (prev["dropped_high"] or 0))
            out["drops_low"].append((s["dropped_low"] or 0) - (prev["dropped_low"] or 0))
        prev = {k: s[k] for k in ("t", "sent_bytes", "dropped_high", "dropped_low")}
    for p in progress:
        out["progress_t"].append(round(p["elapsed"] if origin is None else origin.wall(p["t"]), 2))
        out["pages_done"].append(p["pages_done"])
    first = next(iter(samples), None) or next(iter(progress), None)
    if first is not None and "point" in first.keys():
        out["color"] = color(first["point"])
    out["last"] = prev
    return out


# The live charts: (key, title, y field, y title, x field, x title). run.js draws the same four
# as data streams in (it keeps their layout in step with this one).
LIVE_CHARTS = (("queue", "Queue occupancy", "queue_pkts", "packets", "t", "s since engine start"),
               ("throughput", "Throughput", "throughput_mbps", "Mbit/s", "t", "s since engine start"),
               ("drops", "Drops by priority", None, "packets per interval", "t", "s since engine start"),
               ("pages", "Pages completed", "pages_done", "pages", "progress_t", "s since the workload started"))


POINT_CLOCK = "s since the point's start"


def bottleneck_charts(points: Sequence[dict[str, Any]], series: dict[int, dict[str, Any]],
                      point_clock: bool = False) -> dict[str, dict[str, Any]]:
    """The live view's four charts for export: `points` as the run page lists them (point, label),
    `series` from bottleneck_series per point number; `point_clock`: the series were made with an
    origin, so every chart's time axis is seconds since the point's start."""
    out = {}
    for key, title, field_, ytitle, xf, xtitle in LIVE_CHARTS:
        xtitle = POINT_CLOCK if point_clock else xtitle
        data = []
        for p in points:
            s = series.get(p["point"]) or {}
            name, c = _esc(f"{p['point']}: {p['label']}"), color(p["point"])
            if key == "drops":
                data.append({"type": "bar", "name": name + " high priority (AF11)", "x": s.get(xf, []),
                             "y": s.get("drops_high", []), "marker": {"color": c}})
                data.append({"type": "bar", "name": name + " other", "x": s.get(xf, []), "y": s.get("drops_low", []),
                             "marker": {"color": c, "pattern": {"shape": "/"}}})
            else:
                line = {"color": c, **({"shape": "hv"} if key in ("queue", "pages") else {})}
                data.append({"type": "scatter", "mode": "lines", "name": name, "x": s.get(xf, []),
                             "y": s.get(field_, []), "line": line})
        layout = {"title": _title(title), "margin": {"t": 36, "r": 10, "b": 10, "l": 50},
                  "xaxis": {"title": {"text": xtitle}, **FOOT_X},
                  "yaxis": {"title": {"text": ytitle}, "rangemode": "tozero"}, "legend": dict(FOOT)}
        if key == "drops":
            layout["barmode"] = "stack"
        out[key] = {"data": data, "layout": layout}
    return out


def series_chart(title: str, ytitle: str, traces: Sequence[dict[str, Any]], xtitle: str = POINT_CLOCK,
                 markers: bool = False) -> dict[str, Any]:
    """One series of several runs' points on one chart, Flent's way (the dashboard's plot view):
    `traces` each with `name`, `x` (seconds since its point's start), `y`, a trace's colour by its
    position; lines, or markers for samples that are not one line (several flows of an app)."""
    data = []
    for i, t in enumerate(traces):
        trace = {"type": "scatter", "name": _esc(t["name"]), "x": list(t["x"]), "y": list(t["y"])}
        if markers:
            trace.update(mode="markers", marker={"color": color(i), "size": 5})
        else:
            trace.update(mode="lines", line={"color": color(i), **({"shape": "hv"} if t.get("steps") else {})})
        data.append(trace)
    return {"data": data, "layout": {
        "title": _title(_esc(title)), "margin": {"t": 40, "r": 10, "b": 60, "l": 60},
        "xaxis": {"title": {"text": xtitle}, "rangemode": "tozero"},
        "yaxis": {"title": {"text": _esc(ytitle)}, "rangemode": "tozero"},
        "legend": dict(BELOW)}}


# --- applications (results/samples.py's numbers, as webui/app.py hands them to the page) -------------
def app_ccdf_chart(metric: dict[str, Any]) -> dict[str, Any]:
    """One application metric's CCDF, a curve per tag, fraction on a log axis. `metric`: app,
    metric, units and curves (tag, x, y) as the run page's apps data carries them."""
    data, xs, ys = [], [], []
    for c in metric["curves"]:
        name = "(no tag)" if c["tag"] is None else c["tag"]
        data.append({"type": "scatter", "mode": "lines+markers", "line": {"shape": "hv", "color": color(name)},
                     "marker": {"size": 4}, "name": _esc(name), "x": c["x"], "y": c["y"]})
        xs += c["x"]
        ys += c["y"]
    units = ", ".join(_esc(u) for u in metric["units"] if u is not None)
    return {"data": data, "layout": {
        "title": _title(f"{_esc(metric['app'])}: {_esc(metric['metric'])} CCDF"),
        "xaxis": {"title": {"text": units or "value"}, **FOOT_X},
        # Short: the y title is centred on the plot and must stay below the chart's title when the
        # plot is 150-200 px tall ("fraction of samples greater (log)" reached it).
        "yaxis": log_axis("fraction greater", ys),
        "margin": {"t": 36, "r": 10, "b": 10, "l": 50}, "legend": dict(FOOT)}}


def app_goodput_chart(goodput: dict[str, Any]) -> dict[str, Any]:
    """An application's goodput per flow over time, with the C.O.V. across flows in the title; the
    flows named in the legend, or on hover only when there are more than MAX_LEGEND_FLOWS."""
    data = [{"type": "scatter", "mode": "lines", "x": f["t"], "y": f["value"],
             "name": "(no flow)" if f["flow"] is None else "flow " + _esc(f["flow"]),
             "line": {"color": color("(no flow)" if f["flow"] is None else f"flow {f['flow']}")}}
            for f in goodput["series"]]
    cov = "" if goodput["cov"] is None else f" (C.O.V. across flows {goodput['cov']:.3f})"
    units = ", ".join(_esc(u) for u in goodput["units"] if u is not None)
    many = len(data) > MAX_LEGEND_FLOWS
    return {"data": data, "layout": {
        "title": _title(f"{_esc(goodput['app'])}: goodput of {len(data)} flows{cov}" if many
                        else f"{_esc(goodput['app'])}: goodput per flow{cov}"),
        "xaxis": {"title": {"text": "s since the first sample"}, **FOOT_X},
        "yaxis": {"title": {"text": units or "goodput"}, "rangemode": "tozero"},
        "margin": {"t": 36, "r": 10, "b": 10, "l": 50}, "legend": dict(FOOT), **({"showlegend": False} if many else {})}}


# --- Nouredine and Tobagi's service differentiation (papers/servdiff/analysis.py) -----------------------
def ccdf_steps(points: Sequence[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """An exact CCDF (x, fraction greater than x) as the points of a step line (shape "hv"): from 1
    at the first value, each fraction held until the next value. A last fraction of 0 has no place
    on a log axis: the line ends at the last value at the fraction before it."""
    if not points:
        return [], []
    xs, ys = [points[0][0]], [1.0]
    for i, (x, y) in enumerate(points):
        xs.append(x)
        ys.append(y if y > 0 or i == 0 else ys[-1])
    if ys[-1] <= 0:  # a single distinct value, none greater
        xs.pop()
        ys.pop()
    return xs, ys


def threshold_ccdf_chart(title: str, series: Sequence[dict[str, Any]], thresholds: Sequence[tuple[float, str]],
                         xtitle: str) -> dict[str, Any]:
    """CCDFs as Nouredine and Tobagi draw them (Figs 2-4, 7-9, 12, 13, 15): one curve per scheme,
    the fraction of samples greater than x on a log axis, x in seconds, and the paper's limits as
    vertical lines. series: name, key (the scheme's colour, `color`), points (the exact CCDF), n
    (samples), failed, dash (None: solid), loss (the bottleneck's drop rate, which labels each
    curve of the paper's Fig. 2; None: not shown)."""
    data, ys = [], []
    for s in series:
        x, y = ccdf_steps(s["points"])
        x, y = [round(v, 6) for v in x], [round(v, 6) for v in y]
        failed = f", {s['failed']} failed" if s.get("failed") else ""
        loss = "" if s.get("loss") is None else f"; loss {100 * s['loss']:.1f}%"
        data.append({"type": "scatter", "mode": "lines", "name": _esc(f"{s['name']} (n={s['n']}{failed}{loss})"),
                     "x": x, "y": y, "line": {"shape": "hv", "color": color(s["key"]),
                                              **({"dash": s["dash"]} if s.get("dash") else {})}})
        ys += y
    shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": t, "x1": t, "y0": 0, "y1": 1,
               "line": {"color": "#555", "width": 1, "dash": "dot"}} for t, _ in thresholds]
    notes = [{"x": t, "y": 1, "xref": "x", "yref": "paper", "text": _esc(label), "showarrow": False,
              "xanchor": "left", "yanchor": "bottom", "font": {"size": 11}} for t, label in thresholds]
    return {"data": data, "layout": {
        "title": _title(_esc(title)), "shapes": shapes, "annotations": notes,
        "xaxis": {"title": {"text": f"{xtitle} (s)"}, "rangemode": "tozero"},
        "yaxis": log_axis("fraction greater", ys),
        # The legend lists every curve below the plot: the bottom margin grows with it, the plot keeps its size.
        "height": 400 + 20 * len(data), "margin": {"t": 50, "r": 10, "b": 80 + 20 * len(data)},
        "legend": {**BELOW, "y": -0.25}}}


def fair_share_chart(classes: Sequence[str], series: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Fig. 16's two quantities per RTT class, a line pair per scheme: throughput / fair share
    (solid, with its 95% interval where repetitions pool) and the C.O.V. of the throughput samples
    (dotted), as the paper draws them; 1 (the fair share) dashed. series: name, key, and per class
    ratio, ratio_ci95, cov (None where missing)."""
    data = []
    for s in series:
        c = color(s["key"])
        ratio = {"type": "scatter", "mode": "lines+markers", "name": _esc(f"{s['name']}: throughput / fair share"),
                 "x": list(classes), "y": s["ratio"], "line": {"color": c}, "marker": {"size": 7}}
        if any(v is not None for v in s["ratio_ci95"]):
            ratio["error_y"] = {"type": "data", "array": [v or 0 for v in s["ratio_ci95"]], "visible": True,
                                "color": c, "thickness": 1.2}
        data.append(ratio)
        data.append({"type": "scatter", "mode": "lines+markers", "name": _esc(f"{s['name']}: C.O.V."),
                     "x": list(classes), "y": s["cov"], "line": {"color": c, "dash": "dot"},
                     "marker": {"size": 6, "symbol": "square-open"}})
    return {"data": data, "layout": {
        "title": _title("Long FTP: throughput / fair share (solid) and C.O.V. (dotted) per RTT class"),
        "shapes": [{"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                    "line": {"color": "#555", "width": 1, "dash": "dash"}}],
        "xaxis": {"title": {"text": "RTT class"}, "type": "category"},
        "yaxis": {"title": {"text": "throughput / fair share; C.O.V."}, "rangemode": "tozero"},
        "margin": {"t": 50, "r": 10, "b": 90}, "legend": BELOW}}


def flow_throughput_chart(title: str, series: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Fig. 17: one long FTP flow's throughput samples over time, a line per scheme, its fair share
    dashed in the scheme's colour. series: name, key, t (s since the flow's first sample), kbps,
    fair_kbps (None when unknown)."""
    data, shapes = [], []
    for s in series:
        c = color(s["key"])
        data.append({"type": "scatter", "mode": "lines+markers", "name": _esc(s["name"]), "x": s["t"], "y": s["kbps"],
                     "line": {"color": c}, "marker": {"size": 4}})
        if s.get("fair_kbps") is not None:
            shapes.append({"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": s["fair_kbps"],
                           "y1": s["fair_kbps"], "line": {"color": c, "width": 1, "dash": "dash"}})
    return {"data": data, "layout": {
        "title": _title(_esc(title) + " (fair share dashed)"), "shapes": shapes,
        "xaxis": {"title": {"text": "s since the flow's first sample"}},
        "yaxis": {"title": {"text": "throughput (kbit/s)"}, "rangemode": "tozero"},
        "margin": {"t": 50, "r": 10, "b": 90}, "legend": BELOW}}


# --- the newCWV paper (papers/newcwv/analysis.py) -----------------------------------------------------
def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _short(text: str, n: int = 48) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


# Red where newCWV took longer (a negative gain), white at 0, blue where it was faster.
GAIN_COLORS = [[0.0, "#b2182b"], [0.5, "#f7f7f7"], [1.0, "#2166ac"]]


def gain_heatmaps(comparison: Any) -> list[dict[str, Any]]:
    """newCWV's gain per cell of one comparison (a papers/newcwv/analysis.py Comparison) as heat maps like
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
                    "layout": {"title": _title(title, 13),
                               "xaxis": {"title": {"text": "idle period"}, "type": "category"},
                               # sizes top down, as the text grid and the paper's tables list them
                               "yaxis": {"title": {"text": "burst size"}, "type": "category",
                                         "autorange": "reversed"},
                               "margin": {"t": 40, "r": 10}}})
    return out


def trace_charts(report: Any) -> list[dict[str, Any]]:
    """cwnd, pipeACK (the max filter) and the per-round pipeACK sample in segments against time,
    per point (a papers/newcwv/analysis.py TraceReport), as the paper's Fig. 5; a set of lines per connection.
    One connection: a colour per quantity; several: a colour per connection, the quantity told by
    the line's style."""
    out = []
    for p in report.points:
        flows = sorted({r.flow for r in p.rows})
        data = []
        for f in flows:
            rows = [r for r in p.rows if r.flow == f]
            name = "" if len(flows) == 1 else f" {_esc(f)}"
            c = (lambda kind: color(kind)) if len(flows) == 1 else (lambda kind, f=f: color(f))
            data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "color": c("cwnd")},
                         "name": "cwnd" + name, "x": [round(r.t, 4) for r in rows], "y": [r.cwnd for r in rows]})
            pa = [r for r in rows if r.pipeack_bytes is not None]
            data.append({"type": "scatter", "mode": "lines",
                         "line": {"shape": "hv", "dash": "dash", "color": c("pipeACK (max filter)")},
                         "name": "pipeACK (max filter)" + name, "x": [round(r.t, 4) for r in pa],
                         "y": [round(p.segments(r.pipeack_bytes), 2) for r in pa]})
            sm = [r for r in rows if r.sample_bytes is not None]
            data.append({"type": "scatter", "mode": "markers",
                         "marker": {"size": 5, "color": c("pipeACK sample per round")},
                         "name": "pipeACK sample per round" + name, "x": [round(r.t, 4) for r in sm],
                         "y": [round(p.segments(r.sample_bytes), 2) for r in sm]})
        out.append({"data": data, "layout": {
            "title": _title(f"cwnd and pipeACK, point {p.group.point}: {_esc(_short(p.group.label))}", 13),
            "xaxis": {"title": {"text": "s since the first traced event"}},
            "yaxis": {"title": {"text": f"segments ({p.mss} B)"}, "rangemode": "tozero"},
            "margin": {"t": 40, "r": 10, "b": 90}, "legend": {"orientation": "h", "y": -0.3}}})
    return out


def ftp_chart(report: Any) -> dict[str, Any]:
    """The FTP flow's goodput over time, one line per point (a papers/newcwv/analysis.py FtpReport), as the
    paper's Fig. 11."""
    data = [{"type": "scatter", "mode": "lines", "line": {"shape": "hv", "color": color(p.group.point)},
             "name": f"point {p.group.point}: {_esc(p.group.sender.label())}",
             "x": [k * report.width for k in sorted(p.bins)], "y": [round(p.bins[k] / 1e6, 4) for k in sorted(p.bins)]}
            for p in report.points]
    return {"data": data, "layout": {
        "title": _title(f"FTP throughput ({_esc(report.app)}), bins of {report.width:g} s"),
        "xaxis": {"title": {"text": "s since the FTP flow started"}},
        "yaxis": {"title": {"text": "Mbit/s"}, "rangemode": "tozero"},
        "margin": {"t": 40, "r": 10, "b": 90}, "legend": {"orientation": "h", "y": -0.3}}}


# --- the hysteresis paper's latency figures (cli/models.py) -------------------------------------------
@dataclass
class Series:
    """A line of a latency chart: measured (markers with 95% bars) or a model (a line)."""
    name: str
    points: list[tuple[float, float]]                       # (x, y)
    errors: list[float] = field(default_factory=list)       # half-width of the bar at each point
    measured: bool = False
    dashed: bool = False


def latency_chart(title: str, series: Sequence[Series], xtitle: str = "transfer size (KB)",
                  ytitle: str = "latency (s)") -> dict[str, Any]:
    """Latency against transfer size, measured points with 95% bars and model curves, in the
    manner of the hysteresis paper's Figs. 3, 4 and 6; a series' colour is its name's."""
    data = []
    for s in series:
        pts = sorted(zip(s.points, s.errors or [None] * len(s.points)), key=lambda pe: pe[0][0])
        trace = {"type": "scatter", "name": _esc(s.name), "x": [x for (x, _), _ in pts], "y": [y for (_, y), _ in pts]}
        if s.measured:
            trace.update(mode="markers", marker={"color": color(s.name), "size": 7})
            if s.errors:
                trace["error_y"] = {"type": "data", "array": [e or 0 for _, e in pts], "visible": True,
                                    "color": color(s.name), "thickness": 1.2}
        else:
            trace.update(mode="lines", line={"color": color(s.name), "width": 2,
                                             **({"dash": "dash"} if s.dashed else {})})
        data.append(trace)
    return {"data": data, "layout": {
        "title": _title(_esc(title)), "width": 640, "height": 420,
        "xaxis": {"title": {"text": xtitle}, "rangemode": "tozero"},
        "yaxis": {"title": {"text": ytitle}, "rangemode": "tozero"},
        "margin": {"t": 50, "r": 10}, "legend": {"x": 0.02, "y": 0.98, "bgcolor": "rgba(255,255,255,0.7)"}}}


# --- sequence plots (CATNIP Fig. 2, newCWV Fig. 10) ------------------------------------------------------
def sequence_panels(panels: Sequence[tuple[str, int | str, Sequence[tuple[float, int]]]], title: str = "",
                    panel_width: int = 320) -> dict[str, Any]:
    """Segment (index from the first) against time (ms), one panel per sender or point side by
    side, axes shared. panels: (panel title, colour key, [(seconds, segment), ...])."""
    n = len(panels)
    if not n:
        raise ValueError("a sequence plot needs at least one panel")
    t_max = max((t for _, _, pts in panels for t, _ in pts), default=0.0) * 1000 or 1.0
    s_max = max((s for _, _, pts in panels for _, s in pts), default=0) + 1
    gap = 0.06 / n if n > 1 else 0.0
    data, annotations = [], []
    layout: dict[str, Any] = {"width": panel_width * n + 80, "height": 340, "showlegend": False,
                              "margin": {"t": 70 if title else 50, "r": 10, "l": 60, "b": 50}}
    for i, (ptitle, key, pts) in enumerate(panels):
        sfx = "" if i == 0 else str(i + 1)
        lo, hi = i / n + (gap if i else 0), (i + 1) / n - (gap if i < n - 1 else 0)
        layout[f"xaxis{sfx}"] = {"domain": [lo, hi], "anchor": f"y{sfx}", "range": [-0.02 * t_max, 1.04 * t_max],
                                 "title": {"text": "time (ms)"}, "zeroline": False}
        layout[f"yaxis{sfx}"] = {"anchor": f"x{sfx}", "range": [-0.5, s_max + 0.5], "zeroline": False,
                                 **({"title": {"text": "segment"}} if i == 0 else {"showticklabels": True})}
        data.append({"type": "scatter", "mode": "markers", "xaxis": f"x{sfx}", "yaxis": f"y{sfx}",
                     "name": _esc(ptitle), "x": [round(t * 1000, 3) for t, _ in pts], "y": [s for _, s in pts],
                     "marker": {"symbol": "line-ns-open", "size": 9, "color": color(key), "line": {"width": 2}}})
        annotations.append({"text": f"<b>{_esc(ptitle)}</b>", "xref": "paper", "yref": "paper", "x": (lo + hi) / 2,
                            "y": 1.0, "yanchor": "bottom", "xanchor": "center", "showarrow": False,
                            "font": {"size": 12}})
    layout["annotations"] = annotations
    if title:
        layout["title"] = _title(_esc(title))
    return {"data": data, "layout": layout}


# --- static files ---------------------------------------------------------------------------------------
FORMATS = {".svg": "svg", ".pdf": "pdf", ".png": "png"}
DEFAULT_SIZE = (700, 450)


class ExportError(RuntimeError):
    """A figure could not be written (bad file name, or the export tools are missing)."""


def format_of(path: str | Path) -> str:
    """The export format named by a file's extension; one line naming the allowed ones otherwise."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ExportError(f"figure file {str(path)!r}: the extension must be one of {', '.join(FORMATS)}")
    return fmt


def export_missing() -> str | None:
    """Why static export cannot run here (the missing tool), or None when it can."""
    try:
        import kaleido  # noqa: F401
        from choreographer.browsers.chromium import Chromium
    except ImportError:
        return "the kaleido package is not installed (pip install 'kaleido>=1')"
    # kaleido's own search: BROWSER_PATH, chromium/chrome on PATH, the usual install paths.
    found = Chromium.find_browser(skip_local=False)
    if found is None or not os.access(found, os.X_OK):
        return "no Chromium or Chrome found" + (f" at BROWSER_PATH={found}" if found else "") + \
            " (Debian: apt-get install chromium)"
    return None


def _checked(fig: dict[str, Any]) -> dict[str, Any]:
    # Plotly's schema check: a misspelt property fails here, naming it, not as a blank picture.
    import plotly.graph_objects as go
    return go.Figure(fig).to_dict()


def save_all(items: Sequence[tuple[dict[str, Any], str | Path]]) -> list[Path]:
    """Write each figure to its file, the format by the file's extension (.svg, .pdf, .png), in one
    Chromium session (starting it costs a few seconds; each figure then well under one)."""
    specs = []
    for fig, path in items:
        path = Path(path)
        fmt = format_of(path)
        lay = fig.get("layout", {})
        # Static files on white (a paper's page); the dashboard keeps Plotly's default look.
        fig = {**fig, "layout": {"template": "plotly_white", **fig.get("layout", {})}}
        specs.append({"fig": _checked(fig), "path": path,
                      "opts": {"format": fmt, "width": lay.get("width") or DEFAULT_SIZE[0],
                               "height": lay.get("height") or DEFAULT_SIZE[1], "scale": 1}})
    if not specs:
        return []
    missing = export_missing()
    if missing:
        raise ExportError(f"cannot write figures: {missing}")
    import kaleido
    for s in specs:
        s["path"].parent.mkdir(parents=True, exist_ok=True)
    # MathJax off: it would be fetched from a CDN (no labels use LaTeX); plotly.js is the plotly
    # package's own file.
    try:
        kaleido.write_fig_from_object_sync(specs, kopts={"mathjax": False})
    except kaleido.errors.ChromeNotFoundError as exc:
        raise ExportError(f"cannot write figures: no Chromium or Chrome ({exc})") from None
    for s in specs:
        if not s["path"].is_file() or not s["path"].stat().st_size:
            raise ExportError(f"figure file {s['path']} was not written")
    return [s["path"] for s in specs]


def save(fig: dict[str, Any], path: str | Path) -> Path:
    """Write one figure; the format by the file's extension (.svg, .pdf, .png)."""
    return save_all([(fig, path)])[0]


def render(fig: dict[str, Any], fmt: str = "svg") -> bytes:
    """One figure as the bytes of an SVG, PDF or PNG file."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="catnip-figure-") as tmp:
        path = save(fig, Path(tmp) / f"figure.{fmt}")
        return path.read_bytes()
