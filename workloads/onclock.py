"""Run a host program on the controller's clock, on a machine whose clock is another:

    python -m catnip.workloads.onclock OFFSET -m MODULE ARG...
    python -m catnip.workloads.onclock OFFSET -c CODE ARG...

The plug-ins give their host programs instants on the controller's time.monotonic() (the common
start, deadlines) and read the instants those programs record against it. CLOCK_MONOTONIC counts
from each machine's boot, so on another machine the same instant reads OFFSET seconds more
(testbed/machines.Machine.clock_offset measures it). Here time.monotonic() is replaced, before the
program is loaded, by one that reads OFFSET less: every instant the program reads, waits for or
records is then the controller's, within the offset's uncertainty. Durations (timeouts, select)
are untouched. Only Python programs can be run so; the plug-ins give absolute instants to no other.
"""

from __future__ import annotations

import runpy
import sys
import time


def shifted(offset: float):
    """time.monotonic, less `offset`."""
    read = time.monotonic

    def monotonic() -> float:
        return read() - offset

    return monotonic


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in ("-m", "-c"):
        print("usage: python -m catnip.workloads.onclock OFFSET (-m MODULE | -c CODE) [ARG...]", file=sys.stderr)
        return 2
    try:
        offset = float(argv[0])
    except ValueError:
        print(f"catnip.workloads.onclock: OFFSET {argv[0]!r} is not a number of seconds", file=sys.stderr)
        return 2
    time.monotonic = shifted(offset)
    if argv[1] == "-m":
        sys.argv = [argv[2], *argv[3:]]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    else:
        sys.argv = ["-c", *argv[3:]]
        exec(compile(argv[2], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102 - python -c's own
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
