"""The start gate of a client program, so that the common start is set once every client is loaded.

A client program started with `--gate` (workloads/client.py, and the host programs of
workloads/hostprog.py) loads first, the interpreter and its imports (about 1 s each, and a point's
100 clients share 2 CPUs), then prints READY on its output and waits for GO (SIGUSR1). The runner
waits for every gated client's READY, sets the common start, writes each client's config with
it and sends GO (controller/point.py, workloads/apps/base.py `release`). Only then does the
program read its config: its instants are set when all are loaded, not guessed ahead of the
launch. The time it then takes to read the config and begin is still checked against its instant
(controller/fidelity.client_start).
"""

from __future__ import annotations

import os
import signal
import sys

GO = signal.SIGUSR1
READY = "READY"


def wait_for_go() -> None:
    """Say READY, then wait for GO; afterwards the program's output goes to its error log, not to
    the pipe the runner read READY from (nobody reads that pipe any more)."""
    # Blocked before READY is out: a GO sent at once waits, pending, for sigwait instead of
    # killing the program (SIGUSR1's default action).
    signal.pthread_sigmask(signal.SIG_BLOCK, {GO})
    sys.stdout.write(READY + "\n")
    sys.stdout.flush()
    signal.sigwait({GO})
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
