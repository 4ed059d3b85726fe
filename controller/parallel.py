"""Runs the points of one sweep side by side while the machine has room.

Each point runs in a worker process (controller/point_worker.py) that `unshare` gives a network
and a mount namespace of its own, so the point's Mininet hosts, links, bridges, addresses and
iptables rules are private to it and two points can use the same names. What the kernel keeps
global (congestion-control names, the allowed list) and the documents are set up once per run
(runner.run_resources). OVS bridges live in one ovsdb for the whole machine, so side-by-side
points need the Linux bridge as access switch (the `auto` choice on a kernel without the OVS
datapath).

Room is measured, not assumed: another point starts only when every running point has been in
its workload for `settle` seconds (set-up is CPU-heavy; the room is judged by the workload) and
the whole machine's CPU was busy less than `room` over the last WINDOW_S. Each point records how
crowded the machine was when it started (fidelity.concurrency), and its verdict lateness says
whether the crowding cost it real time.
"""

from __future__ import annotations

import json
import os
import pickle
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from catnip.controller.fidelity import idle_jiffies
from catnip.controller.point import cpu_times
from catnip.controller.skeleton import CANCEL_SIGNALS, Progress, ProgressSink, RunCancelled

if TYPE_CHECKING:
    from catnip.controller.point_plan import PointPlan
from catnip.spec.scenario import Sweep
from catnip.results.store import Store
from catnip.testbed import cleanup, paths, processes
from catnip.testbed.capabilities import Capabilities

WINDOW_S = 10.0
TEARDOWN_S = 180.0  # a cancelled point tears down 100+ hosts; after this it is killed
PROGRESS_FIELDS = {f.name for f in fields(Progress)}


def check_isolatable(sweep: Sweep, caps: Capabilities) -> None:
    """ValueError unless every point of the sweep can run in a namespace of its own."""
    if shutil.which("unshare") is None:
        raise ValueError("running points side by side needs `unshare` (util-linux)")
    for assignment, scenario in sweep.points:
        if scenario.run.machines:  # one imitation's names and VXLAN ids per machine at a time
            raise ValueError(f"point {assignment or 'single'} runs routers on other machines (run.machines): "
                             "run it with --jobs 1")
        switch = caps.choose_switch(scenario.topology.access_switch, scenario.topology.ovs_datapath)
        if switch != "linuxbridge":
            raise ValueError(f"running points side by side needs the Linux bridge as access switch; point "
                             f"{assignment or 'single'} uses {switch} (OVS bridges are global to the machine): "
                             f"set topology.access_switch=linuxbridge or run with --jobs 1")


class CpuGauge:
    """How busy the whole machine's CPU was over a recent window (/proc/stat). With `nice_is_idle`
    (run.keep_awake) the nice time is idle too: the keep-awake loops' (testbed/keep_awake.py)."""

    def __init__(self, nice_is_idle: bool = False) -> None:
        self._samples: deque[tuple[float, int, int]] = deque()  # (time, busy jiffies, all jiffies)
        self.nice_is_idle = nice_is_idle

    def sample(self) -> None:
        v = cpu_times()
        now = time.monotonic()
        self._samples.append((now, sum(v) - idle_jiffies(v, self.nice_is_idle), sum(v)))
        while self._samples and now - self._samples[0][0] > 3 * WINDOW_S:
            self._samples.popleft()

    def busy(self, window: float) -> float | None:
        """Busy fraction over the last `window` seconds; None until that much has been sampled."""
        if not self._samples:
            return None
        t1, b1, a1 = self._samples[-1]
        older = [s for s in self._samples if t1 - s[0] >= window]
        if not older:
            return None
        t0, b0, a0 = older[-1]
        return (b1 - b0) / (a1 - a0) if a1 > a0 else None


@dataclass
class Worker:
    plan: PointPlan
    proc: subprocess.Popen
    log: Path
    reader: threading.Thread
    workload_since: float | None = None


def _read_progress(w_index: int, stream, updates: queue.Queue) -> None:
    for line in stream:
        try:
            data = json.loads(line)
        except ValueError:  # not ours (a library printing)
            continue
        if isinstance(data, dict) and set(data) == PROGRESS_FIELDS:
            updates.put((w_index, data))


