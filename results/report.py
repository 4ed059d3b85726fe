"""Analysis of stored runs: the per-page table in the layout of CATNIP Table II, and packet loss.

`run_report` turns the records of a run into plain data; renderers (text, JSON, CSV) only format
it. Page statistics use only pages that completed without error; failed pages are counted apart.
Each page row has the Student t half-width `ci95` and the bounds of the chosen 95% interval
(`interval`: t, the percentile bootstrap of the mean, or the order-statistics interval of the
median; results/samples.py), since page times are heavy-tailed.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from typing import Any

from catnip.results.samples import INTERVALS, ci95
from catnip.results.samples import interval as interval_of
from catnip.results.store import Store
from catnip.results.table import Column, Table
from catnip.results.table import render_csv as table_csv
from catnip.results.labels import label_of, point_label
from catnip.workloads.pages import catnip_pages


def page_row(page, durations: list[float], failed: int, interval: str = "t") -> dict[str, Any]:
    row: dict[str, Any] = {"page": page.number, "conns": len(page.objects), "bytes": page.total_bytes,
                           "n": len(durations), "failed": failed}
    if durations:
        sdev = statistics.stdev(durations) if len(durations) > 1 else 0.0
        ci = interval_of(durations, interval)
        row.update(min=min(durations), median=statistics.median(durations), max=max(durations),
                   mean=statistics.fmean(durations), sdev=sdev,
                   ci95=ci95(sdev, len(durations)),
                   interval=interval, ci_low=None if ci is None else ci.low,
                   ci_high=None if ci is None else ci.high)
    return row


def loss_summary(stats) -> dict[str, Any]:
    """Loss per link role: drops over arrivals, in total and per DSCP class."""
    out: dict[str, Any] = {}
    for r in stats:
        role = out.setdefault(r["role"], {"arrived": 0, "dropped": 0, "sent": 0, "by_class": {}})
        role["arrived"] += r["arrived_pkts"]
        role["dropped"] += r["dropped_pkts"]
        role["sent"] += r["sent_pkts"]
        c = role["by_class"].setdefault(r["class"], {"arrived": 0, "dropped": 0})
        c["arrived"] += r["arrived_pkts"]
        c["dropped"] += r["dropped_pkts"]
    for role in out.values():
        role["loss"] = role["dropped"] / role["arrived"] if role["arrived"] else 0.0
        for c in role["by_class"].values():
            c["loss"] = c["dropped"] / c["arrived"] if c["arrived"] else 0.0
        role["by_class"] = {k: v for k, v in role["by_class"].items() if v["arrived"]}
    return out


def point_report(store: Store, run_id: str, point_row, interval: str = "t") -> dict[str, Any]:
    point = point_row["point"]
    pages = store.pages(run_id, point)
    by_page: dict[int, list[float]] = {}
    failed: dict[int, int] = {}
    for p in pages:
        if p["error"]:
            failed[p["page"]] = failed.get(p["page"], 0) + 1
        else:
            by_page.setdefault(p["page"], []).append(p["duration"])
    table = [page_row(page, by_page.get(page.number, []), failed.get(page.number, 0), interval)
             for page in catnip_pages() if page.number in by_page or page.number in failed]
    tcp: dict[str, Any] = store.tcp_totals(run_id, point, (
        "TcpOutSegs", "TcpRetransSegs", "TcpExtTCPTimeouts", "TcpExtTCPLossProbes", "TcpExtTCPSackRecovery",
        "TcpExtTCPRenoRecovery", "TcpExtTCPFastRetrans"))
    tcp["retrans_fraction"] = tcp["TcpRetransSegs"] / tcp["TcpOutSegs"] if tcp["TcpOutSegs"] else 0.0
    summary = store.link_summary(run_id, point)
    bottleneck = [s for s in summary if s["role"] == "bottleneck-data"]
    return {
        "point": point, "rep": point_row["rep"], "assignment": json.loads(point_row["assignment"]),
        "status": point_row["status"], "error": point_row["error"],
        "realtime_ok": None if point_row["realtime_ok"] is None else bool(point_row["realtime_ok"]),
        "fidelity": json.loads(point_row["fidelity"]) if point_row["fidelity"] else None,
        "switch_kind": point_row["switch_kind"],
        "pages_completed": sum(len(v) for v in by_page.values()), "pages_failed": sum(failed.values()),
        "table": table,
        "loss": loss_summary(store.link_stats(run_id, point)),
        "bottleneck_max_queue": {"pkts": max((s["max_queue_pkts"] or 0 for s in bottleneck), default=None),
                                 "bytes": max((s["max_queue_bytes"] or 0 for s in bottleneck), default=None)},
        "tcp": tcp,
        "marking": marking_summary(point_row["marking"]),
    }


def marking_summary(raw: str | None) -> dict[str, Any] | None:
    """The SPM marker's counters and the share of data segments it marked high (CATNIP III-B
    expects about 35-40% for an 8 KB document of 512-byte segments)."""
    if not raw:
        return None
    c = json.loads(raw)
    if "error" in c:
        return None
    if "tcp_state" in c or "initial_rto_answers" in c:  # controller/point.py: TCP-DS and the initial RTO
        ds = c.get("tcp_state")
        return {"kind": "tcp_state", "tcp_state": ds if isinstance(ds, dict) and "error" not in ds else None,
                "initial_rto_answers": c.get("initial_rto_answers"),
                "unanswered": c.get("unanswered", {})}  # machines whose part is missing from a sum
    data = c.get("data_high", 0) + c.get("data_low", 0)
    data_bytes = c.get("data_high_bytes", 0) + c.get("data_low_bytes", 0)
    return {**c, "high_share": c.get("data_high", 0) / data if data else None,
            "high_byte_share": c.get("data_high_bytes", 0) / data_bytes if data_bytes else None}


def _unanswered(marking: dict, key: str) -> str:
    """The note for a sum that lacks the machines whose helpers did not answer."""
    labels = (marking.get("unanswered") or {}).get(key)
    return f"; INCOMPLETE: without machine(s) {', '.join(labels)}, which did not answer" if labels else ""


def run_report(store: Store, run_id: str, interval: str = "t") -> dict[str, Any]:
    """The report of a run; `interval` (results.samples.INTERVALS) chooses the page times' 95%
    interval given as ci_low, ci_high beside the Student t half-width ci95."""
    if interval not in INTERVALS:
        raise ValueError(f"interval {interval!r}: one of {', '.join(INTERVALS)}")
    run = store.find_run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id!r} in {store.path} (see `catnip list`)")
    return {
        "run_id": run["id"], "name": run["name"], "status": run["status"], "error": run["error"],
        "seed": run["seed"], "git_rev": run["git_rev"], "started": run["started"], "finished": run["finished"],
        "sweep": json.loads(run["sweep"]),
        "interval": {"kind": interval, "description": INTERVALS[interval]},
        "points": [{**point_report(store, run["id"], p, interval), "label": label_of(run, p)}
                   for p in store.points(run["id"])],
    }


def point_name(report: dict[str, Any], p: dict[str, Any], default: str = "single point") -> str:
    """A report point's human label (results/labels.py): the one run_report put there, or one made
    from the report's sweep (pooled reports)."""
    if not p["assignment"]:
        return default
    return p.get("label") or point_label(p["assignment"], report.get("sweep"), default=default)


