"""Keep every CPU out of the halt state while a point runs (`run.keep_awake`, docs/fidelity.md).

On a virtual machine an idle CPU halts (this kernel has no cpuidle driver: HLT), and the
hypervisor runs something else on it. When the engine's timer then fires, the host must first
schedule the virtual CPU again: at light load that wake-up, not the engine, is what makes a
verdict late. Here one busy loop per CPU runs at SCHED_IDLE and nice 19, so it gets a CPU only when
nothing else wants it, yields to any other task at once, and the CPU never halts.

Its time is the kernel's "nice" time (/proc/stat), which controller/fidelity.py then counts as
idle, so the busy fractions a point records stay the testbed's. The loops are children of the
point's process (so in the run's cgroup, which `catnip clean` empties after a killed run) and
are stopped by the point's teardown. On another machine of a split topology the point's helper
there runs them (testbed/machine_helper.py), until the end of its input.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

LOOP = "while True:\n    pass\n"


class KeepAwakeError(RuntimeError):
    pass


def _idle_on(cpu: int):
    def setup() -> None:  # in the child, before the loop starts
        os.sched_setaffinity(0, {cpu})
        os.setpriority(os.PRIO_PROCESS, 0, 19)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    return setup


class KeepAwake:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, cpus: list[int] | None = None) -> list[int]:
        """One loop per CPU this process may use (or these); returns the CPUs, as the kernel holds
        each loop's affinity and policy (read back)."""
        cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        for cpu in cpus:
            self.procs.append(subprocess.Popen([sys.executable, "-c", LOOP], preexec_fn=_idle_on(cpu),
                                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))
        for cpu, p in zip(cpus, self.procs):
            if p.poll() is not None:
                raise KeepAwakeError(f"the keep-awake loop for CPU {cpu} ended at once (exit {p.returncode})")
            if os.sched_getscheduler(p.pid) != os.SCHED_IDLE or os.sched_getaffinity(p.pid) != {cpu}:
                raise KeepAwakeError(f"the keep-awake loop for CPU {cpu} is not SCHED_IDLE on that CPU alone")
        return cpus

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait(10)
        self.procs = []
