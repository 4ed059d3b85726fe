"""Transfer latencies read from a capture (results/transfer_capture.py) on a hand-made pcap, and
the transfer scenario's validation messages."""

from __future__ import annotations

import socket

import dpkt
import pytest

from catnip.spec import transfer as transfer_scenario
from catnip.spec.scenario import ScenarioError
from catnip.results import transfer_capture

SERVER, CLIENT = "10.67.1.2", "10.67.2.2"


def _packet(src, dst, sport, dport, seq, ack, flags, payload=0, tos=0) -> bytes:
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq % 2**32, ack=ack % 2**32, flags=flags, data=b"x" * payload)
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=dpkt.ip.IP_PROTO_TCP, tos=tos, data=tcp)
    ip.len = len(ip)
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, data=ip))


def _write(path, packets) -> None:
    with open(path, "wb") as fh:
        w = dpkt.pcap.Writer(fh, snaplen=96)  # truncated like the real capture: lengths from the IP header
        for ts, buf in packets:
            w.writepkt(buf[:96], ts)


def test_latency_is_first_data_to_ack_of_last_byte(tmp_path):
    A, SA = dpkt.tcp.TH_ACK, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK
    isn = 4_294_967_000  # wraps within the transfer
    out = lambda t, seq, n, tos=0: (t, _packet(SERVER, CLIENT, 5001, 40000, seq, 1, A, n, tos))  # noqa: E731
    back = lambda t, ack: (t, _packet(CLIENT, SERVER, 40000, 5001, 1, ack, A))  # noqa: E731
    pcap = tmp_path / "t.pcap"
    _write(pcap, [
        (0.0, _packet(SERVER, CLIENT, 5001, 40000, isn, 1, SA)),
        out(1.0, isn + 1, 1000, tos=40),          # first data segment, AF11
        out(1.0, isn + 1001, 1000),
        back(1.2, isn + 1001),
        out(2.2, isn + 1001, 1000),               # retransmission
        out(2.2, isn + 2001, 500),
        back(2.4, isn + 2001),
        back(2.5, isn + 2501),                    # the ACK of the last byte
        back(2.9, isn + 2502),
    ])
    (flow,) = transfer_capture.read(pcap, SERVER, 5001)[40000]
    transfer_capture.complete(flow, 2500)
    assert flow.latency() == pytest.approx(1.5)
    assert (flow.data_segments, flow.retransmissions, flow.dscp_high) == (4, 1, 1)


def test_a_port_used_twice_pairs_with_the_trials_in_start_order(tmp_path):
    A, SA = dpkt.tcp.TH_ACK, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK
    pcap = tmp_path / "t.pcap"
    _write(pcap, [
        (0.0, _packet(SERVER, CLIENT, 5001, 39999, 7, 1, A, 100)),  # a connection older than the capture
        (0.0, _packet(CLIENT, SERVER, 39999, 5001, 1, 108, A)),
        (0.0, _packet(SERVER, CLIENT, 5001, 40001, 100, 1, SA)),
        (0.1, _packet(SERVER, CLIENT, 5001, 40001, 101, 1, A, 1000)),
        (0.3, _packet(CLIENT, SERVER, 40001, 5001, 1, 601, A)),    # half of it acknowledged: incomplete
        (1.0, _packet(SERVER, CLIENT, 5001, 40001, 900, 1, SA)),   # the port again: a new connection
        (1.0, _packet(SERVER, CLIENT, 5001, 40001, 900, 1, SA)),   # its SYN-ACK sent twice: still one
        (1.1, _packet(SERVER, CLIENT, 5001, 40001, 901, 1, A, 500)),
        (1.4, _packet(CLIENT, SERVER, 40001, 5001, 1, 1401, A)),
        (2.0, _packet(SERVER, CLIENT, 5001, 40002, 5, 1, SA)),
    ])
    flows = transfer_capture.read(pcap, SERVER, 5001)
    assert [f.isn for f in flows[40001]] == [100, 900] and 39999 not in flows
    trials = [{"trial": 3, "port": 40001, "size": 500, "t_start": 0.9},      # trial numbers repeat per size
              {"trial": 3, "port": 40001, "size": 1000, "t_start": -0.1},
              {"trial": 9, "port": 40002, "size": 10, "t_start": 1.9},
              {"trial": 10, "port": 40002, "size": 10, "t_start": 1.95}]
    matched = transfer_capture.match(flows, trials)
    assert matched[(1000, 3)].latency() is None          # the first, incomplete connection
    assert matched[(500, 3)].latency() == pytest.approx(0.3)
    assert "the client opened 2 connections, the capture shows 1" in matched[(10, 9)]


SCENARIO = "scenarios/transfers/hysteresis-validation.yaml"


def test_the_shipped_transfer_scenario_is_valid():
    sc = transfer_scenario.load(SCENARIO)
    assert sc.path.mss == 1433 and sc.path.wmax == 24 and sc.path.min_rto == 1.0 and sc.path.rtt == 0.2
    assert len(sc.points()) == len(sc.profiles) * len(sc.loss)


@pytest.mark.parametrize("override, message", [
    ("trials=0", "trials: 0: Input should be greater than or equal to 1"),
    ("loss=[{p: 1.5}]", "loss.0.p: 1.5: Input should be less than 1"),
    ("loss=[{p: 0.1, p_high: -1}]", "loss.0.p_high: -1"),
    ("sizes_kb=[0, 4]", "sizes_kb: [0]: sizes must be 1-65536 KB"),
    ("path.rtt=fast", "path.rtt: 'fast' is not a duration"),
    ("profiles=[bsd]", "profiles.0: 'bsd' not allowed"),
    ("colour=red", "colour: unknown field"),
])
def test_bad_transfer_scenarios_name_the_field(override, message):
    with pytest.raises(ScenarioError) as err:
        transfer_scenario.load(SCENARIO, [override])
    assert message in str(err.value)
