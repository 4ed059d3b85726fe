"""What a Dask worker runs for `catnip run --cluster` (controller/cluster.py).

`identity` is what the coordinator compares with its own before it sends a worker anything: the
code fingerprint, the builds (engine, BPF objects) and the kernel features this machine has.
`run_point` runs one sweep point's repetitions with the local runner, in a process of its own
(controller/cluster_point.py: Mininet and the runner's signal handling need a main thread, which
a Dask task does not have), into a database of its own, and returns them as an export document
(results/archive.py) with the point's folder. Its progress goes to the coordinator as Dask events
on PROGRESS_TOPIC; the coordinator cancels it through a Dask Event named by cancel_event().
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from catnip.testbed import paths

PROGRESS_TOPIC = "catnip-progress"
POLL_S = 0.5  # how often a running point looks for the coordinator's cancel
TEARDOWN_S = paths.CLUSTER_POINT_TEARDOWN_S  # a cancelled point tears its network down; after this it is killed
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class WorkerRefused(RuntimeError):
    """This worker may not run the point (its code differs from the coordinator's)."""


def cancel_event(run_id: str) -> str:
    return f"catnip-cancel-{run_id}"


def build_fingerprint() -> str:
    """A hash of what the Python fingerprint does not cover and a point runs: the queue engine's
    binary and the compiled BPF objects ("missing" parts are hashed as such)."""
    h = hashlib.sha256()
    parts = [paths.engine_binary(), *sorted((paths.REPO / "bpf" / "build").glob("*.o"))]
    for path in parts:
        h.update(path.name.encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"missing")
    return h.hexdigest()[:16]


def comparable_capabilities(caps: dict[str, Any]) -> dict[str, Any]:
    """The kernel features and tools of `Capabilities.to_dict()`, without what names this machine
    (its kernel release, the engine's path): two machines that can run the same points agree."""
    return {k: v for k, v in caps.items() if k not in ("kernel", "engine_binary")}


def identity() -> dict[str, Any]:
    """This machine as the coordinator checks it (controller/cluster.py, check_workers)."""
    from catnip.testbed.capabilities import probe
    return {"host": socket.gethostname(), "code": paths.code_fingerprint(), "builds": build_fingerprint(),
            "capabilities": comparable_capabilities(probe().to_dict())}


def _die_with_parent() -> None:
    # The point's process is cancelled (SIGTERM: a clean teardown) if this worker dies, even by
    # SIGKILL: a lost worker leaves no network running on its machine.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _forward_progress(worker, stream, first_point: int, run_id: str) -> None:
    for line in stream:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "point" in data:
            worker.log_event(PROGRESS_TOPIC, {**data, "run_id": run_id, "point": first_point + data["point"],
                                              "worker": worker.address})


def _folder_archive(folder: Path) -> bytes:
    """The point's folder (configs, logs, captures) as a gzip'd tar, paths relative to it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        if folder.is_dir():
            for child in sorted(folder.iterdir()):
                tar.add(child, arcname=child.name)
    return buf.getvalue()


def run_point(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one point's repetitions as `spec` says (controller/cluster.py, PointTask.spec) and return
    {"document": export, "folder": tar.gz bytes, "worker": address, "host": name, "exit": code}.
    WorkerRefused if this worker's code is not the coordinator's; RuntimeError if the point could
    not even be recorded (the process's last lines say why)."""
    from distributed import Event, get_worker
    from catnip.results import archive
    from catnip.results.store import Store
    if paths.code_fingerprint() != spec["code"]:
        raise WorkerRefused(f"worker {socket.gethostname()}: its testbed code ({paths.code_fingerprint()}) is not the"
                            f" coordinator's ({spec['code']}); update its checkout")
    worker = get_worker()
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=paths.cluster_work_prefix(), dir=paths.state_dir()))
    cancel = Event(cancel_event(spec["run_id"]))
    try:
        (work / "spec.json").write_text(json.dumps(spec))
        db = work / "catnip.db"
        env = {**os.environ, "CATNIP_DB": str(db),
               "PYTHONPATH": os.pathsep.join(p for p in (str(paths.REPO), os.environ.get("PYTHONPATH")) if p)}
        with open(work / "point.log", "w") as err:
            proc = subprocess.Popen([paths.python(), "-m", "catnip.controller.cluster_point", str(work / "spec.json")],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True,
                                    env=env, cwd=paths.REPO, preexec_fn=_die_with_parent)
        (work / "point.pid").write_text(str(proc.pid))
        reader = threading.Thread(target=_forward_progress, daemon=True,
                                  args=(worker, proc.stdout, spec["first_point"], spec["run_id"]))
        reader.start()
        cancelled_at = None
        while proc.poll() is None:
            if cancelled_at is None and cancel.is_set():
                cancelled_at = time.monotonic()
                proc.send_signal(signal.SIGTERM)  # the runner tears the point down and records it cancelled
            elif cancelled_at is not None and time.monotonic() - cancelled_at > TEARDOWN_S:
                proc.kill()
            try:
                proc.wait(POLL_S)
            except subprocess.TimeoutExpired:
                pass
        reader.join(timeout=5)
        log = (work / "point.log").read_text(errors="replace").strip().splitlines()
        if not db.exists():
            raise RuntimeError(f"worker {socket.gethostname()}: the point did not start (exit {proc.returncode}): "
                               + (" | ".join(log[-3:]) or "no output"))
        with Store(db) as store:
            if store.run(spec["run_id"]) is None:
                raise RuntimeError(f"worker {socket.gethostname()}: the point was not recorded (exit"
                                   f" {proc.returncode}): " + (" | ".join(log[-3:]) or "no output"))
            document = archive.export_run(store, spec["run_id"])
        folder = work / "runs" / spec["run_id"]
        return {"document": document, "folder": _folder_archive(folder), "worker": worker.address,
                "host": socket.gethostname(), "exit": proc.returncode, "log_tail": log[-5:]}
    finally:
        shutil.rmtree(work, ignore_errors=True)
        # A killed worker's folders on this machine: nobody else there removes them. By now the
        # killed one's point process has let go of the machine lock this point needed, so has ended.
        for orphan in paths.orphaned_cluster_work():
            shutil.rmtree(orphan, ignore_errors=True)
