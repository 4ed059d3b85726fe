"""The `catnip` command: check, run, list, report, compare, clean, web, fig2 and the models.

Every command has a `short_help` that reads whole in `catnip --help` (click cuts a docstring's
first sentence at its first full stop, "CATNIP Fig." for "CATNIP Fig. 2: ...").
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

import click

from click.core import ParameterSource

from catnip.controller import validate as validate_mod
from catnip.spec import bounded
from catnip import api
from catnip.testbed import paths


def _store(db: str | None):
    from catnip.results.store import Store
    try:
        return Store(db or paths.database())
    except sqlite3.Error as exc:  # read-only or full disk, not a database: one line (results/store.py)
        raise click.ClickException(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option("0.1.0", prog_name="catnip")
def main() -> None:
    """CATNIP testbed: emulate the papers' networks on real Linux and reproduce their tables."""


@main.command(short_help="What this machine can run (kernel, OVS, BPF); exit 0 if ready.")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--brief", is_flag=True, help="one line")
@click.option("--references", "run_references", is_flag=True,
              help="also run each mechanism's reference tests (minutes) instead of only listing them")
def check(as_json: bool, brief: bool, run_references: bool) -> None:
    """What this machine can do; exit 0 if scenarios can run. Lists each emulated mechanism's
    independent reference (testbed/references.py) and its status."""
    from catnip.testbed.bpf_probe import probe_programs
    from catnip.testbed.capabilities import probe
    from catnip.testbed.references import reference_status
    caps = probe()
    references = reference_status(run=run_references)
    problems = caps.blocking_problems()
    from catnip.controller.skeleton import machine_busy
    programs: dict[str, str] = {}
    if caps.root and caps.bpf_btf and not brief:
        busy = "not probed: a run is using the machine"
        programs = {"spm": busy, "senders": busy} if machine_busy() else probe_programs()
    kinds = _engine_kinds() if caps.engine_binary else {}
    if as_json:
        click.echo(json.dumps({**caps.to_dict(), "bpf_programs": programs, "engine_kinds": kinds,
                               "references": [{"mechanism": m, "tests": t, "status": st} for m, t, st in references]},
                              indent=2))
    elif brief:
        click.echo("ready: link backends " + ",".join(caps.link_backends) + "; switches " +
                   ",".join(caps.access_switches) if not problems else "NOT ready: " + "; ".join(problems))
    else:
        yes = lambda b: click.style("yes", fg="green") if b else click.style("no", fg="red")  # noqa: E731
        click.echo(f"kernel {caps.kernel}   root: {yes(caps.root)}   network namespaces: {yes(caps.netns)}")
        click.echo("qdiscs: " + "  ".join(f"{q} {yes(v)}" for q, v in caps.qdiscs.items()))
        click.echo(f"NFQUEUE: {yes(caps.nfqueue)}   queue engine built: {yes(caps.engine_binary)}"
                   f" ({paths.engine_binary()})")
        if caps.engine_binary:
            edge = kinds.get("edge", [])
            click.echo("  engine edge functions: " + (", ".join(edge) or "unknown (an engine without `kinds`: rebuild)")
                       + "   TCP-friendly markers (tcpf, token_marker): "
                       + yes({"tcpf", "token_marker"} <= set(edge)))
        click.echo(f"Open vSwitch running: {yes(caps.ovs_running)}   kernel datapath: {yes(caps.ovs_kernel_datapath)}"
                   f"   userspace datapath: {yes(caps.ovs_userspace_datapath)}   Linux bridge: {yes(caps.linux_bridge)}")
        click.echo(f"BPF: BTF {yes(caps.bpf_btf)}   bpftool {yes(caps.tools.get('bpftool'))}"
                   f"   clang {yes(caps.tools.get('clang'))}   cgroup v2 {yes(caps.cgroup2)}")
        if programs:
            click.echo("BPF programs: SPM marker + document size " + _verdict(programs["spm"]))
            ccs = programs.get("congestion_controls")
            click.echo("  sender congestion controls (struct_ops, loaded through the verifier): " +
                       ("  ".join(f"{name} {_verdict(v)}" for name, v in ccs.items()) if ccs
                        else _verdict(programs["senders"])))
        click.echo(f"Mininet API: {yes(caps.mininet)}   tools: " +
                   "  ".join(f"{t} {yes(v)}" for t, v in caps.tools.items()))
        click.echo(f"link backends: {', '.join(caps.link_backends) or 'none'}"
                   f"   (kernel tc backend needs netem)   access switches: {', '.join(caps.access_switches) or 'none'}")
        click.echo("mechanisms checked against an independent reference (docs/engine.md; --references runs them):")
        for mechanism, _, status in references:
            colour = "red" if status.startswith(("none", "missing", "fails")) else "green"
            click.echo(f"  {mechanism}: " + click.style(status, fg=colour))
        if problems:
            click.echo(click.style("cannot run scenarios:", fg="red", bold=True))
            for p in problems:
                click.echo(f"  - {p}")
        else:
            click.echo(click.style("ready to run scenarios", fg="green", bold=True))
    sys.exit(1 if problems else 0)


def _engine_kinds() -> dict:
    """The policy and edge function kinds the built engine has (`catnip-engine kinds`); {} if it cannot say."""
    import subprocess
    try:
        out = subprocess.run([str(paths.engine_binary()), "kinds"], capture_output=True, text=True, timeout=10)
        return json.loads(out.stdout) if out.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}


