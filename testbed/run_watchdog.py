"""A run's watchdog: when its runner dies without its own teardown (SIGKILL, the OOM killer, a
crash in C), nothing of the run keeps running and what it left on the machine is removed.

    python -m catnip.testbed.run_watchdog RUNNER_PID RUNNER_IDENTITY GROUP [--leftovers]

The runner starts it (`joined` below, where a run joins its group, testbed/run_cgroup.py) before
it moves itself into its run group, so the watchdog is born outside the group, in a session of its
own (a Ctrl-C or a closed terminal reaches the runner, whose teardown then runs, not the
watchdog). It says WATCHING once it holds a pidfd of the runner, then waits on that pidfd and on
its stdin. A runner that ends its run through its own teardown writes `done` there and the
watchdog leaves. A runner that dies first:

1. the run's group is ended at once with `cgroup.kill` (testbed/run_cgroup.remove): every process
   the run started, in whatever namespace and however deep (Apache's workers, Mininet's shells'
   children, side-by-side point workers), which a parent-death signal would not reach;
2. then, for a runner that held the machine lock (`--leftovers`; not a machine helper on another
   machine, testbed/machine_helper.py, whose run goes on elsewhere), holding that lock itself (so
   nothing of a run that starts meanwhile is touched), what `catnip clean` removes: links,
   bridges, namespaces, BPF pins, congestion controls, the sysctl.

The run's records stay where they are: the client files in its folder are read into the database
by the next `catnip list`, `catnip run` or `catnip clean` (controller/recover.py).
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from catnip.testbed import paths, processes, run_cgroup

READY = "WATCHING"
DONE = b"done"
READY_TIMEOUT_S = 20.0   # a cold interpreter on a loaded 2-core machine; measured well under 1 s idle
LOCK_WAIT_S = 120.0      # a run that took the lock meanwhile is refused over these leftovers and lets it go


class Watchdog:
    """The runner's handle on its watchdog."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def finished(self) -> None:
        """The run ended through its own teardown: the watchdog leaves without touching anything."""
        try:
            self.proc.stdin.write(DONE + b"\n")
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start(group: Path | None, leftovers: bool = True) -> Watchdog | None:
    """Start the watchdog of this process (the runner) and its run group; `leftovers`: it also
    removes what the run left (only for a holder of the machine lock: what carries our prefix is
    then its run's alone). None, said on stderr, when it does not come up (the run goes on; after
    a kill, `catnip clean` is needed then)."""
    argv = [paths.python(), "-m", "catnip.testbed.run_watchdog", str(os.getpid()), processes.identity(),
            str(group) if group is not None else "-", *(["--leftovers"] if leftovers else [])]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=paths.REPO,
                                start_new_session=True)
    except OSError as exc:
        print(f"catnip: no watchdog for this run ({exc.strerror}): after a kill, `catnip clean` removes what it"
              " left", file=sys.stderr)
        return None
    line = b""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(proc.stdout.fileno(), 64)
        if not chunk:
            break
        line += chunk
    proc.stdout.close()
    if line.strip() != READY.encode():
        proc.kill()
        proc.wait()
        print(f"catnip: the run's watchdog did not start ({line.strip()[:100]!r}, exit {proc.returncode}): after a"
              " kill, `catnip clean` removes what the run left", file=sys.stderr)
        return None
    return Watchdog(proc)


