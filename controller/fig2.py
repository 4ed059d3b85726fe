"""CATNIP Fig. 2 on the testbed: a 14-segment document (512-byte segments, initial window 1) sent
by Reno, RBPLW, ECA and ECA+RBPLW, seen at the server's link; writes a sequence-number plot and
returns each sender's bursts (segments per round trip).

One client, one server, the dumbbell with the queue engine delaying the bottleneck (no loss: the
figure is about how each sender spaces its packets). Apache with mod_catnip serves the document;
the document-size program gives ECA and RBPLW the document's extent. The plot is drawn by
results/figures.py (sequence_panels) and written as SVG, PDF or PNG by the file's extension.
"""

from __future__ import annotations

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
    return {name: bursts([t for t, _ in results[name]], gap=rtt_ms / 1000 / 2) for name, _ in SENDERS}
