"""The run queue: runs asked for from the dashboard wait here and run one at a time.

Starting runs is the controller's job: the dashboard (webui/app.py) only submits, lists and
cancels runs through a RunQueue it keeps for as long as it serves. Each run is a `catnip run`
child process started from an argument list (never a shell), so a run started from the
dashboard is the same run as one started by hand, writes the same records, and is torn down by
the runner's own SIGTERM handling when cancelled. A run that another process (a `catnip run` in
a terminal) is doing holds the machine lock; queued runs wait for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from catnip.controller import skeleton
from catnip.testbed import paths, processes

LIVE = ("queued", "waiting", "running")  # states of a job not yet over (also: finished, failed, cancelled)


@dataclass
class Job:
    run_id: str
    scenario: Path
    overrides: list[str]
    seed: int | None
    jobs: int = 1  # sweep points side by side (`catnip run --jobs`)
    state: str = "queued"
    message: str = ""
    submitted: float = field(default_factory=time.time)
    returncode: int | None = None
    proc: subprocess.Popen | None = None
    log: Path | None = None
    cancel_requested: bool = False

    def argv(self, db: Path) -> list[str]:
        args = [paths.python(), "-m", "catnip.cli.main", "run", str(self.scenario), "--db", str(db),
                "--run-id", self.run_id, "--json"]
        for o in self.overrides:
            args += ["--set", o]
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        if self.jobs > 1:
            args += ["--jobs", str(self.jobs)]
        return args

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "scenario": self.scenario.name, "overrides": self.overrides,
                "seed": self.seed, "jobs": self.jobs, "state": self.state, "message": self.message, "returncode": self.returncode}


class RunQueue:
    """FIFO of jobs, one running at a time, worked by a daemon thread."""

    def __init__(self, db: Path, log_dir: Path, machine_busy: Callable[[], bool] = skeleton.machine_busy,
                 poll: float = 1.0):
        self.db, self.log_dir, self.machine_busy, self.poll = db, log_dir, machine_busy, poll
        self._jobs: dict[str, Job] = {}
        self._order: list[str] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="catnip-run-queue", daemon=True)
        self._thread.start()

    def submit(self, run_id: str, scenario: Path, overrides: list[str], seed: int | None, jobs: int = 1) -> Job:
        job = Job(run_id, scenario, list(overrides), seed, jobs)
        with self._lock:
            if self._stopping:
                raise RuntimeError("the dashboard is shutting down; no new runs")
            self._jobs[run_id] = job
            self._order.append(run_id)
        self._wake.set()
        return job

    def get(self, run_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(run_id)

    def jobs(self) -> list[Job]:
        with self._lock:
            return [self._jobs[r] for r in self._order]

    def active(self) -> list[Job]:
        return [j for j in self.jobs() if j.state in LIVE]

    def cancel(self, run_id: str) -> str:
        """Cancel a queued run (it never starts) or a running one (SIGTERM: the runner tears the
        network down and records the run as cancelled). Raises KeyError for runs not queued here."""
        with self._lock:
            job = self._jobs.get(run_id)
            if job is None:
                raise KeyError(run_id)
            job.cancel_requested = True
            if job.state in ("queued", "waiting"):
                job.state, job.message = "cancelled", "cancelled before it started"
                return job.message
            if job.state == "running" and job.proc is not None and job.proc.poll() is None:
                job.proc.send_signal(signal.SIGTERM)
                job.message = "cancelling: tearing the network down"
                return job.message
            return f"run already {job.state}"

    def shutdown(self, timeout: float = 120.0) -> None:
        """Stop taking jobs, cancel the running one and wait for its teardown."""
        with self._lock:
            self._stopping = True
            for job in self._jobs.values():
                if job.state in ("queued", "waiting"):
                    job.state, job.message = "cancelled", "the dashboard stopped before it started"
            running = [j for j in self._jobs.values() if j.state == "running" and j.proc]
        processes.stop_all([job.proc for job in running], timeout)
        self._wake.set()
        self._thread.join(5)

    # --- worker ------------------------------------------------------------------------------
    def _next(self) -> Job | None:
        with self._lock:
            return next((self._jobs[r] for r in self._order if self._jobs[r].state in ("queued", "waiting")), None)

    def _work(self) -> None:
        while not self._stopping:
            job = self._next()
            if job is None:
                self._wake.wait(self.poll)
                self._wake.clear()
                continue
            if self.machine_busy():
                with self._lock:
                    if job.state == "queued":
                        job.state = "waiting"
                        job.message = "waiting for the machine: another catnip run holds it"
                self._wake.wait(self.poll)
                self._wake.clear()
                continue
            self._launch(job)

    def _launch(self, job: Job) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        job.log = self.log_dir / f"{job.run_id}.log"
        with self._lock:
            if job.state not in ("queued", "waiting"):
                return
            with open(job.log, "w") as log:
                job.proc = subprocess.Popen(job.argv(self.db), stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, cwd=str(paths.REPO),
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
            job.state, job.message = "running", ""
        code = job.proc.wait()
        with self._lock:
            job.returncode = code
            if job.cancel_requested or code == 130:
                job.state, job.message = "cancelled", "cancelled; network torn down"
            elif code == 0:
                job.state, job.message = "finished", ""
            else:
                job.state = "failed"
                job.message = f"catnip run exited {code}: " + _tail(job.log)


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])
