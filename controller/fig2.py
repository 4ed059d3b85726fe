"""CATNIP Fig. 2 on the testbed: a 14-segment document (512-byte segments, initial window 1) sent
by Reno, RBPLW, ECA and ECA+RBPLW, seen at the server's link; writes a sequence-number plot, keeps
the series it drew beside it, and returns each sender's bursts (segments per round trip).

One client, one server, the dumbbell with the queue engine delaying the bottleneck (no loss: the
figure is about how each sender spaces its packets). Apache with mod_catnip serves the document;
the document-size program gives ECA and RBPLW the document's extent. The plot is drawn by
results/figures.py (sequence_panels) and written as SVG, PDF or PNG by the file's extension; the
series (each sender's data segments: seconds since its first, segment index) go to the same name
with .json (`data_path`, `write_data`), which the dashboard's /figures/fig2 draws the figure from
(`read_data`, then `figure`), as `catnip fig2` drew the file.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tempfile
from pathlib import Path

from catnip.spec import scenario as scenario_mod
from catnip.results import figures
from catnip.controller.skeleton import TeardownStack, kernel_resources
from catnip.testbed import hostconfig, network, spm
from catnip.workloads import apache
from catnip.testbed.capabilities import probe
from catnip.testbed.capture import Capture
from catnip.testbed.links import EngineBackend

MSS = 512
SEGMENTS = 14
SENDERS = (("catnip_reno", "(a) Reno"), ("catnip_rbplw", "(b) RBPLW"), ("catnip_eca", "(c) ECA"),
           ("catnip_ecarbplw", "(d) ECA+RBPLW"))
COLOR_KEYS = {"catnip_reno": "Reno", "catnip_rbplw": "RBPLW", "catnip_eca": "ECA", "catnip_ecarbplw": "ECA+RBPLW"}
CITATION = ('C. Williamson, Q. Wu, "A Case for Context-Aware TCP/IP", ACM SIGMETRICS Performance Evaluation'
            " Review 29(4), 2002")
# What the paper's Fig. 2 shows each sender do with the 14-packet document (ns-2, 512-byte packets),
# as its text gives it (section III-B, the paragraph on Figure 2): Reno "1, 2, 4, and 8 packets"
# with "only 7" in the last burst; RBPLW "paces the last window's worth of packets"; ECA "a burst of
# 4 packets followed by a burst of 3 packets, rather than a single burst of 7"; ECA+RBPLW "only the
# last window of 3 packets is temporally spaced".
PAPER_BURSTS = {"catnip_reno": "1, 2, 4, 7", "catnip_rbplw": "1, 2, 4, then the last 7 paced",
                "catnip_eca": "1, 2, 4, 4, 3", "catnip_ecarbplw": "1, 2, 4, 4, then the last 3 paced"}
DATA_FORMAT = "catnip-fig2/1"


def _scenario(rtt_ms: float) -> scenario_mod.Scenario:
    one_way = rtt_ms / 2 - 2  # the access links add 1 ms each way
    return scenario_mod.validate({
        "name": "fig2", "topology": {
            "clients": 1, "servers": 1, "mss": MSS,
            "client_link": {"rate": "10Mbit", "delay": "1ms", "buffer": "100p"},
            "server_link": {"rate": "10Mbit", "delay": "1ms", "buffer": "100p"},
            "bottleneck": {"rate": "10Mbit", "delay": f"{one_way}ms", "buffer": "100p"}},
        "tcp": {"congestion_control": "catnip_reno", "initial_cwnd": 1, "timestamps": False}})


def bursts(times: list[float], gap: float) -> list[tuple[int, float]]:
    """(segments, duration in s) per burst: a new burst starts after a silence longer than `gap` s."""
    out: list[list] = []
    last = None
    for t in times:
        if last is None or t - last > gap:
            out.append([0, t, t])
        out[-1][0] += 1
        out[-1][2] = t
        last = t
    return [(n, end - start) for n, start, end in out]


def _segments(pcap: Path, server_ip: str) -> list[tuple[float, int]]:
    from scapy.all import IP, TCP, rdpcap
    isn, t0, pts = None, None, []
    for pkt in rdpcap(str(pcap)):
        if IP not in pkt or pkt[IP].src != server_ip:
            continue
        tcp = pkt[TCP]
        if tcp.flags.S:
            isn = tcp.seq
        elif len(tcp.payload) and isn is not None:
            t0 = float(pkt.time) if t0 is None else t0
            pts.append((float(pkt.time) - t0, ((tcp.seq - isn - 1) % 2**32) // MSS))
    return pts


def figure(results: dict[str, list[tuple[float, int]]], rtt_ms: float) -> dict:
    """The plot: each sender's data segments (segment index against ms) in its own panel."""
    return figures.sequence_panels([(title, COLOR_KEYS[name], results.get(name, [])) for name, title in SENDERS],
                                   title=f"CATNIP Fig. 2 on the testbed: {SEGMENTS} segments of {MSS} B, "
                                         f"RTT {rtt_ms:g} ms, initial window 1", panel_width=260)


def data_path(out: Path) -> Path:
    """Where `run` keeps the series of the figure `out`: the same name with .json
    (docs/figures/fig2-senders.svg -> docs/figures/fig2-senders.json)."""
    return Path(out).with_suffix(".json")


