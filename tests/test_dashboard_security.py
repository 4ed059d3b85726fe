"""The dashboard against a hostile browser or client (issue 22): the Host allow-list (DNS
rebinding), Origin/Referer on state-changing requests, malformed Host headers, a health check
that opens the database, a bounded server (idle sockets cost no thread), captures served only
from their run's own folder.

No network namespaces and no runs: the run queue is told the machine is busy, so a submitted run
waits and never starts; the server test starts `catnip web` on a free loopback port.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from catnip.controller.run_queue import RunQueue
from catnip.results.store import Store
from catnip.testbed.paths import REPO
from catnip.webui import hosts
from catnip.webui.app import create_app

RUN = "20260101-000000-sec-aaaa"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CATNIP_DATA", str(tmp_path / "data"))
    db = tmp_path / "data" / "catnip.db"
    with Store(db) as store:
        store.create_run(RUN, "quick", "scenarios/quick.yaml", {"name": "quick"}, {}, 1, "abc", {}, {})
        store.create_point(RUN, 0, 0, {}, {"topology": {"clients": 1}, "workload": {"pages": [1], "rounds": 1}}, 1)
    scen = tmp_path / "scenarios"
    scen.mkdir()
    shutil.copy(REPO / "scenarios" / "quick.yaml", scen / "quick.yaml")
    queue = RunQueue(db, tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=db, scenarios_dir=scen, queue=queue)
    yield app, app.test_client(), queue, db
    queue.shutdown(timeout=5)


def _token(client, host: str = "localhost") -> str:
    page = client.get("/", headers={"Host": host}).get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def _start(client, host: str, origin: str | None = None, referer: str | None = None, token: str | None = None):
    headers = {"Host": host}
    if origin is not None:
        headers["Origin"] = origin
    if referer is not None:
        headers["Referer"] = referer
    return client.post("/runs", headers=headers, data={"scenario": "quick", "csrf_token": token or _token(client)})


# --- Host ------------------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "10.0.0.1", "localhost.evil.example",
                                  "127.0.0.2", "[::2]:8080", "0.0.0.0:8080"])
def test_a_foreign_host_is_refused(env, host):
    _, client, _, _ = env
    for url in ("/", "/runs", f"/runs/{RUN}", "/healthz"):
        r = client.get(url, headers={"Host": host})
        assert r.status_code == 400, (url, host, r.status_code)
        body = r.get_data(as_text=True)
        assert "does not answer to host" in body and "Traceback" not in body
        assert "csrf_token" not in body  # a rebinding page must not read a token


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:8080", "127.0.0.1", "127.0.0.1:8080", "[::1]:8080", "[::1]"])
def test_loopback_names_are_answered(env, host):
    _, client, _, _ = env
    r = client.get("/", headers={"Host": host})
    assert r.status_code == 200 and 'name="csrf_token"' in r.get_data(as_text=True)


def test_dns_rebinding_shape_is_refused(env):
    """evil.example resolved to 127.0.0.1: the browser sends the page's own cookie and the token
    it read, with Host and Origin evil.example. Everything is valid except the names."""
    _, client, queue, _ = env
    token = _token(client, "127.0.0.1:8080")
    session = client.get_cookie("session", domain="127.0.0.1")
    assert session is not None
    # What the browser holds for evil.example once it answered from 127.0.0.1 unguarded: the cookie too.
    client.set_cookie("session", session.value, domain="evil.example")
    r = _start(client, "evil.example:8080", origin="http://evil.example:8080", token=token)
    assert r.status_code == 400 and "does not answer to host 'evil.example'" in r.get_data(as_text=True)
    assert queue.jobs() == []
    # The same cookie and token under the dashboard's own name start the run: only the Host was wrong.
    r = _start(client, "127.0.0.1:8080", origin="http://127.0.0.1:8080", token=token)
    assert r.status_code == 303 and len(queue.jobs()) == 1


@pytest.mark.parametrize("origin, referer", [
    ("http://evil.example", None),
    ("http://evil.example:8080", None),
    ("http://127.0.0.1:9999", None),           # another service on this machine
    ("https://127.0.0.1:8080", None),          # another scheme
    ("null", None),                            # sandboxed frame, data: URL
    ("http://127.0.0.1:8080@evil.example", None),
    (None, "http://evil.example/page.html"),
    (None, "http://127.0.0.1:9999/"),
    ("http://evil.example", "http://127.0.0.1:8080/"),  # Origin decides when both are there
])
def test_a_post_from_a_foreign_origin_is_refused(env, origin, referer):
    _, client, queue, _ = env
    token = _token(client, "127.0.0.1:8080")
    r = _start(client, "127.0.0.1:8080", origin=origin, referer=referer, token=token)
    assert r.status_code == 403, r.get_data(as_text=True)
    assert "cross-origin request refused" in r.get_data(as_text=True)
    assert queue.jobs() == []
    r = client.post(f"/runs/{RUN}/cancel", headers={"Host": "127.0.0.1:8080", "Origin": origin or "null"},
                    data={"csrf_token": token})
    assert r.status_code == 403


@pytest.mark.parametrize("origin, referer", [
    ("http://127.0.0.1:8080", None),
    (None, "http://127.0.0.1:8080/runs?x=1"),
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
])
def test_a_post_from_the_dashboard_itself_is_accepted(env, origin, referer):
    _, client, queue, _ = env
    r = _start(client, "127.0.0.1:8080", origin=origin, referer=referer, token=_token(client, "127.0.0.1:8080"))
    assert r.status_code == 303 and len(queue.jobs()) == 1


def test_a_post_with_neither_origin_nor_referer_is_refused(env):
    # A valid token and cookie are not enough: a browser always names where a POST comes from
    # (Origin, else Referer); a request naming neither is not one of the dashboard's forms (issue 47).
    _, client, queue, _ = env
    token = _token(client, "127.0.0.1:8080")
    r = _start(client, "127.0.0.1:8080", token=token)
    assert r.status_code == 403 and "neither Origin nor Referer" in r.get_data(as_text=True)
    assert queue.jobs() == []
    r = client.post(f"/runs/{RUN}/cancel", headers={"Host": "127.0.0.1:8080"}, data={"csrf_token": token})
    assert r.status_code == 403


def test_the_csrf_token_is_still_required_from_the_right_origin(env):
    _, client, queue, _ = env
    r = client.post("/runs", headers={"Host": "localhost", "Origin": "http://localhost"}, data={"scenario": "quick"})
    assert r.status_code == 400 and "CSRF token is missing" in r.get_data(as_text=True)
    assert queue.jobs() == []


@pytest.mark.parametrize("host", ["a b", "[::1", "::1", "x:y:z", "localhost:abc", "localhost:99999", "localhost:",
                                  "..", "-", ".localhost", "local_host", "\x00", "é", "",
                                  "[127.0.0.1]", "[zz::1]", "localhost:8080:80", "user@localhost", "a" * 300])
def test_a_malformed_host_is_a_400_without_traceback(env, host):
    _, client, _, _ = env
    r = client.get("/runs", headers={"Host": host})
    assert r.status_code == 400
    body = r.get_data(as_text=True)
    assert ("malformed Host" in body or "Host header is required" in body) and "Traceback" not in body
    assert r.headers["Content-Type"].startswith("text/plain")


def test_bound_address_and_allowed_names(tmp_path):
    names = hosts.allowed_names("192.0.2.7", ["catnip-vm", "2001:DB8::1", "[2001:db8::2]"])
    assert names == {"localhost", "127.0.0.1", "::1", "192.0.2.7", "catnip-vm", "2001:db8::1", "2001:db8::2"}
    assert hosts.allowed_names("0.0.0.0") == set(hosts.LOOPBACK_NAMES)  # a wildcard names no host
    assert hosts.allowed_names("::") == set(hosts.LOOPBACK_NAMES)
    for bad in ("evil example", "0.0.0.0", "http://x", ""):
        with pytest.raises(ValueError):
            hosts.allowed_names(None, [bad])
    queue = RunQueue(tmp_path / "x.db", tmp_path / "logs", machine_busy=lambda: True)
    app = create_app(db=tmp_path / "x.db", scenarios_dir=tmp_path, queue=queue, allowed_hosts=names)
    try:
        client = app.test_client()
        for host in ("192.0.2.7:8080", "CATNIP-VM", "[2001:db8::1]:80", "localhost"):
            assert client.get("/runs", headers={"Host": host}).status_code == 200, host
        assert client.get("/runs", headers={"Host": "192.0.2.8"}).status_code == 400
    finally:
        queue.shutdown(timeout=5)


# --- health ----------------------------------------------------------------------------------

def test_healthz_opens_the_database(env):
    _, client, _, db = env
    r = client.get("/healthz")
    assert r.status_code == 200 and r.get_json()["ok"] is True and r.get_json()["runs"] == 1


@pytest.mark.parametrize("damage", ["garbage", "directory", "newer schema"])
def test_healthz_is_503_when_the_database_cannot_be_opened(env, damage):
    app, client, _, db = env
    broken = db.parent / "broken.db"
    if damage == "garbage":
        broken.write_bytes(b"this is not an SQLite database, " * 200)
    elif damage == "directory":
        broken.mkdir()
    else:
        shutil.copy(db, broken)
        import sqlite3
        con = sqlite3.connect(broken)
        con.execute("PRAGMA user_version = 9999")
        con.commit()
        con.close()
    app.config["CATNIP_DB"] = broken
    r = client.get("/healthz")
    assert r.status_code == 503
    data = r.get_json()
    assert data["ok"] is False and data["database"] == str(broken) and "cannot open the database" in data["error"]
    # The pages say so too, with a status and a reason, not a 500.
    r = client.get("/runs")
    assert r.status_code == 503 and "Database unavailable" in r.get_data(as_text=True)


# --- captures --------------------------------------------------------------------------------

def test_a_capture_is_served_only_from_its_runs_folder(env, tmp_path):
    _, client, _, db = env
    data = tmp_path / "data"
    own = data / "runs" / RUN
    own.mkdir(parents=True)
    other = data / "runs" / "20260101-000000-other-bbbb"
    other.mkdir(parents=True)
    (other / "secret.pcap").write_bytes(b"another run's capture")
    (data / "catnip-notes.txt").write_bytes(b"not a capture")
    url = f"/runs/{RUN}/points/0/capture.pcap"

    def record(path) -> None:
        with Store(db) as store:
            store.update_point(RUN, 0, capture=str(path))

    (own / "point0-bottleneck.pcap").write_bytes(b"pcap bytes")
    record(own / "point0-bottleneck.pcap")
    r = client.get(url)
    assert r.status_code == 200 and r.data == b"pcap bytes"
    for outside in (other / "secret.pcap", data / "catnip-notes.txt", own / ".." / ".." / "catnip-notes.txt",
                    tmp_path / "scenarios" / "quick.yaml"):
        record(outside)
        r = client.get(url)
        assert r.status_code == 403 and "outside the run" in r.get_data(as_text=True), outside
    (own / "link.pcap").symlink_to(other / "secret.pcap")
    record(own / "link.pcap")
    assert client.get(url).status_code == 403
    (own / "fifo.pcap").unlink(missing_ok=True)
    os.mkfifo(own / "fifo.pcap")  # would block a plain open() for ever
    record(own / "fifo.pcap")
    assert client.get(url).status_code == 404


def _hostile_export(tmp_path, run_id: str, capture: str):
    """An export of the fixture's run as a hostile file carries it: another run id inside the file
    (not given with --as), its point's capture recorded at `capture`."""
    from catnip.results import archive
    with Store(tmp_path / "data" / "catnip.db") as store:
        store.finish_run(RUN, "done")
        doc = archive.export_run(store, RUN)
    doc["run_id"] = run_id
    for name, t in doc["tables"].items():
        key = t["columns"].index("id" if name == "runs" else "run_id")
        for r in t["rows"]:
            r[key] = run_id
    points = doc["tables"]["points"]
    points["rows"][0][points["columns"].index("capture")] = capture
    path = tmp_path / f"hostile-{len(run_id)}.catnip.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


