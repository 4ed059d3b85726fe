"""`catnip validate`: what `catnip run` checks before it touches the machine, without touching it.

One path for every way a scenario arrives: `catnip validate`, `catnip run` (before it prints a
run id or opens the database) and the dashboard's form (webui/forms.py) load it through `load`
here, so a scenario refused by one is refused by all, in the same words. Nothing here creates a
namespace, a database, a run id or a run folder; reading /proc for the congestion controls the
kernel offers is the only look at the machine. What only the machine can tell (qdiscs, OVS,
root) is listed as needs and checked by `catnip run` against `catnip check`'s probe.

Every refusal is a `Refused`: one short line (a few for several schema problems), exit code 2.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import click
import yaml

from catnip.results.store import RUN_ID
from catnip.spec import bounded
from catnip.spec import scenario as scenario_mod
from catnip.testbed.paths import REPO


class Refused(click.ClickException):
    """An input `catnip run` or `catnip validate` will not take: exit code 2, no traceback."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(bounded.bound_message(message))


class BoundedInt(click.ParamType):
    """An integer option whose refusal echoes at most a few dozen characters of what was given
    (click's own `int` quotes it whole: a 5,000-digit seed made a 5,061-character line)."""

    name = "integer"

    def __init__(self, low: int | None = None, high: int | None = None):
        self.low, self.high = low, high

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip()
            if len(text) > bounded.MAX_INT_DIGITS + 1 or not re.fullmatch(r"[-+]?[0-9]+", text):
                self.fail(f"{bounded.short(text)} is not an integer of at most {bounded.MAX_INT_DIGITS} digits",
                          param, ctx)
            number = int(text)
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            self.fail(f"{number} is not in {self.low}-{self.high}", param, ctx)
        return number


SEED = BoundedInt()  # the scenario's schema says which seeds it takes


def check_run_id(run_id: str) -> None:
    """A run id names a folder (data/runs/ID): the store's shape, and not '.', '..' or a hidden name."""
    if not RUN_ID.fullmatch(run_id) or run_id.startswith((".", "-")):
        raise Refused(f"--run-id {bounded.short(run_id[:120])}: letters, digits, '.', '_' and '-', at most 100,"
                      " starting with a letter or digit (it names the run's folder)")


def load(scenario_file: str, overrides: list[str] | tuple[str, ...] = (), seed: int | None = None,
         only: list[str] | tuple[str, ...] = ()) -> scenario_mod.Sweep:
    """The scenario's sweep, checked as `catnip run` checks it; Refused otherwise."""
    try:
        return scenario_mod.load(scenario_file, list(overrides), seed, list(only))
    except scenario_mod.ScenarioError as exc:
        message = str(exc).removeprefix(f"{scenario_file}: ")  # the file is named once
        raise Refused(f"invalid scenario {bounded.shorten(str(scenario_file), 120)}: {message}") from None
    except RecursionError:  # bounded.MAX_DEPTH keeps this from happening; say so plainly if it does
        raise Refused(f"invalid scenario {scenario_file}: nested too deeply to check") from None


def run_problems(sweep: scenario_mod.Sweep, jobs: int) -> list[str]:
    """What `catnip run --jobs N` refuses that needs no look at the machine."""
    out = []
    if jobs > 1 and any(sc.run.placement == "split" for _, sc in sweep.points):
        out.append(f"--jobs {jobs}: run.placement split gives the engines of every point the same CPUs, so the"
                   " points' engines would wait for each other: run with --jobs 1, or run.placement shared")
    return out


def machine_needs(sweep: scenario_mod.Sweep) -> list[str]:
    """The qdiscs the scenario needs of the kernel, which `catnip run` checks against its probe."""
    needs = set()
    for _, sc in sweep.points:
        needs.update(f"{qdisc} qdisc ({where})" for where, qdisc in sc.host_qdiscs().items())
        if sc.run.link_backend == "kernel":
            needs.update(f"{q} qdisc (run.link_backend: kernel)" for q in sc.kernel_qdiscs())
    return sorted(needs)


def describe(sweep: scenario_mod.Sweep, jobs: int = 1) -> dict:
    """What `catnip validate` prints: the resolved scenario (its first point) and the sweep's size."""
    first = sweep.points[0][1]
    reps = sorted({s.run.repetitions for _, s in sweep.points})
    return {"name": sweep.name, "source": sweep.source, "points": len(sweep.points),
            "repetitions": reps[0] if len(reps) == 1 else reps,
            "point_runs": sum(s.run.repetitions for _, s in sweep.points), "sweep": {k: [str(v) for v in vs] for k, vs in sweep.sweep.items()},
            "labels": [scenario_mod.point_label(a, "single point") for a, _ in sweep.points],
            "machine_needs": machine_needs(sweep), "jobs": jobs,
            "resolved": json.loads(first.model_dump_json())}