INTERVAL_HEADS = {"t": "+-95%", "bootstrap": "Mean 95%", "median": "Median 95%"}


def interval_line(kind: str) -> str:
    """Which interval the page-time tables show (and how to choose another)."""
    return f"Page times: {INTERVAL_HEADS[kind]} = {INTERVALS[kind]}; --interval t|bootstrap|median chooses"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def fmt_seconds(v: Any, digits: int = 3) -> str:
    """Seconds as the text tables show them: 3 decimals, "-" for none."""
    return "-" if v is None else f"{v:.{digits}f}"


def fidelity_lines(f: dict[str, Any]) -> list[str]:
    """How well a point kept real time, and what made its verdicts late."""
    out: list[str] = []
    pq = (f" p50 {f['late_p50_us']} us, p99 {f['late_p99_us']} us," if "late_p99_us" in f else "")
    out.append(f"  Fidelity: {f['late_events']} of {f['engine_events']} verdicts late by more than"
               f" {f['late_threshold_us'] / 1000:g} ms (lateness{pq} max {f['max_late_us'] / 1000:.1f} ms);"
               f" kernel queue drops {f['kernel_queue_drops']}; CPU busy"
               f" {100 * f.get('cpu_busy_fraction', 0):.0f}%, stolen by the hypervisor"
               f" {100 * f.get('cpu_steal_fraction', 0):.0f}%")
    if "slow_verdict_calls" in f:
        p99 = f.get("verdict_call_p99_us")
        out.append(f"  Late verdicts' cause: {f['late_at_issue_events']} were already late when the engine"
                   f" issued them; {f['slow_verdict_calls']} of {f.get('verdict_calls', 0)} verdict calls took"
                   f" longer than {f['late_threshold_us'] / 1000:g} ms"
                   + (f" (worse router's p99 {p99} us, max {f.get('max_verdict_call_us', 0) / 1000:.1f} ms)"
                      if p99 is not None else "")
                   + ": the kernel forwards released packets inside the call")
    if "cpu_busy_each" in f:
        where = f.get("placement") or {}
        split = (f" (engines on CPU {','.join(map(str, where['engine_cpus']))}, the rest and the veths' receive"
                 f" processing on {','.join(map(str, where['other_cpus']))})" if where.get("kind") == "split" else "")
        soft = f.get("cpu_softirq_each")
        eng = {k: v for k, v in (f.get("engine_cpu_s") or {}).items() if v is not None}
        names = f.get("cpus") or list(range(len(f["cpu_busy_each"])))
        out.append(f"  Placement: {where.get('kind', 'shared')}{split}; busy "
                   + ", ".join(f"CPU {c} {100 * b:.0f}%" for c, b in zip(names, f["cpu_busy_each"]))
                   + (" (in softirq " + ", ".join(f"{100 * x:.1f}%" for x in soft) + ")" if soft else "")
                   + ("; engines' CPU time " + ", ".join(f"{k} {v:.1f} s" for k, v in eng.items()) if eng else "")
                   + f"; receive backlog drops {f.get('backlog_drops', 0)}")
    for t in f.get("tunnels") or []:
        rtt = t.get("rtt_before_engines") or {}
        change = t.get("underlay_change")
        # testbed/tunnels.DROP_COUNTERS: a real NIC's receive drops include frames nobody wanted.
        lost = ("not measured" if change is None else
                sum(c.get(k, 0) for c in change.values() for k in ("rx_errors", "tx_errors", "tx_dropped")))
        out.append(f"  Tunnel {t['link']} (VXLAN {t['vni']}, " + " - ".join(e["machine"] for e in t["ends"])
                   + f"): round trip before the engines {rtt.get('avg_ms', float('nan')):.3f} ms"
                   + f" (max {rtt.get('max_ms', float('nan')):.3f}); underlay errors and send drops {lost}")
    for label, m in (f.get("machines") or {}).items():
        out.append(f"  Machine {label}: " + ("CPU and backlog counters not read" if m is None else
                   "busy " + ", ".join(f"CPU {c} {100 * b:.0f}%" for c, b in zip(m["cpus"], m["cpu_busy_each"]))
                   + " (stolen " + ", ".join(f"{100 * x:.1f}%" for x in m["cpu_steal_each"]) + ")"
                   + f"; receive backlog drops {m['backlog_drops']}"))
    for label, c in (f.get("clocks") or {}).items():
        drift = c.get("drift_s")
        out.append(f"  Clock of machine {label}: {c['offset_start_s']:+.6f} s from ours"
                   f" (+- {1e3 * c['uncertainty_start_s']:.3f} ms); its programs ran on ours, and drifted "
                   + ("an unmeasured amount" if drift is None else f"{1e3 * drift:+.3f} ms") + " by the end")
    start = f.get("client_start") or {}
    if start.get("clients"):
        out.append(f"  Clients: {start['clients']} ready, the last {start['latest_s']:+.3f} s from when it was due"
                   + _late_clients(start.get("late"), start["limit_s"], "the workload was not the scenario's"))
    if start.get("first_units"):
        out.append(f"  First units (pages, keystrokes, files, bursts): {start['first_units']} began, the last"
                   f" {start['first_latest_s']:+.3f} s from"
                   " its instant" + _late_clients(start.get("first_late"), start["limit_s"], "woken late"))
    conc = f.get("concurrency")
    if conc:
        busy = conc.get("cpu_busy_before_start")
        out.append(f"  Side by side (--jobs {conc['jobs']}): started beside {conc['beside_at_start']} running point(s)"
                   + (f", machine CPU busy {100 * busy:.0f}% just before" if busy is not None else ""))
    return out


