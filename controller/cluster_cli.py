"""`catnip cluster scheduler|worker` and the `--cluster` side of `catnip run` (controller/cluster.py).
Registered on the `catnip` group by controller/cli.py."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import click

from testbed import paths

DEFAULT_PORT = 8786  # Dask's
# A worker that dies while running a point fails its task at once (KilledWorker) instead of Dask
# quietly sending it elsewhere: the coordinator records the attempt and sends it again itself.
SCHEDULER_ENV = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}


def _dask() -> str:
    exe = Path(sys.executable).with_name("dask")
    if not exe.exists():
        raise click.ClickException(f"{exe} is missing: Dask distributed is not installed here (scripts/setup.sh)")
    return str(exe)


@click.group(name="cluster", short_help="Start a Dask scheduler or worker for `catnip run --cluster`.")
def cluster_group() -> None:
    """The machines of `catnip run FILE --cluster ADDRESS` (docs/cluster.md): one scheduler, and a
    worker on each machine that runs points. Every machine needs the same checkout, built."""


@cluster_group.command(name="scheduler")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to listen on; anything but localhost lets that network submit work, which runs as root"
                   " on the workers: use an SSH tunnel or Dask's TLS (docs/cluster.md)")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.option("--dashboard/--no-dashboard", default=False, show_default=True, help="Dask's own status page")
def scheduler_cmd(host: str, port: int, dashboard: bool) -> None:
    """Run the scheduler in the foreground (Ctrl-C stops it)."""
    args = [_dask(), "scheduler", "--host", host, "--port", str(port)]
    if not dashboard:
        args.append("--no-dashboard")
    os.execve(args[0], args, {**os.environ, **SCHEDULER_ENV})


@cluster_group.command(name="worker")
@click.argument("address")
@click.option("--name", default=None, help="the worker's name (default this machine's host name)")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address the worker listens on (the scheduler and other workers must reach it)")
def worker_cmd(address: str, name: str | None, host: str) -> None:
    """Run a worker of the scheduler at ADDRESS in the foreground: one point at a time (one thread,
    one 'machine' resource), with this checkout's code and builds."""
    if os.geteuid() != 0:
        raise click.ClickException("a worker runs points, which need root (namespaces, iptables)")
    args = [_dask(), "worker", address, "--nworkers", "1", "--nthreads", "1", "--resources", "machine=1",
            "--name", name or socket.gethostname(), "--host", host, "--no-dashboard"]
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(p for p in (str(paths.REPO), os.environ.get("PYTHONPATH")) if p)}
    os.chdir(paths.REPO)
    os.execve(args[0], args, env)
