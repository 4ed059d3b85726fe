"""The skeleton every run shares (scenario runs, transfer measurements, `catnip fig2`): one run at
a time on the machine (a lock), Ctrl-C, SIGTERM and SIGHUP as a clean cancel, teardown that a second
signal cannot cut short, the kernel-global resources of a run, run ids, and how a point's end
is recorded. Written once here so the three kinds of runs cannot drift apart.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import sys
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Iterator

from catnip.results.store import Store
from catnip.spec import senders
from catnip.testbed import cleanup, hostconfig, paths, run_watchdog, sender, spm


@dataclass
class Progress:
    """What a progress display needs; the CLI draws it, the dashboard will stream it."""

    run_id: str
    point: int
    points: int
    label: str
    pages_done: int = 0     # work units done (pages when the point runs only web sessions)
    pages_total: int = 0    # of this many (0: open-ended)
    unit: str = "pages"     # what pages_done counts: an application's unit, or "units" for several
    detail: str = ""        # per application: "web 12/48 pages, telnet 300 keystrokes"
    elapsed: float = 0.0
    phase: str = "starting"
    bottleneck: dict = field(default_factory=dict)


ProgressSink = Callable[[Progress], None]


class RunCancelled(Exception):
    """Ctrl-C, SIGTERM or a cancel request: the point is torn down and recorded as cancelled."""


class RunBusy(RuntimeError):
    pass


class LeftoversFound(RunBusy):
    """The machine holds what a run that died without its teardown left: a new run would collide
    with it (Mininet's "RTNETLINK answers: File exists", seconds in) or share the machine with it."""


@contextmanager
def machine_lock(wait: bool = False) -> Iterator[None]:
    """Two runs must never fight over the machine unnoticed: one lock at a fixed path
    (paths.machine_lock_path), whatever CATNIP_STATE says, recording who holds it. RunBusy when it
    is held, or with `wait` until it is free (a cluster worker's point queues behind a local run)."""
    path = paths.machine_lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "unknown holder"
        fh.close()
        raise RunBusy(f"another catnip run is using this machine ({holder}; lock {path});"
                      " wait for it or stop it") from None
    try:
        fh.seek(0)
        fh.truncate()
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        fh.write(f"pid {os.getpid()} since {since}: {' '.join(sys.argv)[:200]}")
        fh.flush()
        # Asked while holding the lock: nothing of a live run is among them.
        left = cleanup.start_blockers()
        if left:
            raise LeftoversFound(f"a run that died without its teardown left {cleanup.describe(left)}: run `catnip"
                                 " clean` first, then start again")
        with run_watchdog.joined(leftovers=True):  # everything the run starts is born in its group; a watchdog outside it
            yield
    finally:
        fh.seek(0)
        fh.truncate()
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def machine_busy() -> bool:
    """Whether a run holds the machine lock now (the dashboard waits instead of failing)."""
    return cleanup.run_in_progress() is not None


# A closed terminal or a lost ssh session (SIGHUP) cancels as Ctrl-C and SIGTERM do: the default
# action would end the run with its network left behind, as SIGKILL does.
CANCEL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _detach_from_dead_terminal() -> None:
    """After SIGHUP the terminal is gone and writing to it fails (EIO): the teardown's messages would
    raise in the middle of the teardown. Point our terminal descriptors at /dev/null instead."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        devnull = os.fstat(null).st_rdev
        for fd in (0, 1, 2):
            try:
                st = os.fstat(fd)
                # A terminal that hung up is no tty for isatty() any more (its ioctls fail): any
                # character device but /dev/null itself is taken for it. Files and pipes stay.
                if stat.S_ISCHR(st.st_mode) and st.st_rdev != devnull:
                    os.dup2(null, fd)
            except OSError:
                pass
    finally:
        os.close(null)


@contextmanager
def signals_cancel() -> Iterator[None]:
    """SIGINT (Ctrl-C), SIGTERM and SIGHUP cancel the run cleanly, even where the shell that started
    us ignored SIGINT (background jobs of a non-interactive shell inherit SIG_IGN)."""
    def handler(signum, frame):
        if signum == signal.SIGHUP:
            _detach_from_dead_terminal()
        # Only the first signal cancels; later ones must not break the teardown it starts.
        for sig in CANCEL_SIGNALS:
            signal.signal(sig, _tearing_down)
        raise RunCancelled(f"stopped by {signal.Signals(signum).name}")
    previous = {sig: signal.signal(sig, handler) for sig in CANCEL_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _tearing_down(signum, frame) -> None:
    if signum == signal.SIGHUP:
        _detach_from_dead_terminal()
    try:
        print("catnip: tearing down, please wait", file=sys.stderr)
    except OSError:
        pass


@contextmanager
def cancel_deferred() -> Iterator[None]:
    """Hold the cancel signals while tearing down (a cancel cutting teardown short would leave
    detached processes behind); one that came meanwhile is delivered afterwards."""
    got: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: got.append(signum)) for sig in CANCEL_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if got:
            signal.raise_signal(got[0])


class TeardownStack(ExitStack):
    """An ExitStack whose unwinding a cancel signal cannot interrupt (cancel_deferred)."""

    def __exit__(self, *exc):
        with cancel_deferred():
            return super().__exit__(*exc)


@contextmanager
def kernel_resources(ccs: Iterable[str]) -> Iterator[None]:
    """What the kernel holds globally for a run, set up once and undone on every exit path: the
    CATNIP congestion controls (kernel-global names) and the global list of allowed congestion
    controls, whose value before the first change is saved where `catnip clean` finds it, so it is
    restored even after a SIGKILL. Runs, transfer measurements and `catnip fig2` all use this."""
    ccs = set(ccs)
    with TeardownStack() as stack:
        if ccs & set(senders.NAMES):
            stack.callback(_unregister_senders)
            sender.register()
        for cc in sorted(ccs):
            previous_cc = hostconfig.allow_congestion_control(cc)
            if previous_cc is not None:
                paths.state_dir().mkdir(parents=True, exist_ok=True)
                orig = paths.state_dir() / "allowed_cc.orig"
                if not orig.exists():  # the list before the first change: what `catnip clean` restores
                    orig.write_text(previous_cc)
                stack.callback(_restore_cc, previous_cc)
        yield


def _unregister_senders() -> None:
    sender.unregister()
    if not spm.PIN_ROOT.exists():  # no marker left that shares the document map
        sender.release_shared_map()


def _restore_cc(previous: str) -> None:
    hostconfig.restore_allowed_congestion_control(previous)
    (paths.state_dir() / "allowed_cc.orig").unlink(missing_ok=True)




def new_run_id(name: str) -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{name[:24]}-{uuid.uuid4().hex[:4]}"




def emit_progress(p: Progress) -> None:
    """A point run in another process (point_worker, cluster_point) tells its parent its progress:
    one JSON line each on stdout. A parent that is gone (broken pipe) cancels the point: its death
    signal may be on the way, and nobody reads the point any more."""
    try:
        print(json.dumps(asdict(p)), flush=True)
    except BrokenPipeError:
        raise RunCancelled("the process that started this point is gone") from None


@dataclass
class RunEnd:
    """How a run ended, as `recorded_run` writes it: done unless `fail` is called or it raises."""
    status: str = "done"
    error: str | None = None

    def fail(self, error: str) -> None:
        self.status, self.error = "failed", error


@contextmanager
def recorded_run(store: Store, run_id: str) -> Iterator[RunEnd]:
    """The end of a created run, recorded once whatever happens inside (for runs, transfer
    measurements and cluster runs alike): cancelled (RunCancelled, raised again), failed with the
    exception that ended it (raised again), failed as `fail` said, or done."""
    end = RunEnd()
    try:
        yield end
    except RunCancelled as exc:
        end.status, end.error = "cancelled", str(exc)
        raise
    except Exception as exc:  # set-up shared by the points failed (e.g. registering the senders)
        end.fail(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        store.finish_run(run_id, end.status, end.error)


def record_point(store: Store, run_id: str, index: int, execute: Callable[[], None]) -> str | None:
    """Run one point and record how it ended: done; cancelled (raised again as RunCancelled); or
    failed, returned as the run's error while the next point still runs."""
    try:
        execute()
        store.update_point(run_id, index, status="done", finished=time.time())
        return None
    except (RunCancelled, KeyboardInterrupt) as exc:
        store.update_point(run_id, index, status="cancelled", error=str(exc) or "interrupted", finished=time.time())
        raise RunCancelled(str(exc) or "interrupted") from None
    except Exception as exc:  # noqa: BLE001 - recorded; the next point still runs
        store.update_point(run_id, index, status="failed", error=f"{type(exc).__name__}: {exc}", finished=time.time())
        return f"point {index}: {exc}"
