"""`catnip run FILE --cluster ADDRESS`: a sweep's points fanned out over worker machines.

The work goes through Dask distributed (docs/cluster.md says why Dask and not Ray): a scheduler
at ADDRESS and workers started with `catnip cluster scheduler` and `catnip cluster worker`, every
connection TLS with the cluster's own certificates (controller/cluster_tls.py: a tls:// ADDRESS
only). This process, the coordinator, records the run in its own database as a local run does:

1. It asks every worker for its identity (controller/cluster_task.identity) and refuses, with
   what differs, each one whose code, builds or kernel features are not its own, or that does not
   offer the `machine` resource (one point per worker machine at a time).
2. Each sweep point (with its repetitions) becomes one task: the scenario's text, the overrides
   narrowed to that point (`sweep.KEY=[value]`), the seed, and the hash of the point's resolved
   scenario, which the worker checks it resolves to (controller/cluster_point.py).
3. A finished point comes back as an export document (results/archive.py) and is merged into the
   run under its own point numbers, with its folder: reports, pooling and the dashboard read it as
   a local point. It is committed at once, so a coordinator that dies keeps every point that
   finished, and `--resume RUN_ID` runs only the points that are not `done`.
4. A worker that dies takes only its point: the task fails with Dask's KilledWorker, the attempt
   is recorded, and the point is sent again up to `retries` times, then recorded failed.
5. Ctrl-C (or a cancelled run) sets a Dask Event the tasks watch: each running point tears its
   network down on its worker and comes back cancelled, with its records so far.
"""

from __future__ import annotations

import io
import itertools
import json
import queue
import shutil
import socket
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from catnip.controller import cluster_task, cluster_tls
from catnip.controller.cluster_point import resolved_hash
from catnip.controller.point_plan import PointPlan, plan_points
from catnip.controller.recover import close_abandoned_runs
from catnip.controller.skeleton import Progress, ProgressSink, RunCancelled
from catnip.results import archive
from catnip.results.store import Store
from catnip.results.store_runs import dumps
from catnip.spec import scenario as scenario_mod
from catnip.spec.scenario import Sweep
from catnip.testbed import paths, processes
from catnip.testbed.capabilities import Capabilities
from catnip.testbed.metadata import git_revision, versions

RESOURCE = "machine"  # what `catnip cluster worker` offers one of: one point per machine at a time
CONNECT_S = 10.0
POLL_S = 0.5
CANCEL_WAIT_S = 240.0  # how long a cancel waits for the running points to come back torn down
PROGRESS_FIELDS = set(Progress.__dataclass_fields__)


class ClusterError(RuntimeError):
    """The cluster cannot run this sweep; the message is one line saying why."""


@dataclass
class PointTask:
    """One sweep point with its repetitions, as one Dask task."""

    plans: list[PointPlan]
    spec: dict[str, Any]
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def first_point(self) -> int:
        return self.plans[0].index


def check_address(address: str) -> None:
    """ClusterError unless `address` is tls:// (the cluster speaks nothing else; docs/cluster.md, Security)."""
    try:
        cluster_tls.check_address(address, "--cluster")
    except cluster_tls.TLSError as exc:
        raise ClusterError(str(exc)) from None


def connect(address: str, tls_dir: Path | None = None):
    """A Dask client of the scheduler at `address`, authenticated by the cluster's certificates in
    `tls_dir` (default cluster_tls.default_dir()), or ClusterError."""
    from distributed import Client
    check_address(address)
    try:
        security = cluster_tls.security(tls_dir or cluster_tls.default_dir())
    except cluster_tls.TLSError as exc:
        raise ClusterError(f"--tls-dir: {exc}") from None
    try:
        # The default client: distributed.wait uses it.
        return Client(address, security=security, timeout=CONNECT_S)
    except (OSError, TimeoutError) as exc:
        if "TLS certificate does not match" in str(exc):  # Dask's words when either end refused the other
            raise ClusterError(f"--cluster {address}: the scheduler there was not started with the certificates of"
                               f" {tls_dir or cluster_tls.default_dir()} (copy its folder here, docs/cluster.md)"
                               ) from None
        raise ClusterError(f"--cluster {address}: no Dask scheduler answers there within {CONNECT_S:.0f} s ({exc});"
                           " start one with `catnip cluster scheduler`") from None


