"""Where a point's work runs on the machine's CPUs (`run.placement`, docs/fidelity.md).

`shared`: the scheduler places everything; the engines are SCHED_FIFO and preempt the rest, but
each verdict call also carries the kernel's forwarding of the packet it releases: veth hands the
packet to the next namespace with netif_rx, and the receive processing (the next router's rules,
the switch, a host's TCP, waking Apache) runs in softirq inside the engine's system call.

`split`: the engines get the upper half of the CPUs this process may use (the last one of two);
the runner, Mininet's shells, Apache and the clients keep the others, and every veth of the network steers its receive processing to
those others with RPS (Documentation/networking/scaling.rst), so a verdict call ends once the
packet is queued for the other CPU. The price: the other CPUs carry all the rest, so the point
records each CPU's busy fraction and the kernel's backlog drops (controller/fidelity.py).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator

KINDS = ("shared", "split")

# Mininet's shells run in a mount namespace of their own with sysfs mounted from inside the node's
# network namespace (mnexec -n), so /sys/class/net there lists the node's own devices.
_RPS_SCRIPT = ('mask=$1; shift; for d in "$@"; do f=/sys/class/net/$d/queues/rx-0/rps_cpus;'
               ' echo "$mask" > "$f" || exit 1; echo "$d $(cat "$f")"; done')


class PlacementError(RuntimeError):
    pass


def cpu_mask(cpus: Iterable[int]) -> str:
    """The hex mask rps_cpus takes."""
    return format(sum(1 << c for c in cpus), "x")


@dataclass(frozen=True)
class Placement:
    kind: str
    engine_cpus: tuple[int, ...] = ()
    other_cpus: tuple[int, ...] = ()

    def record(self) -> dict:
        return {"kind": self.kind, "engine_cpus": list(self.engine_cpus), "other_cpus": list(self.other_cpus)}

    @contextmanager
    def for_this_process(self) -> Iterator[None]:
        """Keep this process (and what it starts from now on) off the engines' CPUs."""
        if self.kind == "shared":
            yield
            return
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, self.other_cpus)
        try:
            yield
        finally:
            os.sched_setaffinity(0, before)

    def pin_engine(self, pid: int) -> list[int]:
        """Every thread of an engine process onto the engines' CPUs; returns the CPUs its threads
        may use now, read back (any CPU under `shared`)."""
        if self.kind == "shared":
            return _threads_on(pid)
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError as exc:
            raise PlacementError(f"engine process {pid} is gone: {exc}") from exc
        for tid in tids:
            try:
                os.sched_setaffinity(tid, self.engine_cpus)
            except ProcessLookupError:
                continue  # a thread that ended meanwhile
        return _threads_on(pid)

    def steer_receive(self, nodes: Iterable, root_devices: Iterable[str]) -> int:
        """Every veth's receive processing onto the other CPUs: the devices of each node's
        namespace, and the network's devices in the root namespace (switch ports). Returns how
        many devices were set."""
        if self.kind == "shared":
            return 0
        mask, count = cpu_mask(self.other_cpus), 0
        for node in nodes:
            names = [i.name for i in node.intfList() if i.name != "lo"]
            if not names:
                continue
            proc = node.popen(["sh", "-c", _RPS_SCRIPT, "sh", mask, *names])
            out, err = proc.communicate(timeout=10)
            # What the kernel holds now, read back: a mask it did not take is an error here, not a
            # silently shared CPU.
            got = dict(line.split()[:2] for line in out.decode().splitlines() if len(line.split()) >= 2)
            if proc.returncode != 0 or any(int(got.get(n, "0").replace(",", ""), 16) != int(mask, 16) for n in names):
                raise PlacementError(f"could not steer the receive processing of {node.name}'s devices"
                                     f" {', '.join(names)} (rps_cpus): {(err or out or b'').strip()[-300:]!r}")
            count += len(names)
        for name in root_devices:
            path = f"/sys/class/net/{name}/queues/rx-0/rps_cpus"
            try:
                with open(path, "w") as fh:
                    fh.write(mask)
            except OSError as exc:
                raise PlacementError(f"could not steer the receive processing of {name} ({path}): {exc}") from exc
            count += 1
        return count


def _threads_on(pid: int) -> list[int]:
    """The CPUs any thread of a process may use now, as the kernel holds them."""
    cpus: set[int] = set()
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError as exc:
        raise PlacementError(f"engine process {pid} is gone: {exc}") from exc
    for tid in tids:
        try:
            cpus |= os.sched_getaffinity(int(tid))
        except ProcessLookupError:
            continue  # a thread that ended meanwhile
    return sorted(cpus)


def plan(kind: str, cpus: Iterable[int] | None = None) -> Placement:
    """The placement of `kind` over the CPUs this process may use (or `cpus`)."""
    if kind not in KINDS:
        raise PlacementError(f"run.placement: {kind!r} is not one of {', '.join(KINDS)}")
    usable = tuple(sorted(os.sched_getaffinity(0) if cpus is None else cpus))
    if kind == "shared":
        return Placement("shared")
    if len(usable) < 2:
        raise PlacementError(f"run.placement: split needs at least 2 CPUs and this process may use"
                             f" {len(usable)} ({', '.join(map(str, usable))}); use run.placement: shared")
    half = max(1, len(usable) // 2)  # the upper half for the engines: on 2 CPUs they share one
    return Placement("split", engine_cpus=usable[-half:], other_cpus=usable[:-half])