def _verdict(text: str) -> str:
    return click.style("yes", fg="green") if text == "ok" else click.style(text, fg="red")


@main.command(name="run", short_help="Run a scenario file (or a name in scenarios/); prints the run id.")
@click.argument("scenario_file", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="override a field, e.g. --set topology.clients=20 (repeatable)")
@click.option("--seed", type=validate_mod.SEED, default=None, help="seed for every random choice of the run")
@click.option("--only", multiple=True, metavar="KEY=NAME",
              help="run only the sweep points with this value of sweep KEY (a scheme's name, a policy's kind, a"
                   " value as written), e.g. --only scheme=base-iw; repeatable: names of one key are alternatives")
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable summary at the end")
@click.option("--report/--no-report", default=False, help="print the report table after the run")
@click.option("--run-id", default=None, metavar="ID",
              help="use this id for the run (the dashboard picks ids before starting runs)")
@click.option("--jobs", type=validate_mod.BoundedInt(1, os.cpu_count() or 1), default=1, show_default=True,
              help="run up to this many sweep points side by side, each in namespaces of its own")
@click.option("--room", type=click.FloatRange(1, 100), default=50, show_default=True, metavar="PERCENT",
              help="with --jobs: start another point only while the machine's CPU is busy less than this")
@click.option("--settle", type=click.FloatRange(0, 3600), default=30, show_default=True, metavar="SECONDS",
              help="with --jobs: how long every running point must have run its workload before the room "
                   "is measured for another")
@click.option("--cluster", "cluster_address", default=None, metavar="ADDRESS",
              help="run the points on the workers of the Dask scheduler at ADDRESS (e.g. tls://127.0.0.1:8786;"
                   " `catnip cluster`), one point per worker machine at a time, recorded here")
@click.option("--tls-dir", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="with --cluster: the cluster's certificates (default <data dir>/cluster/tls; docs/cluster.md)")
@click.option("--retries", type=click.IntRange(0, 10), default=1, show_default=True,
              help="with --cluster: how often a point whose worker died is sent again")
@click.option("--resume", "resume_id", default=None, metavar="RUN_ID",
              help="with --cluster: take up this run of the same scenario and options again, running only its"
                   " points that are not done")
def run_cmd(scenario_file: str, overrides: tuple[str, ...], seed: int | None, only: tuple[str, ...], db: str | None,
            as_json: bool, report: bool, run_id: str | None, jobs: int, room: float, settle: float,
            cluster_address: str | None, tls_dir: Path | None, retries: int, resume_id: str | None) -> None:
    """Run SCENARIO_FILE; prints the run id. A bare name (no folder, no extension, not a file
    here), e.g. `quick`, is scenarios/quick.yaml of this repository."""
    # Everything refused is refused before a run id is printed or the database opened (exit 2).
    run_id = _checked_run_options(run_id, jobs, cluster_address, tls_dir, resume_id)
    scenario_file = scenario_path(scenario_file)
    sweep = validate_mod.load(scenario_file, overrides, seed, only)
    from catnip.controller import runner, skeleton
    from catnip.testbed.hostconfig import HostConfigError
    from catnip.testbed.sender import SenderError
    caps = api.prepare(sweep, jobs, on_this_machine=cluster_address is None)
    run_id = run_id or skeleton.new_run_id(sweep.name)
    if cluster_address is not None:
        _run_on_cluster(sweep, caps, Path(scenario_file), list(overrides), seed, db, run_id, cluster_address,
                        retries, resume_id is not None, as_json, report, tls_dir)
    if Path(db or paths.database()).exists():  # a database is created only for a run that starts
        with _store(db) as existing:
            if existing.run(run_id) is not None:
                raise validate_mod.Refused(f"--run-id {run_id}: already in {existing.path}")
            if existing.readonly:
                raise click.ClickException(f"{existing.path} can only be read here (a read-only file system, folder"
                                           " or file): a run cannot be recorded; give another --db")
    store = _store(db)
    display = api.ProgressDisplay(enabled=not as_json)
    started = time.monotonic()
    click.echo(f"run {run_id}: {sweep.name}, {len(sweep.points)} point(s)"
               + (f", up to {jobs} at once while the CPU is busy less than {room:g}%" if jobs > 1 else ""),
               err=as_json)
    try:
        with display:
            runner.run(sweep, caps, store, progress=display.update, run_id=run_id, jobs=jobs, room=room / 100,
                       settle=settle)
    except skeleton.RunBusy as exc:
        raise click.ClickException(str(exc)) from None
    except (SenderError, HostConfigError) as exc:  # the run's shared set-up; recorded as the run's error
        raise click.ClickException(f"run {run_id} failed before its first point: {exc}") from None
    except sqlite3.Error as exc:  # the database: disk full or read-only (results/store.py says which)
        raise click.ClickException(f"run {run_id} failed: {exc}") from None
    except (skeleton.RunCancelled, KeyboardInterrupt):
        click.echo(f"run {run_id} cancelled; network torn down. Partial records kept.", err=True)
        sys.exit(130)
    _finish(store, run_id, started, as_json, report)


