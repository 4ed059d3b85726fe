"""The workload: Fig. 4's pages as Table II gives them, exact documents, think-time models, and
the client against a real Apache on the loopback interface (HTTP/1.0 with 1 and 4 parallel
connections, HTTP/1.1 pipelined), plus its failure paths."""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from testbed.apache import ApacheServer
from testbed.paths import REPO
from workloads import client as client_mod
from workloads.docroot import documents, gif_bytes, write_docroot
from workloads.pages import (MIN_IMAGE, NS2_REPLY_SHA256, TABLE_II, catnip_pages, html_room, page,
                             reply_length_cdf)
from workloads.thinktime import (NS2_THINK_SHA256, ThinkTimeError, load_cdf, ns2_think_cdf, parse_spec,
                                 sampler)

TABLE_II_BYTES = 221_356  # sum of Table II's totals
# Response header bytes per pass over the ten pages, as docs/workload.md states them (Apache
# 2.4.71): if Apache's headers change, update the table there.
HEADER_BYTES = {"1.0": 9_255, "1.1": 8_400}

# The generated splits of pages 2-10 (workloads/pages.py): pinned, because every run on every
# machine must serve exactly these documents.
GENERATED = {
    2: (36704, (19730,)),
    3: (852, (7008,)),
    4: (10034, (2281,)),
    5: (57333, (4577, 716, 113, 1540, 3822, 2567, 549, 102, 2248, 4032, 4487, 102, 678, 2565, 1917, 103)),
    6: (1682, (26309,)),
    7: (522, (957, 412, 104, 83)),
    8: (5924, (2629, 1333)),
    9: (932, (233, 3837, 2283, 2044, 291)),
    10: (648, (941, 1187)),
}


# --- pages -------------------------------------------------------------------------------------
def test_pages_match_table_ii_and_page_1_is_exact():
    pages = catnip_pages()
    assert [(p.number, p.connections, p.total_bytes) for p in pages] == list(TABLE_II)
    assert [(p.number, len(p.objects), p.total_bytes) for p in pages] == [
        (1, 3, 4_945), (2, 2, 56_434), (3, 2, 7_860), (4, 2, 12_315), (5, 17, 87_451),
        (6, 2, 27_991), (7, 5, 2_078), (8, 3, 9_886), (9, 6, 9_620), (10, 3, 2_776)]
    assert (page(1).html_bytes, page(1).images) == (2_589, (548, 1_808))
    assert sum(p.connections for p in pages) == 45 and sum(p.total_bytes for p in pages) == TABLE_II_BYTES
    with pytest.raises(KeyError, match="1 to 10"):
        page(11)


def test_generated_splits_are_pinned_and_plausible():
    assert {p.number: (p.html_bytes, p.images) for p in catnip_pages()[1:]} == GENERATED
    table = reply_length_cdf()
    for p in catnip_pages():
        assert p.html_bytes >= html_room(len(p.images)) and min(p.images) >= MIN_IMAGE
        # Every size is within 0.4 % of one of Mah's measured reply lengths (pages.py docstring).
        for size in (p.html_bytes, *p.images):
            i = bisect.bisect_left(table.values, size)
            nearest = min(table.values[max(0, i - 1):i + 1], key=lambda v: abs(v - size))
            assert abs(nearest - size) <= 0.004 * size + 1, (p.number, size, nearest)
    # Page 1's sizes, given by the paper, are entries of the same table.
    assert {2589, 548, 1808} <= set(table.values)


def test_embedded_ns2_tables_are_the_original_files():
    think = ns2_think_cdf()
    assert hashlib.sha256(think.ns2_text().encode()).hexdigest() == NS2_THINK_SHA256
    assert (len(think.values), sum(think.counts)) == (1293, 1314)
    reply = reply_length_cdf()
    assert hashlib.sha256(reply.ns2_text("{:.0f}").encode()).hexdigest() == NS2_REPLY_SHA256
    assert sum(reply.counts) == 4100


# --- documents ------------------------------------------------------------------------------
def _gif_blocks_ok(data: bytes) -> bool:
    """Walk a GIF's blocks: header, colour table, extensions, one image, trailer."""
    assert data[:6] == b"GIF89a"
    flags = data[10]
    at = 13 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
    images = 0
    while True:
        kind = data[at]
        if kind == 0x3B:
            return at == len(data) - 1 and images == 1
        if kind == 0x21:
            at += 2
        elif kind == 0x2C:
            images += 1
            at += 10 + 1  # descriptor, LZW minimum code size
        else:
            return False
        while data[at]:
            at += 1 + data[at]
        at += 1


