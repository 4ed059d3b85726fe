"""Scenario files: schema, loading, overrides and sweep expansion.

A scenario YAML file plus a seed fully determines a run. Loading goes
raw YAML -> `--set` overrides applied to the raw mapping -> validation -> one resolved
`Scenario` per sweep point. Every validation error names the field, the bad value and what
is allowed (`ScenarioError`).
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (BaseModel, ConfigDict, Field, SerializeAsAny, StringConstraints, ValidationError,
                      field_validator, model_validator)

from spec import units
from spec.graph import Graph, kernel_problem, kernel_qdiscs
from spec.policy import DropTail, PolicySpec
from topologies import LIBRARY
from workloads.apps.base import AppSpec, parse_spec

TopologySpec = Annotated[Union[LIBRARY], Field(discriminator="kind")]


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message is meant for the user, one problem a line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RouterSpec(_Strict):
    """The queue policy of every router egress queue whose link does not name its own."""
    policy: PolicySpec = DropTail()


class TcpSpec(_Strict):
    """TCP settings applied in every host's namespace."""

    congestion_control: str = Field(default="cubic", pattern=r"^[a-z0-9_]{1,16}$")
    server_congestion_control: list[Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,15}$")]] | None = Field(
        default=None, min_length=1,
        description="per server (server i uses entry i mod length), e.g. [catnip_reno, catnip_eca]; "
                    "default: congestion_control")

    def server_cc(self, index: int) -> str:
        ccs = self.server_congestion_control
        return ccs[index % len(ccs)] if ccs else self.congestion_control

    def all_cc(self) -> set[str]:
        return {self.congestion_control, *(self.server_congestion_control or [])}
    sack: bool = True
    timestamps: bool = True
    initial_cwnd: int | None = Field(default=None, ge=1, le=100,
                                     description="route initcwnd; None keeps the Linux default (10)")


class MarkingSpec(_Strict):
    """Selective Packet Marking at the servers (CATNIP III-B), by eBPF (bpf/spm.bpf.c, docs/spm.md)."""

    spm: bool = Field(default=False, description="mark the servers' TCP segments AF11 (high) / AF12 (low)")
    first: bool = Field(default=True, description="the first 3 segments of each document are high")
    last: bool = Field(default=True, description="the last 3 too; false is the paper's partial SPM (V-G)")
    small_cwnd: bool = Field(default=True, description="segments sent while cwnd < 4 are high")
    scope: Literal["document", "connection"] = Field(
        default="document", description="first/last segments of each document, or of the connection (V-F)")
    control: Literal["high", "low", "unmarked"] = Field(
        default="high", description="segments without payload (SYN-ACK, ACK, FIN)")
    retransmissions: Literal["position", "high", "low"] = Field(
        default="position", description="retransmitted segments: by the same rules as new ones, or always high/low")

    @model_validator(mode="after")
    def _something_marked(self) -> "MarkingSpec":
        if self.spm and not (self.first or self.last or self.small_cwnd):
            raise ValueError("spm: true with first, last and small_cwnd all false would mark nothing high")
        return self


class RunSpec(_Strict):
    time_limit: float = Field(default=900.0, description="a sweep point still running after this is stopped")
    capture: bool = Field(default=False, description="tcpdump (headers only) at the bottleneck")
    late_threshold: float = Field(default=0.001, description="engine wake-ups later than this count as late")
    max_late_fraction: float = Field(default=0.001, ge=0, le=1,
                                     description="more late events than this fraction flags the run as not real time")
    repetitions: int = Field(default=1, ge=1, le=100)
    engine_spin: float = Field(default=0.0002, le=0.01,
                               description="the engine polls without sleeping this long before each event")
    link_backend: Literal["engine", "kernel"] = Field(
        default="engine", description="who emulates the router links: the queue engine, or the kernel's tc"
                                      " qdiscs where the kernel has them (netem, red; docs/architecture.md)")

    @field_validator("time_limit", "late_threshold", "engine_spin", mode="before")
    @classmethod
    def _durations(cls, v: Any) -> float:
        return units.parse_duration(v)