def _checked_run_options(run_id: str | None, jobs: int, cluster_address: str | None, tls_dir: Path | None,
                         resume_id: str | None) -> str | None:
    """`catnip run`'s options that go together, checked; the run id (--resume's where given)."""
    if run_id is not None:
        validate_mod.check_run_id(run_id)
    if cluster_address is not None and jobs > 1:
        raise click.BadParameter("--cluster runs one point per worker machine; --jobs is for one machine",
                                 param_hint="--jobs")
    if tls_dir is not None and cluster_address is None:
        raise click.BadParameter("the cluster's certificates are for --cluster: give it too", param_hint="--tls-dir")
    if resume_id is not None:
        if cluster_address is None:
            raise click.BadParameter("--resume takes up a cluster run: give --cluster too", param_hint="--resume")
        if run_id is not None and run_id != resume_id:
            raise click.BadParameter("--resume names the run; leave --run-id out", param_hint="--run-id")
        validate_mod.check_run_id(resume_id)
        run_id = resume_id
    return run_id


def _finish(store, run_id: str, started: float, as_json: bool, report: bool) -> None:
    """The end of `catnip run`: the summary (or the report), and exit 0 only for a run that is done."""
    from catnip.results import report as report_mod
    rep = report_mod.run_report(store, run_id)
    wall = time.monotonic() - started
    if as_json:
        click.echo(json.dumps({"run_id": run_id, "status": rep["status"], "wall_seconds": round(wall, 1),
                               "points": [{k: p[k] for k in ("point", "assignment", "status", "error", "realtime_ok",
                                                             "pages_completed", "pages_failed")}
                                          | {"bottleneck_loss": p["loss"].get("bottleneck-data", {}).get("loss")}
                                          for p in rep["points"]]}, indent=2))
    else:
        if report:
            click.echo(report_mod.render_text(rep))
        click.echo(f"run {run_id} {rep['status']} in {wall:.0f} s; `catnip report {run_id}` shows it again")
    sys.exit(0 if rep["status"] == "done" else 1)


def _run_on_cluster(sweep, caps, scenario_file: Path, overrides: list[str], seed: int | None, db: str | None,
                    run_id: str, address: str, retries: int, resume: bool, as_json: bool, report: bool,
                    tls_dir: Path | None = None) -> None:
    """`catnip run --cluster`: the points go to the workers (controller/cluster.py); exits."""
    from catnip.controller import cluster, skeleton
    if any(sc.run.machines for _, sc in sweep.points):
        # A worker would reach the point's other machines by their addresses, and two workers could
        # share one of them: not carried over yet (docs/cluster.md).
        raise validate_mod.Refused("--cluster: the scenario puts routers on other machines (run.machines); run it"
                                   " without --cluster")
    try:
        cluster.check_address(address)  # TLS only (docs/cluster.md, Security)
    except cluster.ClusterError as exc:
        raise validate_mod.Refused(str(exc)) from None
    if not resume and Path(db or paths.database()).exists():
        with _store(db) as existing:
            if existing.run(run_id) is not None:
                raise validate_mod.Refused(f"--run-id {run_id}: already in {existing.path}")
    store = _store(db)
    display = api.ProgressDisplay(enabled=not as_json)
    started = time.monotonic()
    click.echo(f"run {run_id}: {sweep.name}, {len(sweep.points)} point(s) on the cluster at {address}", err=as_json)
    try:
        with display:
            cluster.run(sweep, caps, store, address, scenario_file, overrides, seed, progress=display.update,
                        run_id=run_id, retries=retries, resume=resume, notice=lambda line: click.echo(line, err=True),
                        tls_dir=tls_dir)
    except cluster.ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    except sqlite3.Error as exc:
        raise click.ClickException(f"run {run_id} failed: {exc}") from None
    except (skeleton.RunCancelled, KeyboardInterrupt):
        click.echo(f"run {run_id} cancelled; the workers tore their points down. Partial records kept.", err=True)
        sys.exit(130)
    _finish(store, run_id, started, as_json, report)


scenario_path = validate_mod.scenario_path  # a bare name is looked up in scenarios/


# results.samples.INTERVALS (a test keeps them equal): importing it here would load scipy for every command.
INTERVAL_KINDS = ("t", "bootstrap", "median")


def _one_format(as_json: bool, as_csv: bool) -> str:
    """text, json or csv; --json and --csv together are refused naming both."""
    if as_json and as_csv:
        raise click.UsageError("--json and --csv: choose one format (text by default, --json or --csv)")
    return "json" if as_json else "csv" if as_csv else "text"


def _csv(header: list[str], rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _check_run_ids(store, specs) -> None:
    """Refuses, listing the runs it matches, a run id prefix that names several runs (the store's
    find_run then finds none, and the error would say there is no such run)."""
    for spec in specs:
        for prefix in spec.split("+"):
            if not prefix or store.run(prefix) is not None:
                continue
            matches = sorted(r["id"] for r in store.runs() if r["id"].startswith(prefix))
            if len(matches) > 1:
                shown = ", ".join(matches[:8]) + (f" and {len(matches) - 8} more" if len(matches) > 8 else "")
                raise click.ClickException(f"run id prefix {bounded.short(prefix)} matches {len(matches)} runs"
                                           f" ({shown}): give more of the id")


LIST_COLUMNS = ("id", "name", "status", "seed", "started", "finished", "error", "note")


@main.command(name="list", short_help="The runs in the results database, newest first.")
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
@click.option("--json", "as_json", is_flag=True, help="JSON: a record per run")
@click.option("--csv", "as_csv", is_flag=True, help="CSV: a header, then a row per run (times in Unix seconds)")
def list_cmd(db: str | None, as_json: bool, as_csv: bool) -> None:
    """Runs in the results database, newest first: id, scenario, status, start and duration, and
    the first line of the run's note (`catnip note`; whole in --json and --csv)."""
    fmt = _one_format(as_json, as_csv)
    from catnip.controller.recover import close_abandoned_runs
    from catnip.results import run_notes
    with _store(db) as store:
        close_abandoned_runs(store)
        rows = [{**dict(r), "note": run_notes.note_of(r)} for r in store.runs()]  # a database before notes: None
        if fmt == "json":
            click.echo(json.dumps([{k: r[k] for k in LIST_COLUMNS} for r in rows], indent=2))
            return
        if fmt == "csv":
            click.echo(_csv(list(LIST_COLUMNS), ([r[k] for k in LIST_COLUMNS] for r in rows)), nl=False)
            return
        if not rows:
            click.echo(f"no runs in {store.path}")
            return
        click.echo(f"{'RUN ID':<48} {'SCENARIO':<24} {'STATUS':<10} {'STARTED':<16}  DURATION")
        for r in rows:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["started"]))
            dur = f"{r['finished'] - r['started']:.0f} s" if r["finished"] else "-"
            imported = " (imported)" if r.get("imported") else ""  # a colleague's run
            note = f"  note: {run_notes.first_line(r['note'])}" if r["note"] else ""
            click.echo(f"{r['id']:<48} {r['name']:<24} {r['status']:<10} {when:<16}  {dur}{imported}{note}")