def _late_clients(late: dict[str, list[str]] | None, limit_s: float, meaning: str) -> str:
    """'; later than LIMIT s (MEANING): app c1, c2 and N more; ...', or '' when none was."""
    if not late:
        return ""
    names = [f"{app} {', '.join(c[:8])}" + (f" and {len(c) - 8} more" if len(c) > 8 else "") for app, c in late.items()]
    return f"; later than {limit_s:g} s ({meaning}): " + "; ".join(names)


def _bounds(r: dict[str, Any]) -> str:
    return "-" if r.get("ci_low") is None else f"{r['ci_low']:.3f}..{r['ci_high']:.3f}"


def render_text(report: dict[str, Any]) -> str:
    """Plain-text tables in the layout of Table II, one per sweep point. With the Student t
    interval (the default) the +-95% column is its half-width; with another, the column holds the
    interval's bounds and its header says which."""
    kind = report.get("interval", {}).get("kind", "t")
    head = INTERVAL_HEADS[kind]
    rows = [r for p in report["points"] for r in p["table"]]
    width = 6 if kind == "t" else max([len(head)] + [len(_bounds(r)) for r in rows])
    out = [f"Run {report['run_id']}  scenario {report['name']}  status {report['status']}"
           f"  seed {report['seed']}  git {report['git_rev'] or '?'}"]
    if report["error"]:
        out.append(f"error: {report['error']}")
    if rows:
        out.append(interval_line(kind))
    for p in report["points"]:
        label = point_name(report, p)
        rt = {True: "yes", False: "NO (see fidelity)", None: "unknown"}[p["realtime_ok"]]
        out.append("")
        out.append(f"Point {p['point']} (rep {p['rep']}): {label}   status {p['status']}   real time kept: {rt}")
        if p["error"]:
            out.append(f"  error: {p['error']}")
        if p["fidelity"]:
            out += fidelity_lines(p["fidelity"])
        web = bool(p["table"]) or p["pages_completed"] or p["pages_failed"]  # no page table without web pages
        if web:
            out.append(f"  {'Page':>4} {'Conns':>5} {'Bytes':>8} {'N':>4} {'Min':>7} {'Median':>7} {'Max':>7}"
                       f" {'Mean':>7} {head:>{width}} {'SDev':>7} {'Fail':>4}")
        for r in p["table"]:
            ci = fmt_seconds(r.get("ci95")) if kind == "t" else _bounds(r)
            out.append(f"  {r['page']:>4} {r['conns']:>5} {r['bytes']:>8,} {r['n']:>4} {fmt_seconds(r.get('min')):>7}"
                       f" {fmt_seconds(r.get('median')):>7} {fmt_seconds(r.get('max')):>7} {fmt_seconds(r.get('mean')):>7}"
                       f" {ci:>{width}} {fmt_seconds(r.get('sdev')):>7} {r['failed']:>4}")

        data = p["loss"].get("bottleneck-data")
        if data:
            out.append(f"  Bottleneck (server->client) packet loss: {100 * data['loss']:.2f}%"
                       f"  ({data['dropped']} of {data['arrived']} packets)"
                       f"   max queue {p['bottleneck_max_queue']['pkts']} pkts / {p['bottleneck_max_queue']['bytes']} B")
            classes = data["by_class"]
            if set(classes) - {"other"}:
                out.append("    by priority: " + ", ".join(
                    f"{name} {100 * c['loss']:.2f}% ({c['dropped']} of {c['arrived']})"
                    for name, c in sorted(classes.items())))
        total_arr = sum(v["arrived"] for k, v in p["loss"].items() if k != "ingress-delay")
        total_drop = sum(v["dropped"] for k, v in p["loss"].items() if k != "ingress-delay")
        if total_arr:
            out.append(f"  All router queues: {100 * total_drop / total_arr:.2f}% loss"
                       f" ({total_drop} of {total_arr} packets)")
        m = p.get("marking")
        if m and m.get("kind") == "tcp_state":
            ds = m["tcp_state"]
            if ds:
                out.append("  TCP-state marking: data high/med/low " + " / ".join(
                    str(ds.get(f"data_{k}", 0)) for k in ("high", "med", "low")) + ", ACKs high/med/low "
                    + " / ".join(str(ds.get(f"ack_{k}", 0)) for k in ("high", "med", "low"))
                    + f", SYNs {ds.get('syn', 0)}, in fast recovery {ds.get('recovery', 0)},"
                    f" always high {ds.get('always_high', 0)}, random promotions {ds.get('random_up', 0)}"
                    + _unanswered(m, "tcp_state"))
            if m.get("initial_rto_answers") is not None:
                out.append(f"  Initial RTO: the kernel took ours {m['initial_rto_answers']} times (SYNs and SYN-ACKs)"
                           + _unanswered(m, "initial_rto_answers"))
        elif m:
            out.append(f"  SPM marking at the servers: {_pct(m['high_share'])} of data segments high"
                       f" ({m['data_high']} of {m['data_high'] + m['data_low']}; {_pct(m['high_byte_share'])} of bytes),"
                       f" {m['retransmissions']} retransmissions, {m['documents']} documents announced,"
                       f" control segments high {m['control_high']} / low {m['control_low']}")
        t = p["tcp"]
        out.append(f"  TCP (all hosts): {t['TcpOutSegs']} segments out, {t['TcpRetransSegs']} retransmitted"
                   f" ({100 * t['retrans_fraction']:.2f}%), {t['TcpExtTCPTimeouts']} timeouts,"
                   f" {t['TcpExtTCPLossProbes']} loss probes")
        if web:
            out.append(f"  Pages: {p['pages_completed']} completed, {p['pages_failed']} failed")
        else:
            out.append(f"  No web pages: `catnip report {report['run_id']} --apps` shows the applications' samples")
    return "\n".join(out)


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, default=str)


