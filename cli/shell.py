"""`catnip shell SCENARIO`: the scenario's network up (one sweep point), Mininet's CLI on it
(controller/shell.py). Registered on the `catnip` group by cli/main.py."""

from __future__ import annotations

from pathlib import Path

import click

from catnip.controller import validate as validate_mod


@click.command(name="shell", short_help="A scenario's network up with its links, and Mininet's CLI on it.")
@click.argument("scenario_file")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="override a field, as `catnip run --set` (repeatable)")
@click.option("--point", type=click.IntRange(min=0), default=0, show_default=True,
              help="which sweep point's network (0-based, in the order `catnip validate` lists them)")
@click.option("--script", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="run Mininet CLI commands from this file instead of reading them typed, then tear down")
def shell_cmd(scenario_file: str, overrides: tuple[str, ...], point: int, script: Path | None) -> None:
    """Bring SCENARIO_FILE's network up (hosts, routers, every link direction's rate, delay, buffer,
    policy and edge functions in the queue engines) and open Mininet's CLI on it: `ctpc1 ping ctpv1`,
    `ctprs tcpdump -ni ctprs-eth0`, `xterm`, `exit`. The applications are not started. Everything is
    torn down on exit, Ctrl-C or a closed terminal."""
    sweep = validate_mod.load(validate_mod.scenario_path(scenario_file), list(overrides))
    if point >= len(sweep.points):
        raise click.BadParameter(f"{point}: the scenario has {len(sweep.points)} point(s), 0-{len(sweep.points) - 1}",
                                 param_hint="--point")
    from catnip.controller import shell, skeleton
    from catnip.testbed.capabilities import probe
    sc = sweep.points[point][1]
    why = shell.refusal(sc)
    if why:
        raise click.ClickException(why)
    if skeleton.machine_busy():
        from catnip.testbed.cleanup import run_in_progress
        raise click.ClickException(f"a run is in progress ({run_in_progress()}): start the shell once it is over")
    try:
        shell.interactive(sc, probe(), script)
    except skeleton.RunCancelled:
        raise SystemExit(130) from None
