"""The other machine's end of an application folder's mirror (workloads/apps/elsewhere.py):

    python -m workloads.mirror FOLDER

run there over ssh. It keeps the controller's copy of FOLDER up to date while the programs there
write into it, and takes the files the controller sends (their configs). Binary frames, each a JSON
line and then `size` bytes:

- in:  {"write": NAME, "size": N} + N bytes: write FOLDER/NAME (never sent back);
       {"sync": K}: look at every file now, send what grew, then {"synced": K} (nothing after it
       is older than the request);
       end of input: a last look, then exit.
- out: {"file": NAME, "at": OFFSET, "size": N} + N bytes: what a file gained from OFFSET (0 after
       a file shrank: its whole content again); {"synced": K}.

Every LOOK_S without a request it looks anyway, so progress read here lags by about that much.
Only the folder's own regular files are followed, not its subfolders or names starting with a dot.
"""

from __future__ import annotations

import json
import os
import select
import sys

LOOK_S = 0.05


class Follower:
    def __init__(self, folder: str, out) -> None:
        self.folder, self.out = folder, out
        self.sent: dict[str, int] = {}  # name -> bytes sent
        self.shipped: set[str] = set()

    def look(self) -> None:
        for entry in os.scandir(self.folder):
            if entry.name.startswith(".") or entry.name in self.shipped or not entry.is_file(follow_symlinks=False):
                continue
            try:
                size = entry.stat(follow_symlinks=False).st_size
                at = self.sent.get(entry.name, 0)
                if size < at:
                    at = 0  # it shrank (written anew): all of it again
                if size == at and entry.name in self.sent:
                    continue
                with open(entry.path, "rb") as fh:
                    fh.seek(at)
                    data = fh.read(size - at)  # up to the size seen; a line half written ends with the next look
            except FileNotFoundError:
                continue
            self.frame({"file": entry.name, "at": at, "size": len(data)}, data)
            self.sent[entry.name] = at + len(data)
        self.out.flush()

    def frame(self, header: dict, data: bytes = b"") -> None:
        self.out.write(json.dumps(header).encode() + b"\n" + data)

    def take(self, header: dict, data: bytes) -> None:
        name = header["write"]
        if "/" in name or name.startswith("."):
            raise ValueError(f"a file name of the folder, not {name!r}")
        with open(os.path.join(self.folder, name), "wb") as fh:
            fh.write(data)
        self.shipped.add(name)


def serve(folder: str, fd_in: int, out) -> None:
    os.makedirs(folder, exist_ok=True)
    follower, pending = Follower(folder, out), b""
    while True:
        ready, _, _ = select.select([fd_in], [], [], LOOK_S)
        chunk = os.read(fd_in, 1 << 16) if ready else None
        if chunk == b"":  # end of input
            follower.look()
            return
        pending += chunk or b""
        while b"\n" in pending:
            line, rest = pending.split(b"\n", 1)
            header = json.loads(line)
            if "write" in header:
                if len(rest) < header["size"]:
                    break  # its bytes are still coming
                follower.take(header, rest[:header["size"]])
                pending = rest[header["size"]:]
            else:
                pending = rest
                follower.look()
                follower.frame({"synced": header["sync"]})
        follower.look()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m workloads.mirror FOLDER", file=sys.stderr)
        return 2
    serve(argv[0], sys.stdin.fileno(), sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