def render_csv(report: dict[str, Any]) -> str:
    """One row per (point, page): the Table II columns plus the point's sweep values and loss (the
    rows of the catnip-table-ii layout, results/layouts.py). With an interval other than Student
    t (whose half-width is the ci95 column), three columns more: interval, ci_low, ci_high."""
    table = table_ii_from_report(report)
    kind = report.get("interval", {}).get("kind", "t")
    if kind != "t":  # the default CSV stays as scripts read it
        extra = [(kind, r.get("ci_low"), r.get("ci_high")) for p in report["points"] for r in p["table"]]
        table = replace(table, columns=table.columns + (Column("interval", "str"), Column("ci_low", "float", "s"),
                                                        Column("ci_high", "float", "s")),
                        rows=tuple(row + e for row, e in zip(table.rows, extra, strict=True)))
    return table_csv(table)


def loss_table(report: dict[str, Any], role: str = "bottleneck-data") -> list[dict[str, Any]]:
    """CATNIP Tables IV, VII and X: per point, packets offered to the bottleneck queue, drops and
    loss, in all and split into high priority (AF11) and low priority (everything else)."""
    rows = []
    for p in report["points"]:
        data = p["loss"].get(role)
        if not data:
            continue
        high = data["by_class"].get("high", {"arrived": 0, "dropped": 0})
        low_arr = data["arrived"] - high["arrived"]
        low_drop = data["dropped"] - high["dropped"]
        rows.append({
            "point": p["point"], "label": point_name(report, p, report["name"]),
            "sent": data["arrived"], "drops": data["dropped"], "loss": data["loss"],
            "high_sent": high["arrived"], "high_drops": high["dropped"],
            "high_loss": high["dropped"] / high["arrived"] if high["arrived"] else None,
            "low_sent": low_arr, "low_drops": low_drop, "low_loss": low_drop / low_arr if low_arr else None,
            "realtime_ok": p["realtime_ok"]})
    return rows


