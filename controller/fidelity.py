"""Whether a point kept real time, judged once for every kind of run from the engines' own
counters (docs/fidelity.md): at most `max_late_fraction` of the engine's events later than its
late threshold, no packet dropped by the kernel's NFQUEUE or by its per-CPU receive backlogs,
every engine's closing counters written, and every client program ready by the instant it was due.
"""

from __future__ import annotations

from typing import Any

QUANTILES = ("late_p50_us", "late_p99_us", "late_p999_us")
CAUSE_SUMS = ("late_at_issue_events", "verdict_calls", "slow_verdict_calls")
# Packets an engine took but did not emulate as the scenario says: an offload super-packet
# serialized as one (gso_packets), a packet of a queue no link has, accepted as it came
# (unbound_packets). Any of them fails real time (engine/src/nfq_loop.rs).
UNEMULATED = ("gso_packets", "unbound_packets")
CAUSE_MAXES = ("verdict_call_p99_us", "late_at_issue_p99_us", "max_verdict_call_us", "max_late_at_issue_us")


def engine_fidelity(finals: dict[str, dict], kernel: dict[str, dict[str, dict]]) -> dict[str, Any]:
    """Fold each router's final stats record and kernel queue counters into one fidelity record."""
    late = events = kdrops = queued = 0
    max_late = 0.0
    quantiles: dict[str, int] = {}
    causes: dict[str, float] = {}  # what made verdicts late (engine/src/stats.rs, LatenessCauses)
    no_final: list[str] = []       # engines that did not write their closing counters
    unemulated: dict[str, int] = {k: 0 for k in UNEMULATED}
    for router, final in finals.items():
        eng = final.get("engine", {})
        late += eng.get("late_events", 0)
        events += eng.get("events", 0)
        max_late = max(max_late, eng.get("max_late_us", 0) or 0)
        for q in QUANTILES:  # the worse router's
            if eng.get(q) is not None:
                quantiles[q] = max(quantiles.get(q, 0), eng[q])
        for k in CAUSE_SUMS:
            if eng.get(k) is not None:
                causes[k] = causes.get(k, 0) + eng[k]
        for k in CAUSE_MAXES:
            if eng.get(k) is not None:
                causes[k] = max(causes.get(k, 0), eng[k])
        for k in UNEMULATED:
            unemulated[k] = unemulated.get(k, 0) + (eng.get(k) or 0)
        kdrops += sum(r["queue_dropped"] + r["user_dropped"] for r in kernel.get(router, {}).values())
        queued += sum(r.get("queued", 0) for r in kernel.get(router, {}).values())
        if not final.get("final"):
            no_final.append(router)
    return {"engine_events": events, "late_events": late, "late_fraction": late / events if events else 0.0,
            "max_late_us": max_late, **quantiles, **causes, "kernel_queue_drops": kdrops, **unemulated,
            "engines_without_final_stats": no_final,
            # Packets the kernel handed to the engines' queues, and how many queues were bound at the end:
            # beside engine_events they tell rules that matched nothing from counters that were lost.
            "kernel_queued": queued, "kernel_queues": sum(len(k) for k in kernel.values())}


def idle_jiffies(times: list[int], nice_is_idle: bool = False) -> int:
    """The idle part of /proc/stat CPU times (user nice system idle iowait irq softirq steal): idle
    and iowait, and nice with `nice_is_idle` (run.keep_awake: its loops run at nice 19, nothing
    else of a run does)."""
    return times[3] + times[4] + (times[1] if nice_is_idle else 0)


def cpu_fidelity(start: list[int], end: list[int], nice_is_idle: bool = False) -> dict[str, float]:
    """How busy the machine was (user nice system idle iowait irq softirq steal from /proc/stat),
    and how much of its CPU the hypervisor took away (steal), between two readings. With
    `nice_is_idle` (run.keep_awake) the nice time, the keep-awake loops', counts as idle."""
    delta = [b - a for a, b in zip(start, end)]
    total = sum(delta) or 1
    return {"cpu_busy_fraction": round(1 - idle_jiffies(delta, nice_is_idle) / total, 4),
            "cpu_steal_fraction": round(delta[7] / total, 4)}


def machine_snapshot(stat: str | None = None, softnet: str | None = None) -> dict[str, Any]:
    """Each CPU's jiffies by CPU number (/proc/stat cpuN lines) and each CPU's count of packets its
    receive backlog dropped (/proc/net/softnet_stat, second column, hex): a veth's netif_rx drops
    when the receiving CPU's backlog is full (net.core.netdev_max_backlog), a loss no queue
    emulated. The texts can be given (tests); otherwise they are read."""
    if stat is None:
        with open("/proc/stat") as fh:
            stat = fh.read()
    if softnet is None:
        try:
            with open("/proc/net/softnet_stat") as fh:
                softnet = fh.read()
        except OSError:
            softnet = ""
    rows = [f for f in (line.split() for line in stat.splitlines()) if f and f[0].startswith("cpu")]
    total = next(([int(x) for x in f[1:9]] for f in rows if f[0] == "cpu"), [0] * 8)
    each = {int(f[0][3:]): [int(x) for x in f[1:9]] for f in rows if f[0][3:].isdigit()}
    drops = [int(line.split()[1], 16) for line in softnet.splitlines() if len(line.split()) > 1]
    return {"cpu": total, "cpu_each": each, "backlog_drops_each": drops}


