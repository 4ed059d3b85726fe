"""A tiny HTTP/1.0 file server that announces each response to the kernel with the CATNIP
document-size option (bpf/catnip_sockopt.h), as mod_catnip does for Apache: an example for
other servers. Usage: python3 catnip_doc_server.py ADDRESS PORT DIRECTORY
"""

import socket
import struct
import sys
from pathlib import Path

SOL_CATNIP, CATNIP_DOC, CATNIP_DOC_LAST = 0x43544E50, 1, 1


def announce(conn: socket.socket, offset: int, length: int, last: bool) -> None:
    try:
        conn.setsockopt(SOL_CATNIP, CATNIP_DOC, struct.pack("QII", offset, length, CATNIP_DOC_LAST if last else 0))
    except OSError:
        pass  # no BPF program attached to our cgroup: nothing to tell


def serve(address: str, port: int, root: Path) -> None:
    with socket.create_server((address, port)) as srv:
        while True:
            conn, _ = srv.accept()
            with conn:
                request = conn.recv(4096).decode(errors="replace").split(" ")
                path = root / Path(request[1] if len(request) > 1 else "/").name
                body = path.read_bytes() if path.is_file() else b"not found\n"
                status = "200 OK" if path.is_file() else "404 Not Found"
                head = f"HTTP/1.0 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                announce(conn, 0, len(head) + len(body), last=True)  # one response per connection: offset 0
                conn.sendall(head + body)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]))
