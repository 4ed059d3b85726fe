"""Application processes on a host of another machine (a split topology, docs/cluster.md).

A plug-in spawns a program there as it would here (base.Application.spawn); what differs is kept
here, so no plug-in needs to know. One ssh session per machine and application runs
`python -m catnip.workloads.agent FOLDER` there (`Agent`), which
- starts the programs in their hosts' namespaces and signals them: `RemoteProcess` stands for one
  here with Popen's methods (poll, wait, send_signal, its piped output), so the plug-ins' checks,
  READY lines and stops read it as a local process;
- keeps this machine's copy of the application folder (the same path there) up to date as the
  programs there write into it, and writes the files they are given (their configs) there first:
  progress, collection and logs read local files as for a local host; `sync` makes the copy complete;
- runs Python programs on the controller's clock (workloads/onclock.py, with the machine's
  measured offset), so the instants they are given and record are this machine's.
"""

from __future__ import annotations

import json
import os
import queue
import signal as signals
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 30


class AgentError(RuntimeError):
    """The agent on another machine failed; the message says where and why."""


class RemoteProcess:
    """A program the agent started there, with the parts of subprocess.Popen the plug-ins use."""

    def __init__(self, agent: "Agent", ident: int, name: str, pipe: bool, text: bool) -> None:
        self.agent, self.ident, self.name = agent, ident, name
        self.pid: int | None = None  # its pid there
        self.returncode: int | None = None
        self.error: str | None = None
        self.stdout = None
        self._queue: queue.SimpleQueue | None = None
        if pipe:
            # Its own thread writes into the pipe: a plug-in that stops reading one program's output
            # must not stall the agent's reader, and with it every other program's files and ends.
            read_end, write_end = os.pipe()
            self.stdout = os.fdopen(read_end, "r" if text else "rb")
            self._queue = queue.SimpleQueue()
            threading.Thread(target=self._feed, args=(write_end,), name=f"out-{name}", daemon=True).start()
        self._started = threading.Event()
        self._ended = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.name, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            self.agent.signal(self, signals.Signals(sig).name[3:])

    def terminate(self) -> None:
        self.send_signal(signals.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signals.SIGKILL)

    def _feed(self, fd: int) -> None:
        try:
            while (data := self._queue.get()) is not None:
                os.write(fd, data)
        except OSError:
            pass  # nobody reads it any more
        finally:
            os.close(fd)  # its reader here sees the end of its output

    # --- called by the agent's reader ---
    def _output(self, data: bytes) -> None:
        if self._queue is not None and data:
            self._queue.put(data)

    def _end(self, code: int) -> None:
        if self.returncode is not None:
            return
        if self._queue is not None:
            self._queue.put(None)
        self.returncode = code
        self._started.set()
        self._ended.set()


