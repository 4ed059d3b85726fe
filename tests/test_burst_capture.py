"""Fig. 10's burst segments from a capture: a synthetic pcap whose sequence numbers and times are
known, split into the planned bursts (warm-up first, retransmissions apart)."""

from __future__ import annotations

import socket

import dpkt
import pytest

from catnip.results.burst_capture import CaptureError, bursts_from_capture

SERVER, CLIENT, PORT, CPORT, ISN, MSS = "10.2.0.2", "10.1.0.2", 8070, 40000, 1_000_000, 1000


def _packet(seq: int, length: int, syn: bool = False, src: str = SERVER, sport: int = PORT) -> bytes:
    tcp = dpkt.tcp.TCP(sport=sport, dport=CPORT, seq=seq, flags=(dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK) if syn
                       else dpkt.tcp.TH_ACK, off=5)
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(CLIENT), p=dpkt.ip.IP_PROTO_TCP, data=tcp)
    raw = bytearray(bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip)))
    # The capture keeps headers only: the IP total length says how much data there was.
    raw[16:18] = (20 + 20 + length).to_bytes(2, "big")
    return bytes(raw)


def _pcap(path, packets):
    with open(path, "wb") as fh:
        w = dpkt.pcap.Writer(fh)
        for ts, pkt in packets:
            w.writepkt(pkt, ts=ts)


def test_segments_split_into_bursts(tmp_path):
    warmup, plan = 2000, [(3000, 1.0), (2000, 3.0)]
    base = ISN + 1
    packets = [(10.0, _packet(ISN, 0, syn=True)),
               (10.1, _packet(base, 1000)), (10.1, _packet(base + 1000, 1000)),         # warm-up
               (11.0, _packet(base + 2000, 1000)), (11.05, _packet(base + 3000, 1000)),  # burst 0
               (11.10, _packet(base + 4000, 1000)),
               (11.3, _packet(base + 3000, 1000)),                                        # its retransmission
               (12.0, _packet(base + 5000, 1000, src="10.9.0.9")),                        # another host's
               (15.0, _packet(base + 5000, 1000)), (15.0, _packet(base + 6000, 1000))]   # burst 1, back to back
    pcap = tmp_path / "c.pcap"
    _pcap(pcap, packets)
    got = bursts_from_capture(pcap, PORT, warmup, plan, mss=MSS)
    assert [(b.size, b.idle) for b in got] == plan
    assert got[0].segments == [(0.0, 0), (pytest.approx(0.05), 1), (pytest.approx(0.10), 2)]
    assert got[0].retransmitted == 1 and got[0].spread == pytest.approx(0.10)
    assert got[1].segments == [(0.0, 0), (0.0, 1)] and got[1].spread == 0.0


def test_wraps_around_the_sequence_space(tmp_path):
    isn = 2**32 - 500  # the second segment starts past 2**32
    pcap = tmp_path / "w.pcap"
    _pcap(pcap, [(1.0, _packet(isn, 0, syn=True)), (2.0, _packet(isn + 1, 1000)),
                 (2.1, _packet((isn + 1001) % 2**32, 1000))])
    got = bursts_from_capture(pcap, PORT, 0, [(2000, 1.0)], mss=MSS)
    assert [s for _, s in got[0].segments] == [0, 1]


def test_no_handshake_is_an_error(tmp_path):
    pcap = tmp_path / "n.pcap"
    _pcap(pcap, [(1.0, _packet(5, 1000))])
    with pytest.raises(CaptureError, match="no connection from port 8070"):
        bursts_from_capture(pcap, PORT, 0, [(1000, 1.0)], mss=MSS)


def test_run_report_of_a_burst_run_has_no_page_table(tmp_path):
    """A run without web pages says where its samples are instead of an empty page table."""
    from catnip.results import report
    from catnip.results.store import Store
    store = Store(tmp_path / "r.db")
    store.create_run("b1", "burst-only", "scenarios/x.yaml", {"name": "burst-only"}, {}, 1, "abc", {}, {})
    store.create_point("b1", 0, 0, {}, {"applications": [{"kind": "burst"}]}, 1)
    store.add_samples("b1", 0, [{"app": "burst", "metric": "burst_time", "host": "c1", "peer": "v1", "flow": "c1/1",
                                 "tag": "5120B/1s", "t": 1.0, "value": 0.2, "unit": "s", "error": None}])
    store.update_point("b1", 0, status="done", realtime_ok=1, finished=1.0)
    text = report.render_text(report.run_report(store, "b1"))
    assert "Page Conns" not in text and "Pages:" not in text
    assert "No web pages: `catnip report b1 --apps`" in text