def _worker_env(store: Store) -> dict[str, str]:
    # Same working directory as the runner (relative paths mean the same), our modules first.
    python_path = os.pathsep.join(p for p in (str(paths.REPO), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "CATNIP_DB": str(store.path.resolve()), "PYTHONPATH": python_path}


def _launch(plan: PointPlan, run_id: str, caps: Capabilities, store: Store, artifacts: Path,
            updates: queue.Queue, concurrency: dict, code: str) -> Worker:
    plan.create(store, run_id)
    spec = plan.workdir / "worker.pickle"
    with open(spec, "wb") as fh:
        pickle.dump({"run_id": run_id, "plan": plan, "caps": caps, "artifacts": artifacts,
                     "concurrency": concurrency, "runner_pid": os.getpid()}, fh)
    log = plan.workdir / "worker.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(["unshare", "--net", "--mount", "--propagation", "private", "--",
                                 paths.python(), "-m", "catnip.controller.point_worker", str(spec), code],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True,
                                env=_worker_env(store))
    reader = threading.Thread(target=_read_progress, args=(plan.index, proc.stdout, updates), daemon=True)
    reader.start()
    return Worker(plan, proc, log, reader)


def _has_room(running: list[Worker], gauge: CpuGauge, jobs: int, room: float,
              settle: float) -> tuple[bool, float | None]:
    busy = gauge.busy(WINDOW_S)
    if not running:
        return True, busy
    if len(running) >= jobs:
        return False, busy
    now = time.monotonic()
    settled = all(w.workload_since is not None and now - w.workload_since >= settle for w in running)
    return settled and busy is not None and busy < room, busy


def _finished(w: Worker, store: Store, run_id: str) -> str | None:
    """The point's outcome as the run's error text, or None when it is done."""
    w.reader.join(timeout=5)
    row = store.point(run_id, w.plan.index)
    status = row["status"] if row is not None else None
    if status == "done":
        return None
    if status in ("failed", "cancelled"):
        return f"point {w.plan.index}: {row['error']}"
    # The worker died before it could record how the point ended.
    tail = w.log.read_text(errors="replace").strip().splitlines()[-1:] if w.log.exists() else []
    error = f"worker exited with code {w.proc.returncode}" + (f": {tail[0]}" if tail else "") + f" (log {w.log})"
    store.update_point(run_id, w.plan.index, status="failed", error=error, finished=time.time())
    return f"point {w.plan.index}: {error}"


def _stop_all(running: list[Worker], store: Store, run_id: str) -> None:
    """Cancel every running point; each worker tears its network down and records the point."""
    killed = processes.stop_all([w.proc for w in running], TEARDOWN_S)
    for w in running:
        row = store.point(run_id, w.plan.index)
        if row is not None and row["status"] == "running":
            store.update_point(run_id, w.plan.index, status="cancelled", error="cancelled", finished=time.time())
    if killed:  # every worker has ended: what the killed ones left is removed by name
        print(f"catnip: a point did not tear down within {TEARDOWN_S:.0f} s; removing what it left",
              file=sys.stderr)
        cleanup.clean()


def run_points(plans: list[PointPlan], run_id: str, caps: Capabilities, store: Store, artifacts: Path,
               progress: ProgressSink, cancelled: Callable[[], bool], jobs: int, room: float,
               settle: float) -> list[str]:
    """Run the plans, up to `jobs` at once while the machine has room; returns the failures."""
    pending, running, failures = list(plans), [], []
    updates: queue.Queue = queue.Queue()
    gauge = CpuGauge(nice_is_idle=any(p.scenario.run.keep_awake for p in plans))
    code = paths.code_fingerprint()  # the code this run started with; every worker must run the same
    try:
        while pending or running:
            if cancelled():
                raise RunCancelled("cancelled")
            gauge.sample()
            ok, busy = _has_room(running, gauge, jobs, room, settle)
            if pending and ok:
                concurrency = {"jobs": jobs, "room": room, "settle_s": settle, "beside_at_start": len(running),
                               "cpu_busy_before_start": None if busy is None else round(busy, 4)}
                # A cancel arriving mid-launch must find the new worker among the running ones.
                held = signal.pthread_sigmask(signal.SIG_BLOCK, set(CANCEL_SIGNALS))
                try:
                    running.append(_launch(pending.pop(0), run_id, caps, store, artifacts, updates, concurrency,
                                           code))
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, held)
            while True:
                try:
                    index, data = updates.get_nowait()
                except queue.Empty:
                    break
                w = next((w for w in running if w.plan.index == index), None)
                if w is not None and data.get("phase") == "running workload" and w.workload_since is None:
                    w.workload_since = time.monotonic()
                progress(Progress(**data))
            for w in [w for w in running if w.proc.poll() is not None]:
                running.remove(w)
                failure = _finished(w, store, run_id)
                if failure:
                    failures.append(failure)
            time.sleep(0.5)
    except BaseException:  # cancelled (signal or request): every running point tears down first
        _stop_all(running, store, run_id)
        raise
    return failures
