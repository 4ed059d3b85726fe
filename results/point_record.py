"""The resolved record of a stored point (spec/record.py): the one place reports, layouts, labels
and the dashboard learn what a point ran.

A point recorded since records exist carries its own (`points.record`, written when its network
was planned). A point recorded before has none: its record is planned again, by the same planner
the run would use today, from what the run stored (its scenario with the overrides, its sweep and
the point's assignment and seed), and says so (`derived: true`).
"""

from __future__ import annotations

import json
from typing import Any

from catnip.spec.record import PointRecord, RecordError, parse


def record_of(run: Any, point: Any) -> PointRecord:
    """The record of a point row (`run`: its run's row, used only for a point without its own).
    RecordError where there is none to read or plan (say which point)."""
    keys = point.keys() if hasattr(point, "keys") else ()
    stored = point["record"] if "record" in keys else None
    record = parse(stored)
    if record is not None:
        return record
    return _derived(run, point)


def _derived(run: Any, point: Any) -> PointRecord:
    from catnip.spec.scenario import ScenarioError, stored_point
    from catnip.testbed.plan import plan
    where = f"run {run['id']} point {point['point']}" if run is not None else f"point {point['point']}"
    if run is None:
        raise RecordError(f"{where}: no record and no run to plan one from")
    try:
        raw, sweep, assignment = (json.loads(run["scenario"]), json.loads(run["sweep"] or "{}"),
                                  json.loads(point["assignment"]))
        sc = stored_point(raw, sweep, assignment)
        return plan(sc, seed=point["seed"]).model_copy(update={"derived": True})
    except (ValueError, TypeError, KeyError, ScenarioError) as exc:
        raise RecordError(f"{where} was recorded before records and its scenario no longer plans: "
                          f"{str(exc).splitlines()[0][:200]}") from None


def _rate(bps: int, host_bps: int | None = None) -> str:
    if not bps:
        return f"{_rate(host_bps)} (the host's htb)" if host_bps else "host's own"
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps} bit/s"


def _policy(policy: dict[str, Any]) -> str:
    params = ", ".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(policy.items()) if k != "kind")
    return policy.get("kind", "?") + (f" ({params})" if params else "")


def summary(record: PointRecord) -> dict[str, Any]:
    """What a point ran, for a reader: its link directions (alike access directions of a group
    counted once, with how many), each group's hosts' TCP as applied, its applications."""
    links: dict[str, dict[str, Any]] = {}
    for d in record.links:
        shown = {"where": d.where, "role": d.role, "rate": _rate(d.rate_bps, d.host_rate_bps), "delay": f"{d.delay_s * 1000:g} ms",
                 "buffer": ", ".join(f"{v} {k}" for k, v in (d.buffer or {}).items()) or "-",
                 "policy": _policy(d.policy), "loss": json.dumps(d.loss) if d.loss else "-",
                 "edge": "; ".join(_policy(e) for e in d.edge) or "-", "backend": d.backend}
        key = json.dumps(shown, sort_keys=True)
        links.setdefault(key, {**shown, "directions": 0})["directions"] += 1
    tcp: dict[str, dict[str, Any]] = {}
    for h in record.hosts:
        entry = tcp.setdefault(json.dumps([h.group, h.tcp, h.sysctls], sort_keys=True),
                               {"group": h.group, "hosts": 0, "congestion_control": h.tcp.get("congestion_control"),
                                "settings": h.tcp, "sysctls": h.sysctls})
        entry["hosts"] += 1
    return {"derived": record.derived, "version": record.version, "tcp_profile": record.tcp_profile,
            "placement": record.placement.model_dump(), "links": list(links.values()), "tcp": list(tcp.values()),
            "applications": [{"instance": a.instance, "kind": a.kind, "clients": len(a.clients),
                              "servers": len(a.servers), "params": a.params} for a in record.applications]}
