"""Short human labels for sweep points: "DropTail", "TCPF+FRIO (max_th 200 KB), SACK, 100 flows",
"newCWV, paced 200%", "base-iw, 64 KB buffer".

A point is named by its sweep assignment (the swept field paths and the values this point took).
Each value is described by what it means rather than how it is written: a queue policy by its
name, a link's edge functions and policy as the paper writes a case (marker+dropper), a sender by
its congestion control, a rate in Mbit/s. Where the sweep is known (every stored run keeps it),
only what differs between the key's values is shown, and values that would read the same get the
field that tells them apart, so the labels of one run's points are distinct. A point's resolved
record (spec/record.py), where given, turns a number of senders into the flows they carry.

The raw form (`router.policy={'kind': 'droptail'}`, spec.scenario.point_label) stays what
`--only` and the controller's messages use; everything a reader sees uses this one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from catnip.spec.record import PointRecord, RecordError, parse

POLICIES = {"droptail": "DropTail", "red": "RED", "catnip_good": "CATNIP-Good", "catnip_bad": "CATNIP-Bad",
            "catnip_red": "CATNIP-RED", "fred": "FRED", "rio": "RIO", "red3": "3-level RED", "frio": "FRIO",
            "wrr": "WRR", "bernoulli": "random loss", "catnip_loss": "CATNIP loss model",
            "source_scheduler": "source scheduler"}
EDGES = {"mark": "DSCP marker", "police": "policer", "shape": "shaper", "tcpf": "TCPF", "token_marker": "TB"}
SENDERS = {"reno": "Reno", "cubic": "CUBIC", "bbr": "BBR", "catnip_reno": "Reno", "catnip_eca": "ECA",
           "catnip_rbplw": "Reno+RBPLW", "catnip_ecarbplw": "ECA+RBPLW", "catnip_ns2reno": "ns-2 Reno",
           "catnip_newcwv": "newCWV"}
SCHEME = "scheme"  # spec.scenario.SCHEME: its values are named, the name is the label

Part = tuple[str, str]  # (field path inside the value, text)
ESSENTIAL = {"", "kind", "queue", "congestion_control"}  # what a value is: shown even where its siblings share it


def _amount(text: str) -> str:
    """'64KB' -> '64 KB', '5.4Mbit' -> '5.4 Mbit/s': a number and its unit apart, as prose writes them."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z%]*)\s*", str(text))
    if not m:
        return str(text)
    number, unit = m.groups()
    if unit.lower().endswith("bit"):
        unit += "/s"
    return f"{number}{unit}" if unit == "%" else f"{number} {unit}".strip()


def _sender(cc: Any) -> str:
    return SENDERS.get(str(cc), str(cc))


def _edge(e: Any) -> str:
    if not isinstance(e, dict):
        return str(e)
    kind = str(e.get("kind", "?"))
    if kind == "tcpf" and e.get("protect_retransmissions") is False:
        return "TCPF(O)"  # the paper's name for TCPF without retransmission protection
    return EDGES.get(kind, kind)


def _scalar(path: str, value: Any, record: PointRecord | None) -> str:
    name = path.split(".")[-1]
    if name == "rate" and str(value).strip().lower().endswith("bit"):
        return _amount(value)
    if name in ("policy", "kind") and isinstance(value, str):
        return POLICIES.get(value, value)
    if name in ("buffer", "delay"):
        return f"{_amount(value)} {name}"
    if name == "sack" and isinstance(value, bool):
        return "SACK" if value else "no SACK"
    if name in ("congestion_control", "server_congestion_control"):
        return " / ".join(_sender(v) for v in value) if isinstance(value, list) else _sender(value)
    if name in ("senders", "clients") and isinstance(value, int):
        flows = _flows(record)
        return f"{flows} flows" if flows else f"{value} {name}"
    if isinstance(value, bool):
        return f"{name} {'on' if value else 'off'}"
    if isinstance(value, list):
        return f"{name} {' '.join(_amount(v) for v in value)}"
    return f"{name} {_amount(value) if isinstance(value, str) else value}"


def _flows(record: PointRecord | None) -> int:
    """The long-lived flows of a point's bulk applications (senders x flows per sender)."""
    if record is None:
        return 0
    return sum(len(a.clients) * int(a.params.get("flows_per_client") or 0) for a in record.apps("bulk"))


def _leaves(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every scalar of a nested value with its dotted path."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{prefix}{k}.")]
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{prefix}{i}.")]
    return [(prefix.rstrip("."), value)]


def _edges_in(value: Any) -> list[Any]:
    """The edge functions anywhere in a link's value (`edge`, `forward.edge`, `up.edge`), in order."""
    if not isinstance(value, dict):
        return []
    out = list(value["edge"]) if isinstance(value.get("edge"), list) else []
    for k, v in value.items():
        if k != "edge":
            out += _edges_in(v)
    return out