VIEWS = "the page-time table (default), --loss, --by-sender, --pool, --apps, --layout NAME or --figure NAME"


@main.command(short_help="A run's report: page times (Table II), loss, pooled, any layout.")
@click.argument("run_ids", nargs=-1, metavar="RUN_ID...")
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
@click.option("--json", "as_json", is_flag=True, help="format: JSON (of the default view: the whole report)")
@click.option("--csv", "as_csv", is_flag=True, help="format: CSV (of the default view: a row per point and page)")
@click.option("--loss", is_flag=True, help="view: loss by priority per point (layout of Tables IV, VII, X)")
@click.option("--by-sender", is_flag=True,
              help="view: page times and retransmissions per server congestion control (fairness, section V-E)")
@click.option("--pool", is_flag=True, help="view: one table per sweep point over all its repetitions (and over all "
              "runs of RUN1+RUN2+...), then every point against one of them")
@click.option("--apps", is_flag=True, help="view: application metrics per point, app, metric and tag (the "
              "app-metrics layout)")
@click.option("--layout", "layout_name", metavar="NAME", default=None,
              help="view: a registered layout (see --layouts); catnip-table-xi takes the baseline run, then the "
                   "runs compared with it")
@click.option("--layouts", "list_layouts", is_flag=True, help="list the registered layouts (text or --json)")
@click.option("--interval", type=click.Choice(list(INTERVAL_KINDS)), default="t", show_default=True,
              help="the page times' 95% interval in the default view: t (Student t of the mean), bootstrap "
                   "(percentile bootstrap of the mean, seeded) or median (distribution-free, of the median)")
@click.option("--realtime-only", is_flag=True, help="with --pool: leave out (and count) repetitions that "
              "did not keep real time")
@click.option("--against", "base", type=click.IntRange(min=0), default=None,
              help="with --pool: the sweep point the others are compared with  [default: 0]")
@click.option("--figure", "figure_name", metavar="NAME", default=None,
              help="view: a figure of Nouredine and Tobagi's reports (web-1.0, web-1.1, telnet, ftp-probes, ftp-files,"
                   " fair-share, flow-throughput; docs/reports-servdiff.md), written to --out (--json prints its spec)")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="with --figure: the file to write, .svg, .pdf or .png (default servdiff-NAME-RUN.svg)")
@click.option("--tag", default=None, help="with --figure: only the samples of this tag (an RTT class, e.g. rtt80ms)")
@click.option("--flow", default=None, help="with --figure flow-throughput: the flow (e.g. s5/0; default the first of"
              " the longest RTT class)")
def report(run_ids: tuple[str, ...], db: str | None, as_json: bool, as_csv: bool, loss: bool, by_sender: bool,
           pool: bool, apps: bool, layout_name: str | None, list_layouts: bool, interval: str,
           realtime_only: bool, base: int | None, figure_name: str | None, out: str | None, tag: str | None,
           flow: str | None) -> None:
    """The report of RUN_ID (an id or an unambiguous prefix) in the layout of Table II.

    One view: the page-time table (default), --loss, --by-sender, --pool, --apps or --layout
    NAME; in one format: text (default), --json or --csv.

    With --pool, RUN_ID may join runs of one scenario with '+' (e.g. the same scenario with seeds
    1, 2 and 3): their points are pooled per sweep point, and each point is compared with point 0
    (or --against N) page by page, with 95% intervals.

    With --apps, the applications' metrics of each point; with --layout NAME, any registered
    layout (--layouts lists them); with --figure NAME, a figure of the servdiff reports."""
    fmt = _one_format(as_json, as_csv)
    # --apps is --layout app-metrics: the two together name one view.
    views = [name for name, on in (("--loss", loss), ("--by-sender", by_sender), ("--pool", pool), ("--apps", apps),
                                   (f"--layout {layout_name}", layout_name is not None
                                    and not (apps and layout_name == "app-metrics")),
                                   (f"--figure {figure_name}", figure_name is not None)) if on]
    interval_given = click.get_current_context().get_parameter_source("interval") != ParameterSource.DEFAULT
    if list_layouts:
        given = views + [f for f, on in (("RUN_ID", run_ids), ("--csv", fmt == "csv"),
                                         ("--interval", interval_given), ("--realtime-only", realtime_only),
                                         ("--against", base is not None)) if on]
        if given:
            raise click.UsageError(f"--layouts and {given[0]}: --layouts lists the layouts, as text or --json")
        _list_layouts(fmt == "json")
        return
    if len(views) > 1:
        hint = " (--apps is --layout app-metrics)" if apps and layout_name else ""
        raise click.UsageError(f"{views[0]} and {views[1]}: choose one view: {VIEWS}{hint}")
    view = views[0].split()[0] if views else None
    _check_view_options(views, view, {"--realtime-only": realtime_only, "--against": base is not None},
                        {"--out": out is not None, "--tag": tag is not None, "--flow": flow is not None}, interval)
    if apps or layout_name is not None:
        _layout_report("app-metrics" if apps else layout_name, run_ids, db, fmt)
        return
    if view == "--figure":
        _figure_report(figure_name, run_ids, db, fmt, out, tag, flow)
        return
    if len(run_ids) != 1:
        raise click.UsageError("Missing argument 'RUN_ID' (or --layouts to list the layouts)." if not run_ids else
                               f"one RUN_ID, not {len(run_ids)}: join runs of one scenario with '+' and add --pool,"
                               " or compare runs with --layout catnip-table-xi (or `catnip compare`)")
    run_id = run_ids[0]
    if "+" in run_id and view != "--pool":
        raise click.UsageError("runs joined with '+' are pooled: add --pool" + (f" (not {views[0]})" if views else ""))
    if view == "--pool":
        _pooled_report(run_id, db, realtime_only, base, fmt)
        return
    _one_run_report(run_id, db, view, fmt, interval)


