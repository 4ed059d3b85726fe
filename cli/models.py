"""`catnip model ...`: the latency models' predictions from the command line."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path as Path_

import click

from catnip.spec import units
from catnip.models import cardwell, hysteresis, partial_catnip, sikdar
from catnip.models.params import ModelInputError, Path
from catnip.testbed import paths

TABLE1_KB = (1, 4, 8, 16, 32, 50, 64, 90, 110, 128, 160, 180, 200)  # hysteresis paper, Table 1
TABLE1_P = (0.01, 0.03, 0.05, 0.08, 0.10)


def _path_options(f):
    opts = [
        click.option("--size", required=True, help="transfer size, e.g. 8KB or 8192"),
        click.option("--p", "p", type=float, required=True, help="packet loss probability, [0, 1)"),
        click.option("--mss", type=int, default=1433, show_default=True),
        click.option("--rtt", default="200ms", show_default=True),
        click.option("--wmax", type=int, default=24, show_default=True, help="receive window, packets"),
        click.option("--t0", default="1s", show_default=True, help="first retransmission timeout"),
        click.option("--delack", default="100ms", show_default=True, help="expected delayed-ACK cost"),
        click.option("--samples", type=click.IntRange(1, 1_000_000), default=1000, show_default=True),
        click.option("--seed", type=int, default=1, show_default=True),
        click.option("--json", "as_json", is_flag=True),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _size(text: str) -> int:
    """Bytes from '8192', '8KB', '1.5MB' (KB = 1024 bytes, as the paper's Table 1)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    kind = units.parse_buffer(text)  # the scenario files' byte units
    if "bytes" not in kind:
        raise ValueError(f"size {text!r}: give bytes, e.g. 8192 or 8KB")
    return kind["bytes"]


def _path(size: str, p: float, mss: int, rtt: str, wmax: int, t0: str, delack: str, p_high=None) -> Path:
    try:
        nbytes = _size(size)
        return Path(size=nbytes, p=p, mss=mss, rtt=units.parse_duration(rtt), wmax=wmax, t0=units.parse_duration(t0),
                    delack=units.parse_duration(delack), p_high=p_high)
    except (ModelInputError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None


def _report(name: str, path: Path, values: list[float], as_json: bool) -> None:
    values = sorted(values)
    q = lambda x: values[min(len(values) - 1, int(x * len(values)))]  # noqa: E731
    out = {"model": name, "packets": path.packets, "samples": len(values), "mean_s": statistics.fmean(values),
           "sdev_s": statistics.stdev(values) if len(values) > 1 else 0.0, "p10_s": q(0.1), "median_s": q(0.5),
           "p90_s": q(0.9)}
    if as_json:
        click.echo(json.dumps(out, indent=2))
    else:
        click.echo(f"{name}: {path.size} B = {path.packets} packets, p {path.p:g}"
                   + (f", p' {path.p_high:g}" if path.p_high is not None else "")
                   + f": mean {out['mean_s']:.3f} s (sdev {out['sdev_s']:.3f}; p10 {out['p10_s']:.3f},"
                     f" median {out['median_s']:.3f}, p90 {out['p90_s']:.3f}; {len(values)} samples)")


@click.group()
def model() -> None:
    """Latency models of short TCP transfers (hysteresis paper; docs/models.md)."""


@model.command()
@_path_options
def hysteresis_cmd(size, p, mss, rtt, wmax, t0, delack, samples, seed, as_json):
    """The hysteresis model (section 3, equations 3-12), sampled."""
    path = _path(size, p, mss, rtt, wmax, t0, delack)
    _report("hysteresis", path, hysteresis.latencies(path, samples, seed), as_json)


hysteresis_cmd.name = "hysteresis"


@model.command(name="partial-catnip")
@_path_options
@click.option("--p-high", type=float, required=True, help="p': loss probability of the first and last 3 packets")
def partial_catnip_cmd(size, p, mss, rtt, wmax, t0, delack, samples, seed, as_json, p_high):
    """Partial CATNIP TCP (section 5): first and last 3 packets at p', the rest at p."""
    path = _path(size, p, mss, rtt, wmax, t0, delack, p_high)
    _report("partial-catnip", path, hysteresis.latencies(path, samples, seed, draw=partial_catnip.sample), as_json)


def _closed_form(name: str, label: str, fn, doc: str):
    """A subcommand for a closed-form model (one expected latency, no sampling)."""
    @click.option("--json", "as_json", is_flag=True)
    @click.option("--delack", default="100ms", show_default=True, help="expected delayed-ACK cost")
    @click.option("--t0", default="1s", show_default=True, help="first retransmission timeout")
    @click.option("--wmax", type=int, default=24, show_default=True, help="receive window, packets")
    @click.option("--rtt", default="200ms", show_default=True)
    @click.option("--mss", type=int, default=1433, show_default=True)
    @click.option("--p", "p", type=float, required=True, help="packet loss probability, [0, 1)")
    @click.option("--size", required=True, help="transfer size, e.g. 8KB or 8192")
    def cmd(size, p, mss, rtt, wmax, t0, delack, as_json):
        path = _path(size, p, mss, rtt, wmax, t0, delack)
        value = fn(path)
        if as_json:
            click.echo(json.dumps({"model": label, "packets": path.packets, "size": path.size, "p": path.p,
                                   "mean_s": value}, indent=2))
        else:
            click.echo(f"{label}: {path.size} B = {path.packets} packets, p {path.p:g}: {value:.3f} s")
    cmd.__doc__ = doc
    return model.command(name=name)(cmd)


_closed_form("cardwell", "cardwell-00", cardwell.latency,
             "Cardwell-00 (Cardwell, Savage, Anderson, \"Modeling TCP Latency\", INFOCOM 2000), closed\n"
             "form: the expected latency of a transfer from its first data segment (no handshake): slow\n"
             "start until the first loss (their eqs. 5, 11, 15), that loss's expected cost, timeout or\n"
             "fast retransmit (eq. 17), the data left sent at the rate of their eq. 22, and the expected\n"
             "delayed-ACK cost (--delack).")
_closed_form("sikdar", "sikdar", sikdar.latency,
             "A Sikdar-like model: no, one or several losses, equation 1 slow start (closed form).")


@model.command()
@click.option("--samples", type=click.IntRange(1, 1_000_000), default=1000, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
def table(samples: int, seed: int) -> None:
    """Mean latency (s) of the hysteresis model over Table 1's sizes and loss rates (default path)."""
    click.echo(f"{'KB':>5} " + " ".join(f"{'p=' + format(p, 'g'):>8}" for p in TABLE1_P))
    for kb in TABLE1_KB:
        row = [statistics.fmean(hysteresis.latencies(Path(size=kb * 1024, p=p), samples, seed)) for p in TABLE1_P]
        click.echo(f"{kb:>5} " + " ".join(f"{v:>8.3f}" for v in row))


@model.command()
@click.argument("scenario_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="override a field, e.g. trials=50")
@click.option("--seed", type=int, default=None)
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
@click.option("--run-id", default=None, help="name the run (letters, digits, . _ -)")
@click.option("--keep-captures", is_flag=True, help="keep each point's pcap with the run's files")
def measure(scenario_file, overrides, seed, db, run_id, keep_captures):
    """Measure single transfers on the testbed (a `kind: transfers` scenario, e.g.
    scenarios/transfers/hysteresis-validation.yaml); then `catnip model validate RUN`."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from catnip.controller import transfers
    from catnip.spec import transfer as transfer_scenario
    from catnip.controller.skeleton import RunBusy, RunCancelled
    from catnip.spec.scenario import ScenarioError
    from catnip.results.store import RUN_ID, Store

    if run_id is not None and not RUN_ID.fullmatch(run_id):
        raise click.BadParameter("letters, digits, '.', '_' and '-' only, at most 100", param_hint="--run-id")
    try:
        sc = transfer_scenario.load(scenario_file, list(overrides), seed)
    except ScenarioError as exc:
        raise click.ClickException(f"{scenario_file}:\n{exc}") from None
    points = sc.points()
    click.echo(f"{sc.name}: {len(points)} points x {len(sc.sizes_kb)} sizes x {sc.trials} trials, "
               f"{sc.concurrency} at once")
    tasks: dict[str, int] = {}
    with Store(db or paths.database()) as store, \
            Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as bar:
        def progress(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=total)
            bar.update(tasks[label], completed=done)
        try:
            rid = transfers.measure(sc, store, source=str(scenario_file), progress=progress, run_id=run_id,
                                    keep_captures=keep_captures, log=bar.console.print)
        except RunBusy as exc:
            raise click.ClickException(str(exc)) from None
        except RunCancelled as exc:
            click.echo(f"cancelled: {exc}", err=True)
            raise SystemExit(130) from None
        except RuntimeError as exc:
            raise click.ClickException(str(exc)) from None
        failed = [p for p in store.points(rid) if p["status"] != "done"]
    click.echo(f"run {rid}: {len(points) - len(failed)} of {len(points)} points done; "
               f"`catnip model validate {rid}`")
    if failed:
        for p in failed:
            click.echo(f"  point {p['point']}: {p['status']}: {p['error']}", err=True)
        raise SystemExit(1)


@model.command()
@click.argument("run")
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
@click.option("--out", type=click.Path(file_okay=False), default=None, help="write Figs. 3, 4, 6 here")
@click.option("--format", "fmt", type=click.Choice(["svg", "pdf", "png"]), default="svg", show_default=True,
              help="file format of the figures written by --out")
@click.option("--delack", default="100ms", show_default=True, help="the models' expected delayed-ACK cost")
@click.option("--samples", type=click.IntRange(100, 1_000_000), default=2000, show_default=True)
@click.option("--include-late", is_flag=True, help="also use points that did not keep real time")
@click.option("--json", "as_json", is_flag=True)
def validate(run, db, out, fmt, delack, samples, include_late, as_json):
    """The models against a measured run: equation 13 errors (Tables 2, 3), Partial CATNIP vs Reno, figures."""
    from catnip.models import validation as v
    from catnip.results.store import Store

    with Store(db or paths.database()) as store:
        row = store.find_run(run)
        if row is None:
            matches = sorted(r["id"] for r in store.runs() if r["id"].startswith(run))
            if len(matches) > 1:  # find_run finds none for a prefix of several runs: say which
                raise click.ClickException(f"run id prefix {run!r} matches {len(matches)} runs"
                                           f" ({', '.join(matches[:8])}{' ...' if len(matches) > 8 else ''}):"
                                           " give more of the id")
            raise click.ClickException(f"no run {run!r} in {store.path}")
        scenario = json.loads(row["scenario"])
        if scenario.get("kind") != "transfers":
            raise click.ClickException(f"run {row['id']} is not a transfer measurement (`catnip report` reads it)")
        points = store.points(row["id"])
        late = {p["point"] for p in points if not p["realtime_ok"]} if not include_late else set()
        trials = store.transfer_trials(row["id"])
    cells = v.cells(trials, late)
    if not cells:
        raise click.ClickException(f"run {row['id']}: no completed transfers"
                                   + (f" ({len(late)} points excluded as not real time)" if late else ""))
    from catnip.models.validation_figures import predictions
    preds = predictions(cells, scenario["path"], units.parse_duration(delack), samples)
    report = {"run": row["id"], "excluded_points_not_real_time": sorted(late), "points": [], "profiles": {}}
    for p in points:
        assignment, fidelity = json.loads(p["assignment"]), json.loads(p["fidelity"] or "{}")
        report["points"].append({"point": p["point"], **assignment, "status": p["status"],
                                 "loss": v.measured_loss(fidelity), "realtime_ok": bool(p["realtime_ok"]),
                                 "late_fraction": fidelity.get("late_fraction"),
                                 "late_p99_us": fidelity.get("late_p99_us")})
    for profile in dict.fromkeys(c.profile for c in cells):
        mine = [c for c in cells if c.profile == profile]
        report["profiles"][profile] = {
            "cells": [{"p": c.p, "p_high": c.p_high, "kb": c.kb, "n": len(c.values), "failed": c.failed,
                       "mean_s": c.mean, "ci95_s": c.ci95,
                       "models": {m: preds[k] for m in (*v.MODELS, "Partial CATNIP")
                                  if (k := (m, c.profile, c.p, c.p_high, c.size)) in preds}} for c in mine],
            "table2": v.error_table(mine, profile, (0, v.SHORT_MAX_KB), preds),
            "table3": v.error_table(mine, profile, (v.LONG_MIN_KB, math.inf), preds),
            "catnip_gain": v.catnip_gain(mine, profile)}
    if out:
        from catnip.results.figures import ExportError
        try:
            report["figures"] = _figures(cells, preds, Path_(out), fmt)
        except ExportError as exc:
            raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
        return
    _print_validation(report)


def _print_validation(report: dict) -> None:
    from catnip.models import validation as v
    click.echo(f"run {report['run']}")
    click.echo("\npoints: data segments lost on the loss link (drops / arrivals), real time kept")
    for pt in report["points"]:
        loss = " ".join(f"{cls} {'-' if x is None else format(x * 100, '.2f') + '%'}" for cls, x in pt["loss"].items())
        ph = "-" if pt.get("p_high") is None else f"{pt['p_high']:g}"
        late = "" if pt["late_fraction"] is None else \
            f" ({pt['late_fraction'] * 100:.2f}% of verdicts late, p99 {pt['late_p99_us']} us)"
        click.echo(f"  {pt['point']:>3} {pt.get('profile', ''):<9} p={pt.get('p', 0):<5g} p'={ph:<4} {pt['status']:<9} "
                   f"{loss}  real time: {'yes' if pt['realtime_ok'] else 'NO'}{late}")
    if report["excluded_points_not_real_time"]:
        click.echo(f"excluded (not real time): points {report['excluded_points_not_real_time']}")
    for profile, rep in report["profiles"].items():
        click.echo(f"\n== profile {profile}: measured mean latency (s) +- 95% CI, n, and the models ==")
        click.echo(f"{'p':>6} {'p_high':>6} {'KB':>5} {'measured':>16} {'n':>5} {'fail':>4} "
                   f"{'Sikdar':>7} {'Cardw.':>7} {'Hyst.':>7} {'P.CATNIP':>8}")
        for c in rep["cells"]:
            m = c["models"]
            cols = [f"{m[k]:>{w}.3f}" if k in m else " " * w
                    for k, w in (("Sikdar", 7), ("Cardwell-00", 7), ("Hysteresis", 7), ("Partial CATNIP", 8))]
            ph = "-" if c["p_high"] is None else f"{c['p_high']:g}"
            click.echo(f"{c['p']:>6g} {ph:>6} {c['kb']:>5g} {c['mean_s']:>9.3f} +-{c['ci95_s']:<5.3f}"
                       f"{c['n']:>5} {c['failed']:>4} " + " ".join(cols))
        for name, key, paper in (("Table 2 (short flows, <= 50 KB)", "table2", v.PAPER_TABLE2),
                                 ("Table 3 (long flows, >= 50 KB)", "table3", v.PAPER_TABLE3)):
            table = rep[key]
            ps = sorted({p for row in table.values() for p in row})
            if not ps:
                continue
            click.echo(f"\n{name}: eq. 13 error V(p), s^2 (paper's ns-2 values in brackets)")
            click.echo(f"{'model':<12}" + "".join(f"{'p=' + format(p * 100, 'g') + '%':>16}" for p in ps))
            for model_name, row in table.items():
                cells_txt = []
                for p in ps:
                    ref = dict(zip(v.PAPER_P, paper[model_name])).get(round(p, 4))
                    cells_txt.append(f"{row.get(p, float('nan')):>9.3f}" + (f" [{ref:>4.2f}]" if ref is not None
                                                                           else " " * 7))
                click.echo(f"{model_name:<12}" + "".join(cells_txt))
        if rep["catnip_gain"]:
            click.echo("\nPartial CATNIP (p' = measured p_high) against Reno at the same p: % faster (paper: 5-42%)")
            for p, kb, base, cat, gain in rep["catnip_gain"]:
                click.echo(f"  p={p:g} {kb:>5g} KB: Reno {base:.3f} s, CATNIP {cat:.3f} s: {gain:+.1f}%")
    for f in report.get("figures", []):
        click.echo(f"wrote {f}")


def _figures(cells, preds, out_dir, fmt: str = "svg") -> list[str]:
    """Figs. 3 and 4 (Reno measured against the three models, short and long transfers) and Fig. 6
    (Partial CATNIP measured and modelled beside Reno) per profile and loss point, as
    models/validation_figures.py builds them (the dashboard draws the same), all in one export session."""
    from catnip.models.validation_figures import figure_specs
    from catnip.results.figures import save_all
    return [str(path) for path in save_all([(spec, out_dir / f"{name}.{fmt}") for name, spec in figure_specs(cells, preds)])]


# `catnip model --help` lists these whole (click would cut each docstring at its width).
for _name, _short in {"hysteresis": "The hysteresis model (equations 3-12), sampled.",
                      "partial-catnip": "Partial CATNIP TCP: first and last 3 packets at p'.",
                      "cardwell": "Cardwell-00 (closed form).",
                      "sikdar": "A Sikdar-like model (closed form).",
                      "table": "Hysteresis model means over Table 1's sizes and losses.",
                      "measure": "Measure single transfers on the testbed.",
                      "validate": "The models against a measured run (Tables 2, 3; figures)."}.items():
    if _name in model.commands:
        model.commands[_name].short_help = _short

