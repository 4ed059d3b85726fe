"""The runs page's provenance columns and its filter (issue 48, item 8), and the words the run page
uses for a point that did not keep real time (item 10).

A run is listed with the paper it reproduces (a short name from its scenario's `paper:` field: the
one the run stored, else the one of the scenario file of its name; the papers, their short names
and how their `paper:` fields start are the paper registry's, catnip.papers `Paper.short` and
`Paper.paper_field`, so a paper registered later is listed too), its point count, how many of
its points kept real time (each point's verdict, from its fidelity record: controller/fidelity.py),
and whether it was imported (`runs.imported`, as `catnip list` marks it). The filter is three query
parameters, each checked against a closed list before anything is read.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml

from catnip import papers
from catnip.results.import_schema import STATUSES
from catnip.spec import bounded

OTHER, NONE = "other", "none"  # a `paper:` field naming no registered paper; no `paper:` field at all


def paper_names() -> tuple[str, ...]:
    """The runs page's paper names: each registered paper's short name, then `other` and `none`."""
    return tuple(dict.fromkeys([*(p.short_name for p in papers.PAPERS.values()), OTHER, NONE]))


class _PaperNames:
    """`paper_names()` read when used, so a paper registered after this module was imported (a
    test's toy paper) is a filter value and a column value too."""

    def __iter__(self) -> Iterator[str]:
        return iter(paper_names())

    def __contains__(self, name: object) -> bool:
        return name in paper_names()

    def __len__(self) -> int:
        return len(paper_names())


PAPER_NAMES = _PaperNames()
REALTIME = {"kept": "every judged point kept real time", "missed": "a point missed real time",
            "unjudged": "no point judged"}
FILTER_KEYS = ("paper", "status", "realtime")
SCENARIO_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def paper_name(field: str) -> str:
    """The short name of the paper a scenario's `paper:` field names."""
    if not field.strip():
        return NONE
    paper = papers.registry.paper_of_field(field)
    return paper.short_name if paper else OTHER


def _file_paper(scenarios: Path, name: str, cache: dict[str, str]) -> str:
    """The `paper:` field of scenarios/NAME.yaml (also scenarios/*/NAME.yaml), read within the bounds
    every scenario is read with; "" when there is no such file or it cannot be read."""
    if name in cache:
        return cache[name]
    cache[name] = ""
    if not SCENARIO_NAME.fullmatch(name) or name.startswith("."):  # a name, never a path or a pattern
        return ""
    for path in (scenarios / f"{name}.yaml", *sorted(scenarios.glob(f"*/{name}.yaml"))):
        try:
            raw = bounded.load_yaml(bounded.read_text(path), str(path))
        except (OSError, ValueError, yaml.YAMLError):  # bounded.InputError is a ValueError
            continue
        if isinstance(raw, dict):
            cache[name] = bounded.shorten(str(raw.get("paper") or ""), 300)
            break
    return cache[name]


def _stored_paper(run: Mapping[str, Any]) -> str:
    try:
        scenario = json.loads(run["scenario"] or "{}")
    except (TypeError, ValueError):
        return ""
    return str(scenario.get("paper") or "")[:300] if isinstance(scenario, dict) else ""


def point_counts(db: sqlite3.Connection) -> dict[str, dict[str, int]]:
    """Per run: its points, how many were judged for real time, and how many kept it."""
    rows = db.execute("SELECT run_id, count(*), sum(realtime_ok IS NOT NULL), sum(realtime_ok = 1)"
                      " FROM points GROUP BY run_id").fetchall()
    return {r[0]: {"points": r[1], "judged": r[2] or 0, "kept": r[3] or 0} for r in rows}


def provenance(run: Mapping[str, Any], scenarios: Path, counts: dict[str, dict[str, int]],
               cache: dict[str, str]) -> dict[str, Any]:
    """What the runs page shows of a run beside its id, status and times."""
    field = _stored_paper(run) or _file_paper(scenarios, str(run["name"] or ""), cache)
    c = counts.get(run["id"], {"points": 0, "judged": 0, "kept": 0})
    if not c["judged"]:
        realtime = "unjudged"
    else:
        realtime = "kept" if c["kept"] == c["judged"] else "missed"
    imported = run["imported"] if "imported" in run.keys() else None
    return {"paper": paper_name(field), "paper_field": field, **c, "realtime": realtime,
            "imported": _imported_from(imported)}


def _imported_from(mark: str | None) -> str | None:
    """None for a run recorded here, else where it came from in a few words."""
    if not mark:
        return None
    try:
        m = json.loads(mark)
    except ValueError:
        return "imported"
    if not isinstance(m, dict):
        return "imported"
    parts = [f"from {m['file']}" if m.get("file") else "", f"(run {m['run_id']} there)" if m.get("run_id") else ""]
    return " ".join(p for p in parts if p)[:200] or "imported"


@dataclass(frozen=True)
class RunFilter:
    paper: str | None = None
    status: str | None = None
    realtime: str | None = None

    def active(self) -> bool:
        return any((self.paper, self.status, self.realtime))

    def keeps(self, row: Mapping[str, Any]) -> bool:
        return ((self.paper is None or row["paper"] == self.paper)
                and (self.status is None or row["status"] == self.status)
                and (self.realtime is None or row["realtime"] == self.realtime))

    def words(self) -> str:
        said = [f"paper {self.paper}" if self.paper else "", f"status {self.status}" if self.status else "",
                REALTIME[self.realtime] if self.realtime else ""]
        return ", ".join(w for w in said if w)


def run_filter(args: Any) -> RunFilter:
    """The runs page's query (`args` a MultiDict): `paper`, `status` and `realtime`, each left out,
    empty (no filter) or one value of its list. Raises ValueError naming the first bad parameter."""
    unknown = sorted(k for k in args.keys() if k not in FILTER_KEYS)
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0][:40]!r}: the runs page is filtered by"
                         f" {', '.join(FILTER_KEYS)}")
    chosen: dict[str, str | None] = {}
    for key, allowed in (("paper", PAPER_NAMES), ("status", STATUSES), ("realtime", tuple(REALTIME))):
        values = args.getlist(key)
        if len(values) > 1:
            raise ValueError(f"{key} is given {len(values)} times: choose one")
        value = values[0] if values else ""
        if value and value not in allowed:
            raise ValueError(f"{key}={value[:40]!r} is not one of: {', '.join(allowed)}")
        chosen[key] = value or None
    return RunFilter(**chosen)


