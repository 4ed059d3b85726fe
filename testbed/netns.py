"""A network namespace's cookie: the kernel's 64-bit name for it (net->net_cookie), the key of
the project's BPF maps that hold something per host (testbed/rto_init.py, testbed/sender.py).
Every host is a namespace of its own, and points run side by side reuse addresses but never
namespaces, so a cookie names one host of one point."""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import threading

SO_NETNS_COOKIE = 71   # include/uapi/asm-generic/socket.h (Linux 5.14)
CLONE_NEWNET = 0x40000000


class NetnsError(RuntimeError):
    pass


def cookie(pid: int) -> int:
    """The cookie of the network namespace of process `pid`: a socket opened there, on a thread of
    our own that enters the namespace (setns moves only the calling thread)."""
    libc = ctypes.CDLL(None, use_errno=True)
    out: dict[str, object] = {}

    def inside() -> None:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into process {pid}'s network namespace")
            finally:
                os.close(fd)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                out["cookie"] = struct.unpack("<Q", s.getsockopt(socket.SOL_SOCKET, SO_NETNS_COOKIE, 8))[0]
        except OSError as exc:
            out["error"] = exc

    t = threading.Thread(target=inside, name=f"netns-cookie-{pid}")
    t.start()
    t.join()
    if "error" in out:
        raise NetnsError(f"reading the network namespace cookie of process {pid}: {out['error']}")
    return int(out["cookie"])  # type: ignore[arg-type]
