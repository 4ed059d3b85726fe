"""Application processes on a host of another machine (a split topology, docs/cluster.md).

A plug-in spawns a program there as it would here (base.Application.spawn); what differs is kept
here, so no plug-in needs to know:
- the files: the application's folder exists there at the same path. The files the program is
  given (its config) are sent there first, and what the programs there write into the folder comes
  back into this machine's copy as it grows (`Mirror`, one ssh session per machine), so progress,
  collection and logs read local files as for a local host. `sync` makes the copy complete.
- the clock: a Python program runs on the controller's clock (workloads/onclock.py, with the
  machine's measured offset), so the instants it is given and records are this machine's.
- the stop: a signal to the local ssh client does not reach the program, so each writes its pid
  there first, and `stop_there` signals them by it, all of one machine in one command.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

PID_FOLDER = ".pids"  # inside the application's folder; names with a dot are not mirrored


class MirrorError(RuntimeError):
    """The mirror of a folder on another machine failed; the message says where and why."""


class Mirror:
    """This machine's copy of an application folder on `machine`, kept up to date by
    `python -m workloads.mirror FOLDER` there."""

    def __init__(self, machine: Any, folder: Path, python: str, repo: Path, log: Path) -> None:
        self.machine, self.folder = machine, folder
        machine.run(["mkdir", "-p", str(folder / PID_FOLDER)])
        self._log = open(log, "w")  # noqa: SIM115 - open while the mirror runs
        self.proc = subprocess.Popen(machine.argv(["sh", "-c", 'cd "$0" && exec "$1" -m workloads.mirror "$2"',
                                                   str(repo), python, str(folder)]),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)
        self._cond = threading.Condition()
        self._synced, self._asked, self._ended = 0, 0, False
        self._error: str | None = None
        self._reader = threading.Thread(target=self._read, name=f"mirror-{machine.name}", daemon=True)
        self._reader.start()

    def ship(self, path: Path) -> None:
        """Send a file of the folder there (a program's config)."""
        if path.parent != self.folder:
            raise MirrorError(f"{path}: only files of {self.folder} go to machine {self.machine.name}")
        data = path.read_bytes()
        self._send({"write": path.name, "size": len(data)}, data)

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
                    raise MirrorError(self._why("ended before the files were complete"))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise MirrorError(self._why(f"did not complete the files within {timeout:g} s"))
                self._cond.wait(left)

    def close(self) -> None:
        """A last sync, then the mirror ends (safe to call twice)."""
        if self.proc.poll() is None:
            try:
                self.sync()
            finally:
                if self.proc.stdin and not self.proc.stdin.closed:
                    self.proc.stdin.close()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        self._reader.join(10)
        self._log.close()

    def _send(self, header: dict, data: bytes = b"") -> None:
        try:
            self.proc.stdin.write(json.dumps(header).encode() + b"\n" + data)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise MirrorError(self._why("is gone")) from None

    def _why(self, what: str) -> str:
        text = self._error or Path(self._log.name).read_text().strip()[-300:]
        return f"the mirror of {self.folder} on machine {self.machine.name} {what}: {text or 'no message'}"

    def _read(self) -> None:
        stream = self.proc.stdout
        try:
            while line := stream.readline():
                header = json.loads(line)
                if "synced" in header:
                    with self._cond:
                        self._synced = max(self._synced, header["synced"])
                        self._cond.notify_all()
                    continue
                data = stream.read(header["size"])
                path = self.folder / header["file"]
                with open(path, "r+b" if path.exists() and header["at"] > 0 else "wb") as fh:
                    fh.seek(header["at"])
                    fh.write(data)
        except (OSError, ValueError, KeyError) as exc:
            self._error = f"{type(exc).__name__}: {exc}"
        finally:
            with self._cond:
                self._ended = True
                self._cond.notify_all()


def on_clock(argv: list[str], python: str, offset: float) -> list[str]:
    """A Python program's command line, run on the controller's clock (workloads/onclock.py); any
    other program's as it is (the plug-ins give absolute instants to Python programs only)."""
    if len(argv) >= 3 and argv[0] == python and argv[1] in ("-m", "-c"):
        return [python, "-m", "workloads.onclock", repr(offset), *argv[1:]]
    return list(argv)


def with_pid_file(argv: list[str], pid_file: Path) -> list[str]:
    """`argv`, writing its pid to `pid_file` first (the shell becomes the program)."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(pid_file), *argv]


def stop_there(machine: Any, pid_files: list[Path], signal_name: str) -> None:
    """Signal the programs of these pid files on `machine`, in one command; those gone are skipped."""
    if pid_files:
        machine.run(["sh", "-c", 'for f; do [ -s "$f" ] && kill -' + signal_name + ' "$(cat "$f")" 2>/dev/null;'
                     ' done; true', "stop", *map(str, pid_files)])
