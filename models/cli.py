"""`catnip model ...`: the latency models' predictions from the command line."""

from __future__ import annotations

import json
import statistics

import click

from controller import units
from models import cardwell, hysteresis, partial_catnip
from models.params import ModelInputError, Path

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
    """The hysteresis model (section 3, eqs. 3-12), sampled."""
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


@model.command(name="cardwell")
@click.option("--size", required=True, help="transfer size, e.g. 8KB or 8192")
@click.option("--p", "p", type=float, required=True, help="packet loss probability, [0, 1)")
@click.option("--mss", type=int, default=1433, show_default=True)
@click.option("--rtt", default="200ms", show_default=True)
@click.option("--wmax", type=int, default=24, show_default=True)
@click.option("--t0", default="1s", show_default=True)
@click.option("--delack", default="100ms", show_default=True)
def cardwell_cmd(size, p, mss, rtt, wmax, t0, delack):
    """Cardwell-00: slow start, first loss, then Padhye's steady-state rate (closed form)."""
    path = _path(size, p, mss, rtt, wmax, t0, delack)
    click.echo(f"cardwell-00: {path.size} B = {path.packets} packets, p {path.p:g}: {cardwell.latency(path):.3f} s")


@model.command()
@click.option("--samples", type=click.IntRange(1, 1_000_000), default=1000, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
def table(samples: int, seed: int) -> None:
    """Mean latency (s) of the hysteresis model over Table 1's sizes and loss rates (default path)."""
    click.echo(f"{'KB':>5} " + " ".join(f"{'p=' + format(p, 'g'):>8}" for p in TABLE1_P))
    for kb in TABLE1_KB:
        row = [statistics.fmean(hysteresis.latencies(Path(size=kb * 1024, p=p), samples, seed)) for p in TABLE1_P]
        click.echo(f"{kb:>5} " + " ".join(f"{v:>8.3f}" for v in row))
