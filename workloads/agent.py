"""The other machine's end of an application on a split topology (workloads/apps/elsewhere.py):

    python -m catnip.workloads.agent FOLDER

run there over one ssh session per application. It runs the application's programs there, keeps
the controller's copy of FOLDER up to date while they write into it, and takes the files the
controller sends (their configs). Binary frames, each a JSON line and then `size` bytes if it
says a size:

- in:  {"write": NAME, "size": N} + N bytes: write FOLDER/NAME (never sent back);
       {"run": ID, "argv": [...], "cwd": DIR, "log": NAME, "pipe": BOOL}: start a program, its
       errors (and its output unless `pipe`) into FOLDER/NAME; answered by "started" or "failed";
       {"signal": ID, "name": "TERM"}: signal a program (nothing if it has ended);
       {"sync": K}: look at every file now, send what grew, then {"synced": K};
       end of input: every program still running is killed, a last look, then exit.
- out: {"file": NAME, "at": OFFSET, "size": N} + N bytes: what a file gained from OFFSET (0 after
       a file shrank: its whole content again);
       {"started": ID, "pid": PID} or {"failed": ID, "error": TEXT};
       {"stdout": ID, "size": N} + N bytes: a piped program's output;
       {"exited": ID, "code": CODE} after its last output (CODE negative: killed by that signal);
       {"synced": K}: everything older than the request has been sent.

Every LOOK_S without a request it looks anyway, so what is read here lags by about that much.
Only the folder's own regular files are followed, not its subfolders or names starting with a dot.
One session for all of an application's programs there: an ssh session each would take about
0.1 s to open (docs/cluster.md).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys

LOOK_S = 0.05


class Agent:
    def __init__(self, folder: str, out) -> None:
        self.folder, self.out = folder, out
        self.sent: dict[str, tuple[int, int]] = {}  # name -> (inode, bytes sent)
        self.shipped: set[str] = set()
        self.programs: dict[int, subprocess.Popen] = {}

    # --- the folder ---
    def look(self) -> None:
        for entry in os.scandir(self.folder):
            if entry.name.startswith(".") or entry.name in self.shipped or not entry.is_file(follow_symlinks=False):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                inode, at = self.sent.get(entry.name, (None, 0))
                if st.st_ino != inode or st.st_size < at:
                    at = -1  # new, replaced or shrunk: all of it again (an empty one empties the copy)
                elif st.st_size == at:
                    continue
                with open(entry.path, "rb") as fh:
                    fh.seek(max(at, 0))
                    data = fh.read(st.st_size - max(at, 0))  # up to the size seen; a half line ends with the next look
            except FileNotFoundError:
                continue
            self.frame({"file": entry.name, "at": max(at, 0), "size": len(data)}, data)
            self.sent[entry.name] = (st.st_ino, max(at, 0) + len(data))
        self.out.flush()

    def take(self, header: dict, data: bytes) -> None:
        with open(self._path(header["write"]), "wb") as fh:
            fh.write(data)
        self.shipped.add(header["write"])

    def _path(self, name: str) -> str:
        if "/" in name or name.startswith("."):
            raise ValueError(f"a file name of the folder, not {name!r}")
        return os.path.join(self.folder, name)

    # --- the programs ---
    def run(self, req: dict) -> None:
        try:
            with open(self._path(req["log"]), "ab") as log:
                proc = subprocess.Popen(req["argv"], cwd=req.get("cwd"), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE if req.get("pipe") else log,
                                        stderr=log if req.get("pipe") else subprocess.STDOUT)
        except (OSError, ValueError) as exc:
            self.frame({"failed": req["run"], "error": f"{type(exc).__name__}: {exc}"})
            return
        self.programs[req["run"]] = proc
        self.frame({"started": req["run"], "pid": proc.pid})

    def signal(self, req: dict) -> None:
        proc = self.programs.get(req["signal"])
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(getattr(signal, f"SIG{req['name']}"))
            except ProcessLookupError:
                pass

    def pipes(self) -> dict[int, int]:
        """fd -> program id of the piped programs' outputs still open."""
        return {p.stdout.fileno(): i for i, p in self.programs.items() if p.stdout is not None and not p.stdout.closed}

    def relay(self, fd: int, ident: int) -> None:
        data = os.read(fd, 1 << 16)
        if data:
            self.frame({"stdout": ident, "size": len(data)}, data)
        else:
            self.programs[ident].stdout.close()

    def reap(self) -> None:
        """Report the programs that ended (a piped one once its output is closed)."""
        for ident, proc in list(self.programs.items()):
            if proc.poll() is not None and (proc.stdout is None or proc.stdout.closed):
                self.look()  # its last writes go before its end
                self.frame({"exited": ident, "code": proc.returncode})
                del self.programs[ident]

    def end(self) -> None:
        for proc in self.programs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.look()

    def frame(self, header: dict, data: bytes = b"") -> None:
        self.out.write(json.dumps(header).encode() + b"\n" + data)


def serve(folder: str, fd_in: int, out) -> None:
    os.makedirs(folder, exist_ok=True)
    agent, pending = Agent(folder, out), b""
    try:
        while True:
            pipes = agent.pipes()
            ready, _, _ = select.select([fd_in, *pipes], [], [], LOOK_S)
            for fd in ready:
                if fd in pipes:
                    agent.relay(fd, pipes[fd])
            if fd_in in ready:
                chunk = os.read(fd_in, 1 << 16)
                if not chunk:  # end of input
                    return
                pending += chunk
            while b"\n" in pending:
                line, rest = pending.split(b"\n", 1)
                header = json.loads(line)
                if "write" in header:
                    if len(rest) < header["size"]:
                        break  # its bytes are still coming
                    agent.take(header, rest[:header["size"]])
                    pending = rest[header["size"]:]
                    continue
                pending = rest
                if "run" in header:
                    agent.run(header)
                elif "signal" in header:
                    agent.signal(header)
                elif "sync" in header:
                    agent.look()
                    agent.frame({"synced": header["sync"]})
            agent.reap()
            agent.look()
    finally:
        agent.end()
        out.flush()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m catnip.workloads.agent FOLDER", file=sys.stderr)
        return 2
    serve(argv[0], sys.stdin.fileno(), sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