def _check_view_options(views: list[str], view: str | None, pool_only: dict[str, bool],
                        figure_only: dict[str, bool], interval: str) -> None:
    """Options that go with one view only, refused with the others (a usage error naming both)."""
    for wanted, options in (("--pool", pool_only), ("--figure", figure_only)):
        if view != wanted:
            for name, on in options.items():
                if on:
                    raise click.UsageError(f"{name} goes with {wanted}" + (f", not {views[0]}" if views else ""))
    if interval != "t" and view is not None:
        raise click.UsageError(f"--interval {interval} and {views[0]}: only the page-time table of one run (the "
                               "default view) has intervals other than Student t")


def _one_run_report(run_id: str, db: str | None, view: str | None, fmt: str, interval: str) -> None:
    """The page-time table (default), --by-sender or --loss of one run."""
    from catnip.results import layouts
    import catnip.papers  # noqa: F401 (registers the papers' layouts: papers/__init__.py)
    from catnip.results import report as report_mod
    with _report_store(db) as store:
        _check_run_ids(store, [run_id])
        found = store.find_run(run_id)
        if found is None:
            raise click.ClickException(f"no run {run_id!r} in {store.path} (see `catnip list`)")
        if json.loads(found["scenario"]).get("kind") == "transfers":
            raise click.ClickException(f"run {found['id']} is a transfer measurement: "
                                       f"`catnip model validate {found['id']}` reports it")
        if view == "--by-sender":
            from catnip.results import by_sender as by_sender_mod
            from catnip.spec.record import RecordError
            try:
                points = by_sender_mod.by_sender(store, found["id"])
            except RecordError as exc:  # a point that cannot say what it ran
                raise click.ClickException(str(exc)) from None
            click.echo(_by_sender_output(by_sender_mod, points, fmt), nl=fmt != "csv")
            return
        if view == "--loss":
            table = layouts.build("catnip-loss", store, found["id"])
            click.echo(layouts.RENDERERS[fmt](table), nl=fmt != "csv")
            return
        rep = report_mod.run_report(store, found["id"], interval)
    render = {"text": report_mod.render_text, "json": report_mod.render_json, "csv": report_mod.render_csv}[fmt]
    click.echo(render(rep), nl=fmt != "csv")


BY_SENDER_COLUMNS = ("point", "label", "realtime_ok", "cc", "servers", "pages", "failed", "mean", "ci95", "sdev",
                     "segments", "retransmitted", "retrans_fraction")


def _by_sender_output(mod, points: list[dict], fmt: str) -> str:
    """--by-sender as text, JSON (its records) or CSV (a row per point and sender; servers
    separated by spaces)."""
    if fmt == "json":
        return json.dumps(points, indent=2)
    if fmt == "csv":
        return _csv(list(BY_SENDER_COLUMNS), (
            [p["point"], p["label"], p["realtime_ok"], g["cc"], " ".join(g["servers"]), g["pages"], g["failed"],
             g["mean"], g["ci95"], g["sdev"], g["segments"], g["retransmitted"], g["retrans_fraction"]]
            for p in points for g in p["groups"]))
    return mod.render_text(points)


def _report_store(db: str | None):
    from catnip.results.store import StoreVersionError
    try:
        return _store(db)
    except StoreVersionError as exc:
        raise click.ClickException(str(exc)) from None


