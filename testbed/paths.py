"""Where things live: the repository, the engine binary, run state and results.

Environment variables override the defaults so tests and CI can isolate themselves.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PREFIX = "ctp"  # every interface, bridge, namespace and node name the project creates starts with it


def engine_binary() -> Path:
    return Path(os.environ.get("CATNIP_ENGINE", REPO / "engine" / "target" / "release" / "catnip-engine"))


MACHINE_DIR = Path("/run/catnip")  # fixed, whatever CATNIP_STATE says: what every run on this machine shares


def machine_lock_path() -> Path:
    """The one machine lock every run takes, so two runs never collide on interface names
    even when their CATNIP_STATE differs; it records who holds it (pid, since, command)."""
    return MACHINE_DIR / "machine.lock"


def state_dir() -> Path:
    """Transient per-run state (configs, pid files); removed by cleanup."""
    return Path(os.environ.get("CATNIP_STATE", "/run/catnip"))


def docroot() -> Path:
    """The served documents: deterministic, so kept with the transient state, world-readable
    (Apache's workers run as www-data, which cannot enter a private data directory)."""
    return state_dir() / "docroot"


CLUSTER_WORK_PREFIX = "cluster-"  # a cluster worker's point folders: cluster-<worker pid>-<random>
CLUSTER_POINT_TEARDOWN_S = 180.0  # how long a point may take to tear down once told to


def cluster_work_prefix() -> str:
    """The name a cluster worker's point folder starts with, carrying the worker's pid, so a folder
    whose worker died (SIGKILL skips its removal) can be told from one in use."""
    return f"{CLUSTER_WORK_PREFIX}{os.getpid()}-"


def orphaned_cluster_work() -> list[Path]:
    """Point folders in the state directory whose cluster worker is gone and whose point process
    (its pid in `point.pid`; it tears its network down when the worker dies) has ended too."""
    def alive(pid: str) -> bool:
        return pid.isdigit() and Path(f"/proc/{pid}").exists()
    found = []
    for folder in sorted(state_dir().glob(f"{CLUSTER_WORK_PREFIX}*")):
        worker = folder.name[len(CLUSTER_WORK_PREFIX):].split("-", 1)[0]  # older names had none: orphans
        try:
            point = (folder / "point.pid").read_text().strip()
        except OSError:
            point = ""
            # A worker killed between starting the point and writing its pid: give that point the
            # time a cancelled one has to tear down (controller/cluster_task.TEARDOWN_S) first.
            try:
                if time.time() - folder.stat().st_mtime < CLUSTER_POINT_TEARDOWN_S:
                    continue
            except OSError:
                continue
        if not alive(worker) and not alive(point):
            found.append(folder)
    return found


def data_dir() -> Path:
    """Kept results: the SQLite database and per-run artifacts such as captures."""
    return Path(os.environ.get("CATNIP_DATA", REPO / "data"))


def database() -> Path:
    return Path(os.environ.get("CATNIP_DB", data_dir() / "catnip.db"))


def runs_dir(db: Path | str | None = None) -> Path:
    """Run folders (configs, logs, captures) go beside the database that records the runs, so a
    `--db` elsewhere keeps its runs' files with it (by default data/runs/)."""
    return Path(db or database()).resolve().parent / "runs"


def python() -> str:
    """The interpreter of this venv, used to start workload clients inside hosts."""
    import sys
    return sys.executable


CODE_PACKAGES = ("catnip", "spec", "controller", "testbed", "topologies", "workloads", "results", "papers")


def code_fingerprint() -> str:
    """A hash of the control plane's Python sources: a process started later in a run (a point's
    worker) compares it with the runner's, so an edit or pull during a run cannot go unnoticed."""
    h = hashlib.sha256()
    for path in sorted(p for pkg in CODE_PACKAGES for p in (REPO / pkg).rglob("*.py")):
        h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]
