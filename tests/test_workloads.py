"""The workload: Fig. 4's pages as Table II gives them, exact documents, think times, and the
client against a real Apache on the loopback interface."""

from __future__ import annotations

import json
import os
import signal
import shutil
import socket
import statistics
import subprocess
import tempfile
from pathlib import Path

import pytest

from catnip.workloads.apache import ApacheServer
from tests.conftest import wait_until
from catnip.workloads import client as client_mod
from catnip.workloads.docroot import documents, write_docroot
from catnip.workloads.pages import TABLE_II, catnip_pages, page
from catnip.workloads.thinktime import ThinkTimeError, load_cdf, sampler


def test_pages_match_table_ii_and_page_1_is_exact():
    pages = catnip_pages()
    assert [(p.number, len(p.objects), p.total_bytes) for p in pages] == [tuple(row) for row in TABLE_II]
    assert (page(1).html_bytes, page(1).images) == (2589, (548, 1808))
    assert sum(len(p.objects) for p in pages) == 45
    assert all(min(p.images) >= 64 for p in pages)
    with pytest.raises(KeyError, match="1 to 10"):
        page(11)


def test_docroot_has_exact_sizes_and_real_img_tags(tmp_path):
    write_docroot(catnip_pages(), tmp_path)
    write_docroot(catnip_pages(), tmp_path)  # idempotent
    for p in catnip_pages():
        html = (tmp_path / p.objects[0].lstrip("/")).read_bytes()
        assert len(html) == p.html_bytes
        srcs = [m.decode() for m in client_mod.IMG_SRC.findall(html)]
        assert srcs == p.objects[1:]
        for url, size in zip(srcs, p.images):
            assert (tmp_path / url.lstrip("/")).stat().st_size == size
    assert sum(len(v) for v in documents(catnip_pages()).values()) == 221_356


def test_think_times_are_seeded_and_have_their_means(tmp_path):
    a = sampler({"model": "exponential", "mean": 8.0}, 5)
    b = sampler({"model": "exponential", "mean": 8.0}, 5)
    xs = [a() for _ in range(20000)]
    assert xs[:50] == [b() for _ in range(50)]
    assert statistics.fmean(xs) == pytest.approx(8.0, rel=0.03)
    assert sampler({"model": "fixed", "mean": 2.5}, 1)() == 2.5
    assert sampler({"model": "zero"}, 1)() == 0.0
    cdf = tmp_path / "think.cdf"
    cdf.write_text("1.0 1 0.25\n2.0 1 0.5\n4.0 2 1.0\n")
    draw = sampler({"model": "empirical", "cdf": str(cdf)}, 3)
    ys = [draw() for _ in range(20000)]
    assert min(ys) >= 1.0 and max(ys) <= 4.0
    assert statistics.median(ys) == pytest.approx(2.0, abs=0.05)
    assert sum(y <= 1.0 for y in ys) / len(ys) == pytest.approx(0.25, abs=0.02)
    cdf.write_text("1.0 1 0.5\n0.5 1 1.0\n")
    with pytest.raises(ThinkTimeError, match="line 2"):
        load_cdf(cdf)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def docroot():
    # www-data must be able to read it: a world-readable directory outside pytest's 0700 tree.
    root = Path(tempfile.mkdtemp(prefix="ctp-docroot-"))
    root.chmod(0o755)
    write_docroot(catnip_pages(), root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["1.0", "1.1"])