def _list_layouts(as_json: bool) -> None:
    from catnip.results import layouts
    import catnip.papers  # noqa: F401 (registers the papers' layouts: papers/__init__.py)
    from catnip.papers.registry import paper_of_layout
    found = list(layouts.LAYOUTS.values())
    if as_json:
        # Where a paper registered the layout (papers/): its name, docs page and citation.
        owners = {x.name: paper_of_layout(x.name) for x in found}
        click.echo(json.dumps([{"name": x.name, "title": x.title, "paper": x.paper, "min_runs": x.min_runs,
                                "max_runs": x.max_runs, "registered_by": None if (o := owners[x.name]) is None else
                                {"paper": o.name, "docs": o.docs, "citation": str(o.citation) if o.citation else None}}
                               for x in found], indent=2))
        return
    # Columns as wide as their longest entry (fixed widths broke at the first longer name: issue 48),
    # the free text last: `catnip report RUNS --layout LAYOUT` builds one.
    rows = [(x.name, " ".join(["RUN"] * x.min_runs) + ("..." if x.max_runs is None else ""), f"{x.paper}: {x.title}")
            for x in found]
    head = ("LAYOUT", "RUNS", "PAPER: WHAT IT SHOWS (catnip report RUNS --layout LAYOUT)")
    wide = [max(len(r[i]) for r in [head, *rows]) for i in (0, 1)]
    for name, runs, text in [head, *rows]:
        click.echo(f"{name:<{wide[0]}}  {runs:<{wide[1]}}  {text}")


def _layout_report(name: str, run_ids: tuple[str, ...], db: str | None, fmt: str) -> None:
    from catnip.results import layouts
    import catnip.papers  # noqa: F401 (registers the papers' layouts: papers/__init__.py)
    try:
        layouts.get(name)
    except layouts.UnknownLayout as exc:
        raise click.BadParameter(str(exc), param_hint="--layout") from None
    if not run_ids:
        raise click.UsageError(f"Missing argument 'RUN_ID': the runs of layout {name}.")
    with _report_store(db) as store:
        _check_run_ids(store, run_ids)
        try:
            table = layouts.build(name, store, *run_ids)
        except KeyError as exc:
            raise click.ClickException(exc.args[0]) from None
        except ValueError as exc:  # LayoutError too: the wrong number or kind of runs
            raise click.BadParameter(str(exc), param_hint="RUN_ID") from None
    out = layouts.RENDERERS[fmt](table)
    if fmt == "text" and name == "catnip-table-xi":
        out += "\n" + _columns_legend(table.source)
    click.echo(out, nl=fmt != "csv")


def _figure_report(name: str, run_ids: tuple[str, ...], db: str | None, fmt: str, out: str | None, tag: str | None,
                   flow: str | None) -> None:
    """--figure: a servdiff figure (papers/servdiff/analysis.py) written to a file, a line per curve
    printed; with --json its Plotly spec printed instead."""
    from catnip.papers.servdiff import analysis as servdiff
    from catnip.results import figures
    if fmt == "csv":
        raise click.UsageError("--csv and --figure: a figure is written to --out (or printed as its spec with --json)")
    if not run_ids:
        raise click.UsageError(f"Missing argument 'RUN_ID': the runs of figure {name}.")
    path = Path(out or f"servdiff-{name}-{run_ids[0].split('+')[0]}.svg")
    try:
        servdiff.check_figure(name, tag, flow)
        if fmt == "text":
            figures.format_of(path)  # a bad extension is said before the runs are read
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--figure") from None
    except figures.ExportError as exc:
        raise click.BadParameter(str(exc), param_hint="--out") from None
    with _report_store(db) as store:
        _check_run_ids(store, run_ids)
        try:
            fig = servdiff.figure(store, run_ids, name, tag, flow)
        except KeyError as exc:
            raise click.ClickException(exc.args[0]) from None
        except servdiff.NoData as exc:
            raise click.ClickException(str(exc)) from None
        except ValueError as exc:  # runs that cannot be pooled, or a run given twice
            raise click.BadParameter(str(exc), param_hint="RUN_ID") from None
    if fmt == "json":
        click.echo(json.dumps(fig.spec, indent=2))
        return
    try:
        figures.save(fig.spec, path)
    except figures.ExportError as exc:
        raise click.ClickException(str(exc)) from None
    for line in fig.lines:
        click.echo(line)
    click.echo(f"figure: {path}")


def _pooled_report(spec: str, db: str | None, realtime_only: bool, base: int | None, fmt: str) -> None:
    """--pool: the pooled tables and loss, then every point against one (text); all of it as one
    JSON document; or the pooled Table II rows as CSV (report.render_csv's columns, a row per
    pooled point and page, RUN_ID the runs joined by '+')."""
    from catnip.results import compare, contrast, pooled
    from catnip.results.report import loss_table, render_csv, render_loss_table
    try:
        ids = compare.split_run_ids(spec)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="RUN_ID") from None
    with _report_store(db) as store:
        _check_run_ids(store, ids)
        try:
            rep = pooled.pooled_runs_report(store, ids, realtime_only)
        except KeyError as exc:
            raise click.ClickException(exc.args[0]) from None
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="RUN_ID") from None
    against, why_not = None, None
    if len(rep["points"]) > 1 or base is not None:
        try:
            against = contrast.against(rep, base or 0)
        except ValueError as exc:
            if base is not None:
                raise click.BadParameter(str(exc), param_hint="--against") from None
            why_not = str(exc)
    if fmt == "csv":
        click.echo(render_csv(rep), nl=False)
        return
    if fmt == "json":
        click.echo(json.dumps({"pooled": rep, "loss": loss_table(rep), "against": against,
                               "no_comparison": why_not}, indent=2, default=str))
        return
    click.echo(pooled.render_text(rep))
    if loss_table(rep):
        click.echo()
        click.echo(render_loss_table(rep))
    if why_not:
        click.echo(f"\nNo comparison: {why_not}; choose another base with --against N")
    elif against is not None:
        click.echo()
        click.echo(contrast.render_text(against))