def write_data(path: Path, results: dict[str, list[tuple[float, int]]], rtt_ms: float,
               figure_file: Path | None = None) -> Path:
    """The series `figure` draws, as a JSON file: per sender (in SENDERS' order) its panel title
    and its data segments as [seconds since its first data segment, segment index]; the RTT, and
    the figure file drawn from them."""
    doc = {"format": DATA_FORMAT, "figure": "CATNIP Fig. 2 on the testbed", "paper": f"{CITATION}, section III-B, Fig. 2",
           "figure_file": None if figure_file is None else str(figure_file),
           "rtt_ms": rtt_ms, "mss": MSS, "segments": SEGMENTS,
           "senders": [{"name": name, "title": title, "points": [[round(t, 6), s] for t, s in results.get(name, [])]}
                       for name, title in SENDERS]}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # A sender a line: the file reads (and diffs) as the figure's four series.
    senders = ",\n".join("  " + json.dumps(s) for s in doc["senders"])
    tmp.write_text(json.dumps({**doc, "senders": "SENDERS"}, indent=1).replace('"SENDERS"', f"[\n{senders}\n ]") + "\n")
    tmp.replace(path)
    return path


def read_data(path: Path) -> tuple[dict[str, list[tuple[float, int]]], float]:
    """The series and the RTT (ms) `write_data` kept; ValueError naming what is wrong with the file."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != DATA_FORMAT:
        raise ValueError(f"{path}: not a `catnip fig2` data file (format {DATA_FORMAT!r})")
    rtt = doc.get("rtt_ms")
    if isinstance(rtt, bool) or not isinstance(rtt, (int, float)) or not 0 < rtt < math.inf:
        raise ValueError(f"{path}: rtt_ms must be a positive number, not {rtt!r}")
    senders = doc.get("senders")
    names = [name for name, _ in SENDERS]
    if not isinstance(senders, list) or [s.get("name") if isinstance(s, dict) else None for s in senders] != names:
        raise ValueError(f"{path}: senders must be {', '.join(names)}, in that order")
    results = {}
    for s in senders:
        pts = s.get("points")
        if not isinstance(pts, list) or not all(
                isinstance(p, list) and len(p) == 2 and isinstance(p[0], (int, float)) and not isinstance(p[0], bool)
                and math.isfinite(p[0]) and p[0] >= 0 and isinstance(p[1], int) and not isinstance(p[1], bool)
                and 0 <= p[1] < 10 * SEGMENTS for p in pts):
            raise ValueError(f"{path}: {s['name']}'s points must be [seconds >= 0, segment index] pairs")
        results[s["name"]] = [(float(t), i) for t, i in pts]
    return results, float(rtt)


def run(out: Path, rtt_ms: float = 100.0, log=print) -> dict[str, list[int]]:
    # Refused before the experiment: a file name it cannot write, or no export tools.
    figures.format_of(out)
    missing = figures.export_missing()
    if missing:
        raise figures.ExportError(f"cannot write {out}: {missing}")
    sc = _scenario(rtt_ms)
    caps = probe()
    problems = caps.blocking_problems()
    if problems:
        raise RuntimeError("this machine cannot run scenarios: " + "; ".join(problems))
    work = Path(tempfile.mkdtemp(prefix="catnip-fig2-"))
    work.chmod(0o755)
    results: dict[str, list[tuple[float, int]]] = {}
    with TeardownStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        # The same kernel-global set-up as runs: the allowed list is saved for `catnip clean`.
        stack.enter_context(kernel_resources(name for name, _ in SENDERS))
        log("building the network")
        net = network.build(sc, caps.choose_switch("auto", sc.topology.ovs_datapath))
        stack.callback(network.stop, net)
        engines = EngineBackend(work, sc.seed, sc.run.late_threshold, sc.run.engine_spin)
        stack.callback(engines.stop)
        engines.start(list(net.routers.values()), net.directions)
        server, client = net.hosts_of("servers")[0], net.hosts_of("clients")[0]
        server_intf = f"{server.name}-eth0"
        marker = spm.SpmMarker(spm.SpmRules(enabled=False), name="fig2")
        stack.callback(marker.unload)
        marker.load()
        marker.make_cgroup()
        hostconfig.one_packet_per_skb(server.node, server_intf)
        hostconfig.set_sysctls(server.node, {"net.ipv4.tcp_pacing_ss_ratio": 100, "net.ipv4.tcp_pacing_ca_ratio": 100})
        docroot = work / "docroot"
        docroot.mkdir()
        docroot.chmod(0o755)
        # Headers are about 230 bytes: status line + headers + body fill 14 segments, the last partly.
        (docroot / "doc.bin").write_bytes(b"x" * (SEGMENTS * MSS - 300))
        for name, title in SENDERS:
            hostconfig.set_sysctls(server.node, {"net.ipv4.tcp_congestion_control": name})
            srv = apache.ApacheServer(workdir=work / name, docroot=docroot, listen_ip=server.ip, port=80,
                                      catnip_module=spm.MOD_CATNIP, max_workers=64)
            srv.prepare()
            srv.proc = server.node.popen(srv.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                         preexec_fn=spm.joiner(marker.cgroup))
            try:
                srv.wait_ready(server.node, timeout=10)
                pcap = work / f"{name}.pcap"
                cap = Capture(server.node, server_intf, pcap, snaplen=262144, bpf_filter="tcp port 80").start()
                stack.callback(cap.stop)
                client.node.cmd(f"python3 -c \"import socket; s=socket.create_connection(('{server.ip}', 80));"
                                f" s.sendall(b'GET /doc.bin HTTP/1.0\\r\\n\\r\\n');"
                                f" exec('while s.recv(65536): pass')\"")
                # Every data segment crossed the server's interface half a round trip before the
                # client read it: the capture has them all when the client is done.
                cap.stop()
            finally:
                srv.stop()
            results[name] = _segments(pcap, server.ip)
            log(f"{title}: {len(results[name])} data segments")
    figures.save(figure(results, rtt_ms), out)
    write_data(data_path(out), results, rtt_ms, out)
    return {name: bursts([t for t, _ in results[name]], gap=rtt_ms / 1000 / 2) for name, _ in SENDERS}