@pytest.mark.parametrize("bad", ["..", ".", ".hidden", "-rf"])
def test_a_run_id_inside_an_import_cannot_reach_outside_its_folder(env, tmp_path, bad):
    # Issue 47: `--as` refused these ids, the id inside the file was not checked; imported as '..'
    # with a capture beside the database, /runs/%2E%2E/points/0/capture.pcap served that file.
    from click.testing import CliRunner
    from catnip.cli.archive import export_cmd, import_cmd
    _, client, _, db = env
    secret = db.parent / "beside-the-database.pcap"
    secret.write_bytes(b"a file beside the database")
    hostile = _hostile_export(tmp_path, bad, str(secret))
    res = CliRunner().invoke(import_cmd, [str(hostile), "--db", str(db)])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert f"run_id {bad!r} is not a run id" in res.output and "Traceback" not in res.output
    url = "/runs/" + "".join(f"%{ord(c):02X}" for c in bad) + "/points/0/capture.pcap"
    r = client.get(url)
    assert r.status_code in (400, 404) and b"a file beside the database" not in r.data
    # A database where an older version imported such a run: the routes refuse the id itself.
    con = sqlite3.connect(db)
    con.execute("INSERT INTO runs (id, name, scenario, sweep, started, status) VALUES (?, 'x', '{}', '{}', 1, 'done')",
                (bad,))
    con.execute("INSERT INTO points (run_id, point, rep, assignment, resolved, status, capture)"
                " VALUES (?, 0, 0, '{}', '{}', 'done', ?)", (bad, str(secret)))
    con.commit()
    con.close()
    for path in (url, url.removesuffix("/points/0/capture.pcap"), url.replace("capture.pcap", "apps.json")):
        r = client.get(path)
        assert r.status_code == 400 and b"a file beside the database" not in r.data, (path, r.status_code)
        assert "is not a run id" in r.get_data(as_text=True)
    res = CliRunner().invoke(export_cmd, ["--db", str(db), "--out", str(tmp_path / "out.gz"), "--", bad])
    assert res.exit_code == 2 and "not a run id" in res.output and not (tmp_path / "out.gz").exists(), res.output


