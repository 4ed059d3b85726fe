"""Apache instances: a config Apache accepts, exact sizes served with stable headers, keep-alive
as configured, and stopping leaves no process behind (also when stopped by pid file only)."""

from __future__ import annotations

import http.client
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from testbed.apache import APACHE, ApacheError, ApacheServer, local_exec
from workloads.docroot import documents, write_docroot
from workloads.pages import catnip_pages

pytestmark = pytest.mark.skipif(not APACHE.exists(), reason=f"{APACHE} not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def docroot():
    root = Path(tempfile.mkdtemp(prefix="ctp-test-docroot-"))  # world-readable, for www-data
    try:
        write_docroot(catnip_pages(), root)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def servers(docroot):
    """Makes ApacheServer objects; whatever they started is stopped even if the test fails."""
    made: list[ApacheServer] = []

    def make(version: str = "1.0", **kw) -> ApacheServer:
        srv = ApacheServer(workdir=Path(tempfile.mkdtemp(prefix="ctp-test-apache-")), docroot=docroot,
                           listen_ip="127.0.0.1", port=_free_port(), http_version=version, **kw)
        made.append(srv)
        return srv
    try:
        yield make
    finally:
        for srv in made:
            srv.stop()
            shutil.rmtree(srv.workdir, ignore_errors=True)


@pytest.mark.parametrize("version,access_log", [("1.0", False), ("1.1", False), ("1.1", True)])
def test_config_passes_apache_syntax_check(servers, version, access_log):
    srv = servers(version, access_log=access_log)
    srv.prepare()
    srv.check_config()
    text = srv.config_text()
    assert f"Listen 127.0.0.1:{srv.port}" in text
    assert not [line for line in text.splitlines() if "/etc/apache2" in line and not line.startswith("#")]
    if version == "1.1":
        assert "KeepAlive On" in text and "MaxKeepAliveRequests 0" in text and "KeepAliveTimeout 3600" in text
    else:
        assert "KeepAlive Off" in text
    assert "FileETag None" in text and "MaxRequestWorkers 512" in text
    assert srv.argv()[-3:] == ["-f", str(srv.config_path), "-DFOREGROUND"]


def test_bad_settings_are_clear_errors(docroot, tmp_path):
    for kw, message in [({"http_version": "2"}, "'1.0' or '1.1'"), ({"listen_ip": "server1"}, "not an IP"),
                        ({"port": 0}, "1 to 65535"), ({"max_workers": 0}, "max_workers")]:
        with pytest.raises(ApacheError, match=message):
            ApacheServer(**{"workdir": tmp_path, "docroot": docroot, "listen_ip": "127.0.0.1", **kw})
    with pytest.raises(ApacheError, match="not a directory"):
        ApacheServer(workdir=tmp_path, docroot=tmp_path / "missing", listen_ip="127.0.0.1").prepare()


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_serves_exact_sizes_then_stops_without_leftovers(servers, version):
    srv = servers(version)
    srv.start()
    srv.wait_ready(local_exec, timeout=10)
    assert len(srv.processes()) >= 2  # main process and its children
    docs = documents(catnip_pages())
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        for url, content in docs.items():
            conn.request("GET", url)
            resp = conn.getresponse()
            body = resp.read()
            assert resp.status == 200 and body == content
            assert int(resp.headers["Content-Length"]) == len(content)
            assert resp.headers.get("ETag") is None and resp.headers.get("Content-Encoding") is None
            assert resp.headers["Content-Type"] == ("text/html" if url.endswith(".html") else "image/gif")
            assert resp.headers["Server"] == "Apache"
            if version == "1.0":
                assert resp.headers["Connection"] == "close"
                conn.close()
        if version == "1.1":
            assert conn.sock is not None  # the one connection carried all 45 requests
        conn.request("GET", "/nothing-here.gif")
        assert conn.getresponse().status == 404
    finally:
        conn.close()
    srv.stop()
    assert srv.proc.returncode == 0 and srv.processes() == []
    leftovers = subprocess.run(["pgrep", "-f", str(srv.config_path)], capture_output=True, text=True).stdout
    assert leftovers.strip() == ""
    srv.stop()  # a second stop is harmless


def test_stop_by_pid_file_alone(servers):
    """The runner may hold no Popen of ours (Mininet starts it): stop() finds it by pid file."""
    srv = servers("1.1")
    proc = srv.start()
    srv.wait_ready(timeout=10)
    srv.proc = None
    assert srv.pid() == proc.pid
    srv.stop()
    assert proc.wait(timeout=5) == 0 and srv.processes() == []


def test_wait_ready_reports_a_server_that_cannot_start(servers):
    srv = servers("1.0")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", srv.port))
        taken.listen(1)
        srv.start()
        with pytest.raises(ApacheError, match="exited|not listening"):
            srv.wait_ready(timeout=5)
    assert "Address already in use" in srv.log_tail()
