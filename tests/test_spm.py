"""Selective Packet Marking on the wire: real Apache with mod_catnip, the BPF marker attached at the
server's egress, a capture on the server's link read with Scapy. For documents of 1, 3, 6, 14, 28
and 100 segments, exactly the segments the rules name are AF11 and the rest AF12 (CATNIP III-B);
with the paper's partial SPM (V-G) the last three are not marked; HTTP/1.1 pipelined documents
are marked per document, or per connection (V-F).

The expected marks are computed here from the captured byte stream alone (where each HTTP
response starts and how long it is), independently of the marker's own bookkeeping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from catnip.testbed import spm
from catnip.testbed.kernel_fs import cgroup2_root
from catnip.workloads import apache
from tests.conftest import REPO, listening, need_root, wait_until

pytestmark = [pytest.mark.netns]

SRV, CLI = "ctpt-spm-s", "ctpt-spm-c"
SRV_IP, CLI_IP = "10.77.0.1", "10.77.0.2"
MSS = 512  # MTU 552, no TCP timestamps: every full segment carries 512 bytes, as in section III-B
EDGE = 3 * MSS
AF11, AF12 = 10, 12
SIZES = (1, 3, 6, 14, 28, 100)


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout


def in_ns(ns: str) -> list[str]:
    # nsenter keeps this mount namespace: bpffs pins and the cgroup tree stay visible (ip netns exec remounts /sys).
    return ["nsenter", f"--net=/run/netns/{ns}"]


@pytest.fixture(scope="module")
def link():
    need_root()
    for tool in ("bpftool", "clang", "apxs", "tcpdump", "nsenter"):
        if not shutil.which(tool):
            pytest.skip(f"needs {tool} (scripts/setup.sh installs it)")
    if cgroup2_root() is None:
        pytest.skip("needs a cgroup-v2 hierarchy for the document-size program")
    try:
        for ns in (SRV, CLI):
            sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", "ctpt-spm-sv", "type", "veth", "peer", "name", "ctpt-spm-cv")
        for ns, dev, ip in ((SRV, "ctpt-spm-sv", SRV_IP), (CLI, "ctpt-spm-cv", CLI_IP)):
            sh("ip", "link", "set", dev, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up", "mtu", "552")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh(*in_ns(ns), "sysctl", "-qw", "net.ipv4.tcp_timestamps=0")
            subprocess.run([*in_ns(ns), "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"],
                           capture_output=True)
        sh("ip", "-n", SRV, "link", "set", "dev", "ctpt-spm-sv", "gso_max_segs", "1")
        yield
    finally:
        for ns in (SRV, CLI):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture(scope="module")
def docroot():
    root = Path(tempfile.mkdtemp(prefix="catnip-spm-"))
    root.chmod(0o755)
    for n in SIZES:
        # Headers are about 230 bytes: this makes each response just under n full segments.
        (root / f"doc{n}.bin").write_bytes(b"x" * (n * MSS - 300))
    (root / "doc8k.bin").write_bytes(b"y" * 8192)
    yield root
    shutil.rmtree(root, ignore_errors=True)


class Server:
    """Marker + Apache (with mod_catnip, in the marker's cgroup) + capture on the server's link."""

    def __init__(self, rules: spm.SpmRules, docroot: Path, http_version: str, workdir: Path):
        self.marker = spm.SpmMarker(rules, name=f"test{os.getpid()}")
        self.srv = apache.ApacheServer(workdir=workdir, docroot=docroot, listen_ip=SRV_IP, port=80,
                                       http_version=http_version, catnip_module=spm.MOD_CATNIP, max_workers=64)
        self.pcap = workdir / "server.pcap"
        self.cap = None

    def __enter__(self):
        try:
            self.marker.load()
            self.marker.attach_tc("ctpt-spm-sv", in_ns(SRV))
            self.marker.make_cgroup()
            self.srv.prepare()
            self.srv.proc = subprocess.Popen([*in_ns(SRV), *self.srv.argv()], stdout=subprocess.DEVNULL,
                                             stderr=subprocess.STDOUT, preexec_fn=spm.joiner(self.marker.cgroup))
            _wait_port()
            self.cap = subprocess.Popen([*in_ns(SRV), "tcpdump", "-i", "ctpt-spm-sv", "--immediate-mode", "-U", "-s", "0", "-w",
                                         str(self.pcap), "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _wait_capture(self.cap)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        if self.cap and self.cap.poll() is None:
            time.sleep(0.3)
            self.cap.terminate()
            self.cap.wait(5)
        self.srv.stop()
        problems = self.marker.unload()
        assert not problems, problems


def _wait_port(timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f"{SRV_IP}:80" in sh(*in_ns(SRV), "ss", "-ltn"):
            return
        time.sleep(0.1)
    pytest.fail("Apache did not listen")


def _wait_capture(cap: subprocess.Popen) -> None:
    # tcpdump says "listening on" on stderr once the capture runs.
    deadline = time.monotonic() + 10
    line = b""
    while time.monotonic() < deadline and b"listening" not in line:
        line = cap.stderr.readline()
    assert b"listening" in line, "tcpdump did not start"


def fetch(paths: list[str], pipelined: bool = False) -> None:
    """GET the paths from the client namespace: one HTTP/1.0 connection each, or one pipelined
    HTTP/1.1 connection (the last request says Connection: close)."""
    if pipelined:
        reqs = "".join(f"GET /{p} HTTP/1.1\r\nHost: x\r\n{'Connection: close' + chr(13) + chr(10) if i == len(paths) - 1 else ''}\r\n"
                       for i, p in enumerate(paths))
        batches = [reqs]
    else:
        batches = [f"GET /{p} HTTP/1.0\r\n\r\n" for p in paths]
    code = ("import socket,sys\n"
            "for req in sys.argv[1:]:\n"
            f"    s = socket.create_connection(('{SRV_IP}', 80), timeout=20)\n"
            "    s.sendall(req.encode())\n"
            "    while s.recv(65536): pass\n"
            "    s.close()\n")
    subprocess.run([*in_ns(CLI), "python3", "-c", code, *batches], check=True, timeout=60)


def server_streams(pcap: Path) -> list[tuple[bytes, list[tuple[int, int, int]]]]:
    """Per connection: the server's byte stream, and its data segments as (offset, length, dscp)
    in the order sent (first transmissions only; the link is loss-free)."""
    from scapy.all import IP, TCP, rdpcap
    conns: dict[int, dict] = {}
    for pkt in rdpcap(str(pcap)):
        if IP not in pkt or pkt[IP].src != SRV_IP:
            continue
        tcp = pkt[TCP]
        c = conns.setdefault(tcp.dport, {"isn": None, "segs": [], "data": {}})
        if tcp.flags.S:
            c["isn"] = tcp.seq
            continue
        payload = bytes(tcp.payload)
        if payload:
            off = (tcp.seq - c["isn"] - 1) % 2**32
            c["segs"].append((off, len(payload), pkt[IP].tos >> 2))
            c["data"][off] = payload
    out = []
    for c in conns.values():
        stream = b"".join(c["data"][k] for k in sorted(c["data"]))
        out.append((stream, c["segs"]))
    return out


def documents(stream: bytes) -> list[tuple[int, int]]:
    """(offset, length) of each HTTP response in a server's byte stream."""
    docs, off = [], 0
    while off < len(stream):
        head_end = stream.index(b"\r\n\r\n", off) + 4
        headers = stream[off:head_end].decode().lower()
        length = int(headers.split("content-length:")[1].split("\r\n")[0])
        docs.append((off, head_end - off + length))
        off = head_end + length
    return docs


def expected_high(off: int, length: int, docs: list[tuple[int, int]], first=True, last=True) -> bool:
    for start, dlen in docs:
        if off + length <= start or off >= start + dlen:
            continue
        if (first and off - start < EDGE) or (last and start + dlen - off <= EDGE):
            return True
    return False


def check(streams, first=True, last=True, scope="document"):
    seen = {}
    for stream, segs in streams:
        docs = documents(stream)
        for off, length, dscp in segs:
            if scope == "document":
                high = expected_high(off, length, docs, first, last)
            else:  # the connection's first segments, and the last ones of its last document
                high = (first and off < EDGE) or (last and expected_high(off, length, docs[-1:], False, True))
            assert dscp == (AF11 if high else AF12), (
                f"segment at offset {off} (+{length}) of a {len(segs)}-segment stream has DSCP {dscp}, "
                f"rules say {'AF11' if high else 'AF12'}; documents {docs}")
        # A rare loss on the local link retransmits a segment (checked above too): key by first sendings.
        first_sent = {}
        for off, _, dscp in segs:
            first_sent.setdefault(off, dscp)
        seen[len(first_sent)] = list(first_sent.values())
    return seen


def test_each_document_size_marks_exactly_first_and_last_three(link, docroot, tmp_path):
    with Server(spm.SpmRules(small_cwnd=False), docroot, "1.0", tmp_path / "full") as s:
        fetch([f"doc{n}.bin" for n in SIZES] + ["doc8k.bin"])
        counters = s.marker.counters()
    seen = check(server_streams(s.pcap))
    assert set(SIZES) <= set(seen), f"documents of {sorted(seen)} segments, wanted {SIZES}"
    assert seen[14] == [AF11] * 3 + [AF12] * 8 + [AF11] * 3
    assert seen[1] == [AF11] and seen[6] == [AF11] * 6
    # Section III-B: an 8 KB document of 512-byte segments has about 35-40% high-priority packets.
    eight_k = next(v for n, v in seen.items() if n == 17)
    assert eight_k.count(AF11) / len(eight_k) == pytest.approx(6 / 17)
    assert counters["documents"] == len(SIZES) + 1
    print(f"\n8 KB document, 512-byte segments: {eight_k.count(AF11)} of {len(eight_k)} high "
          f"({100 * eight_k.count(AF11) / len(eight_k):.1f}%); marker counters {counters}")


def test_partial_spm_leaves_the_last_three_unmarked(link, docroot, tmp_path):
    with Server(spm.SpmRules(small_cwnd=False, last=False), docroot, "1.0", tmp_path / "partial") as s:
        fetch([f"doc{n}.bin" for n in (14, 28)])
    seen = check(server_streams(s.pcap), last=False)
    assert seen[14] == [AF11] * 3 + [AF12] * 11 and seen[28] == [AF11] * 3 + [AF12] * 25


def test_pipelined_documents_are_marked_per_document(link, docroot, tmp_path):
    with Server(spm.SpmRules(small_cwnd=False), docroot, "1.1", tmp_path / "pipelined") as s:
        fetch(["doc14.bin", "doc6.bin", "doc28.bin"], pipelined=True)
    (stream, segs), = server_streams(s.pcap)
    assert len(documents(stream)) == 3
    check([(stream, segs)])
    assert sum(1 for *_, d in segs if d == AF11) >= 3 * 6 - 2  # six per document, less shared edge segments


def test_connection_scope_marks_the_connection_edges_only(link, docroot, tmp_path):
    with Server(spm.SpmRules(small_cwnd=False, scope="connection"), docroot, "1.1", tmp_path / "conn") as s:
        fetch(["doc14.bin", "doc6.bin", "doc28.bin"], pipelined=True)
    streams = server_streams(s.pcap)
    check(streams, scope="connection")
    first_sent = {off: d for off, _, d in reversed(streams[0][1])}
    assert list(first_sent.values()).count(AF11) == 6


def test_small_window_segments_are_high(link, docroot, tmp_path):
    # Reno's window only grows on this loss-free link, unless the server pauses for an RTO: then
    # slow_start_after_idle restarts it (or cwnd validation halves it) toward the initial 2, and the
    # marker rightly marks again. Keep the window's path fixed so the test checks the marker.
    sysctls = {"net.ipv4.tcp_congestion_control": "reno", "net.ipv4.tcp_slow_start_after_idle": "0"}
    saved = {k: subprocess.run([*in_ns(SRV), "sysctl", "-n", k], capture_output=True, text=True).stdout.strip()
             for k in sysctls}
    try:
        sh("ip", "-n", SRV, "route", "change", "10.77.0.0/24", "dev", "ctpt-spm-sv", "initcwnd", "2")
        for k, v in sysctls.items():
            sh(*in_ns(SRV), "sysctl", "-qw", f"{k}={v}")
        with Server(spm.SpmRules(first=False, last=False, small_cwnd=True), docroot, "1.0", tmp_path / "cwnd") as s:
            fetch(["doc100.bin"])
    finally:
        sh("ip", "-n", SRV, "route", "change", "10.77.0.0/24", "dev", "ctpt-spm-sv", "initcwnd", "10")
        for k, v in saved.items():
            if v:
                sh(*in_ns(SRV), "sysctl", "-qw", f"{k}={v}")
    (_, segs), = server_streams(s.pcap)
    # Until the first retransmission (cwnd may fall below 4 after a loss, and then marks again).
    clean, top = [], -1
    for off, _, dscp in segs:
        if off <= top:
            break
        top = off
        clean.append(dscp)
    assert len(clean) >= 20, f"a retransmission after only {len(clean)} segments"
    high = clean.count(AF11)
    # Slow start from 2 segments: the first flights go out while cwnd < 4, later ones do not.
    highs = [i for i, d in enumerate(clean) if d == AF11]
    assert 2 <= high <= 6 and highs == list(range(high)), f"high segments at {highs} of {len(clean)}"
    assert all(d == AF12 for d in clean[high:]), f"unmarked segments after the high ones: {clean[high:]}"


def test_marker_loads_and_unloads_cleanly(link):
    m = spm.SpmMarker(spm.SpmRules(), name=f"load{os.getpid()}")
    m.load()
    try:
        m.attach_tc("ctpt-spm-sv", in_ns(SRV))
        m.make_cgroup()
        assert "catnip_mark" in sh(*in_ns(SRV), "tc", "filter", "show", "dev", "ctpt-spm-sv", "egress")
        assert str(m.cgroup) in sh("bpftool", "cgroup", "tree", str(m.cgroup))
    finally:
        assert m.unload() == []
    assert not m.pin.exists() and not m.cgroup
    assert "catnip_mark" not in sh(*in_ns(SRV), "tc", "filter", "show", "dev", "ctpt-spm-sv", "egress")
    assert spm.our_cgroups() == []


def _bulk_mbps(seconds: int = 4) -> float:
    """iperf3 goodput from the server namespace to the client (reverse mode: the server sends)."""
    import json
    srv = subprocess.Popen([*in_ns(SRV), "iperf3", "-s", "-1", "-B", SRV_IP], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: listening(in_ns(SRV), 5201, srv), 10, "iperf3 -s listening in the server namespace")
        out = subprocess.run([*in_ns(CLI), "iperf3", "-c", SRV_IP, "-R", "-t", str(seconds), "-J"],
                             capture_output=True, text=True, timeout=seconds + 20, check=True).stdout
        return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        srv.kill()
        srv.wait()


def test_marking_costs_no_throughput(link, tmp_path):
    if not shutil.which("iperf3"):
        pytest.skip("needs iperf3")
    # A 20 Mbit/s bottleneck at the server's egress (htb), so both runs meet the same limit.
    sh(*in_ns(SRV), "tc", "qdisc", "replace", "dev", "ctpt-spm-sv", "root", "handle", "1:", "htb", "default", "1")
    sh(*in_ns(SRV), "tc", "class", "add", "dev", "ctpt-spm-sv", "parent", "1:", "classid", "1:1", "htb",
       "rate", "20mbit", "burst", "1514")
    try:
        without = _bulk_mbps()
        m = spm.SpmMarker(spm.SpmRules(), name=f"bulk{os.getpid()}")
        m.load()
        try:
            m.attach_tc("ctpt-spm-sv", in_ns(SRV))
            with_marker = _bulk_mbps()
            marked = m.counters()
        finally:
            assert m.unload() == []
    finally:
        subprocess.run([*in_ns(SRV), "tc", "qdisc", "del", "dev", "ctpt-spm-sv", "root"], capture_output=True)
    print(f"\nbulk through 20 Mbit/s: {without:.3f} Mbit/s without the marker, {with_marker:.3f} with it "
          f"({100 * (with_marker / without - 1):+.2f}%); {marked['data_high'] + marked['data_low']} segments marked")
    assert marked["data_low"] > 1000  # the marker really was in the path
    assert with_marker == pytest.approx(without, rel=0.02)


def test_the_example_server_gets_the_same_marks(link, docroot, tmp_path):
    m = spm.SpmMarker(spm.SpmRules(small_cwnd=False), name=f"example{os.getpid()}")
    m.load()
    pcap = tmp_path / "example.pcap"
    try:
        m.attach_tc("ctpt-spm-sv", in_ns(SRV))
        m.make_cgroup()
        server = subprocess.Popen([*in_ns(SRV), "python3", str(REPO / "examples" / "catnip_doc_server.py"), SRV_IP,
                                   "80", str(docroot)], preexec_fn=spm.joiner(m.cgroup))
        try:
            _wait_port()
            cap = subprocess.Popen([*in_ns(SRV), "tcpdump", "-i", "ctpt-spm-sv", "--immediate-mode", "-U", "-w",
                                    str(pcap), "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _wait_capture(cap)
            fetch(["doc14.bin", "doc28.bin"])
            time.sleep(0.3)
            cap.terminate()
            cap.wait(5)
            assert m.counters()["documents"] == 2
        finally:
            server.kill()
            server.wait()
    finally:
        assert m.unload() == []
    seen = check(server_streams(pcap))
    assert seen[14] == [AF11] * 3 + [AF12] * 8 + [AF11] * 3
