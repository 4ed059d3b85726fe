"""The kernel backend against the queue engine, on the same link: a 10 Mbit/s bottleneck with a
20-packet DropTail buffer at the router's egress, 4 TCP flows for 8 s, once through htb + pfifo
and once through the engine. Throughput must agree within 2% and loss be of the same order.
Tests of the qdiscs this kernel lacks (netem, red) skip, naming the qdisc."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from testbed import tc_backend
from testbed.capabilities import probe_qdiscs
from testbed.engine import EngineLink, RouterEngine
from testbed.netline import NetLine
from tests.conftest import need_engine, need_root

pytestmark = [pytest.mark.netns]
RATE = 10_000_000


class _Router:
    """What RouterEngine needs of a node, for a plain `ip netns` namespace."""

    def __init__(self, line: NetLine):
        self.name, self.prefix = line.names[1], line.ns("r")

    def popen(self, argv, **kw):
        return subprocess.Popen([*self.prefix, *argv], **kw)

    def cmd(self, text: str) -> str:
        return subprocess.run([*self.prefix, "sh", "-c", text], capture_output=True, text=True, timeout=60).stdout


@pytest.fixture
def line(no_leftovers):
    need_root()
    with NetLine("ctpt-tc", net=67) as ln:
        server = subprocess.Popen([*ln.ns("c"), "iperf3", "-s"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        try:
            yield ln
        finally:
            server.kill()
            server.wait()


def _bulk(line: NetLine, seconds: int = 8) -> float:
    out = subprocess.run([*line.ns("s"), "iperf3", "-c", line.receiver_ip, "-P", "4", "-t", str(seconds), "-J"],
                         capture_output=True, text=True, timeout=seconds + 30, check=True).stdout
    return json.loads(out)["end"]["sum_received"]["bits_per_second"]


def test_kernel_droptail_matches_the_engine(line, tmp_path):
    need_engine()
    have = probe_qdiscs()
    if not (have.get("htb") and have.get("pfifo")):
        pytest.skip("needs the htb and pfifo qdiscs")
    link = tc_backend.TcLink(intf=line.router_out, rate_bps=RATE, buffer_packets=20)
    tc_backend.configure(link, line.ns("r"))
    try:
        kernel_bps = _bulk(line)
        k = tc_backend.stats(line.router_out, line.ns("r"))
    finally:
        tc_backend.remove(line.router_out, line.ns("r"))
    engine = RouterEngine(_Router(line), [EngineLink("r>c", "egress", line.router_out, RATE, 0.0, {"packets": 20},
                                                      {"kind": "droptail"})], tmp_path, seed=1)
    engine.start()
    try:
        engine_bps = _bulk(line)
    finally:
        engine.stop()
    s = engine.latest_stats()["links"]["r>c"]
    e_sent = sum(v[0] for v in s["sent"].values())
    e_drop = sum(v[0] for v in s["dropped"].values())
    k_loss = k["dropped"] / (k["sent_packets"] + k["dropped"])
    e_loss = e_drop / (e_sent + e_drop)
    print(f"\n10 Mbit/s, 20-packet DropTail, 4 TCP flows: kernel htb+pfifo {kernel_bps / 1e6:.3f} Mbit/s, loss "
          f"{100 * k_loss:.2f}% ({k['dropped']} of {k['sent_packets'] + k['dropped']}); engine {engine_bps / 1e6:.3f} "
          f"Mbit/s, loss {100 * e_loss:.2f}% ({e_drop} of {e_sent + e_drop})")
    assert engine_bps == pytest.approx(kernel_bps, rel=0.02)
    assert k["dropped"] > 0 and e_drop > 0
    assert 0.33 < e_loss / k_loss < 3, "loss not of the same order"


@pytest.mark.parametrize("qdisc, link", [
    ("netem", tc_backend.TcLink(intf="x", rate_bps=RATE, delay_us=10_000, buffer_packets=20)),
    ("red", tc_backend.TcLink(intf="x", rate_bps=RATE, buffer_packets=50, policy="red",
                              red={"min_th": 10, "max_th": 30})),
])
def test_missing_qdiscs_are_named(qdisc, link, line):
    if probe_qdiscs().get(qdisc):
        pytest.skip(f"this kernel has {qdisc}: the error path is not reachable here")
    with pytest.raises(tc_backend.TcBackendError, match=f"lacks the {qdisc}"):
        tc_backend.configure(link, line.ns("r"))


def test_red_and_netem_commands(line):
    """Where the kernel has red and netem the backend would run these; here the commands are
    checked for shape only when the qdiscs are missing."""
    have = probe_qdiscs()
    red = tc_backend.TcLink(intf=line.router_out, rate_bps=RATE, delay_us=5000, buffer_packets=50, policy="red",
                            red={"min_th": 10, "max_th": 30, "max_p": 0.1})
    cmds = red.commands()
    assert cmds[2][cmds[2].index("red"):][:9] == ["red", "limit", "50000", "min", "10000", "max", "30000", "avpkt", "1000"]
    assert cmds[3][-3:] == ["netem", "delay", "5000us"]
    if not (have.get("red") and have.get("netem")):
        pytest.skip("this kernel lacks " + " and ".join(q for q in ("red", "netem") if not have.get(q)))
    tc_backend.configure(red, line.ns("r"))
    tc_backend.remove(line.router_out, line.ns("r"))
