"""Runs a loaded scenario: one emulated network per sweep point, recorded into the store.

Each point is a `PointRun` (controller/point.py) on a freshly built network; teardown runs on
every exit path and a failed point is recorded as failed while the next point still runs. Only
one run uses the machine at a time (controller/skeleton.py); its points run one after another,
or side by side in namespaces of their own (controller/parallel.py).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from catnip.controller.point import PointRun
from catnip.controller.recover import close_abandoned_runs
from catnip.controller.skeleton import (Progress, ProgressSink, recorded_run,
                                 kernel_resources, machine_lock, new_run_id, record_point,
                                 signals_cancel)
from catnip.results.store import Store
from catnip.spec import senders
from catnip.spec.scenario import Scenario, Sweep
from catnip.controller.point_plan import PointPlan, plan_points
from catnip.testbed import paths, processes
from catnip.testbed.hostconfig import HostConfigError
from catnip.testbed.capabilities import Capabilities
from catnip.testbed.metadata import git_revision, versions
from catnip.workloads import docroot as docroot_mod
from catnip.workloads.pages import catnip_pages

@contextmanager
def run_resources(scenarios: list[Scenario]) -> Iterator[None]:
    """What every point of a run shares, set up once per run (so points can run side by side)
    and undone on every exit path: the kernel-global congestion controls and allowed list
    (skeleton.kernel_resources) and the served documents."""
    from mininet.net import Mininet
    # Mininet raises the socket buffer and neighbour-table limits in the namespace it starts in;
    # hosts copy them from the initial namespace, so that must happen here, not in a worker's.
    Mininet.init()
    with kernel_resources(set().union(*(s.tcp.all_cc() for s in scenarios))):
        paths.state_dir().mkdir(parents=True, exist_ok=True)
        paths.state_dir().chmod(0o755)
        docroot_mod.write_docroot(catnip_pages(), paths.docroot())
        yield


def machine_problems(scenarios: list[Scenario], caps: Capabilities) -> list[str]:
    """What the scenarios' hosts need that this machine lacks, one line each, found before a run
    starts: the fq qdisc of `tcp.groups.G.pacing: fq` (this kernel may lack it; `catnip check`)."""
    out = []
    for sc in scenarios:
        for where, qdisc in sc.host_qdiscs().items():
            line = (f"{where}: '{qdisc}' needs the {qdisc} qdisc, which this kernel lacks (`catnip check`); pace with"
                    f" 'internal' ({' or '.join(senders.PACEABLE)}) instead")
            if not caps.qdiscs.get(qdisc) and line not in out:
                out.append(line)
    return out


def recording_progress(sink: ProgressSink, store: Store, every: float = 1.0) -> ProgressSink:
    """Also write progress to the store (at most once a second, and at each change of phase)."""
    last: dict[int, tuple[float, str]] = {}

    def record(p: Progress) -> None:
        sink(p)
        t, phase = last.get(p.point, (0.0, ""))
        if p.phase != phase or time.monotonic() - t >= every:
            last[p.point] = (time.monotonic(), p.phase)
            store.add_progress(p.run_id, p.point, p.elapsed, p.phase, p.pages_done, p.pages_total)
    return record


def run(sweep: Sweep, caps: Capabilities, store: Store, progress: ProgressSink = lambda p: None,
        cancelled: Callable[[], bool] = lambda: False, run_id: str | None = None, jobs: int = 1,
        room: float = 0.5, settle: float = 30.0, wait_for_machine: bool = False) -> str:
    """Run every point of a sweep; returns the run id. Records survive failures of single points.

    jobs > 1 runs up to that many points side by side, each in a network namespace of its own,
    starting another only while the machine has room: every running point `settle` seconds into
    its workload and the CPU busy below `room` (controller/parallel.py). `wait_for_machine` waits
    for another run holding the machine to end instead of failing (RunBusy)."""
    problems = caps.blocking_problems()
    if problems:
        raise RuntimeError("this machine cannot run scenarios: " + "; ".join(problems))
    missing = machine_problems([s for _, s in sweep.points], caps)
    if missing:  # HostConfigError: the CLI reports it in one line, as the run's shared set-up failing
        raise HostConfigError(missing[0])
    if jobs > 1:
        from catnip.controller import parallel
        parallel.check_isolatable(sweep, caps)
    run_id = run_id or new_run_id(sweep.name)
    first = sweep.points[0][1]
    with machine_lock(wait_for_machine), signals_cancel():
        close_abandoned_runs(store)
        store.create_run(run_id, sweep.name, sweep.source, sweep.raw, sweep.sweep, first.seed, git_revision(),
                         versions(), caps.to_dict(), runner=processes.identity())
        artifacts = paths.runs_dir(store.path) / run_id
        plans = plan_points(sweep, artifacts)
        with recorded_run(store, run_id) as end, run_resources([s for _, s in sweep.points]):
            if jobs > 1:
                failures = parallel.run_points(plans, run_id, caps, store, artifacts, progress, cancelled,
                                               jobs, room, settle)
            else:
                failures = [f for plan in plans
                            if (f := _run_in_process(plan, run_id, caps, store, artifacts,
                                                     recording_progress(progress, store), cancelled))]
            if failures:
                end.fail(failures[-1])
    return run_id


def _run_in_process(plan: PointPlan, run_id: str, caps: Capabilities, store: Store, artifacts: Path,
                    progress: ProgressSink, cancelled: Callable[[], bool]) -> str | None:
    plan.create(store, run_id)
    point = PointRun(run_id, plan, caps, store, artifacts, progress, cancelled)
    prog = plan.progress(run_id)
    return record_point(store, run_id, plan.index, lambda: point.execute(prog))
