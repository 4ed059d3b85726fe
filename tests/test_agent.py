"""The other machine's end of an application (workloads/agent.py), driven here through pipes, as
its ssh session would: files written and mirrored, programs started, signalled and killed."""

from __future__ import annotations

import json
import os
import select
import sys
import threading
import time

import pytest

from catnip.workloads import agent


class Session:
    """An agent serving `folder` in a thread, with our end of its input and output."""

    def __init__(self, folder):
        self.folder = folder
        in_r, self.in_w = os.pipe()
        self.out_r, out_w = os.pipe()
        out = os.fdopen(out_w, "wb")

        def serve():
            try:
                agent.serve(str(folder), in_r, out)
            finally:
                out.close()
                os.close(in_r)

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        self.pending = b""

    def send(self, header: dict, data: bytes = b"", piecewise: bool = False) -> None:
        frame = json.dumps(header).encode() + b"\n" + data
        for i in range(0, len(frame), 1 if piecewise else len(frame)):
            os.write(self.in_w, frame[i:i + (1 if piecewise else len(frame))])

    def frames(self, until, timeout: float = 20) -> list[tuple[dict, bytes]]:
        """Frames as they come, until one for which until(header) holds (included)."""
        got, deadline = [], time.monotonic() + timeout
        while True:
            while b"\n" in self.pending:
                line, rest = self.pending.split(b"\n", 1)
                header = json.loads(line)
                size = header.get("size", 0) if ("file" in header or "stdout" in header) else 0
                if len(rest) < size:
                    break
                self.pending = rest[size:]
                got.append((header, rest[:size]))
                if until(header):
                    return got
            left = deadline - time.monotonic()
            assert left > 0, f"no such frame in {timeout} s; got {got}"
            ready, _, _ = select.select([self.out_r], [], [], left)
            chunk = os.read(self.out_r, 65536) if ready else b""
            assert chunk or not ready, f"the agent ended; got {got}"
            self.pending += chunk

    def close(self) -> None:
        os.close(self.in_w)
        self.thread.join(20)
        os.close(self.out_r)


@pytest.fixture
def session(tmp_path):
    s = Session(tmp_path / "app")
    yield s
    if s.thread.is_alive():
        s.close()


def test_a_file_sent_in_pieces_is_written_whole_and_not_sent_back(session):
    data = b'{"start_at": 1.5}\n' * 3000  # 54 KB, one byte a write
    session.send({"write": "c.json", "size": len(data)}, data, piecewise=True)
    session.send({"sync": 1})
    got = session.frames(lambda h: h.get("synced") == 1)
    assert (session.folder / "c.json").read_bytes() == data
    assert not [h for h, _ in got if h.get("file") == "c.json"]


def test_what_a_program_writes_comes_back_as_it_grows_and_a_truncation_too(session):
    py = sys.executable
    code = ("import sys, time; f = open(sys.argv[1], 'w'); f.write('a\\n'); f.flush(); time.sleep(0.3);"
            " f.write('b\\n'); f.close(); time.sleep(0.3); open(sys.argv[1], 'w').close()")
    session.send({"run": 1, "argv": [py, "-c", code, str(session.folder / "out.jsonl")], "cwd": "/",
                  "log": "p.log", "pipe": False})
    got = session.frames(lambda h: "exited" in h)
    parts = [(h["at"], d) for h, d in got if h.get("file") == "out.jsonl"]
    assert parts[0] == (0, b"a\n") and (2, b"b\n") in parts, parts  # in two looks, at their offsets
    assert parts[-1] == (0, b""), parts  # emptied: the copy here is emptied too
    assert got[-1][0] == {"exited": 1, "code": 0}


def test_programs_start_fail_print_and_end_by_signal_and_the_end_of_input_kills_the_rest(session):
    session.send({"run": 1, "argv": ["/nonexistent/prog"], "cwd": "/", "log": "x.log", "pipe": False})
    (failed, _), = session.frames(lambda h: "failed" in h)
    assert failed["failed"] == 1 and "FileNotFoundError" in failed["error"]
    session.send({"run": 2, "argv": ["sh", "-c", "echo READY; exec sleep 60"], "cwd": "/", "log": "s.log",
                  "pipe": True})
    got = session.frames(lambda h: "stdout" in h)
    pid = next(h["pid"] for h, _ in got if h.get("started") == 2)
    assert got[-1] == ({"stdout": 2, "size": 6}, b"READY\n")
    session.send({"signal": 2, "name": "TERM"})
    assert session.frames(lambda h: "exited" in h)[-1][0] == {"exited": 2, "code": -15}
    # One that ignores SIGTERM: the end of the agent's input kills it.
    session.send({"run": 3, "argv": ["sh", "-c", "trap '' TERM; echo UP; while :; do sleep 1; done"], "cwd": "/",
                  "log": "t.log", "pipe": True})
    got = session.frames(lambda h: "stdout" in h)
    stubborn = next(h["pid"] for h, _ in got if h.get("started") == 3)
    session.send({"signal": 3, "name": "TERM"})
    session.close()
    assert not session.thread.is_alive()
    for gone in (pid, stubborn):
        with pytest.raises(ProcessLookupError):
            os.kill(gone, 0)


def test_a_ready_line_behind_another_in_one_chunk_is_seen():
    """A server's READY can arrive in one chunk behind another line (the agent relays output in
    chunks): workloads/apps/base.wait_for_line reads the pipe itself, not a buffered stream."""
    import subprocess
    from pathlib import Path
    from catnip.workloads.apps.base import AppError, Host, Proc, wait_for_line

    def server(code: str) -> Proc:
        popen = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        return Proc(Host("h1", "10.0.0.1", "g", 0), "server", popen, Path("/dev/null"))

    late = server("import sys, time; sys.stdout.write('warming up\\nREADY\\n'); sys.stdout.flush(); time.sleep(30)")
    try:
        wait_for_line(late, "READY", time.monotonic() + 5)
    finally:
        late.popen.kill()
        late.popen.wait()
    with pytest.raises(AppError, match=r"h1: server exited \(0\) before READY"):
        wait_for_line(server("print('no')"), "READY", time.monotonic() + 5)