class Scenario(_Strict):
    """One fully resolved configuration: what a single sweep point runs."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: str = ""
    paper: str = Field(default="", description="paper and section the scenario reproduces")
    seed: int = Field(default=1, ge=0, le=2**31 - 1)
    topology: TopologySpec
    router: RouterSpec = RouterSpec()
    tcp: TcpSpec = TcpSpec()
    marking: MarkingSpec = MarkingSpec()
    applications: list[SerializeAsAny[AppSpec]] = Field(min_length=1, max_length=32)
    run: RunSpec = RunSpec()

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, raw: Any) -> Any:
        return normalise(raw)[0]

    @field_validator("applications", mode="before")
    @classmethod
    def _applications(cls, v: Any) -> Any:
        if not isinstance(v, list):
            return v
        return [parse_spec(a) for a in v]

    @model_validator(mode="after")
    def _applications_fit_the_graph(self) -> "Scenario":
        graph = self.graph()
        names = graph.group_names()
        seen = set()
        for i, app in enumerate(self.applications):
            for field_name in ("clients", "servers"):
                group = getattr(app, field_name)
                if group is not None and not graph.groups_named(group):
                    raise ValueError(f"applications.{i}.{field_name}: no host group or role {group!r} in the"
                                     f" topology (it has: {', '.join(names)})")
            planned = app.planned_seconds()
            if planned and planned[1] > self.run.time_limit:
                raise ValueError(f"applications.{i}.{planned[0]}: the planned {planned[1]:g} s do not fit in"
                                 f" run.time_limit ({self.run.time_limit:g} s)")
            if app.instance in seen:
                raise ValueError(f"applications.{i}.name: {app.instance!r} is used twice; give each a name")
            seen.add(app.instance)
        # Every link direction must give the engine (or the kernel) a queue it can build: checked
        # here, so nothing is started for a scenario that would fail while its network is built.
        subnets = graph.subnets()
        for where, d in graph.directions(self.router.policy):
            try:
                d.policy.engine_config(d.buffer)
                for e in d.edge:
                    e.engine_config(subnets)
            except ValueError as exc:
                raise ValueError(f"topology.{where}: {exc}") from None
            problem = kernel_problem(d) if self.run.link_backend == "kernel" and where.startswith("links.") else None
            if problem:
                raise ValueError(f"topology.{where}: {problem}")
        if self.run.capture and not any(link.role == "bottleneck" for link in graph.links):
            raise ValueError("run.capture: the topology has no link with role 'bottleneck' to capture at")
        return self

    def graph(self) -> Graph:
        return self.topology.graph()

    def kernel_qdiscs(self) -> set[str]:
        """The qdiscs `run.link_backend: kernel` needs for this scenario's router links."""
        return set().union(*(kernel_qdiscs(d) for where, d in self.graph().directions(self.router.policy)
                             if where.startswith("links.")))

    @property
    def workload(self) -> Any:
        """The web application (the `workload:` short form), or None."""
        return self.app("web")

    def app(self, kind: str) -> AppSpec | None:
        """The first application of a kind (CATNIP's reports read the web sessions)."""
        return next((a for a in self.applications if a.kind == kind), None)


class Sweep(BaseModel):
    """A scenario file after loading: its points (one per combination of swept values)."""

    model_config = ConfigDict(frozen=True)
    name: str
    source: str
    raw: dict[str, Any]
    sweep: dict[str, list[Any]]
    points: list[tuple[dict[str, Any], Scenario]]


def point_label(assignment: dict[str, Any], default: str = "") -> str:
    """How a sweep point is named everywhere: `topology.bottleneck.buffer=64KB, ...`."""
    return ", ".join(f"{k}={v}" for k, v in assignment.items()) or default