def local_identity(caps: Capabilities) -> dict[str, Any]:
    return {"host": socket.gethostname(), "code": paths.code_fingerprint(),
            "builds": cluster_task.build_fingerprint(),
            "capabilities": cluster_task.comparable_capabilities(caps.to_dict())}


def _differences(mine: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    out = []
    if theirs.get("code") != mine["code"]:
        out.append(f"testbed code {theirs.get('code')} (ours {mine['code']})")
    if theirs.get("builds") != mine["builds"]:
        out.append(f"engine/BPF builds {theirs.get('builds')} (ours {mine['builds']})")
    caps, ours = theirs.get("capabilities") or {}, mine["capabilities"]
    for key in sorted(set(caps) | set(ours)):
        if caps.get(key) != ours.get(key):
            if isinstance(ours.get(key), dict) and isinstance(caps.get(key), dict):
                keys = sorted(k for k in set(caps[key]) | set(ours[key]) if caps[key].get(k) != ours[key].get(k))
                out.append(f"{key} " + ", ".join(f"{k}={caps[key].get(k)} (ours {ours[key].get(k)})" for k in keys))
            else:
                out.append(f"{key}={caps.get(key)} (ours {ours.get(key)})")
    return out


def check_workers(client, mine: dict[str, Any], known: dict[str, Any] | None = None
                  ) -> tuple[list[str], list[str]]:
    """The addresses of the workers that may run points, and a line per refused worker. `known`
    keeps identities already asked for: a worker is probed once (the probe builds a namespace,
    which a point running on that machine need not share its CPU with)."""
    info = client.scheduler_info()["workers"]
    known = {} if known is None else known
    new = [a for a in info if a not in known]
    if new:
        known.update(client.run(cluster_task.identity, workers=new, on_error="return"))
    identities = known
    accepted, refused = [], []
    for address in sorted(info):
        name = info[address].get("name", address)
        who = f"worker {address} ({name})"
        if info[address].get("resources", {}).get(RESOURCE, 0) < 1:
            refused.append(f"{who}: offers no '{RESOURCE}' resource (start workers with `catnip cluster worker`)")
            continue
        ident = identities.get(address)
        if not isinstance(ident, dict):
            refused.append(f"{who}: could not tell its identity: {str(ident)[:200]}")
            continue
        diff = _differences(mine, ident)
        if diff:
            refused.append(f"{who} on {ident.get('host')}: differs from this coordinator: " + "; ".join(diff))
        else:
            accepted.append(address)
    return accepted, refused


def point_tasks(sweep: Sweep, plans: list[PointPlan], scenario_file: Path, overrides: list[str],
                seed: int | None, run_id: str) -> list[PointTask]:
    """A task per sweep point, each checked here to resolve to its point alone (so a worker with
    the same code resolves it the same); ClusterError if one does not."""
    text = scenario_file.read_text()
    keys = list(sweep.sweep)
    code = paths.code_fingerprint()
    tasks = []
    combos = list(itertools.product(*(sweep.sweep[k] for k in keys)))
    for (assignment, sc), combo in zip(sweep.points, combos):
        narrowed = [*overrides, *(f"sweep.{k}=[{json.dumps(v)}]" for k, v in zip(keys, combo))]
        try:
            alone = scenario_mod.load(scenario_file, narrowed, seed)
        except scenario_mod.ScenarioError as exc:
            raise ClusterError(f"point {scenario_mod.point_label(assignment)}: cannot be narrowed to one point"
                               f" ({exc})") from None
        if len(alone.points) != 1 or resolved_hash(alone.points[0][1]) != resolved_hash(sc):
            raise ClusterError(f"point {scenario_mod.point_label(assignment)}: narrowed to itself it resolves to"
                               " another scenario")
        mine = [p for p in plans if p.assignment == assignment]
        tasks.append(PointTask(mine, {"run_id": run_id, "code": code, "scenario_name": scenario_file.name,
                                      "scenario_text": text, "overrides": narrowed, "seed": seed,
                                      "resolved": resolved_hash(sc), "first_point": mine[0].index}))
    return tasks


def _extract_folder(data: bytes, artifacts: Path, first_point: int) -> None:
    """The worker's run folder (point0, point1, ...) as this run's pointN folders."""
    artifacts.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".cluster-", dir=artifacts))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = tar.getmembers()
            for m in members:  # only files and folders inside the folder (tarfile's "data" filter is 3.11.4+)
                parts = Path(m.name).parts
                if not (m.isfile() or m.isdir()) or Path(m.name).is_absolute() or ".." in parts:
                    raise ValueError(f"the point's folder holds {m.name!r}, which is not a file or folder inside it")
            tar.extractall(tmp, members=members)
        for child in sorted(tmp.iterdir()):
            if child.name.startswith("point") and child.name[5:].isdigit():
                target = artifacts / f"point{first_point + int(child.name[5:])}"
                shutil.rmtree(target, ignore_errors=True)
                child.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class Coordinator:
    """Sends a run's point tasks to the accepted workers and records what comes back."""

    def __init__(self, client, store: Store, run_id: str, artifacts: Path, mine: dict[str, Any],
                 known: dict[str, Any], workers: list[str], progress: ProgressSink, retries: int):
        self.client, self.store, self.run_id, self.artifacts = client, store, run_id, artifacts
        self.mine, self.workers, self.progress, self.retries = mine, workers, progress, retries
        self.known = known  # worker address -> identity, for check_workers
        self.updates: queue.Queue = queue.Queue()
        self.started: set[int] = set()
        self.failures: list[str] = []
        self.last_progress: dict[int, float] = {}

    def submit(self, task: PointTask):
        from catnip.controller.cluster_task import run_point
        key = f"catnip-{self.run_id}-point{task.first_point}-attempt{len(task.attempts) + 1}"
        return self.client.submit(run_point, task.spec, key=key, resources={RESOURCE: 1}, workers=self.workers,
                                  allow_other_workers=False, pure=False)

    def _on_event(self, event) -> None:  # Dask's event loop thread: only queue it
        _, data = event
        if isinstance(data, dict) and data.get("run_id") == self.run_id:
            self.updates.put(data)

    def _drain(self, tasks: dict[int, PointTask]) -> None:
        while True:
            try:
                data = self.updates.get_nowait()
            except queue.Empty:
                return
            point = data.get("point")
            plan = next((p for t in tasks.values() for p in t.plans if p.index == point), None)
            if plan is None:
                continue
            if point not in self.started and self.store.point(self.run_id, point) is None:
                plan.create(self.store, self.run_id)  # shown as running (on a worker) until it comes back
            self.started.add(point)
            p = Progress(**{k: v for k, v in data.items() if k in PROGRESS_FIELDS})
            self.progress(p)
            if time.monotonic() - self.last_progress.get(point, 0) >= 1:
                self.last_progress[point] = time.monotonic()
                self.store.add_progress(self.run_id, point, p.elapsed, p.phase, p.pages_done, p.pages_total)

    def _record_failed(self, task: PointTask, error: str) -> None:
        for plan in task.plans:
            if self.store.point(self.run_id, plan.index) is None:
                plan.create(self.store, self.run_id)
            self.store.update_point(self.run_id, plan.index, status="failed", error=error, finished=time.time(),
                                    environment={"cluster": {"attempts": task.attempts}})
        self.failures.append(f"point {task.first_point}: {error}")

    def _merge(self, task: PointTask, result: dict[str, Any]) -> None:
        document = archive.check(result["document"], Path(f"the answer of worker {result['worker']}"))
        attempt = {"worker": result["worker"], "host": result["host"], "outcome": "returned"}
        archive.merge_points(self.store, document, self.run_id, task.first_point,
                             environment={"worker": result["worker"], "host": result["host"],
                                          "attempts": [*task.attempts, attempt]},
                             source=f"worker {result['worker']}")
        _extract_folder(result["folder"], self.artifacts, task.first_point)
        for plan in task.plans:
            row = self.store.point(self.run_id, plan.index)
            if row is None:
                self._record_failed(task, f"worker {result['worker']} returned no record of this point (exit"
                                          f" {result['exit']}: {' | '.join(result['log_tail'][-2:])})")
                return
            if row["status"] != "done":
                self.failures.append(f"point {plan.index}: {row['error']}")

    def _settle(self, fut, task: PointTask) -> Any | None:
        """Records a finished future; returns a new future when the point is sent again."""
        from distributed.scheduler import KilledWorker
        try:
            result = fut.result()
        except KilledWorker as exc:
            last = exc.args[1] if len(exc.args) > 1 else "?"
            worker = getattr(last, "address", last)  # a WorkerState in recent Dask, an address before
            task.attempts.append({"worker": str(worker), "outcome": "the worker died while running it"})
            if len(task.attempts) <= self.retries:
                # Workers come and go (a nanny restarts a dead one under a new address): ask again.
                accepted, _ = check_workers(self.client, self.mine, self.known)
                if accepted:
                    self.workers = accepted
                    return self.submit(task)
                task.attempts.append({"outcome": "no worker left that can run it"})
            self._record_failed(task, f"its worker died while running it, {len(task.attempts)} time(s) (last"
                                      f" {worker})")
        except cluster_task.WorkerRefused as exc:
            task.attempts.append({"outcome": str(exc)})
            self._record_failed(task, str(exc))
        except Exception as exc:  # the task raised on the worker: the point could not run there
            task.attempts.append({"outcome": f"{type(exc).__name__}: {exc}"})
            self._record_failed(task, f"{type(exc).__name__}: {exc}")
        else:
            try:
                self._merge(task, result)
            except (archive.ArchiveError, ValueError, OSError, tarfile.TarError) as exc:
                task.attempts.append({"worker": result.get("worker"), "outcome": f"returned, not merged: {exc}"})
                self._record_failed(task, f"its records from worker {result.get('worker')} could not be merged: {exc}")
        return None

    def run(self, tasks: list[PointTask], cancelled: Callable[[], bool]) -> list[str]:
        from distributed import Event, wait
        Event(cluster_task.cancel_event(self.run_id), client=self.client).clear()
        self.client.subscribe_topic(cluster_task.PROGRESS_TOPIC, self._on_event)
        pending = {self.submit(t): t for t in tasks}
        by_point = {t.first_point: t for t in tasks}
        try:
            while pending:
                if cancelled():
                    raise RunCancelled("cancelled")
                try:
                    wait(list(pending), timeout=POLL_S, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    pass
                self._drain(by_point)
                for fut in [f for f in pending if f.done()]:
                    task = pending.pop(fut)
                    again = self._settle(fut, task)
                    if again is not None:  # sent again after its worker died
                        pending[again] = task
        except BaseException:
            self._cancel(pending)
            raise
        finally:
            self.client.unsubscribe_topic(cluster_task.PROGRESS_TOPIC)
        self._drain(by_point)
        return self.failures

    def _cancel(self, pending: dict) -> None:
        """Every running point tears down on its worker and comes back cancelled, with its records."""
        from distributed import Event, wait
        Event(cluster_task.cancel_event(self.run_id), client=self.client).set()
        running = [f for f, t in pending.items() if t.first_point in self.started]
        queued = [f for f in pending if f not in running]
        self.client.cancel(queued)
        try:
            wait(running, timeout=CANCEL_WAIT_S)
        except TimeoutError:
            pass
        for fut in running:
            task = pending[fut]
            if fut.done() and fut.status == "finished":
                self._merge(task, fut.result())
            else:
                for plan in task.plans:
                    if self.store.point(self.run_id, plan.index) is not None:
                        self.store.update_point(self.run_id, plan.index, status="cancelled", error="cancelled",
                                                finished=time.time())
        self.client.cancel(running)


def run(sweep: Sweep, caps: Capabilities, store: Store, address: str, scenario_file: Path,
        overrides: list[str], seed: int | None, progress: ProgressSink = lambda p: None,
        cancelled: Callable[[], bool] = lambda: False, run_id: str | None = None, retries: int = 1,
        resume: bool = False, notice: Callable[[str], None] = lambda line: None,
        tls_dir: Path | None = None) -> str:
    """Run every point of the sweep on the cluster at `address`; returns the run id. With `resume`,
    `run_id` is a run of the same sweep in `store` and only its points that are not done run.
    `tls_dir` holds the cluster's certificates (controller/cluster_tls.py)."""
    from catnip.controller.skeleton import new_run_id
    from catnip.controller.skeleton import recorded_run, signals_cancel
    check_address(address)  # before anything is planned
    run_id = run_id or new_run_id(sweep.name)
    artifacts = paths.runs_dir(store.path) / run_id
    plans = plan_points(sweep, artifacts)
    tasks = point_tasks(sweep, plans, Path(scenario_file), list(overrides), seed, run_id)
    if resume:
        # A coordinator that was killed left its run `running`; close it first, as any new run would.
        close_abandoned_runs(store)
        row = store.run(run_id)
        if row is None:
            raise ClusterError(f"--resume {run_id}: no such run in {store.path}")
        if row["status"] == "running":
            raise ClusterError(f"--resume {run_id}: the run is still running (its coordinator is alive)")
        if row["sweep"] != dumps(sweep.sweep) or row["scenario"] != dumps(sweep.raw):
            raise ClusterError(f"--resume {run_id}: that run was started from another scenario, overrides or seed")
        done = {p["point"] for p in store.points(run_id) if p["status"] == "done"}
        tasks = [t for t in tasks if not all(p.index in done for p in t.plans)]
        notice(f"run {run_id}: {len(plans) - sum(len(t.plans) for t in tasks)} point run(s) already done,"
               f" {sum(len(t.plans) for t in tasks)} to go")
    client = connect(address, tls_dir)
    try:
        mine, known = local_identity(caps), {}
        accepted, refused = check_workers(client, mine, known)
        for line in refused:
            notice(line)
        if not accepted:
            raise ClusterError(f"--cluster {address}: no worker can run this run's points"
                               + (": " + "; ".join(refused) if refused else " (none has joined the scheduler)"))
        notice(f"{len(accepted)} worker(s) accepted: {', '.join(accepted)}")
        with signals_cancel():
            close_abandoned_runs(store)
            if resume:
                store.reopen_run(run_id, runner=processes.identity())
            else:
                first = sweep.points[0][1]
                store.create_run(run_id, sweep.name, sweep.source, sweep.raw, sweep.sweep, first.seed, git_revision(),
                                 versions(), caps.to_dict(), runner=processes.identity())
            with recorded_run(store, run_id) as end:
                failures = Coordinator(client, store, run_id, artifacts, mine, known, accepted, progress, retries).run(
                    tasks, cancelled)
                if failures:
                    end.fail(failures[-1])
                elif resume and any(p["status"] != "done" for p in store.points(run_id)):
                    end.fail("a point of an earlier attempt did not finish")
    finally:
        client.close()
    return run_id
