"""The researcher's API: a scenario loaded from YAML or built in code, overridden, validated, run
with progress, and its results as pandas DataFrames with the run's metadata (docs/api.md).

    import catnip
    sweep = catnip.load("quick", set=["topology.clients=4"], seed=2)   # validated, as `catnip run` checks
    run = catnip.run(sweep)                                            # the same runner as `catnip run`
    run.table("page_time")                                             # one row per page, metadata first
    run.set_note("re-run after the window-probe fix")                  # a free-text note, kept with the run
    catnip.runs()                                                      # every run of the database

`catnip run` is this module's `start` with a progress bar and an exit code; what either refuses,
both refuse with the same words (controller/validate.py's `Refused`).
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from catnip.controller import validate as validate_mod
from catnip.results import run_notes
from catnip.spec import scenario as scenario_mod
from catnip.testbed import paths

if TYPE_CHECKING:
    import pandas

    from catnip.results.store import Store
    from catnip.testbed.capabilities import Capabilities

Sweep = scenario_mod.Sweep
Refused = validate_mod.Refused
# A note not taken (results/run_notes.py): NotText (also a TypeError), EmptyNote, NoteTooLong, UnknownRun.
NoteError = run_notes.NoteError
# pandas dtypes for the column kinds of the database and the tidy tables (results/tidy.py).
_DTYPES = {"INTEGER": "Int64", "REAL": "float64", "TEXT": "string", "BOOLEAN": "boolean"}


def scenario_file(raw: dict[str, Any], folder: Path | None = None) -> Path:
    """A scenario built in code, written where a run can name it: `data/scenarios/NAME-HASH.yaml`
    (the hash of its text, so the same scenario is the same file and a run's `source` is kept)."""
    if not isinstance(raw, dict):
        raise Refused(f"a scenario is a mapping of fields, got {type(raw).__name__}")
    text = yaml.safe_dump(raw, sort_keys=False)
    name = str(raw.get("name") or "scenario")
    validate_mod.check_run_id(name)  # the name becomes a file name and part of run ids
    folder = folder or paths.database().parent / "scenarios"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"
    if not path.exists():
        path.write_text(text)
    return path


def load(scenario: str | Path | dict[str, Any], *, set: Iterable[str] = (), seed: int | None = None,
         only: Iterable[str] = ()) -> Sweep:
    """A scenario file (or a name in scenarios/, or a dict) read, overridden (`set`: `KEY=VALUE` as
    `--set` takes them), validated and expanded into its sweep points; Refused otherwise."""
    if not isinstance(scenario, (str, Path, dict)):
        raise Refused(f"a scenario is a file, a name in scenarios/ or a mapping of fields, got {type(scenario).__name__}")
    source = scenario_file(scenario) if isinstance(scenario, dict) else validate_mod.scenario_path(str(scenario))
    return validate_mod.load(str(source), tuple(set), seed, tuple(only))


def prepare(sweep: Sweep, jobs: int = 1, on_this_machine: bool = True) -> Capabilities:
    """Everything `catnip run` refuses before a run starts, checked in its order (the scenario, the
    CPUs for placement, another run on this machine, this machine's kernel); the probed machine.
    Refused (exit 2 in the CLI) for the scenario and its options, ClickException (exit 1) for the
    machine; `on_this_machine` False (a cluster run) leaves another run here alone."""
    import click

    problems = validate_mod.run_problems(sweep, jobs)
    if problems:
        raise Refused("\n".join(problems))
    from catnip.controller import runner, skeleton
    from catnip.testbed import placement
    from catnip.testbed.capabilities import probe
    for kind in {sc.run.placement for _, sc in sweep.points}:
        try:
            placement.plan(kind)  # split needs two CPUs this process may use: said before a run starts
        except placement.PlacementError as exc:
            raise Refused(str(exc)) from None
    # Before probing: the probe builds a throwaway namespace, which a running experiment need not share
    # its CPU with. Said again by runner.run if a run takes the lock meanwhile.
    if on_this_machine and skeleton.machine_busy():
        from catnip.testbed.cleanup import run_in_progress
        raise click.ClickException(f"another catnip run is using this machine ({run_in_progress()}); wait for it"
                                   " or stop it")
    caps = probe()
    problems = caps.blocking_problems()
    if problems:
        raise click.ClickException("this machine cannot run scenarios (see `catnip check`): " + "; ".join(problems))
    if jobs > 1:
        from catnip.controller import parallel
        try:
            parallel.check_isolatable(sweep, caps)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--jobs") from None
    missing = runner.machine_problems([s for _, s in sweep.points], caps)
    if missing:
        raise Refused(missing[0])
    return caps


def _store(db: str | Path | None) -> Store:
    from catnip.results.store import Store
    return Store(db or paths.database())


def run(scenario: Sweep | str | Path | dict[str, Any], *, set: Iterable[str] = (), seed: int | None = None,
        only: Iterable[str] = (), db: str | Path | None = None, jobs: int = 1, progress: bool = True,
        run_id: str | None = None) -> Run:
    """Run a scenario (a loaded sweep, a file, a name in scenarios/ or a dict) on this machine, as
    `catnip run` does, into `db` (default data/catnip.db); a bar per point on standard error when
    `progress`. Returns the run, whatever its status: look at `run.status` (only `done` is a
    complete run) and each point's `realtime_ok`."""
    sweep = scenario if isinstance(scenario, Sweep) else load(scenario, set=set, seed=seed, only=only)
    if isinstance(scenario, Sweep) and (tuple(set) or seed is not None or tuple(only)):
        raise Refused("set, seed and only apply to a scenario being loaded: give them to catnip.load")
    if run_id is not None:
        validate_mod.check_run_id(run_id)
    caps = prepare(sweep, jobs)
    from catnip.controller import runner, skeleton
    run_id = run_id or skeleton.new_run_id(sweep.name)
    with _store(db) as store:
        if store.run(run_id) is not None:
            raise Refused(f"run id {run_id}: already in {store.path}")
        with ProgressDisplay(enabled=progress) as display:
            runner.run(sweep, caps, store, progress=display.update, run_id=run_id, jobs=jobs)
        return Run(run_id, Path(store.path))


class ProgressDisplay:
    """A rich progress bar per point on standard error (pages done of total, elapsed, bottleneck
    state), or a plain line every 10 s when standard error is not a terminal; `catnip run` and
    `run` here draw the same."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self.plain = enabled and not self.enabled
        self._progress = None
        self._tasks: dict[int, int] = {}
        self._last_plain = 0.0

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("{task.fields[unit]}"), TimeElapsedColumn(),
                                      TextColumn("{task.fields[info]}"),
                                      transient=False)
            self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        if self._progress:
            self._progress.__exit__(*exc)

    def update(self, p) -> None:
        info = p.phase + (f" ({p.detail})" if p.detail else "")
        if p.bottleneck:
            info += f" | queue {p.bottleneck.get('queue_pkts')} pkts, drops {p.bottleneck.get('dropped')}"
        if self._progress:
            if p.point not in self._tasks:
                self._tasks[p.point] = self._progress.add_task(
                    f"point {p.point + 1}/{p.points} {p.label}", total=p.pages_total or None, info=info, unit=p.unit)
            self._progress.update(self._tasks[p.point], completed=p.pages_done, total=p.pages_total or None,
                                  info=info, unit=p.unit)
        elif self.plain and time.monotonic() - self._last_plain > 10:
            self._last_plain = time.monotonic()
            count = f"{p.pages_done}/{p.pages_total}" if p.pages_total else str(p.pages_done)  # 0: open-ended
            click.echo(f"  point {p.point + 1}/{p.points} [{p.label}] {count} {p.unit},"
                       f" {p.elapsed:.0f} s, {info}", err=True)


def _frame(columns: list[tuple[str, str]], rows: list[dict[str, Any]]) -> pandas.DataFrame:
    import pandas
    frame = pandas.DataFrame.from_records(rows, columns=[c for c, _ in columns])
    return frame.astype({c: _DTYPES[k] for c, k in columns if k in _DTYPES})


def runs(db: str | Path | None = None) -> pandas.DataFrame:
    """Every run of the database, newest first: id, scenario name and file, status, seed, git
    revision, start and end (UTC), points and how many kept real time, and its note (or NA)."""
    import pandas
    with _store(db) as store:
        rows = []
        for r in store.runs():
            points = store.points(r["id"])
            rows.append({"run_id": r["id"], "scenario": r["name"], "source": r["source"], "status": r["status"],
                         "seed": r["seed"], "git_rev": r["git_rev"],
                         "started": pandas.to_datetime(r["started"], unit="s", utc=True, errors="coerce"),
                         "finished": pandas.to_datetime(r["finished"], unit="s", utc=True, errors="coerce"),
                         "points": len(points), "points_realtime": sum(1 for p in points if p["realtime_ok"]),
                         "note": run_notes.note_of(r)})
    frame = pandas.DataFrame(rows, columns=["run_id", "scenario", "source", "status", "seed", "git_rev", "started",
                                            "finished", "points", "points_realtime", "note"])
    return frame.astype({"note": "string"})


def open_run(run_id: str, db: str | Path | None = None) -> Run:
    """A run already in the database (KeyError naming the database if it is not there)."""
    validate_mod.check_run_id(run_id)
    with _store(db) as store:
        if store.run(run_id) is None:
            raise KeyError(f"no run {run_id!r} in {store.path}")
        return Run(run_id, Path(store.path))


@dataclass(frozen=True)
class Run:
    """A stored run: its status, points and tidy tables as DataFrames (results/tidy.py's tables: one
    row per sample, the run's metadata first), and any report layout as a DataFrame."""

    id: str
    db: Path

    @property
    def status(self) -> str:
        with _store(self.db) as store:
            return store.run(self.id)["status"]

    @property
    def note(self) -> str | None:
        """The run's free-text note, None when it has none."""
        with _store(self.db) as store:
            run = store.run(self.id)
            if run is None:
                raise run_notes.UnknownRun(f"no run {self.id!r} in {store.path}")
            return run_notes.note_of(run)

    def set_note(self, text: str) -> str:
        """Sets the run's note (replacing any), as `catnip note RUN TEXT` does; returns it as stored
        (line ends as \\n, blanks around it off). NoteError when it is not taken: not a string
        (NotText, also a TypeError), empty (EmptyNote: `clear_note` removes a note), longer than
        run_notes.MAX_CHARS characters (NoteTooLong), a control character other than tab and line
        end; UnknownRun when the run is not in its database."""
        with _store(self.db) as store:
            try:
                return run_notes.set_note(store, self.id, text)
            except run_notes.EmptyNote as exc:
                raise run_notes.EmptyNote(f"{exc}: Run.clear_note() removes a run's note") from None

    def clear_note(self) -> bool:
        """Removes the run's note; returns whether it had one."""
        with _store(self.db) as store:
            return run_notes.clear_note(store, self.id)

    def tables(self) -> list[str]:
        """The names `table` takes: `points`, `page_time`, `queue`, ..., `APP.METRIC`."""
        from catnip.results import tidy
        with _store(self.db) as store:
            return list(tidy.tables(store, self.id))

    def table(self, name: str) -> pandas.DataFrame:
        from catnip.results import tidy
        with _store(self.db) as store:
            found = tidy.tables(store, self.id)
        if name not in found:
            raise KeyError(f"run {self.id} has no table {name!r}; it has: {', '.join(found)}")
        return _frame(*found[name])

    def points(self) -> pandas.DataFrame:
        """One row per point: label, seed, status, real-time verdict, sweep assignment."""
        return self.table("points")

    def layout(self, name: str, *others: Run | str) -> pandas.DataFrame:
        """A report layout (`catnip report --layouts`) of this run and `others`, as `catnip report
        RUN --layout NAME` builds it; the paper and the columns' units in `.attrs`."""
        import pandas

        from catnip.results import layouts
        import catnip.papers  # noqa: F401 (registers the papers' layouts: papers/__init__.py)
        ids = (self.id, *(o.id if isinstance(o, Run) else o for o in others))
        with _store(self.db) as store:
            table = layouts.build(name, store, *ids)
        frame = pandas.DataFrame(table.records(), columns=[c.name for c in table.columns])
        frame.attrs.update(layout=table.layout, title=table.title, paper=table.paper, run_ids=list(table.run_ids),
                           units={c.name: c.unit for c in table.columns if getattr(c, "unit", None)})
        return frame
