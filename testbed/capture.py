"""A packet capture on one interface of a node: the one way the testbed starts tcpdump.

Headers only (a snap length), every packet handed over and written as it comes
(`--immediate-mode -U`: libpcap otherwise delivers in batches up to a second late, and what is
still in its buffer when the capture stops is lost; seen: a run's last burst). `start` returns
once tcpdump says it listens (its "listening on" line), never after a sleep; `stop` sends SIGINT
so it writes its last packets, then waits. A node on another machine (testbed/remote.py)
captures there and sends the file back on tcpdump's standard output into the same local path;
it is stopped there by its pid (ssh would not pass SIGINT on).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from catnip.workloads.readable import readable
from catnip.testbed import machines


class CaptureError(RuntimeError):
    pass


class Capture:
    def __init__(self, node, interface: str, path: Path, snaplen: int = 128, bpf_filter: str | None = None,
                 buffer_kib: int | None = None, pid_file: Path | None = None):
        """`buffer_kib`: the kernel buffer (tcpdump -B) where bursts would overrun the default;
        `pid_file`: where a capture on another machine keeps tcpdump's pid there (required there)."""
        self.node, self.interface, self.path = node, interface, Path(path)
        self.snaplen, self.bpf_filter, self.buffer_kib, self.pid_file = snaplen, bpf_filter, buffer_kib, pid_file
        self.machine = getattr(node, "machine", None)
        self.proc: subprocess.Popen | None = None

    def _argv(self, out: str) -> list[str]:
        argv = ["tcpdump", "-i", self.interface, "-n", "-s", str(self.snaplen), "-U", "--immediate-mode", "-w", out]
        argv += ["-B", str(self.buffer_kib)] if self.buffer_kib else []
        return argv + ([self.bpf_filter] if self.bpf_filter else [])

    def start(self, timeout: float = 10.0) -> "Capture":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.machine is None:
            self.proc = self.node.popen(self._argv(str(self.path)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
        else:
            if self.pid_file is None:
                raise CaptureError("a capture on another machine needs a pid file")
            with open(self.path, "wb") as out:
                self.proc = self.node.popen(machines.with_pid_file(self._argv("-"), self.pid_file), stdout=out,
                                            stderr=subprocess.PIPE, text=True)
        said = []  # its lines before "listening on" (a warning, or why it could not start)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0 and readable(self.proc.stderr, left):
            line = self.proc.stderr.readline()
            if not line or "listening on" in line:
                break
            said.append(line.strip())
        else:
            line = ""
        if "listening on" not in line:
            self.stop()
            raise CaptureError(f"tcpdump did not start on {self.interface} within {timeout:g} s"
                               + (f": {'; '.join(said)[:200]}" if said else ""))
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """SIGINT (it writes its last packets and ends), then SIGKILL after `timeout`; safe twice."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            if self.machine is not None:  # it writes its last packets and ends, its ssh with it
                self.machine.signal_pid_files([self.pid_file], "INT")
            else:
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                if self.machine is not None:
                    self.machine.signal_pid_files([self.pid_file], "KILL")
                proc.kill()
                proc.wait()
        if proc is not None and proc.stderr is not None:
            proc.stderr.close()
        if self.machine is not None and self.pid_file is not None:
            try:
                self.machine.run(["rm", "-f", str(self.pid_file)])
            except machines.MachineError:
                pass  # the machine is gone: so is its run state
