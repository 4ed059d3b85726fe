"""The project's BPF congestion controls (CATNIP's sender heuristics, newCWV): per-server choice in
scenarios, registration (every one, both objects) and cleanup, and the behaviours of Fig. 2
measured on the testbed. newCWV's own behaviours: tests/test_newcwv.py."""

from __future__ import annotations

import pytest

from catnip.spec import scenario as scenario_mod
from catnip.spec import senders
from catnip.testbed import sender
from tests.conftest import REPO, need_engine, need_root


def test_server_congestion_control_cycles_over_servers():
    sweep = scenario_mod.load(REPO / "scenarios" / "quick.yaml",
                              ["topology.servers=3", "tcp.server_congestion_control=[catnip_eca, reno]"])
    tcp = sweep.points[0][1].tcp
    assert [tcp.server_cc(i) for i in range(3)] == ["catnip_eca", "reno", "catnip_eca"]
    assert tcp.all_cc() == {"cubic", "catnip_eca", "reno"}
    with pytest.raises(scenario_mod.ScenarioError, match="server_congestion_control"):
        scenario_mod.load(REPO / "scenarios" / "quick.yaml", ["tcp.server_congestion_control=[Bad-Name]"])


def test_register_and_unregister_leave_nothing(no_leftovers):
    need_root()
    sender.register()
    try:
        available = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
        assert set(senders.NAMES) <= set(available)
    finally:
        assert sorted(sender.unregister()) == sorted(senders.NAMES)
        sender.release_shared_map()
    available = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    assert not set(senders.NAMES) & set(available)
    assert not [p for p in sender.PINS if p.exists()]  # documents, per-host parameters, newCWV's trace


@pytest.mark.slow
def test_fig2_behaviours(tmp_path, isolated_data, no_leftovers):
    """Reno sends the 14 segments in bursts of 1, 2, 4, 7; ECA keeps the fourth round below 7 (it
    left slow start); RBPLW spreads its last window over a good part of the RTT (Reno's leaves
    back to back)."""
    need_root()
    need_engine()
    from catnip.controller import fig2
    svg = tmp_path / "fig2.svg"
    found = fig2.run(svg, rtt_ms=100.0, log=lambda m: None)
    counts = {name: [n for n, _ in b] for name, b in found.items()}
    assert counts["catnip_reno"] == [1, 2, 4, 7]
    assert counts["catnip_eca"][:3] == [1, 2, 4] and counts["catnip_eca"][3] < 7 and sum(counts["catnip_eca"]) == 14
    reno_last, rbplw_last = found["catnip_reno"][-1][1], found["catnip_rbplw"][-1][1]
    assert reno_last < 0.010 and rbplw_last > 0.030, (reno_last, rbplw_last)
    # The plot, drawn by results/figures.py: one panel per sender, titled.
    import xml.etree.ElementTree as ET
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == ns + "svg"
    assert ["".join(t.itertext()) for t in root.iter(ns + "text") if t.get("class") == "annotation-text"] == \
        [title for _, title in fig2.SENDERS]