def test_an_imported_runs_capture_is_served_from_its_own_folder_only(env, tmp_path):
    # The capture path of an imported run names the machine it came from: it is read relative to
    # the run's folder there and served from the run's folder here, never followed elsewhere.
    from click.testing import CliRunner
    from catnip.cli.archive import import_cmd
    _, client, _, db = env
    secret = db.parent / "beside-the-database.pcap"
    secret.write_bytes(b"a file beside the database")
    for n, (recorded, served) in enumerate([(str(secret), None),
                                            ("/elsewhere/runs/orig1/../../beside-the-database.pcap", None),
                                            ("/elsewhere/runs/orig2/p0.pcap", b"the imported capture")]):
        run_id = f"imp{n}"
        hostile = _hostile_export(tmp_path, f"orig{n}", recorded)
        hostile = hostile.rename(tmp_path / f"{run_id}.gz")
        res = CliRunner().invoke(import_cmd, [str(hostile), "--db", str(db), "--as", run_id])
        assert res.exit_code == 0, res.output
        folder = db.parent / "runs" / run_id
        folder.mkdir(parents=True)
        (folder / "p0.pcap").write_bytes(b"the imported capture")
        r = client.get(f"/runs/{run_id}/points/0/capture.pcap")
        if served is None:
            assert r.status_code == 403 and b"a file beside the database" not in r.data, recorded
        else:
            assert r.status_code == 200 and r.data == served, (r.status_code, r.data[:200])