def _parts(key: str, value: Any, record: PointRecord | None) -> list[Part]:
    """What a swept value means, in pieces that can be compared with its siblings' pieces."""
    if key == SCHEME:
        return [("", str(value.get("name") if isinstance(value, dict) else value))]
    if not isinstance(value, dict):
        return [("", _scalar(key, value, record))]
    if "kind" in value:  # a policy (router.policy) or an edge function
        kind = str(value["kind"])
        return [("kind", POLICIES.get(kind) or _edge(value))]
    parts: list[Part] = []
    edges = _edges_in(value)
    policy = value.get("policy")
    queue = [_edge(e) for e in edges]
    if isinstance(policy, dict) and "kind" in policy:
        queue.append(POLICIES.get(str(policy["kind"]), str(policy["kind"])))
    if queue:
        parts.append(("queue", "+".join(queue)))
    if "congestion_control" in value:
        parts.append(("congestion_control", _sender(value["congestion_control"])))
    if value.get("pacing") not in (None, "off"):
        ratio = value.get("pacing_ratio")
        parts.append(("pacing", "paced" + (f" {ratio}%" if ratio is not None else "")))
    shown = {"policy", "congestion_control", "pacing", "pacing_ratio", "edge"}
    for k, v in value.items():
        if k in shown or _edges_in({k: v}):
            continue
        if isinstance(v, dict):
            parts += [(f"{k}.{p}", _scalar(f"{k}.{p}", leaf, record)) for p, leaf in _leaves(v)]
        else:
            parts.append((k, _scalar(f"{key}.{k}", v, record)))
    return parts


def _key_text(key: str, value: Any, siblings: list[Any], record: PointRecord | None) -> str:
    """One swept value's text: what it is (its queue or sender) and its pieces that differ among the
    key's values (all of them when none differ), then, where another value would read the same, the
    fields that tell them apart. Siblings are compared without the record (it is this point's)."""
    others = [_parts(key, s, None) for s in siblings]
    varying = {path for path, _ in {p for ps in others for p in ps}
               if len({dict(ps).get(path) for ps in others}) > 1}

    def shown(parts: list[Part]) -> str:
        if not varying:
            return ", ".join(t for _, t in parts)
        return ", ".join(t for p, t in parts if p in varying or p in ESSENTIAL) or ", ".join(t for _, t in parts)
    plain = shown(_parts(key, value, None))
    text = shown(_parts(key, value, record))
    twins = [s for s, ps in zip(siblings, others) if s != value and shown(ps) == plain]
    if not twins:
        return text
    leaves = dict(_leaves(value))
    differ = [(p, v) for p, v in leaves.items() if any(dict(_leaves(t)).get(p) != v for t in twins)]
    detail = ", ".join(_scalar(p, v, None) for p, v in differ[:3])
    if detail:
        return f"{text} ({detail})"
    return f"{text} (value {siblings.index(value) + 1})"


def _order(item: tuple[str, Any]) -> int:
    """Queues and senders (mappings) first, then named schemes, then plain values."""
    key, value = item
    return 0 if isinstance(value, dict) else 1 if key == SCHEME else 2


def point_label(assignment: dict[str, Any], sweep: dict[str, list[Any]] | None = None,
                record: PointRecord | None = None, default: str = "single point") -> str:
    """A point's label from its assignment; `sweep` (the run's, spec.scenario.Sweep.sweep) lets it
    show only what tells the points apart; `record` (its PointRecord) counts flows."""
    sweep = sweep or {}
    texts = []
    for key, value in sorted(assignment.items(), key=_order):
        siblings = list(sweep.get(key) or [value])
        if key == SCHEME:  # a sweep keeps each scheme as {name, set}; the assignment keeps its name
            siblings = [s.get("name") if isinstance(s, dict) else s for s in siblings]
        if value not in siblings:
            siblings.append(value)
        texts.append(_key_text(key, value, siblings, record))
    return ", ".join(texts) or default


def _json(text: Any) -> Any:
    return json.loads(text) if isinstance(text, str) else (text or {})


def _stored_record(point: Any) -> PointRecord | None:
    """The record a point stored, if any: a label does not plan one for an old point."""
    keys = point.keys() if hasattr(point, "keys") else ()
    try:
        return parse(point["record"]) if "record" in keys else None
    except RecordError:
        return None


def label_of(run: Any, point: Any, default: str = "single point") -> str:
    """The label of a stored point row (`run`: its run's row, for the sweep)."""
    sweep = _json(run["sweep"]) if run is not None else {}
    return point_label(_json(point["assignment"]), sweep, _stored_record(point), default)


def run_labels(run: Any, points: list[Any], default: str = "single point") -> dict[int, str]:
    """Every point's label of a run, by point index (repetitions share their point's label)."""
    out: dict[int, str] = {}
    for p in points:
        if p["point"] not in out:
            out[p["point"]] = label_of(run, p, default)
    return out
