"""Reading the dashboard's forms: every value is checked here before anything acts on it.

A run request names a scenario file of `scenarios/` (by name, never a path), overrides in the
CLI's `key=value` form (validated by the same schema as `catnip run --set`), and an optional seed.
Errors are keyed by form field so the page can show each next to its input.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from catnip.controller import validate as validate_mod
from catnip.results.compare import split_run_ids
from catnip.results import run_ids as run_id_check
from catnip.spec import bounded
from catnip.spec import scenario as scenario_mod

SCENARIO_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
OVERRIDE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")
MAX_OVERRIDES = 40
MAX_OVERRIDE_LEN = 400


@dataclass
class ScenarioFile:
    name: str
    path: Path
    description: str
    paper: str
    points: int
    error: str | None


def scenario_files(directory: Path) -> list[ScenarioFile]:
    """Every scenario file with what the page shows of it; an invalid file is listed with its
    error, read through the same bounds as `catnip validate` (a FIFO, a huge or hostile file
    cannot hang the page), and a file that breaks the checker itself is listed, not a 500."""
    out = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            sweep = validate_mod.load(str(path))
            first = sweep.points[0][1]
            out.append(ScenarioFile(path.stem, path, first.description, first.paper, len(sweep.points), None))
        except validate_mod.Refused as exc:
            out.append(ScenarioFile(path.stem, path, _description(path), "", 0, exc.message))
        except Exception as exc:  # noqa: BLE001 - one file's bug must not take the page down
            out.append(ScenarioFile(path.stem, path, "", "", 0, bounded.shorten(
                f"could not be checked ({type(exc).__name__}: {exc}); `catnip validate {path}` says more")))
    return out


def transfer_files(directory: Path) -> list[ScenarioFile]:
    """The transfer measurements (scenarios/transfers/*.yaml: `catnip model measure`, not the
    form's `catnip run`), each with what the scenario page shows or why it does not validate."""
    from catnip.spec import transfer
    out = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            sc = transfer.load(path)
            out.append(ScenarioFile(path.stem, path, sc.description, sc.paper, len(sc.points()), None))
        except scenario_mod.ScenarioError as exc:
            out.append(ScenarioFile(path.stem, path, _description(path), "", 0, bounded.shorten(str(exc))))
        except Exception as exc:  # noqa: BLE001 - one file's bug must not take the page down
            out.append(ScenarioFile(path.stem, path, "", "", 0, bounded.shorten(
                f"could not be checked ({type(exc).__name__}: {exc})")))
    return out


def _description(path: Path) -> str:
    """The description of a file the schema refused, if it can be read within the bounds."""
    try:
        raw = bounded.load_yaml(bounded.read_text(path), str(path))
    except (ValueError, yaml.YAMLError):  # bounded.InputError is a ValueError
        return ""
    return bounded.shorten(str(raw.get("description", "")), 500) if isinstance(raw, dict) else ""


@dataclass
class RunRequest:
    scenario: Path
    overrides: list[str]
    seed: int | None
    sweep: scenario_mod.Sweep
    jobs: int = 1


def parse_run_request(form: Mapping[str, Any], directory: Path) -> tuple[RunRequest | None, dict[str, str]]:
    """(request, {}) when valid, else (None, {field: message})."""
    errors: dict[str, str] = {}
    name = str(form.get("scenario", "")).strip()
    path = directory / f"{name}.yaml"
    if not SCENARIO_NAME.fullmatch(name) or not path.is_file():
        known = ", ".join(p.stem for p in sorted(directory.glob("*.yaml")))
        errors["scenario"] = f"unknown scenario {name!r}; choose one of: {known}"
    seed_text = str(form.get("seed", "")).strip()
    seed = None
    if seed_text:
        if not re.fullmatch(r"\d{1,10}", seed_text) or int(seed_text) > 2**31 - 1:
            errors["seed"] = f"{bounded.short(seed_text)} is not a seed: a whole number from 0 to {2**31 - 1}"
        else:
            seed = int(seed_text)
    jobs_text = str(form.get("jobs", "")).strip() or "1"
    jobs = 1
    cores = os.cpu_count() or 1
    if not re.fullmatch(r"\d{1,3}", jobs_text) or not 1 <= int(jobs_text) <= cores:
        errors["jobs"] = f"{jobs_text[:20]!r} points at once: a whole number from 1 to {cores} (this machine's cores)"
    else:
        jobs = int(jobs_text)
    overrides = [line.strip() for line in str(form.get("overrides", "")).splitlines() if line.strip()]
    if len(overrides) > MAX_OVERRIDES:
        errors["overrides"] = f"at most {MAX_OVERRIDES} overrides, got {len(overrides)}"
    for i, line in enumerate(overrides, 1):
        key, sep, _ = line.partition("=")
        if len(line) > MAX_OVERRIDE_LEN or not sep or not OVERRIDE_KEY.fullmatch(key.strip()):
            errors["overrides"] = (f"line {i} {line[:80]!r}: write key=value with a dotted field path,"
                                   " e.g. topology.clients=20 or sweep.topology.bottleneck.buffer=[64KB, 512KB]")
            break
    if errors:
        return None, errors
    try:  # the path of `catnip validate` and `catnip run`: the same checks, the same words
        sweep = validate_mod.load(str(path), overrides, seed)
        problems = validate_mod.run_problems(sweep, jobs)
    except validate_mod.Refused as exc:
        return None, {"overrides": exc.message}
    if problems:
        return None, {"jobs": "; ".join(problems)}
    return RunRequest(path, overrides, seed, sweep, jobs), {}


def run_ids(values: list[str]) -> list[str]:
    """Run ids from a query string, checked for shape by the one run-id check (results/run_ids.py;
    existence is the caller's business)."""
    why = next((w for v in values if (w := run_id_check.problem(v)) is not None), None)
    if why is not None:
        raise ValueError(f"run={why}")
    return list(dict.fromkeys(values))


def point_index(value: str | None) -> int:
    """A pooled point to compare with (`?against=`): a small non-negative integer, 0 if absent."""
    if value in (None, ""):
        return 0
    if not value.isdigit() or len(value) > 3:
        raise ValueError(f"against must be a point number such as 0 or 2, not {value[:20]!r}")
    return int(value)


@dataclass
class CompareRequest:
    """What `/compare` was asked: each side a run or runs pooled (`A+B`, as `catnip compare`
    takes them), the side to divide by if chosen (else the oldest), whether ticked runs of one
    scenario with the same settings but the seed are pooled, and whether only real-time points count."""
    groups: list[list[str]]
    baseline: list[str] | None
    pool_seeds: bool
    realtime_only: bool


MAX_COMPARED = 50  # runs on one compare page: each is read in full


def _run_group(value: str, what: str) -> list[str]:
    # A '+' typed into a URL's query arrives as a space; run ids have no spaces, so it is read as '+'.
    try:
        ids = split_run_ids(value.replace(" ", "+"))
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    why = next((w for i in ids if (w := run_id_check.problem(i)) is not None), None)
    if why is not None:
        raise ValueError(f"{what}: {why}; join runs to pool with '+'")
    return ids


def _flag(args: Mapping[str, Any], name: str, on: str) -> bool:
    value = args.get(name, "")
    if value not in ("", on):
        raise ValueError(f"{name} is {on!r} or left out, not {str(value)[:20]!r}")
    return value == on


def compare_request(args: Any) -> CompareRequest:
    """The query of `/compare`: `run` (repeatable; a run id, or ids joined by '+' to pool them),
    `baseline` (one of the `run` values or a run in one of them), `pool=seeds`, `realtime_only=1`.
    `args` is a MultiDict (request.args). Raises ValueError naming what was wrong."""
    groups: list[list[str]] = []
    for value in args.getlist("run"):
        ids = _run_group(value, f"run={value[:100]!r}")
        if ids in groups:  # the same run ticked twice is the same side
            continue
        twice = next((i for i in ids for g in groups if i in g), None)
        if twice is not None:
            raise ValueError(f"run {twice} is in two of the compared sides: a run's pages can count on one side only")
        groups.append(ids)
    if sum(map(len, groups)) > MAX_COMPARED:
        raise ValueError(f"at most {MAX_COMPARED} runs on one compare page, got {sum(map(len, groups))}")
    base = args.get("baseline", "")
    baseline = _run_group(base, f"baseline={base[:100]!r}") if base else None
    if baseline is not None:
        known = [i for g in groups for i in g]
        missing = next((i for i in baseline if i not in known), None)
        if missing is not None:
            raise ValueError(f"baseline {missing} is not one of the compared runs: "
                             + ", ".join("+".join(g) for g in groups))
    return CompareRequest(groups, baseline, _flag(args, "pool", "seeds"), _flag(args, "realtime_only", "1"))