# --- a point that did not keep real time: why, and what that means for its numbers ---------------
USABILITY = ("Its numbers are what was measured, but the emulation fell behind real time: points that"
             " missed real time are left out of claims (compare and pool with \"only points that kept real"
             " time\"; the gap study and the docs' tables leave them out).")


DEFAULT_MAX_LATE_FRACTION = 0.001  # run.max_late_fraction's default (spec/scenario.py), and transfers'


def max_late_fraction(resolved: str | None) -> float:
    """The point's run.max_late_fraction from its resolved scenario (points.resolved), else the default."""
    try:
        value = (json.loads(resolved or "{}").get("run") or {}).get("max_late_fraction")
    except (TypeError, ValueError, AttributeError):
        return DEFAULT_MAX_LATE_FRACTION
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1
    return float(value) if ok else DEFAULT_MAX_LATE_FRACTION


def realtime_reasons(fidelity: Mapping[str, Any] | None, max_late: float = DEFAULT_MAX_LATE_FRACTION) -> list[str]:
    """Each check of controller/fidelity.realtime_ok that the point's fidelity record fails, in
    words (docs/fidelity.md); `max_late` is the point's run.max_late_fraction."""
    if not fidelity:
        return ["no fidelity record was stored for this point"]
    out = []
    late, events = fidelity.get("late_events", 0), fidelity.get("engine_events", 0)
    frac = fidelity.get("late_fraction")
    threshold = fidelity.get("late_threshold_us")
    if frac is not None and frac > max_late:
        out.append(f"{late} of {events} verdicts ({100 * frac:.2f}%) were more than"
                   f" {f'{threshold / 1000:g}' if threshold else '?'} ms late; at most {100 * max_late:g}%"
                   " may be (run.max_late_fraction)")
    if fidelity.get("kernel_queue_drops"):
        out.append(f"the kernel's NFQUEUE dropped {fidelity['kernel_queue_drops']} packets before the engine saw them")
    if fidelity.get("backlog_drops"):
        out.append(f"the CPUs' receive backlogs dropped {fidelity['backlog_drops']} packets"
                   " (net.core.netdev_max_backlog)")
    if fidelity.get("tunnel_drops"):
        out.append(f"the tunnels between machines lost {fidelity['tunnel_drops']} packets")
    for label, m in (fidelity.get("machines") or {}).items():
        if m is None:
            out.append(f"machine {label}'s CPU and backlog counters were not read")
        elif m.get("backlog_drops"):
            out.append(f"machine {label}'s receive backlogs dropped {m['backlog_drops']} packets")
    if fidelity.get("gso_packets"):
        out.append(f"the engines took {fidelity['gso_packets']} segmentation-offload super-packets whole, each"
                   " emulated as one packet of its full length")
    if fidelity.get("unbound_packets"):
        out.append(f"the engines accepted {fidelity['unbound_packets']} packets of a queue no link has, unemulated")
    if fidelity.get("engines_without_final_stats"):
        out.append("the engines of " + ", ".join(map(str, fidelity["engines_without_final_stats"]))
                   + " wrote no closing counters")
    start = fidelity.get("client_start") or {}
    limit = start.get("limit_s")
    for key, what in (("late", "ready"), ("first_late", "woken for their first unit of work")):
        for app, names in (start.get(key) or {}).items():
            shown = ", ".join(map(str, names[:5])) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            out.append(f"{app}: client(s) {shown} {what} more than {limit if limit is not None else '?'} s"
                       " after they were due")
    return out