def test_docroot_files_are_exact_and_writing_is_idempotent(tmp_path):
    root = write_docroot(catnip_pages(), tmp_path / "docroot")
    for p in catnip_pages():
        html = (root / p.objects[0].lstrip("/")).read_bytes()
        assert len(html) == p.html_bytes
        assert client_mod.image_urls(html, p.objects[0]) == list(p.objects[1:])
        assert html.startswith(b"<!DOCTYPE html>") and html.endswith(b"</body></html>\n")
        for url, size in zip(p.objects[1:], p.images):
            data = (root / url.lstrip("/")).read_bytes()
            assert len(data) == size and _gif_blocks_ok(data)
    assert sum(len(v) for v in documents(catnip_pages()).values()) == TABLE_II_BYTES
    assert oct((root / "p5").stat().st_mode & 0o777) == "0o755"
    assert oct((root / "p5" / "i1.gif").stat().st_mode & 0o777) == "0o644"

    stamps = {f: f.stat().st_mtime_ns for f in root.rglob("*") if f.is_file()}
    (root / "page3.html").write_bytes(b"damaged")
    time.sleep(0.01)
    write_docroot(catnip_pages(), root)
    assert (root / "page3.html").read_bytes() == documents(catnip_pages())["/page3.html"]
    changed = [f.name for f, t in stamps.items() if f.stat().st_mtime_ns != t]
    assert changed == ["page3.html"]  # intact files are left alone
    assert not list(root.rglob("*.tmp*"))


def test_gif_sizes_from_minimum_up():
    for size in [*range(38, 600), 4096, 65_536]:
        data = gif_bytes(size, "t")
        assert len(data) == size and _gif_blocks_ok(data)
    with pytest.raises(ValueError, match="at least 38"):
        gif_bytes(37, "t")


# --- think times ----------------------------------------------------------------------------
def test_simple_think_time_models_are_seeded_and_have_their_means():
    a, b = sampler({"model": "exponential", "mean": 8.0}, 5), sampler({"model": "exponential", "mean": 8.0}, 5)
    xs = [a() for _ in range(40_000)]
    assert xs[:100] == [b() for _ in range(100)]
    assert xs[:100] != [sampler({"model": "exponential", "mean": 8.0}, 6)() for _ in range(100)]
    assert statistics.fmean(xs) == pytest.approx(8.0, rel=0.02)
    assert sampler({"model": "fixed", "mean": 2.5}, 1)() == 2.5
    assert sampler({"model": "zero"}, 1)() == 0.0
    # The scenario hands over every key, unused ones as None.
    assert sampler({"model": "exponential", "mean": 3, "cdf": None}, 1)() > 0
    assert parse_spec({"model": "fixed", "mean": 4}).expected_mean() == 4.0


def test_ns2_think_time_is_mahs_distribution_sampled_as_ns2_does():
    table = ns2_think_cdf()
    # ns-2 EmpiricalRandomVariable::value() with interpolation_ 0: first entry with cdf >= u.
    assert table.value_at(0.0) == 1.005 and table.value_at(table.probs[0]) == 1.005
    assert table.value_at(table.probs[0] + 1e-12) == 1.010
    assert table.value_at(0.5) == 16.192 and table.value_at(1.0) == 86394.941
    mid = (table.probs[0] + table.probs[1]) / 2
    assert table.value_at(mid, interpolate=True) == pytest.approx((1.005 + 1.010) / 2)

    draw, again = sampler({"model": "ns2"}, 11), sampler({"model": "ns2"}, 11)
    xs = [draw() for _ in range(100_000)]
    assert xs[:100] == [again() for _ in range(100)]
    assert set(xs) <= set(table.values)  # discrete: only observed think times
    assert statistics.median(xs) == pytest.approx(16.2, rel=0.05)
    assert sum(x <= 61.573 for x in xs) / len(xs) == pytest.approx(0.75, abs=0.01)
    assert parse_spec({"model": "ns2"}).expected_mean() == pytest.approx(1803.98, abs=0.01)

    # maxCDF_: truncation at a quantile, here at 300 s.
    cap = table.cdf_at(300.0)
    capped = sampler({"model": "ns2", "max_cdf": cap}, 2)
    ys = [capped() for _ in range(50_000)]
    assert max(ys) <= 300.0
    assert statistics.fmean(ys) == pytest.approx(parse_spec({"model": "ns2", "max_cdf": cap}).expected_mean(),
                                                 rel=0.03)


