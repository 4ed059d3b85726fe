"""The web client's pipelining and duration sessions against a tiny HTTP server run in the test
(threads, 127.0.0.1 of the test's own namespace; no Apache, no Mininet), and the web
application's wiring of page sets, durations and records (fake hosts: nothing is started)."""

from __future__ import annotations

import json
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from catnip.testbed.paths import REPO
from catnip.workloads import client as client_mod
from catnip.workloads.apps.base import AppContext, AppError, Host
from catnip.workloads.apps.web import Web, WebSpec
from catnip.workloads.docroot import documents
from catnip.workloads.pages import probe_pages


class TinyHttp(socketserver.ThreadingTCPServer):
    """Serves documents from memory, in request order, keep-alive unless `Connection: close`.
    With `hold`, it answers nothing on a connection until it has `hold` requests of it (or
    hold_timeout passed), and notes how many it had then: a pipelining client sends them all."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, docs: dict[str, bytes], hold: int = 0, hold_timeout: float = 1.0):
        self.docs, self.hold, self.hold_timeout = docs, hold, hold_timeout
        self.before_first_response: list[int] = []   # per connection
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def port(self) -> int:
        return self.server_address[1]


class Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        srv: TinyHttp = self.server
        sock: socket.socket = self.request
        buf, pending, answered = b"", [], False
        deadline = time.monotonic() + srv.hold_timeout
        while True:
            while b"\r\n\r\n" in buf:
                head, _, buf = buf.partition(b"\r\n\r\n")
                pending.append(head)
            holding = srv.hold and not answered and len(pending) < srv.hold and time.monotonic() < deadline
            if pending and not holding:
                if not answered:
                    with srv.lock:
                        srv.before_first_response.append(len(pending))
                    answered = True
                for head in pending:
                    url = head.split(b" ")[1].decode()
                    body = srv.docs.get(url)
                    status = "200 OK" if body is not None else "404 Not Found"
                    body = body if body is not None else b"missing"
                    sock.sendall(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
                    if b"connection: close" in head.lower():
                        return
                pending = []
            sock.settimeout(0.05 if holding else 5.0)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            buf += data


@pytest.fixture
def tiny():
    servers = []

    def start(hold: int = 0) -> TinyHttp:
        srv = TinyHttp(documents(probe_pages()), hold=hold)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv
    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def _run(tmp_path: Path, port: int, **cfg) -> list[dict]:
    probe = probe_pages()[0]
    conf = {"client": "t", "server": "127.0.0.1", "port": port, "pages": [0], "seed": 5, "http_version": "1.1",
            "parallel": 1, "page_set": "probe", "catalog": {"0": probe.objects}, "object_timeout": 5, **cfg}
    (tmp_path / "c.json").write_text(json.dumps(conf))
    out = tmp_path / "out.jsonl"
    out.unlink(missing_ok=True)
    assert client_mod.main([str(tmp_path / "c.json"), str(out)]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_pipelined_page_sends_every_request_before_reading(tmp_path, tiny):
    srv = tiny(hold=9)  # the HTML and eight images
    records = _run(tmp_path, srv.port, pipeline=True, persistent="page", rounds=3)
    pages = [r for r in records if r["kind"] == "page"]
    objects = [r for r in records if r["kind"] == "object"]
    assert srv.before_first_response == [9, 9, 9]          # every request before any response
    assert [(p["page_set"], p["page"], p["objects"], p["bytes"], p["error"]) for p in pages] == \
        [("probe", 0, 9, 82_944, None)] * 3
    assert [o["url"] for o in objects[:9]] == probe_pages()[0].objects
    assert all(o["status"] == 200 for o in objects)
    assert [o["body_bytes"] for o in objects[:9]] == [1024] + [10240] * 8
    assert len({o["conn"] for o in objects}) == 3          # persistent: page, one connection each
    assert records[-1] == {**records[-1], "kind": "end", "reason": "done"}


def test_todays_http11_client_waits_for_the_html_before_its_images(tmp_path, tiny):
    """Without `pipeline`, HTTP/1.1 sends the HTML's request alone and the images' once the HTML
    arrived: not the paper's model, hence the new field."""
    srv = tiny(hold=9)
    records = _run(tmp_path, srv.port, persistent="page")
    assert srv.before_first_response == [1]
    assert [r["error"] for r in records if r["kind"] == "page"] == [None]


