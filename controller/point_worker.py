"""One sweep point in namespaces of its own: the process controller/parallel.py starts as
`unshare --net --mount -- python -m catnip.controller.point_worker SPEC CODE`.

It records the point in the store itself (as the in-process runner does) and writes its progress
as JSON lines on stdout for the parent to draw. SIGTERM or SIGINT cancels the point cleanly.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from catnip.controller import point as point_mod
from catnip.controller import runner, skeleton
from catnip.results.store import Store
from catnip.testbed import paths

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _mount(*args: str) -> None:
    res = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise RuntimeError(f"mount {' '.join(args)}: {res.stderr.strip()}")


def own_sysfs_view() -> None:
    """Make /sys/class/net list this namespace's interfaces (brctl reads it there): mount a sysfs
    made in this namespace and bind its network directories over the inherited ones. Unlike a whole
    new /sys (what `ip netns exec` does) this keeps /sys/fs/bpf and the cgroup mounts shared."""
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ctp-sysfs-", dir=paths.state_dir()))
    try:
        _mount("-t", "sysfs", "sysfs", str(tmp))
        try:
            for sub in ("class/net", "devices/virtual/net"):
                _mount("--bind", str(tmp / sub), f"/sys/{sub}")
        finally:
            subprocess.run(["umount", "-l", str(tmp)], capture_output=True, timeout=30)
    finally:
        tmp.rmdir()


def die_with_parent(runner_pid: int) -> None:
    """Cancel (SIGTERM: clean teardown) if the runner dies, even by SIGKILL."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != runner_pid:  # it died before we asked (`unshare` execs us: it is our parent)
        raise skeleton.RunCancelled("the runner is gone")


def main(spec_path: str, code: str) -> int:
    if paths.code_fingerprint() != code:  # checked before unpickling classes that may have changed
        print("the testbed's Python code changed since this run started (an edit or a pull during the"
              " run); this point did not run", file=sys.stderr)
        return 3
    with open(spec_path, "rb") as fh:
        spec = pickle.load(fh)
    os.unlink(spec_path)  # read once; the point's resolved scenario is in the store
    run_id, plan = spec["run_id"], spec["plan"]

    with skeleton.signals_cancel(), Store(paths.database()) as store:
        # The runner launches us with the cancel signals blocked (parallel.py); a cancel sent
        # meanwhile was held and arrives now. Our children must not inherit the mask.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(skeleton.CANCEL_SIGNALS))
        try:
            die_with_parent(spec["runner_pid"])
            own_sysfs_view()
            point = point_mod.PointRun(run_id, plan, spec["caps"], store, spec["artifacts"],
                                    runner.recording_progress(skeleton.emit_progress, store), lambda: False,
                                    concurrency=spec["concurrency"])
            prog = plan.progress(run_id)
            failure = skeleton.record_point(store, run_id, plan.index, lambda: point.execute(prog))
        except skeleton.RunCancelled:
            return 130
    if failure:
        print(failure, file=sys.stderr)
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