@pytest.mark.parametrize("point", ["99999999999999999999999", "9223372036854775808", "2147483648"])
def test_a_huge_point_number_is_a_404_not_a_500(env, point):
    _, client, _, _ = env
    for url in (f"/runs/{RUN}/points/{point}/apps.json", f"/runs/{RUN}/points/{point}/capture.pcap"):
        r = client.get(url)
        assert r.status_code == 404 and "Traceback" not in r.get_data(as_text=True), (url, r.status_code)


# --- live views ------------------------------------------------------------------------------

def test_live_views_are_capped_and_give_their_slot_back(env):
    app, client, queue, _ = env
    app.extensions["catnip_streams"] = threading.BoundedSemaphore(1)
    app.config["SSE_MAX_STREAMS"] = 1
    with Store(app.config["CATNIP_DB"]) as store:
        store.finish_run(RUN, "done")
    first = client.get(f"/runs/{RUN}/events", buffered=False)
    assert first.status_code == 200
    second = client.get(f"/runs/{RUN}/events")
    assert second.status_code == 503 and "live views are open already" in second.get_json()["error"]
    first.close()  # the server closes the response when the browser goes away
    third = client.get(f"/runs/{RUN}/events")
    assert third.status_code == 200 and "event: end" in third.get_data(as_text=True)