def apache(request, docroot):
    if os.geteuid() != 0:
        pytest.skip("needs root: Apache drops privileges to www-data")
    work = Path(tempfile.mkdtemp(prefix="ctp-apache-"))
    srv = ApacheServer(workdir=work, docroot=docroot, listen_ip="127.0.0.1", port=_free_port(),
                       http_version=request.param)
    srv.prepare()
    srv.check_config()
    srv.proc = subprocess.Popen(srv.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    class Local:
        def cmd(self, text):
            return subprocess.run(text, shell=True, capture_output=True, text=True).stdout
    try:
        srv.wait_ready(Local(), timeout=10)
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    assert srv.proc.poll() is not None


def _run_client(tmp_path, srv, **cfg) -> list[dict]:
    conf = {"client": "t", "server": "127.0.0.1", "port": srv.port, "pages": list(range(1, 11)), "seed": 3,
            "http_version": srv.http_version, "parallel": 1, **cfg}
    (tmp_path / "c.json").write_text(json.dumps(conf))
    out = tmp_path / "out.jsonl"
    assert client_mod.main([str(tmp_path / "c.json"), str(out)]) == 0
    return [json.loads(l) for l in out.read_text().splitlines()]


@pytest.mark.parametrize("parallel", [1, 4])
def test_client_fetches_every_page_exactly(tmp_path, apache, parallel):
    records = _run_client(tmp_path, apache, parallel=parallel, rounds=2)
    pages = [r for r in records if r["kind"] == "page"]
    objects = [r for r in records if r["kind"] == "object"]
    assert len(pages) == 20 and all(p["error"] is None for p in pages)
    assert sorted(p["page"] for p in pages if p["round"] == 0) == list(range(1, 11))
    assert [p["page"] for p in pages[:10]] != list(range(1, 11))  # seeded shuffle, not file order
    by_page = {p.number: p.total_bytes for p in catnip_pages()}
    assert all(p["bytes"] == by_page[p["page"]] for p in pages)
    assert len(objects) == 90 and all(o["status"] == 200 and o["header_bytes"] > 100 for o in objects)
    for p in pages:
        mine = [o for o in objects if o["page"] == p["page"] and o["round"] == p["round"]]
        assert p["end"] == max(o["end"] for o in mine) and p["start"] <= min(o["start"] for o in mine)
    conns = {o["conn"] for o in objects}
    assert len(conns) == (90 if apache.http_version == "1.0" else 1)
    assert records[0]["kind"] == "start" and records[-1]["kind"] == "end"


@pytest.mark.parametrize("apache", ["1.1"], indirect=True)  # persistent connections are HTTP/1.1's
def test_http11_connection_per_page(tmp_path, apache):
    records = _run_client(tmp_path, apache, persistent="page")
    objects = [r for r in records if r["kind"] == "object"]
    assert len(objects) == 45 and all(o["status"] == 200 for o in objects)
    # One connection per page, shared by all of that page's objects.
    by_page = {}
    for o in objects:
        by_page.setdefault(o["page"], set()).add(o["conn"])
    assert all(len(c) == 1 for c in by_page.values()) and len(set().union(*by_page.values())) == 10


def test_refused_connection_is_recorded_not_fatal(tmp_path):
    port = _free_port()  # nothing listens there
    conf = {"client": "t", "server": "127.0.0.1", "port": port, "pages": [1, 2], "seed": 1,
            "http_version": "1.0", "parallel": 1, "object_timeout": 2}
    (tmp_path / "c.json").write_text(json.dumps(conf))
    assert client_mod.main([str(tmp_path / "c.json"), str(tmp_path / "o.jsonl")]) == 0
    pages = [json.loads(l) for l in (tmp_path / "o.jsonl").read_text().splitlines() if '"page"' in l
             and json.loads(l)["kind"] == "page"]
    assert len(pages) == 2 and all("ConnectionRefused" in p["error"] for p in pages)


def test_bad_client_config_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "c.json").write_text(json.dumps({"client": "t", "http_version": "2"}))
    assert client_mod.main([str(tmp_path / "c.json"), str(tmp_path / "o")]) == 2
    assert "missing keys" in capsys.readouterr().err


@pytest.mark.parametrize("apache", ["1.0"], indirect=True)
def test_stop_kills_the_workers_of_a_parent_killed_from_outside(apache):
    """A SIGKILLed Apache parent leaves its workers serving; stop() must end them too (they are
    recognised by this server's own configuration file)."""
    workers = wait_until(lambda: [p for p in apache._workers() if p != apache.proc.pid], 10, "Apache's workers")
    apache.proc.kill()
    apache.proc.wait()
    assert all(Path(f"/proc/{p}").exists() for p in workers), "workers outlive their parent (what stop must handle)"
    # Had nothing stopped them, `catnip clean` finds them in the root namespace, in a folder of any name.
    from catnip.testbed import cleanup
    assert set(workers) <= {pid for pid, _ in cleanup.our_processes()}
    apache.stop()
    wait_until(lambda: not apache._workers(), 10, "no Apache process with this server's configuration")


@pytest.mark.parametrize("apache", ["1.0"], indirect=True)
def test_a_restart_from_outside_is_seen(apache):
    assert apache.restarts() == []
    apache.proc.send_signal(signal.SIGHUP)
    got = wait_until(apache.restarts, 10, "the restart in Apache's error log")
    assert "SIGHUP" in got[0]