def test_a_pipelined_failure_fails_the_objects_not_received(tmp_path):
    # A server that answers the HTML, then goes silent: the images time out, the page fails.
    probe = probe_pages()[0]
    html = documents(probe_pages())[probe.objects[0]]
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(html)}\r\n\r\n".encode() + html)
        time.sleep(3)
        conn.close()
    threading.Thread(target=serve, daemon=True).start()
    records = _run(tmp_path, listener.getsockname()[1], pipeline=True, object_timeout=0.5)
    listener.close()
    objects = [r for r in records if r["kind"] == "object"]
    assert [o["error"] for o in objects] == [None] + ["timeout"] * 8
    assert [r["error"] for r in records if r["kind"] == "page"] == ["timeout"]


def test_duration_session_starts_no_page_after_its_end(tmp_path, tiny):
    srv = tiny()
    stop_at = time.monotonic() + 1.5
    records = _run(tmp_path, srv.port, http_version="1.0", stop_at=stop_at,
                   think_time={"model": "fixed", "mean": 0.2})
    pages = [r for r in records if r["kind"] == "page"]
    assert len(pages) >= 3 and all(p["error"] is None for p in pages)
    assert all(p["start"] < stop_at for p in pages)
    # It ended because the next page would have started after stop_at, not for want of pages.
    assert pages[-1]["end"] + 0.2 >= stop_at
    assert [p["round"] for p in pages] == list(range(len(pages)))   # one page per pass of the probe set
    assert records[-1]["kind"] == "end" and records[-1]["reason"] == "done"
    assert records[-1]["mono"] - pages[-1]["end"] < 0.1    # no think time slept past the end


def test_duration_session_that_starts_after_its_end_loads_nothing(tmp_path, tiny):
    srv = tiny()
    records = _run(tmp_path, srv.port, stop_at=time.monotonic() - 1)
    assert [r["kind"] for r in records] == ["start", "end"] and records[-1]["reason"] == "done"


