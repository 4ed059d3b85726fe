"""`catnip cluster scheduler|worker` and the `--cluster` side of `catnip run` (controller/cluster.py).
Registered on the `catnip` group by cli/main.py."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import click

from catnip.testbed import paths

DEFAULT_PORT = 8786  # Dask's
# A worker that dies while running a point fails its task at once (KilledWorker) instead of Dask
# quietly sending it elsewhere: the coordinator records the attempt and sends it again itself.
SCHEDULER_ENV = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
# Dask's HTTP servers (status pages, Prometheus, JSON of the cluster's state) with no route.
HTTP_OFF_ENV = {"DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES": "[]", "DASK_DISTRIBUTED__WORKER__HTTP__ROUTES": "[]"}


def _dask() -> str:
    exe = Path(sys.executable).with_name("dask")
    if not exe.exists():
        raise click.ClickException(f"{exe} is missing: Dask distributed is not installed here (scripts/setup.sh)")
    return str(exe)


@click.group(name="cluster", short_help="Start a Dask scheduler or worker for `catnip run --cluster`.")
def cluster_group() -> None:
    """The machines of `catnip run FILE --cluster ADDRESS` (docs/cluster.md): one scheduler, and a
    worker on each machine that runs points. Every machine needs the same checkout, built."""


def _tls_dir_option(help_: str):
    return click.option("--tls-dir", type=click.Path(path_type=Path), default=None, metavar="DIR",
                        help=help_ + " (default: <data dir>/cluster/tls; docs/cluster.md, Security)")


def _tls(folder: Path | None, make: bool = False, new: bool = False) -> Path:
    """The certificate folder, checked (and made first by the scheduler); a one-line error otherwise."""
    from catnip.controller import cluster_tls
    folder = folder or cluster_tls.default_dir()
    try:
        if make:
            _, made = cluster_tls.ensure(folder, new)
            click.echo(f"cluster certificates: {'made in' if made else 'kept in'} {folder} (copy this folder, as root,"
                       " to every worker and coordinator machine)", err=True)
        else:
            cluster_tls.check(folder)
    except (cluster_tls.TLSError, OSError) as exc:
        raise click.ClickException(f"--tls-dir: {exc}") from None
    return folder


def _bare_host(host: str) -> str:
    if "://" in host:  # the scheme is always tls, set here
        raise click.BadParameter(f"{host!r}: give an address or host name without a scheme (the cluster speaks TLS"
                                 " only)", param_hint="--host")
    return host


@cluster_group.command(name="scheduler", short_help="The scheduler, in the foreground (Ctrl-C stops it).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to listen on (TLS only: whoever connects must hold this cluster's certificate)")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.option("--dashboard/--no-dashboard", default=False, show_default=True,
              help="Dask's own status page, on 127.0.0.1:8787 only (any local user can read it)")
@_tls_dir_option("the cluster's CA, certificate and key, made here if missing")
@click.option("--new-certs", is_flag=True, help="replace the folder's certificates by new ones (every worker and"
              " coordinator then needs the new folder)")
def scheduler_cmd(host: str, port: int, dashboard: bool, tls_dir: Path | None, new_certs: bool) -> None:
    """Run the scheduler in the foreground (Ctrl-C stops it); it speaks TLS only, with the
    certificates of --tls-dir, and prints its tls:// address."""
    from catnip.controller import cluster_tls
    host = _bare_host(host)
    folder = _tls(tls_dir, make=True, new=new_certs)
    # Dask opens an HTTP server even with --no-dashboard, on all interfaces unless told: loopback
    # only, and without the dashboard no route at all (DASHBOARD_OFF_ENV).
    args = [_dask(), "scheduler", "--host", host, "--port", str(port), "--protocol", "tls",
            *cluster_tls.dask_args(folder), "--dashboard-address", "127.0.0.1:8787" if dashboard else "127.0.0.1:0"]
    env = {**os.environ, **SCHEDULER_ENV}
    if not dashboard:
        args.append("--no-dashboard")
        env.update(HTTP_OFF_ENV)
    os.execve(args[0], args, env)


@cluster_group.command(name="worker", short_help="A worker of the scheduler at ADDRESS (tls://HOST:PORT).")
@click.argument("address")
@click.option("--name", default=None, help="the worker's name (default this machine's host name)")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address the worker listens on (the scheduler and other workers must reach it)")
@_tls_dir_option("the cluster's certificates, as the scheduler made them")
def worker_cmd(address: str, name: str | None, host: str, tls_dir: Path | None) -> None:
    """Run a worker of the scheduler at ADDRESS (tls://HOST:PORT) in the foreground: one point at a
    time (one thread, one 'machine' resource), with this checkout's code and builds."""
    from catnip.controller import cluster_tls
    try:
        cluster_tls.check_address(address, "")
    except cluster_tls.TLSError as exc:
        raise click.BadParameter(str(exc), param_hint="ADDRESS") from None
    host = _bare_host(host)
    if os.geteuid() != 0:
        raise click.ClickException("a worker runs points, which need root (namespaces, iptables)")
    folder = _tls(tls_dir)
    try:
        scratch = cluster_tls.scratch_dir()
    except (cluster_tls.TLSError, OSError) as exc:
        raise click.ClickException(f"the worker's scratch folder: {exc}") from None
    # The worker's and its nanny's listeners are TLS (the scheduler's address says so); its HTTP
    # server is on loopback and serves nothing.
    args = [_dask(), "worker", address, "--nworkers", "1", "--nthreads", "1", "--resources", "machine=1",
            "--name", name or socket.gethostname(), "--host", host, "--protocol", "tls",
            *cluster_tls.dask_args(folder), "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
            "--local-directory", str(scratch)]
    env = {**os.environ, **HTTP_OFF_ENV,
           "PYTHONPATH": os.pathsep.join(p for p in (str(paths.REPO), os.environ.get("PYTHONPATH")) if p)}
    os.chdir(paths.REPO)
    os.execve(args[0], args, env)