def machine_fidelity(start: dict[str, Any], end: dict[str, Any], nice_is_idle: bool = False) -> dict[str, Any]:
    """Each CPU's busy, softirq and steal fractions (lists in CPU number order, `cpus` naming them)
    and the receive backlogs' drops between two snapshots, nice time idle with `nice_is_idle`
    (idle_jiffies). The drop counters are the machine's, not the point's: beside another point (--jobs) a drop in either counts in both, and a drop by
    traffic outside the testbed would count too (there is none on a testbed machine)."""
    cpus = sorted(set(start["cpu_each"]) & set(end["cpu_each"]))
    busy, softirq, steal = [], [], []
    for cpu in cpus:
        d = [y - x for x, y in zip(start["cpu_each"][cpu], end["cpu_each"][cpu])]
        total = sum(d) or 1
        busy.append(round(1 - idle_jiffies(d, nice_is_idle) / total, 4))
        softirq.append(round(d[6] / total, 4))  # the kernel's packet processing outside any system call
        steal.append(round(d[7] / total, 4))
    # 32-bit counters per CPU: a difference taken modulo 2^32 survives a wrap.
    drops = sum((b - a) % 2**32 for a, b in zip(start["backlog_drops_each"], end["backlog_drops_each"]))
    return {"cpus": cpus, "cpu_busy_each": busy, "cpu_softirq_each": softirq, "cpu_steal_each": steal,
            "backlog_drops": drops}


# A client program may be ready this long after the common start (or its flow's launch): the
# clients' own timing is recorded from then on, and a page, keystroke or file already later than
# that runs a workload the scenario did not describe (seen at 80 client pairs: 14 s, docs/cluster.md).
CLIENT_READY_LIMIT_S = 0.1


def _latest_and_late(after: dict[str, dict[str, float]]) -> tuple[int, float | None, dict[str, list[str]]]:
    every = [s for by_client in after.values() for s in by_client.values()]
    late = {app: sorted(c for c, s in by_client.items() if s > CLIENT_READY_LIMIT_S) for app, by_client in after.items()}
    return len(every), round(max(every), 6) if every else None, {app: names for app, names in late.items() if names}


def client_start(ready: dict[str, dict[str, float]],
                 first_unit: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """From each application's clients' ready instants (seconds after they were due, by client or
    flow): how many there were, the latest, and those later than CLIENT_READY_LIMIT_S by application;
    and the same for the first unit of work (AppResult.first_unit_after_due: a page, a keystroke,
    a file, a burst): a client ready in time but woken late for its first unit is late as well."""
    clients, latest, late = _latest_and_late(ready)
    units, first_latest, first_late = _latest_and_late(first_unit or {})
    return {"clients": clients, "latest_s": latest, "limit_s": CLIENT_READY_LIMIT_S, "late": late,
            "first_units": units, "first_latest_s": first_latest, "first_late": first_late}


def bypassed(fidelity: dict[str, Any], engines: list[str] | None = None) -> str | None:
    """Why the point's packets did not go through its emulated links, or None. Queue engines that
    ran the whole workload and took no packet mean the traffic went around them (their NFQUEUE
    rules missing or not matching): every rate, delay and policy of the scenario was absent, and
    the point's numbers are the bare machine's. Seen once, on a loaded machine: a quick run
    completed its 100 pages with both engines at 0 packets."""
    engines = sorted(engines if engines is not None else fidelity.get("engine_cpu_s") or {})
    if not engines or fidelity.get("engine_events", 0) != 0:
        return None
    queued = fidelity.get("kernel_queued")
    if queued:  # the kernel gave them packets: the traffic went through, its count did not come back
        return (f"the queue engines of {', '.join(engines)} counted no packet, yet the kernel handed {queued:,} to"
                " their queues: the engines' counters are wrong, so nothing of the point's fidelity can be"
                " trusted (an engine defect: keep the run's folder and report it)")
    where = ("no engine had its queue bound at the end" if fidelity.get("kernel_queues") == 0 else
             "their NFQUEUE rules matched no packet" if queued == 0 else
             "their NFQUEUE rules missing or not matching")
    return (f"the queue engines of {', '.join(engines)} took no packet during the workload: the traffic went"
            f" around the emulated links ({where}), so nothing of the scenario's links was applied")


def realtime_ok(fidelity: dict[str, Any], max_late_fraction: float) -> bool:
    # A packet a tunnel between machines lost (its underlay's drops or errors) is a loss no emulated
    # queue decided, as a receive backlog's is.
    # So is one another machine's receive backlog dropped; its counters unread (None) count as unknown.
    others = (fidelity.get("machines") or {}).values()
    start = fidelity.get("client_start") or {}
    return (fidelity["late_fraction"] <= max_late_fraction and fidelity["kernel_queue_drops"] == 0
            and fidelity.get("backlog_drops", 0) == 0 and fidelity.get("tunnel_drops", 0) == 0
            and all(m is not None and m.get("backlog_drops", 0) == 0 for m in others)
            and not fidelity["engines_without_final_stats"]
            and not any(fidelity.get(k, 0) for k in UNEMULATED)
            and not start.get("late") and not start.get("first_late"))