def test_empirical_cdf_files_and_bad_specs(tmp_path):
    cdf = tmp_path / "think.cdf"
    cdf.write_text("1.0 1 0.25\n2.0 1 0.5\n4.0 2 1.0\n")
    assert load_cdf(cdf).values == (1.0, 2.0, 4.0)
    ys = [f() for f in [sampler({"model": "empirical", "cdf": str(cdf)}, 3)] for _ in range(20_000)]
    assert set(ys) == {1.0, 2.0, 4.0}
    assert sum(y == 1.0 for y in ys) / len(ys) == pytest.approx(0.25, abs=0.02)

    cdf.write_text("1.0 1 0.5\n0.5 1 1.0\n")
    with pytest.raises(ThinkTimeError, match="line 2"):
        load_cdf(cdf)
    cdf.write_text("1.0 1 0.5\n")
    with pytest.raises(ThinkTimeError, match="not 1"):
        load_cdf(cdf)
    bad = [({"model": "gamma"}, "not allowed"), ({"model": "exponential"}, "needs a mean"),
           ({"model": "fixed", "mean": -1}, "needs a mean"), ({"model": "zero", "mean": 3}, "does not use"),
           ({"model": "ns2", "max_cdf": 0}, "max_cdf"), ({"model": "empirical"}, "needs the path"),
           ({"model": "empirical", "cdf": str(tmp_path / "none")}, "cannot read"),
           ({"modle": "zero"}, "unknown keys")]
    for spec, message in bad:
        with pytest.raises(ThinkTimeError, match=message):
            sampler(spec, 1)


# --- client: strict HTTP parsing and configuration --------------------------------------------
def _parse(raw: bytes) -> client_mod.Response:
    async def go():
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await client_mod.read_response(reader)
    return asyncio.run(go())