# --- the real server -------------------------------------------------------------------------

def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _accepted(pid: int, port: int) -> int:
    """Established TCP connections on `port` that the process holds (accepted): its socket fds'
    inodes against the kernel's table. Not a count of all its sockets: the readiness check's
    connection may still be open when a baseline is taken and close later."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port and f[3] == "01" and f[9] in inodes:  # 01: ESTABLISHED
                n += 1
    return n


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


@pytest.fixture
def server(tmp_path):
    env = {**os.environ, "CATNIP_DATA": str(tmp_path), "CATNIP_DB": str(tmp_path / "catnip.db")}
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "web", "--port", "0"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
        assert match, "catnip web did not announce its address"
        port = int(match.group(1))
        deadline = time.monotonic() + 60
        while True:  # ready when it answers its health check
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    if json.loads(r.read())["ok"]:
                        break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield proc, port
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("catnip web did not stop within 60 s of SIGTERM")
    assert proc.returncode == 0


def test_idle_sockets_do_not_take_a_thread_each(server):
    proc, port = server
    threads = _threads(proc.pid)
    idle = []
    try:
        for _ in range(200):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        deadline = time.monotonic() + 60
        while _accepted(proc.pid, port) < 200:  # the server has accepted every one of them
            assert time.monotonic() < deadline, f"accepted {_accepted(proc.pid, port)} of 200 sockets in 60 s"
            time.sleep(0.05)
        assert _threads(proc.pid) <= threads + 2, f"{threads} threads before 200 idle sockets, {_threads(proc.pid)} after"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
            assert json.loads(r.read())["ok"] is True  # and it still answers
        proc.terminate()  # and stops, with the sockets still open
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail("catnip web did not stop within 60 s of SIGTERM with 200 sockets open")
    finally:
        for s in idle:
            s.close()


def test_the_served_dashboard_checks_host_and_origin(server):
    _, port = server
    out = _raw(port, b"GET / HTTP/1.1\r\nHost: evil.example:%d\r\nConnection: close\r\n\r\n" % port)
    assert out.startswith(b"HTTP/1.1 400 ") and b"does not answer to host" in out and b"Traceback" not in out
    out = _raw(port, b"GET / HTTP/1.1\r\nHost: [::1\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 ") and b"Traceback" not in out
    out = _raw(port, b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: http://evil.example\r\n"
                     b"Content-Length: 0\r\nConnection: close\r\n\r\n" % port)
    assert out.startswith(b"HTTP/1.1 403 ")
    req = urllib.request.Request(f"http://127.0.0.1:{port}/healthz", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    assert err.value.code == 400


def test_a_run_an_older_version_imported_with_a_textual_start_does_not_break_the_runs_page(env):
    # Issue 47: runs.started="yesterday" (accepted by imports before they were checked) made /runs a
    # 500 for the whole database.
    _, client, _, db = env
    con = sqlite3.connect(db)
    con.execute("INSERT INTO runs (id, name, scenario, sweep, started, finished, status)"
                " VALUES ('old-import', 'x', '{}', '{}', 'yesterday', 'today', 'done')")
    con.commit()
    con.close()
    r = client.get("/runs")
    assert r.status_code == 200 and "yesterday" in r.get_data(as_text=True) and RUN in r.get_data(as_text=True)