FIG2_OUT = "fig2-senders.svg"  # in the current folder: never a tracked file by default


@main.command(name="fig2", short_help="CATNIP Fig. 2 redrawn with the BPF senders (a sequence plot).")
@click.option("--out", type=click.Path(dir_okay=False), default=FIG2_OUT, show_default=True,
              help="the figure to write, .svg, .pdf or .png; the figure of docs/spm.md is --out"
                   " docs/figures/fig2-senders.svg")
@click.option("--rtt", type=click.FloatRange(10, 1000), default=100.0, show_default=True, help="round-trip time, ms")
def fig2_cmd(out: str, rtt: float) -> None:
    """CATNIP Fig. 2: a 14-segment document sent by Reno, RBPLW, ECA and ECA+RBPLW (BPF senders);
    writes a sequence-number plot (./fig2-senders.svg unless --out), the series it drew beside it
    (the same name with .json, which the dashboard's /figures/fig2 draws from) and prints each
    sender's bursts per round trip."""
    from catnip.controller import fig2, skeleton
    from catnip.results.figures import ExportError
    try:
        with skeleton.machine_lock(), skeleton.signals_cancel():
            found = fig2.run(Path(out), rtt, log=lambda m: click.echo(m, err=True))
    except (skeleton.RunBusy, ExportError) as exc:  # ExportError: a bad --out, or no chromium to draw with
        raise click.ClickException(str(exc)) from None
    except skeleton.RunCancelled:
        sys.exit(130)
    for name, b in found.items():
        click.echo(f"{name:<16} bursts (segments over ms): "
                   + ", ".join(f"{n} over {1000 * span:.1f}" for n, span in b) + f"; {sum(n for n, _ in b)} segments")
    click.echo(f"plot: {out}")
    click.echo(f"data: {fig2.data_path(Path(out))}")


@main.command(name="burst-seq", short_help="newCWV Fig. 10: one burst's segments against time (a plot).")
@click.argument("run_id")
@click.option("--size", default="80KB", show_default=True, help="burst size of the cell to show ('any' for every size)")
@click.option("--idle", default="any", show_default=True, help="idle period of the cell, e.g. 1s ('any' for every idle)")
@click.option("--nth", type=click.IntRange(0), default=2, show_default=True,
              help="which burst of the cell (from 0; the first ones start from the initial window)")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="the figure to write, .svg, .pdf or .png (default newcwv-fig10-RUN.svg)")
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
def burst_seq(run_id: str, size: str, idle: str, nth: int, out: str | None, db: str | None) -> None:
    """newCWV Fig. 10: one burst's segments against time in every captured point of a run
    (run.capture: true), e.g. unpaced and paced; writes the figure and prints each burst's spread."""
    from catnip.results import burst_capture
    from catnip.results import figures
    from catnip.spec import units
    try:
        want_size = None if size == "any" else units.parse_size(size)
        want_idle = None if idle == "any" else units.parse_duration(idle)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    store = _store(db)
    _check_run_ids(store, [run_id])
    found = store.find_run(run_id)
    if found is None:
        raise click.ClickException(f"no run {run_id!r} (`catnip list` shows the runs)")
    path = Path(out or f"newcwv-fig10-{found['id']}.svg")
    try:
        figures.format_of(path)  # a bad extension is said before the captures are read
        spec, chosen = burst_capture.figure_spec(store, found["id"], want_size, want_idle, nth)
        figures.save(spec, path)
    except (burst_capture.CaptureError, figures.ExportError) as exc:
        raise click.ClickException(str(exc)) from None
    for point, label, b in chosen:
        click.echo(f"point {point} ({label}): burst {b.index} ({b.size} B after {b.idle:g} s): {len(b.segments)}"
                   f" segments over {1000 * (b.spread or 0):.1f} ms, {b.retransmitted} retransmitted")
    click.echo(f"plot: {path}")


@main.command(short_help="Serve the dashboard: start runs, watch them, read the reports.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to listen on; anything but loopback exposes the dashboard to the network")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port")
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="a host name or address browsers reach the dashboard by, besides localhost, 127.0.0.1, ::1 and"
                   " --host (repeatable); requests naming any other host are refused")
def web(host: str, port: int, db: str | None, allow_hosts: tuple[str, ...]) -> None:
    """Serve the dashboard: start scenarios, watch runs live, read and compare reports."""
    from catnip.webui.hosts import allowed_names
    from catnip.webui.server import is_loopback, serve
    try:
        allowed_names(host, allow_hosts)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--allow-host/--host") from None
    if not is_loopback(host):
        click.echo(click.style(f"warning: listening on {host}: anyone who can reach this address can start runs",
                               fg="yellow"), err=True)
    try:
        serve(host, port, db=db, on_ready=lambda line: click.echo(line, err=False), allow_hosts=allow_hosts)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@main.command(short_help="Runs against a baseline run: relative page times (Table XI).")
@click.argument("baseline")
@click.argument("runs", nargs=-1, required=True)
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
@click.option("--json", "as_json", is_flag=True, help="JSON: the whole comparison")
@click.option("--csv", "as_csv", is_flag=True, help="CSV: a row per compared point and page (the columns of "
              "`catnip report BASELINE RUNS --layout catnip-table-xi --csv`)")
@click.option("--realtime-only", is_flag=True, help="leave out (and count) points that did not keep real time; "
              "each run's repetitions are then pooled per sweep point")