def test_response_parser_is_strict():
    ok = _parse(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabcEXTRA")
    assert (ok.status, ok.body, ok.header_bytes, ok.close) == (200, b"abc", 57, True)
    for raw, message in [(b"HTTP/1.1 200 OK\r\n\r\nabc", "without Content-Length"),
                         (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                          "chunked"),
                         (b"ICY 200 OK\r\nContent-Length: 1\r\n\r\na", "bad status line"),
                         (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "Content-Length")]:
        with pytest.raises(client_mod.HttpError, match=message):
            _parse(raw)
    with pytest.raises(asyncio.IncompleteReadError):
        _parse(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")


def test_bad_client_config_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "c.json").write_text(json.dumps({"client": "t", "http_version": "2"}))
    assert client_mod.main([str(tmp_path / "c.json"), str(tmp_path / "o")]) == 2
    assert "missing keys ['server', 'port', 'seed', 'parallel']" in capsys.readouterr().err
    base = {"client": "t", "server": "127.0.0.1", "port": 80, "seed": 1, "http_version": "1.0", "parallel": 4}
    for change, message in [({"http_version": "2"}, "'1.0' or '1.1'"), ({"parallel": 0}, "parallel: 0"),
                            ({"pages": []}, "pages"), ({"port": 70000}, "port"), ({"colour": 1}, "unknown keys"),
                            ({"think_time": {"model": "exponential"}}, "needs a mean"),
                            ({"object_timeout": 0}, "object_timeout"), ({"start_delay": -1}, "start_delay")]:
        with pytest.raises(client_mod.ConfigError, match=message):
            client_mod.parse_config({**base, **change})
    assert client_mod.parse_config(base).pages == tuple(range(1, 11))


# --- client against a real Apache ---------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def docroot():
    # Apache's workers (www-data when started as root) must read it: not under pytest's 0700 tmp.
    root = Path(tempfile.mkdtemp(prefix="ctp-test-docroot-"))
    try:
        write_docroot(catnip_pages(), root)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _start_apache(docroot: Path, version: str, **kw) -> ApacheServer:
    work = Path(tempfile.mkdtemp(prefix="ctp-test-apache-"))
    srv = ApacheServer(workdir=work, docroot=docroot, listen_ip="127.0.0.1", port=_free_port(),
                       http_version=version, **kw)
    srv.start()
    return srv


@pytest.fixture
def apache_factory(docroot):
    """Starts Apache instances; every one is stopped (and checked gone) even if the test fails."""
    started: list[ApacheServer] = []

    def make(version: str, **kw) -> ApacheServer:
        srv = _start_apache(docroot, version, **kw)
        started.append(srv)
        srv.wait_ready(timeout=10)
        return srv
    try:
        yield make
    finally:
        for srv in started:
            srv.stop()
            shutil.rmtree(srv.workdir, ignore_errors=True)
        assert not any(srv.processes() for srv in started)


def _session(tmp_path, port: int, version: str, **cfg) -> tuple[str, list[dict]]:
    conf = client_mod.parse_config({"client": "t", "server": "127.0.0.1", "port": port, "seed": 3,
                                    "http_version": version, "parallel": 1, **cfg})
    out = tmp_path / f"out-{time.monotonic_ns()}.jsonl"
    reason = client_mod.run_session(conf, str(out))
    return reason, [json.loads(line) for line in out.read_text().splitlines()]


def _split(records: list[dict]) -> tuple[list[dict], list[dict]]:
    return ([r for r in records if r["kind"] == "page"], [r for r in records if r["kind"] == "object"])


def _check_complete_session(records: list[dict], rounds: int) -> tuple[list[dict], list[dict]]:
    assert records[0]["kind"] == "start" and records[-1]["kind"] == "end"
    assert records[-1]["reason"] == "done" and records[-1]["pages_failed"] == 0
    pages, objects = _split(records)
    assert len(pages) == 10 * rounds and all(p["error"] is None for p in pages)
    table = {p.number: p for p in catnip_pages()}
    for p in pages:
        assert p["bytes"] == table[p["page"]].total_bytes and p["objects"] == table[p["page"]].connections
        mine = [o for o in objects if (o["page"], o["round"]) == (p["page"], p["round"])]
        assert {o["url"]: o["body_bytes"] for o in mine} == table[p["page"]].sizes()
        assert p["end"] == max(o["end"] for o in mine) and p["start"] == min(o["start"] for o in mine)
        assert p["duration"] == pytest.approx(p["end"] - p["start"])
    assert all(o["status"] == 200 and o["error"] is None for o in objects)
    # No ETag or other surprises: response heads differ only in Content-Length's digits.
    assert len({o["header_bytes"] - len(str(o["body_bytes"])) for o in objects}) == 1
    for r in range(rounds):
        assert sorted(p["page"] for p in pages if p["round"] == r) == list(range(1, 11))
        version = records[0]["config"]["http_version"]
        assert sum(p["header_bytes"] for p in pages if p["round"] == r) == HEADER_BYTES[version], \
            "Apache's response headers changed size: update docs/workload.md"
    assert [p["page"] for p in pages[:10]] != list(range(1, 11))  # seeded shuffle, not file order
    return pages, objects


def _max_overlap(objs: list[dict]) -> int:
    events = sorted([(o["start"], 1) for o in objs] + [(o["end"], -1) for o in objs])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


@pytest.mark.parametrize("parallel", [1, 4])
def test_http10_fetches_every_page_one_connection_per_object(tmp_path, apache_factory, parallel):
    srv = apache_factory("1.0")
    reason, records = _session(tmp_path, srv.port, "1.0", parallel=parallel, rounds=2)
    assert reason == "done"
    pages, objects = _check_complete_session(records, rounds=2)
    assert len(objects) == 90 and len({o["conn"] for o in objects}) == 90
    assert all(o["start"] <= o["connect_done"] <= o["first_byte"] <= o["end"] for o in objects)
    for p in pages:
        mine = [o for o in objects if (o["page"], o["round"]) == (p["page"], p["round"])]
        html, images = mine[0], mine[1:]
        assert html["url"].endswith(".html") and all(i["start"] >= html["end"] for i in images)
        assert _max_overlap(images) <= parallel
    page5 = [o for o in objects if o["page"] == 5 and o["url"].endswith(".gif")]
    if parallel == 4:
        assert _max_overlap(page5) > 1  # 16 images over 4 connections do overlap on loopback


def test_http11_pipelines_every_page_on_one_connection(tmp_path, apache_factory):
    srv = apache_factory("1.1")
    reason, records = _session(tmp_path, srv.port, "1.1", rounds=2)
    assert reason == "done"
    pages, objects = _check_complete_session(records, rounds=2)
    assert {o["conn"] for o in objects} == {1}
    assert sum(o["connect_done"] is not None for o in objects) == 1  # connected once per session
    for p in pages:
        mine = [o for o in objects if (o["page"], o["round"]) == (p["page"], p["round"])]
        images = mine[1:]
        assert len({o["start"] for o in images}) == 1 and images[0]["start"] >= mine[0]["end"]  # one write
        ends = [o["end"] for o in images]
        assert ends == sorted(ends)  # responses come back in request order


def test_http11_reconnects_when_the_server_closed_an_idle_connection(tmp_path, apache_factory):
    srv = apache_factory("1.1", keepalive_timeout=1)
    reason, records = _session(tmp_path, srv.port, "1.1", pages=[1, 7],
                               think_time={"model": "fixed", "mean": 1.6})
    pages, objects = _split(records)
    assert reason == "done" and all(p["error"] is None for p in pages)
    first, second = ({o["conn"] for o in objects if o["page"] == p["page"]} for p in pages)
    assert first == {1} and second == {2}
    assert pages[0]["think_after"] == 1.6 and pages[1]["think_after"] is None


def test_http11_client_against_a_server_without_keepalive(tmp_path, apache_factory):
    """A misconfiguration must show: the server closes after each response, so a pipeline of
    two images loses its second; a page with one image still completes on a new connection."""
    srv = apache_factory("1.0")
    reason, records = _session(tmp_path, srv.port, "1.1", pages=[1, 2])
    pages, objects = _split(records)
    assert reason == "done"
    by_page = {p["page"]: p for p in pages}
    assert by_page[2]["error"] is None and by_page[2]["bytes"] == page(2).total_bytes
    assert len({o["conn"] for o in objects if o["page"] == 2}) == 2  # HTML, then a new one for the image
    assert by_page[1]["error"] is not None and by_page[1]["error"].startswith("/p1/i")


def test_refused_connection_is_recorded_not_fatal(tmp_path):
    port = _free_port()  # nothing listens there
    for version in ("1.0", "1.1"):
        reason, records = _session(tmp_path, port, version, pages=[1, 2], object_timeout=2)
        pages, objects = _split(records)
        assert reason == "done" and records[-1]["pages_failed"] == 2
        assert len(pages) == 2 and all(p["error"].startswith("/page") and "refused" in p["error"] for p in pages)
        assert all(o["error"].startswith("refused") and o["end"] >= o["start"] for o in objects)


@pytest.fixture
def silent_server():
    """Accepts connections (kernel backlog) but never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield s.getsockname()[1]


def test_object_timeout_and_session_deadline(tmp_path, silent_server):
    reason, records = _session(tmp_path, silent_server, "1.0", pages=[1, 2], object_timeout=0.3)
    pages, objects = _split(records)
    assert reason == "done" and [o["error"] for o in objects] == ["timeout", "timeout"]
    assert all(0.29 < o["end"] - o["start"] < 2 for o in objects)

    t0 = time.monotonic()
    reason, records = _session(tmp_path, silent_server, "1.1", pages=[1, 2], object_timeout=30,
                               session_timeout=0.5)
    pages, objects = _split(records)
    assert reason == "session_timeout" and records[-1]["reason"] == "session_timeout"
    assert time.monotonic() - t0 < 3
    assert len(pages) == 1 and "deadline" in pages[0]["error"]


def test_command_line_run_and_sigterm(tmp_path, apache_factory):
    srv = apache_factory("1.0")
    conf = {"client": "h1", "server": "127.0.0.1", "port": srv.port, "seed": 9, "http_version": "1.0",
            "parallel": 4, "pages": [5, 7], "think_time": {"model": "fixed", "mean": 60}, "start_delay": 0.1}
    (tmp_path / "c.json").write_text(json.dumps(conf))
    out = tmp_path / "o.jsonl"
    # PYTHONPATH: run this checkout's package, whatever the venv's editable install points at.
    proc = subprocess.Popen([sys.executable, "-m", "workloads.client", str(tmp_path / "c.json"), str(out)],
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while b'"kind": "page"' not in (out.read_bytes() if out.exists() else b""):  # the runner's test
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else ""
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # now in its 60 s think time
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    pages, _ = _split(records)
    assert records[0]["kind"] == "start" and records[0]["wall"] > 1e9 and records[0]["config"]["client"] == "h1"
    assert records[-1]["reason"] == "terminated" and len(pages) == 1 and pages[0]["think_after"] == 60
    assert pages[0]["start"] - records[0]["mono"] >= 0.1  # start_delay
