"""Serving the dashboard: a threaded WSGI server (server-sent events need streaming responses,
which it sends unbuffered), stopped cleanly by Ctrl-C or SIGTERM: the run queue cancels its
running run and waits for the teardown before the process exits."""

from __future__ import annotations

import ipaddress
import signal
import sys
import threading
from pathlib import Path

from werkzeug.serving import make_server

from webui.app import create_app


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def serve(host: str, port: int, db: Path | None = None, on_ready=print) -> None:
    app = create_app(db=db)
    queue = app.extensions["catnip_queue"]
    server = make_server(host, port, app, threaded=True)
    stopping = threading.Event()

    def stop(signum, frame):
        if stopping.is_set():
            return
        stopping.set()
        print(f"catnip web: {signal.Signals(signum).name}, stopping (a running run is cancelled and torn down)",
              file=sys.stderr, flush=True)
        # shutdown() waits for serve_forever to return, so it runs off the serving thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    shown = f"[{host}]" if ":" in host else host
    on_ready(f"CATNIP dashboard on http://{shown}:{server.server_port}/  (Ctrl-C stops it)")
    try:
        server.serve_forever()
    finally:
        queue.shutdown()
        server.server_close()
        for s, h in previous.items():
            signal.signal(s, h)