def compare(baseline: str, runs: tuple[str, ...], db: str | None, as_json: bool, as_csv: bool,
            realtime_only: bool) -> None:
    """RUNS against BASELINE in the layout of Table XI (relative page download times).

    Join run ids with '+' to pool them per sweep point, e.g. the same scenario run with two
    seeds: catnip compare BASE1+BASE2 RUN1+RUN2. The text's column headers show the last 12
    characters of each run id and point label; the legend under the table gives them whole."""
    fmt = _one_format(as_json, as_csv)
    from catnip.results import compare as compare_mod
    with _store(db) as store:
        _check_run_ids(store, [baseline, *runs])
        try:
            cmp = compare_mod.compare(store, [baseline, *runs], realtime_only)
        except KeyError as exc:
            raise click.ClickException(exc.args[0]) from None
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="RUNS") from None
    if fmt == "json":
        click.echo(json.dumps(cmp, indent=2, default=str))
    elif fmt == "csv":
        click.echo(_csv(list(TABLE_XI_COLUMNS), _table_xi_rows(cmp)), nl=False)
    else:
        click.echo(compare_mod.render_text(cmp) + "\n" + _columns_legend(cmp))


# The columns of the catnip-table-xi layout (papers/catnip/layouts.py), which a test keeps equal; built
# here from the comparison so --realtime-only, which the layout does not take, has its CSV too.
TABLE_XI_COLUMNS = ("run_id", "point", "label", "baseline_run_id", "baseline_point", "baseline_label", "page",
                    "conns", "bytes", "mean_time", "baseline_mean_time", "relative", "relative_ci95",
                    "relative_mean", "relative_mean_ci95", "relative_sdev", "loss", "baseline_loss", "realtime_ok",
                    "baseline_realtime_ok")


def _table_xi_rows(cmp: dict):
    base_id = cmp["baseline"]["run_id"]
    for c in cmp["columns"]:
        for pg in cmp["pages"]:
            page = pg["page"]
            yield (c["run_id"], c["point"], c["label"], base_id, c["baseline_point"], c["baseline_label"], page,
                   pg["conns"], pg["bytes"], c["mean_time"].get(page), c["baseline_mean_time"].get(page),
                   c["relative"].get(page), c["relative_ci95"].get(page), c["relative_mean"],
                   c["relative_mean_ci95"], c["relative_sdev"], c["loss"], c["baseline_loss"], c["realtime_ok"],
                   c["baseline_realtime_ok"])


def _columns_legend(cmp: dict) -> str:
    """The Table XI text's numbered columns with whole run ids and point labels (the headers give
    the number and the label's last 12 characters)."""
    out = ["Columns:"]
    for i, c in enumerate(cmp["columns"], 1):
        against = ("no baseline point" if c["baseline_point"] is None else
                   f"baseline point {c['baseline_point']}: {c['baseline_label']}")
        out.append(f"  #{i}: {c['run_id']} point {c['point']}: {c['label']}   (against {against})")
    return "\n".join(out)


@main.command(short_help="Remove every namespace, process, bridge and BPF object we made.")
@click.option("--dry-run", is_flag=True, help="only list what would be removed")
@click.option("--force", is_flag=True, help="even while a run holds the machine lock (a stuck run): stop it first")
def clean(dry_run: bool, force: bool) -> None:
    """Remove every namespace, process, bridge, link and BPF object the project created.
    Refused while a run holds the machine lock, unless --force."""
    from catnip.testbed import cleanup
    if dry_run:
        left = cleanup.leftovers()
        click.echo(json.dumps(left, indent=2) if left else "nothing to clean")
        return
    holder = cleanup.run_in_progress()
    if force and holder:
        click.echo(f"--force: will stop the run holding the machine lock ({holder}) and remove:", err=True)
        click.echo(json.dumps(cleanup.leftovers(), indent=2), err=True)
    try:
        removed = cleanup.clean(force=force)
    except cleanup.RunInProgress as exc:
        raise click.ClickException(str(exc)) from None
    for line in removed:
        click.echo(f"removed {line}")
    from catnip.controller.recover import after_clean
    for line in after_clean():  # what killed runs' clients wrote, into the database
        click.echo(line)
    left = cleanup.leftovers()
    if left:
        raise click.ClickException("still present after cleaning: " + json.dumps(left))
    click.echo("clean" if not removed else f"clean ({len(removed)} removed)")


from catnip.cli.models import model as _model  # noqa: E402  (the latency models' own command group)

# Their one-line summaries in `catnip --help`, where their owners gave none (click would cut
# their docstrings' first sentence to the listing's width).
_SHORT_HELP = {_model: "Latency models of short TCP transfers, checked against runs.",
               validate_mod.validate_cmd: "Check a scenario as `catnip run` would, touching nothing."}
for _cmd, _text in _SHORT_HELP.items():
    _cmd.short_help = _cmd.short_help or _text
    main.add_command(_cmd)

from catnip.cli.archive import export_cmd, import_cmd  # noqa: E402 - after main exists

main.add_command(export_cmd)
main.add_command(import_cmd)

from catnip.cli.notes import note_cmd  # noqa: E402 - after main exists

main.add_command(note_cmd)

from catnip.cli.docs import docs_group  # noqa: E402 - after main exists

main.add_command(docs_group)

from catnip.cli.shell import shell_cmd  # noqa: E402 - after main exists

main.add_command(shell_cmd)

from catnip.cli.cluster import cluster_group  # noqa: E402 - after main exists

main.add_command(cluster_group)

if __name__ == "__main__":
    main()