def render_loss_table(report: dict[str, Any]) -> str:
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.2f}%"
    rows = loss_table(report)
    w = max([5] + [len(r["label"]) for r in rows])  # whole labels: sweep values often share a prefix
    out = [f"Packet loss at the bottleneck (server->client), run {report['run_id']} (layout of CATNIP Tables IV/VII/X)",
           f"{'':<{w}} {'All packets':^26} {'High priority (AF11)':^26} {'Low priority':^26}",
           f"{'Point':<{w}} " + "  ".join(f"{'Sent':>8} {'Drops':>7} {'Loss':>8}" for _ in range(3))]
    for r in rows:
        flag = "" if r["realtime_ok"] is not False else "  (real time NOT kept)"
        out.append(f"{r['label']:<{w}} {r['sent']:>8,} {r['drops']:>7,} {pct(r['loss']):>8}  "
                   f"{r['high_sent']:>8,} {r['high_drops']:>7,} {pct(r['high_loss']):>8}  "
                   f"{r['low_sent']:>8,} {r['low_drops']:>7,} {pct(r['low_loss']):>8}{flag}")
    return "\n".join(out)


SECONDS = {"type": "float", "unit": "s"}
TABLE_II_TITLE, TABLE_II_PAPER = "Web page download times per page", "CATNIP Table II"