@pytest.mark.parametrize("cfg, message", [
    ({"pipeline": True, "http_version": "1.0"}, "pipeline needs http_version '1.1'"),
    ({"pipeline": "yes"}, "pipeline must be true or false"),
    ({"catalog": {"1": ["/page1.html"]}}, "catalog has no URLs for pages [0]"),
    ({"catalog": None, "pages": [0]}, "no page 0: pages are numbered 1 to 10; other pages need a catalog"),
    ({"stop_at": "soon"}, "stop_at must be a time.monotonic() instant or null"),
    ({"pages": []}, "pages must be a non-empty list of page numbers"),
])
def test_client_config_errors(tmp_path, capsys, cfg, message):
    conf = {"client": "t", "server": "127.0.0.1", "port": 1, "pages": [0], "seed": 1, "http_version": "1.1",
            "parallel": 1, "catalog": {"0": ["/probe/page0.html"]}, **cfg}
    if conf["catalog"] is None:
        del conf["catalog"]
    (tmp_path / "c.json").write_text(json.dumps(conf))
    assert client_mod.main([str(tmp_path / "c.json"), str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


# --- the application's wiring -------------------------------------------------------------------------

class FakeNode:
    """Stands for a Mininet host: a gated client only says READY and waits for GO
    (workloads/gate.py); any other process it is asked to start is a no-op."""

    def popen(self, argv, **kw):
        kw.pop("preexec_fn", None)
        code = "pass"
        if "--gate" in [str(a) for a in argv]:
            code = f"import sys; sys.path.insert(0, {str(REPO)!r}); from workloads import gate; gate.wait_for_go()"
        return subprocess.Popen([sys.executable, "-c", code], **kw)


def _app(tmp_path: Path, **fields) -> Web:
    spec = WebSpec(clients="clients", servers="servers", **fields)
    ctx = AppContext(workdir=tmp_path / "work", seed=11, time_limit=600, python=sys.executable, repo=tmp_path,
                     start_at=time.monotonic(), docroot=tmp_path / "docroot")
    clients = [Host(f"c{i}", f"10.0.0.{i + 1}", "clients", i, "rtt20ms", FakeNode()) for i in range(2)]
    servers = [Host("s0", "10.0.1.1", "servers", 0, "", FakeNode())]
    return Web(spec, ctx, clients, servers)


def test_the_application_serves_and_asks_for_its_page_set(tmp_path):
    app = _app(tmp_path, page_set="random", random_pages={"pool_size": 12}, duration="30s", http_version="1.1",
               persistent="page", pipeline=True)
    try:
        app.start_servers()
        pool = app.spec.served_pages()
        for page in pool:  # the document root holds the set's files
            assert all((tmp_path / "docroot" / u.lstrip("/")).is_file() for u in page.objects)
        app.launch_clients()
        app.wait_clients_ready(time.monotonic() + 30)
        app.start_clients()
        cfg = json.loads((tmp_path / "work" / "client-c0.json").read_text())
        assert cfg["pages"] == list(range(1001, 1013)) and cfg["page_set"] == "random" and cfg["pipeline"] is True
        assert cfg["catalog"] == {str(p.number): p.objects for p in pool}
        assert cfg["stop_at"] == pytest.approx(app.ctx.start_at + 30)
        assert app.expected() == 0                           # open-ended: a duration
    finally:
        app.stop()


def test_a_client_is_not_released_before_it_said_ready(tmp_path):
    """GO before READY would kill the program (SIGUSR1's default action): release refuses it."""
    app = _app(tmp_path, pages=[1])
    try:
        app.launch_clients()
        with pytest.raises(AppError, match="released before it said READY"):
            app.start_clients()
    finally:
        app.stop()


def _outputs(app: Web, tmp_path: Path, lines: dict[str, list[dict]]) -> None:
    for name, recs in lines.items():
        out = tmp_path / f"{name}.jsonl"
        out.write_text("".join(json.dumps(r) + "\n" for r in recs))
        client = next(c for c in app.clients if c.name == name)
        app.outputs[name] = (client, app.servers[0], out)


def _page(n: int, rnd: int = 0, page_set: str = "probe") -> dict:
    return {"kind": "page", "page_set": page_set, "page": n, "round": rnd, "start": 1.0, "end": 2.0,
            "duration": 1.0, "objects": 9, "bytes": 82_944, "error": None}


def test_duration_records_are_complete_when_every_session_ran_to_its_end(tmp_path):
    app = _app(tmp_path, page_set="probe", duration="30s")
    _outputs(app, tmp_path, {"c0": [_page(0), _page(0, 1), {"kind": "end", "reason": "done"}],
                             "c1": [_page(0), {"kind": "end", "reason": "session_timeout"}]})
    res = app.collect()
    assert res.missing == ["web: the client on c1 stopped (session_timeout) after 1 pages"]
    assert [p["page_set"] for p in res.records["pages"]] == ["probe"] * 3
    assert [x["flow"] for x in res.samples] == ["page0/r0", "page0/r1", "page0/r0"]
    _outputs(app, tmp_path, {"c1": [_page(0)]})
    assert app.collect().missing == ["web: the client on c1 ended early after 1 pages"]


def test_rounds_records_count_the_page_sets_pages(tmp_path):
    app = _app(tmp_path, page_set="probe", rounds=2)
    assert app.expected() == 4
    _outputs(app, tmp_path, {"c0": [_page(0), _page(0, 1)], "c1": [_page(0)]})
    assert app.collect().missing == ["web: c1 recorded 1 of 2 pages"]
