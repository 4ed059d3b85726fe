"""Stopping a group of child processes with one deadline for all of them."""

from __future__ import annotations

import signal
import subprocess
import time


def stop_all(procs: list[subprocess.Popen], timeout: float) -> list[subprocess.Popen]:
    """SIGTERM every live one, wait for all within `timeout` together (their teardowns overlap),
    then SIGKILL the ones still running; returns those killed."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed = []
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            killed.append(proc)
    return killed
