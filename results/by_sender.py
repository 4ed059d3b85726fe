"""Results split by the servers' congestion control, for mixed-sender runs such as the fairness
experiment of CATNIP section V-E (50 clients fetching from ECA servers, 50 from Reno servers,
sharing the bottleneck): page times per group, and the share of the group's TCP segments that
were retransmitted, which stands in for its loss (the bottleneck counts drops per priority
class, not per flow; the paper compares loss, 3.05% ECA against 3.68% Reno under DropTail).
"""

from __future__ import annotations

import statistics
from typing import Any

from catnip.results.labels import label_of
from catnip.results.samples import ci95
from catnip.results.point_record import record_of
from catnip.results.store import Store
from catnip.spec.record import PointRecord
from catnip.testbed.paths import PREFIX

def server_cc(record: PointRecord, server: str) -> str:
    """Which congestion control the host `server` (its name in the page records, with or without
    the node prefix) ran, as its namespace got it; "?" for a host the record does not have."""
    host = record.host(server.removeprefix(PREFIX)) if server else None
    return host.tcp["congestion_control"] if host else "?"


def by_sender(store: Store, run_id: str) -> list[dict[str, Any]]:
    run = store.find_run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id!r} in {store.path} (see `catnip list`)")
    out = []
    for pt in store.points(run["id"]):
        record = record_of(run, pt)  # RecordError names a point that cannot say what it ran
        groups: dict[str, dict[str, Any]] = {}
        for page in store.pages(run["id"], pt["point"]):
            g = groups.setdefault(server_cc(record, page["server"]),
                                  {"servers": set(), "times": [], "by_page": {}, "failed": 0})
            g["servers"].add(page["server"])
            if page["error"]:
                g["failed"] += 1
                continue
            g["times"].append(page["duration"])
            g["by_page"].setdefault(page["page"], []).append(page["duration"])
        counters: dict[str, dict[str, int]] = {}
        for row in store.tcp_counters(run["id"], pt["point"]):
            counters.setdefault(row["host"], {})[row["counter"]] = row["value"]
        rows = []
        for cc, g in sorted(groups.items()):
            out_segs = sum(counters.get(s, {}).get("TcpOutSegs", 0) for s in g["servers"])
            retrans = sum(counters.get(s, {}).get("TcpRetransSegs", 0) for s in g["servers"])
            times = g["times"]
            rows.append({
                "cc": cc, "servers": sorted(g["servers"]), "pages": len(times), "failed": g["failed"],
                "mean": statistics.fmean(times) if times else None,
                "ci95": ci95(statistics.stdev(times), len(times)) if len(times) > 1 else None,
                "sdev": statistics.stdev(times) if len(times) > 1 else None,
                "page_means": {p: statistics.fmean(v) for p, v in sorted(g["by_page"].items())},
                "segments": out_segs, "retransmitted": retrans,
                "retrans_fraction": retrans / out_segs if out_segs else None})
        out.append({"point": pt["point"], "label": label_of(run, pt, run["name"]),
                    "realtime_ok": None if pt["realtime_ok"] is None else bool(pt["realtime_ok"]), "groups": rows})
    return out


def render_text(points: list[dict[str, Any]]) -> str:
    out = ["Page times and retransmissions by the servers' congestion control (CATNIP section V-E)"]
    for p in points:
        flag = "" if p["realtime_ok"] is not False else "   (real time NOT kept)"
        out += ["", f"Point {p['point']}: {p['label']}{flag}",
                f"  {'sender':<16} {'servers':>7} {'pages':>6} {'fail':>4} {'mean (s)':>9} {'+-95%':>6} {'sdev':>6}"
                f" {'TCP segs':>9} {'retrans':>8} {'share':>7}"]
        for g in p["groups"]:
            share = "-" if g["retrans_fraction"] is None else f"{100 * g['retrans_fraction']:.2f}%"
            f = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
            out.append(f"  {g['cc']:<16} {len(g['servers']):>7} {g['pages']:>6} {g['failed']:>4} {f(g['mean']):>9}"
                       f" {f(g['ci95']):>6} {f(g['sdev']):>6} {g['segments']:>9,} {g['retransmitted']:>8,} {share:>7}")
    return "\n".join(out)