def _set_path(raw: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = raw
    for i, key in enumerate(keys[:-1]):
        nxt = node.get(key)
        if nxt is None:
            nxt = node[key] = {}
        if not isinstance(nxt, dict):
            raise ScenarioError(f"{'.'.join(keys[:i + 1])}: is {nxt!r}, not a section, so '{dotted}' cannot be set")
        node = nxt
    node[keys[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """`key.path=value`, the value read as a YAML scalar or flow collection."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(f"--set {text!r}: expected key=value, e.g. topology.clients=20")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError as exc:
        raise ScenarioError(f"--set {text!r}: value is not valid YAML ({exc.problem})") from None
    return key.strip(), parsed


def _format_errors(exc: ValidationError, prefix: str = "") -> str:
    lines = []
    for err in exc.errors():
        parts = []
        for i, p in enumerate(err["loc"]):
            # A tagged union puts the chosen tag in the location (`router.policy.red.min_th`): drop it.
            if isinstance(p, str) and i > 0 and str(err["loc"][i - 1]) == "topology" and (
                    p in {t.model_fields["kind"].default for t in LIBRARY}):

                continue
            if isinstance(p, str) and "[" in p:  # pydantic's name of a validator-wrapped union member
                continue
            if p in ("mark", "police", "shape") and i > 1 and err["loc"][i - 2] == "edge":  # edge.0.mark.rules
                continue
            parts.append(str(p))
        loc = ".".join(parts)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "union_tag_invalid":
            loc = f"{loc}.kind" if loc else "kind"
            msg = f"{err['ctx']['tag']!r} not allowed: {err['ctx']['expected_tags'].replace(chr(39), '')}"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; see docs/scenarios.md for the fields)"
        elif err["type"] == "literal_error":
            msg = f"{err['input']!r} not allowed: {msg.removeprefix('Input should be ')}"
        elif "input" in err and err["type"] not in ("missing", "value_error"):
            msg = f"{err['input']!r}: {msg}"
        if not loc and msg.split(":")[0].split(".")[0] in Scenario.model_fields:
            lines.append(f"{prefix}{msg}")  # a check of the whole scenario that names its field itself
        else:
            lines.append(f"{prefix}{loc or '(top level)'}: {msg}")
    return "\n".join(lines)


def normalise(raw: Any) -> tuple[Any, bool]:
    """The short forms of CATNIP's scenarios: `workload:` is the web application between the groups
    `clients` and `servers`, and `topology.kind` defaults to CATNIP's dumbbell. Returns the raw
    mapping with the long forms, and whether `workload:` was used."""
    if not isinstance(raw, dict):
        return raw, False
    raw = dict(raw)
    if isinstance(raw.get("topology"), dict) and "kind" not in raw["topology"]:
        raw["topology"] = {"kind": "dumbbell", **raw["topology"]}
    workload = raw.pop("workload", None)
    short = workload is not None or "applications" not in raw
    if short:
        if "applications" in raw:
            raise ScenarioError("workload and applications: give one (workload is the short form of"
                                " applications: [{kind: web, clients: clients, servers: servers, ...}])")
        if workload is not None and not isinstance(workload, dict):
            raise ScenarioError(f"workload: a mapping of the web application's fields, got {workload!r}")
        raw["applications"] = [{"kind": "web", "clients": "clients", "servers": "servers", **(workload or {})}]
    return raw, short


def validate(raw: dict[str, Any], context: str = "") -> Scenario:
    raw, short = normalise(raw)
    # Each application is checked by its own plug-in's schema first, so errors name its fields.
    apps = raw.get("applications") if isinstance(raw, dict) else None
    if isinstance(apps, list):
        problems, parsed = [], []
        for i, app in enumerate(apps):
            where = "workload." if short else f"applications.{i}."
            try:
                parsed.append(parse_spec(app))
            except ValidationError as exc:
                problems.append(_format_errors(exc, context + where).replace(f"{where}(top level)", where.rstrip(".")))
            except ValueError as exc:
                problems.append(f"{context}{where.rstrip('.')}: {exc}")
        if problems:
            raise ScenarioError("\n".join(problems))
        raw = {**raw, "applications": parsed}
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(_format_errors(exc, context)) from None


def load(path: str | Path, overrides: list[str] = (), seed: int | None = None) -> Sweep:
    """Read, override, validate and expand a scenario file. Raises ScenarioError."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ScenarioError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping of fields, got {type(raw).__name__}")
    raw = copy.deepcopy(raw)
    raw.setdefault("name", path.stem)
    for text_override in overrides:
        key, value = parse_override(text_override)
        if key.startswith("sweep."):
            # Sweep keys are dotted paths themselves: `--set sweep.topology.bottleneck.buffer=[64KB]`.
            sweep_map = raw.get("sweep") if isinstance(raw.get("sweep"), dict) else {}
            raw["sweep"] = {**sweep_map, key.removeprefix("sweep."): value}
        else:
            _set_path(raw, key, value)
    if seed is not None:
        raw["seed"] = seed
    sweep = raw.pop("sweep", None) or {}
    if not isinstance(sweep, dict) or not all(isinstance(v, list) and v for v in sweep.values()):
        raise ScenarioError("sweep: must map field paths to non-empty lists of values, "
                            "e.g. {topology.bottleneck.buffer: [64KB, 512KB]}")
    points = []
    keys = list(sweep)
    for combo in itertools.product(*(sweep[k] for k in keys)):
        point_raw = copy.deepcopy(raw)
        assignment = dict(zip(keys, combo))
        for key, value in assignment.items():
            _set_path(point_raw, key, value)
        label = point_label(assignment)
        points.append((assignment, validate(point_raw, f"[sweep {label}] " if label else "")))
    return Sweep(name=raw["name"], source=str(path), raw=raw, sweep=sweep, points=points)