@contextmanager
def joined(watch: bool = True, leftovers: bool = False) -> Iterator[Path | None]:
    """Run the body with this process in a new run group; afterwards move back, end whatever the
    run left running in the group (its teardown should have; a leak must not outlive the run),
    and remove the group. With `watch`, a watchdog (this module), started before this
    process joins so that it is born outside the group, ends the group if this process dies
    without getting here (SIGKILL); with `leftovers` (a holder of the machine lock, whose run
    alone can own what carries our prefix) it also removes what the run left, as `catnip clean`."""
    root, before = run_cgroup.hierarchy(), run_cgroup.own_group()
    group = None
    watchdog = None
    candidate = root / f"{run_cgroup.PREFIX}{os.getpid()}" if root is not None and before is not None else None
    if candidate is not None:
        try:
            if candidate.exists():  # a run of an earlier process with our pid was killed: its leftovers
                run_cgroup.remove(candidate)
            candidate.mkdir()
            watchdog = start(candidate, leftovers) if watch else None
            (candidate / "cgroup.procs").write_text(str(os.getpid()))
            group = candidate
        except OSError as exc:
            print(f"catnip: no cgroup for this run ({exc.strerror}): cleanup after a kill falls back to"
                  " command-line markers", file=sys.stderr)
            try:
                candidate.rmdir()
            except OSError:
                pass
    if watchdog is None and watch and leftovers and group is None:  # no group: it still removes what the run left
        watchdog = start(None, leftovers)
    try:
        yield group
    finally:
        if group is not None:
            try:
                (before / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                (root / "cgroup.procs").write_text(str(os.getpid()))
            for line in run_cgroup.remove(group):
                print(f"catnip: {line}", file=sys.stderr)
        if watchdog is not None:  # the run ended through its own teardown: nothing for it to do
            watchdog.finished()


def _say(text: str) -> None:
    try:
        print(f"catnip watchdog: {text}", file=sys.stderr, flush=True)
    except OSError:  # the runner's terminal is gone
        pass


def _wait_for_death(pid: int, ident: str) -> bool:
    """Block until the runner dies (True) or says done (False)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):  # kernels before 5.3: its identity is polled instead
        pidfd = None
    if not processes.alive(ident):  # gone before the pidfd was opened (or the pid reused since)
        if pidfd is not None:
            os.close(pidfd)
        return True
    print(READY, flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the runner reads only that line
    said = b""
    stdin_open = True
    while True:
        watched = ([0] if stdin_open else []) + ([pidfd] if pidfd is not None else [])
        ready, _, _ = select.select(watched, [], [], None if pidfd is not None else 0.2)
        if pidfd is not None and pidfd in ready:
            return True
        if pidfd is None and not processes.alive(ident):
            return True
        if 0 in ready:
            chunk = os.read(0, 64)
            said += chunk
            if DONE in said:
                return False
            if not chunk:  # its end closed without `done`: it is dying; the pidfd says when it is dead
                stdin_open = False


def _lock(runner_pid: int) -> int | None:
    """The machine lock, as a run holds it (`pid N since T: what`), once the dead runner's flock
    is released; None if another holder keeps it past LOCK_WAIT_S."""
    path = paths.machine_lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.1)  # polled: a blocking flock cannot be bounded without a signal
    os.ftruncate(fd, 0)
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    os.pwrite(fd, f"pid {os.getpid()} since {since}: catnip watchdog removing what the run of pid {runner_pid}"
                  " left".encode(), 0)
    return fd


def _unlock(fd: int) -> None:
    os.ftruncate(fd, 0)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def clean_after(runner_pid: int, group: Path | None, leftovers: bool) -> None:
    started = time.monotonic()
    ended = 0
    if group is not None and group.exists():
        ended = len(run_cgroup.processes(group))
        for problem in run_cgroup.remove(group):
            _say(problem)
    killed_in = time.monotonic() - started
    if not leftovers:  # not a lock holder's (a machine helper on another machine): its group only
        _say(f"the process {runner_pid} died before its teardown: its group's {ended} processes were ended in"
             f" {killed_in:.2f} s")
        return
    fd = _lock(runner_pid)
    if fd is None:
        _say(f"the machine lock stayed taken for {LOCK_WAIT_S:g} s: run `catnip clean` once that run has ended")
        return
    try:
        from catnip.testbed import cleanup
        removed = cleanup.remove_all()
    finally:
        _unlock(fd)
    _say(f"the runner (pid {runner_pid}) died before its teardown: its {ended} processes were ended in"
         f" {killed_in:.2f} s and {len(removed)} leftovers removed in {time.monotonic() - started:.2f} s;"
         " its records are read from its folder by the next `catnip list`, `catnip run` or `catnip clean`")


def main(argv: list[str]) -> int:
    leftovers = "--leftovers" in argv
    argv = [a for a in argv if a != "--leftovers"]
    if len(argv) != 3 or not argv[0].isdigit():
        print("usage: python -m catnip.testbed.run_watchdog RUNNER_PID RUNNER_IDENTITY GROUP [--leftovers]", file=sys.stderr)
        return 2
    for sig in (signal.SIGINT, signal.SIGHUP):  # a session of its own; ignored all the same
        signal.signal(sig, signal.SIG_IGN)
    pid, ident = int(argv[0]), argv[1]
    group = None if argv[2] == "-" else Path(argv[2])
    if _wait_for_death(pid, ident):
        clean_after(pid, group, leftovers)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