def _transfers(scenario_file: str, overrides: tuple[str, ...], seed: int | None) -> dict | None:
    """A `kind: transfers` file (`catnip model measure`) checked by its own schema; None for others."""
    from catnip.spec import transfer
    try:
        raw = bounded.load_yaml(bounded.read_text(scenario_file), scenario_file)
    except (ValueError, yaml.YAMLError):
        return None  # load() says what is wrong with it
    if not isinstance(raw, dict) or raw.get("kind") != "transfers":
        return None
    try:
        sc = transfer.load(scenario_file, list(overrides), seed)
    except scenario_mod.ScenarioError as exc:
        raise Refused(f"invalid transfer scenario {scenario_file}: {str(exc).removeprefix(scenario_file + ': ')}"
                      ) from None
    return {"name": sc.name, "source": scenario_file, "kind": "transfers", "points": len(sc.points()),
            "trials_per_point": sc.trials * len(sc.sizes_kb), "resolved": json.loads(sc.model_dump_json())}


SCENARIOS = REPO / "scenarios"


def scenario_path(arg: str, folder: Path = SCENARIOS) -> str:
    """The scenario file `arg` names: itself when it is a file or has a folder or an extension;
    else `folder`/ARG.yaml (or .yml), said on stderr; refused listing the names there if neither."""
    given = Path(arg)
    try:
        if "\0" in arg or given.exists() or given.suffix or len(given.parts) != 1:
            return arg  # a path: `load` reads it or says why not
    except OSError:  # a name too long for the file system, say: `load` says so
        return arg
    for ext in (".yaml", ".yml"):
        found = folder / f"{arg}{ext}"
        if found.is_file():
            try:
                shown = found.relative_to(Path.cwd())
            except ValueError:  # not under the current folder: the whole path
                shown = found
            click.echo(f"scenario {arg}: {shown}", err=True)
            return str(found)
    import difflib
    import textwrap
    names = sorted(x.stem for x in folder.glob("*.y*ml") if x.suffix in (".yaml", ".yml"))
    close = difflib.get_close_matches(arg, names, n=3)
    head = (f"no scenario {bounded.short(arg)}: no such file, nor such a name in {folder}"
            + (f" (did you mean {' or '.join(close)}?)" if close else "") + "; the names there:")
    # The names on lines of their own: each refusal line stays within bounded.MAX_LINE.
    raise Refused("\n".join([head, *textwrap.wrap(", ".join(names) or "none", 200)]))


@click.command(name="validate")
@click.argument("scenario_file", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="override a field, as `catnip run --set`")
@click.option("--seed", type=SEED, default=None, help="as `catnip run --seed`")
@click.option("--jobs", type=BoundedInt(1, os.cpu_count() or 1), default=1, help="check as for `catnip run --jobs N`")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def validate_cmd(scenario_file: str, overrides: tuple[str, ...], seed: int | None, jobs: int, as_json: bool) -> None:
    """Check SCENARIO_FILE as `catnip run` would, touching nothing: prints the resolved scenario
    (its first sweep point) and the sweep's size; exit 2 with one line per problem if refused.
    A `kind: transfers` file is checked as `catnip model measure` reads it."""
    scenario_file = scenario_path(scenario_file)
    measured = _transfers(scenario_file, overrides, seed)
    if measured is not None:
        click.echo(json.dumps(measured, indent=2) if as_json else
                   yaml.safe_dump(measured["resolved"], sort_keys=False).rstrip() +
                   f"\n# {measured['name']} ({scenario_file}): valid transfer measurement for `catnip model measure`;"
                   f" {measured['points']} point(s) (profiles x loss) of {measured['trials_per_point']} transfers")
        return
    sweep = load(scenario_file, overrides, seed)
    problems = run_problems(sweep, jobs)
    if problems:
        raise Refused("\n".join(problems))
    info = describe(sweep, jobs)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(yaml.safe_dump(info["resolved"], sort_keys=False).rstrip())
    click.echo(f"# {info['name']} ({info['source']}): valid")
    reps = info["repetitions"]
    reps = f"x {reps} repetition(s)" if isinstance(reps, int) else f"with {min(reps)}-{max(reps)} repetitions each"
    click.echo(f"# {info['points']} sweep point(s) {reps} = {info['point_runs']}"
               " point run(s)" + (f"; the resolved scenario above is point 0 of: {', '.join(info['sweep'])}"
                                  if info["sweep"] else ""))
    for i, label in enumerate(info["labels"] if info["sweep"] else []):
        click.echo(f"#   point {i}: {bounded.shorten(label, 200)}")
    if info["machine_needs"]:
        click.echo("# needs of the machine, checked by `catnip run` (see `catnip check`): "
                   + "; ".join(info["machine_needs"]))