class Agent:
    """This machine's handle on `python -m catnip.workloads.agent FOLDER` on `machine`."""

    def __init__(self, machine: Any, folder: Path, python: str, repo: Path, log: Path) -> None:
        self.machine, self.folder = machine, folder
        self._log = open(log, "w")  # noqa: SIM115 - open while the agent runs
        self.proc = subprocess.Popen(machine.argv(["sh", "-c", 'cd "$0" && exec "$1" -m catnip.workloads.agent "$2"',
                                                   str(repo), python, str(folder)]),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     start_new_session=True)  # Ctrl-C is the runner's to handle: teardown uses it
        self._lock = threading.Lock()  # one frame at a time on its input
        self._cond = threading.Condition()
        self._synced = self._asked = self._next = 0
        self._ended = False
        self._error: str | None = None
        self.programs: dict[int, RemoteProcess] = {}
        self._reader = threading.Thread(target=self._read, name=f"agent-{machine.name}", daemon=True)
        self._reader.start()

    def ship(self, path: Path) -> None:
        """Write a file of the folder there (a program's config)."""
        if path.parent != self.folder:
            raise AgentError(f"{path}: only files of {self.folder} go to machine {self.machine.name}")
        data = path.read_bytes()
        self._send({"write": path.name, "size": len(data)}, data)

    def run(self, argv: list[str], cwd: Path, log: Path, pipe: bool, text: bool, name: str) -> RemoteProcess:
        """Start `argv` there (in a host's namespace: the caller's `mnexec -a PID`), its errors, and
        its output unless piped here, into `log` (a file of the folder, mirrored back)."""
        if log.parent != self.folder:
            raise AgentError(f"{log}: a program's log is a file of {self.folder}")
        with self._cond:
            if self._ended:
                raise AgentError(self._why(f"is gone; {name} not started"))
            self._next += 1
            proc = self.programs[self._next] = RemoteProcess(self, self._next, name, pipe, text)
        self._send({"run": proc.ident, "argv": argv, "cwd": str(cwd), "log": log.name, "pipe": pipe})
        if not proc._started.wait(START_TIMEOUT_S):
            raise AgentError(self._why(f"did not start {name} within {START_TIMEOUT_S} s"))
        if proc.error is not None:
            raise AgentError(f"machine {self.machine.name}: could not start {name}: {proc.error}")
        if proc.pid is None:
            raise AgentError(self._why(f"ended before it started {name}"))
        return proc

    def signal(self, proc: RemoteProcess, name: str) -> None:
        self._send({"signal": proc.ident, "name": name})

    def sync(self, timeout: float = 30) -> None:
        """Return once this copy holds everything the files there held when called."""
        with self._cond:
            self._asked += 1
            token = self._asked
        self._send({"sync": token})
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._synced < token:
                if self._ended:
                    raise AgentError(self._why("ended before the files were complete"))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AgentError(self._why(f"did not complete the files within {timeout:g} s"))
                self._cond.wait(left)

    def close(self) -> None:
        """A last sync, then the agent ends, killing what still runs there (safe to call twice)."""
        try:
            if self.proc.poll() is None:
                self.sync()
        finally:
            if self.proc.stdin and not self.proc.stdin.closed:
                try:
                    self.proc.stdin.close()
                except BrokenPipeError:
                    pass
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(10)
            self._log.close()

    def _send(self, header: dict, data: bytes = b"") -> None:
        try:
            with self._lock:
                self.proc.stdin.write(json.dumps(header).encode() + b"\n" + data)
                self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise AgentError(self._why("is gone")) from None

    def _why(self, what: str) -> str:
        text = self._error or Path(self._log.name).read_text().strip()[-300:]
        return f"the agent of {self.folder} on machine {self.machine.name} {what}: {text or 'no message'}"

    def _read(self) -> None:
        stream = self.proc.stdout
        try:
            while line := stream.readline():
                header = json.loads(line)
                data = stream.read(header["size"]) if "size" in header else b""
                if "file" in header:
                    path = self.folder / header["file"]
                    with open(path, "r+b" if path.exists() and header["at"] > 0 else "wb") as fh:
                        fh.seek(header["at"])
                        fh.write(data)
                elif "synced" in header:
                    with self._cond:
                        self._synced = max(self._synced, header["synced"])
                        self._cond.notify_all()
                elif "started" in header:
                    proc = self.programs[header["started"]]
                    proc.pid = header["pid"]
                    proc._started.set()
                elif "failed" in header:
                    proc = self.programs[header["failed"]]
                    proc.error = header["error"]
                    proc._end(127)
                elif "stdout" in header:
                    self.programs[header["stdout"]]._output(data)
                elif "exited" in header:
                    self.programs[header["exited"]]._end(header["code"])
        except (OSError, ValueError, KeyError) as exc:
            self._error = f"{type(exc).__name__}: {exc}"
        finally:
            with self._cond:
                self._ended = True
                self._cond.notify_all()
                left = list(self.programs.values())
            # The agent is gone, and its programs with it (it kills them at the end of its input;
            # if the ssh session broke, they are ended there by the run's cleanup): none runs on here.
            for proc in left:
                proc._end(255)


def on_clock(argv: list[str], python: str, offset: float) -> list[str]:
    """A Python program's command line, run on the controller's clock (workloads/onclock.py); any
    other program's as it is (the plug-ins give absolute instants to Python programs only)."""
    if argv and argv[0] == python:
        if len(argv) < 3 or argv[1] not in ("-m", "-c"):
            raise AgentError(f"{argv[:3]}: a Python program for another machine is `python -m MODULE ...` or"
                             " `python -c CODE ...`, so that it runs on the controller's clock")
        return [python, "-m", "catnip.workloads.onclock", repr(offset), *argv[1:]]
    return list(argv)
