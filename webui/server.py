"""Serving the dashboard: waitress, a production WSGI server, with a bounded pool of threads
(idle and slow sockets wait in its event loop and cost no thread) and an idle timeout; stopped
cleanly by Ctrl-C, SIGTERM or SIGHUP: the run queue cancels its running run and waits for the
teardown before the process exits."""

from __future__ import annotations

import ipaddress
import logging
import signal
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

from waitress.server import create_server

from catnip.webui import hosts
from catnip.webui.app import create_app

THREADS = 16             # requests served at once; live views are capped below this (SSE_MAX_STREAMS)
CONNECTION_LIMIT = 500   # open sockets accepted; past this the kernel's backlog holds new ones
IDLE_TIMEOUT = 60        # seconds an idle keep-alive or half-sent request may hold its socket
MAX_HEADER_BYTES = 64 * 1024


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class _Stop(SystemExit):
    """Raised by the signal handler into waitress's event loop (the main thread): a SystemExit,
    which waitress lets through its handlers (any other exception there is logged and swallowed)
    and on which its run() closes the server and returns."""


def serve(host: str, port: int, db: Path | None = None, on_ready=print, allow_hosts: Iterable[str] = ()) -> None:
    """`allow_hosts`: names answered besides loopback and `host` (webui/hosts.py); ValueError if one is not a name."""
    app = create_app(db=db, allowed_hosts=hosts.allowed_names(host, allow_hosts))
    queue = app.extensions["catnip_queue"]
    # waitress logs a refused connection past the limit, a task queue building up and an app error
    # (with its traceback, which it never sends to the client) on this logger.
    logging.getLogger("waitress").addHandler(logging.StreamHandler(sys.stderr))
    logging.getLogger("waitress").setLevel(logging.WARNING)
    server = create_server(app, host=host, port=port, threads=THREADS, connection_limit=CONNECTION_LIMIT,
                           channel_timeout=IDLE_TIMEOUT, cleanup_interval=10,
                           max_request_header_size=MAX_HEADER_BYTES,
                           max_request_body_size=app.config["MAX_CONTENT_LENGTH"], expose_tracebacks=False,
                           ident="catnip", asyncore_use_poll=True)
    stopping = app.extensions["catnip_stopping"]

    leaving = threading.Event()  # out of the event loop: the teardown is under way

    def stop(signum, frame):
        if not stopping.is_set():
            stopping.set()
            print(f"catnip web: {signal.Signals(signum).name}, stopping (a running run is cancelled and torn down)",
                  file=sys.stderr, flush=True)
        if not leaving.is_set():  # a second signal during the teardown must not cut it short
            raise _Stop

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        # One socket per address a name resolves to (localhost: 127.0.0.1 and ::1).
        for address, bound_port in getattr(server, "effective_listen", None) or [(server.effective_host,
                                                                                   server.effective_port)]:
            shown = f"[{address}]" if ":" in address else address
            on_ready(f"CATNIP dashboard on http://{shown}:{bound_port}/  (Ctrl-C stops it)")
        server.run()
    finally:
        leaving.set()
        stopping.set()  # live views end, so the pool's threads are free to stop
        server.close()
        server.task_dispatcher.shutdown(timeout=10)
        queue.shutdown()
        for s, h in previous.items():
            signal.signal(s, h)