TABLE_II_COLUMNS = [
    Column("run_id", "str"), Column("point", "int"), Column("rep", "int"), Column("assignment", "json"),
    Column("page", "int"), Column("conns", "int"), Column("bytes", "int", "B"), Column("n", "int"),
    Column("min", **SECONDS), Column("median", **SECONDS), Column("max", **SECONDS), Column("mean", **SECONDS),
    Column("sdev", **SECONDS), Column("failed", "int"), Column("bottleneck_loss", "float", "1", fmt="%"),
    Column("realtime_ok", "bool"), Column("ci95", **SECONDS)]


def table_ii_from_report(rep: dict[str, Any]) -> Table:
    """The rows of Table II per point and page of a `report.run_report` (what `catnip report RUN
    --csv` writes: one row per point and page with the point's sweep values and loss)."""
    rows = []
    for p in rep["points"]:
        data = p["loss"].get("bottleneck-data", {})
        for r in p["table"]:
            rows.append((rep["run_id"], p["point"], p["rep"], p["assignment"], r["page"], r["conns"], r["bytes"],
                         r["n"], r.get("min"), r.get("median"), r.get("max"), r.get("mean"), r.get("sdev"),
                         r["failed"], data.get("loss"), p["realtime_ok"], r.get("ci95")))
    return Table("catnip-table-ii", TABLE_II_TITLE, TABLE_II_PAPER, (rep["run_id"],), tuple(TABLE_II_COLUMNS),
                 tuple(rows), (), rep)
