"""Results split by the servers' congestion control (results/by_sender.py, CATNIP section V-E)."""

from __future__ import annotations

import pytest

from catnip.results import by_sender
from catnip.results.store import Store
from catnip.spec import scenario as s
from catnip.testbed.plan import plan
from tests.conftest import REPO


def _record(*overrides: str):
    return plan(s.load(REPO / "scenarios" / "quick.yaml", ["topology.clients=10", "topology.servers=10", *overrides]).points[0][1])


def test_server_cc_is_what_each_server_ran():
    """server_congestion_control cycles over the servers (spec.scenario.host_tcp): the record says
    which each got; a host the record lacks is '?'."""
    record = _record("tcp.congestion_control=cubic", "tcp.server_congestion_control=[catnip_eca, catnip_reno]")
    assert [by_sender.server_cc(record, f"ctpv{i}") for i in (1, 2, 3, 10)] == \
        ["catnip_eca", "catnip_reno", "catnip_eca", "catnip_reno"]
    assert by_sender.server_cc(record, "v2") == "catnip_reno"
    assert by_sender.server_cc(_record("tcp.congestion_control=cubic"), "ctpv7") == "cubic"
    assert by_sender.server_cc(record, "ctpv99") == "?"


def test_pages_and_retransmissions_per_group(tmp_path):
    with Store(tmp_path / "db") as store:
        store.create_run("r1", "fair", "x", {"name": "fair"}, {}, 1, "abc", {}, {})
        record = _record("tcp.congestion_control=catnip_reno",
                         "tcp.server_congestion_control=[catnip_eca, catnip_reno]")
        store.create_point("r1", 0, 0, {}, {}, 1, record=record.model_dump(mode="json"))
        pages = [{"client": "c1", "server": "ctpv1", "page": 1, "round": 0, "start": 0, "end": 1, "duration": d,
                  "objects": 1, "bytes": 1} for d in (1.0, 3.0)]
        pages += [{"client": "c2", "server": "ctpv2", "page": 1, "round": 0, "start": 0, "end": 1, "duration": 4.0,
                   "objects": 1, "bytes": 1, "error": None},
                  {"client": "c2", "server": "ctpv2", "page": 2, "round": 0, "start": 0, "end": 1, "duration": None,
                   "objects": 1, "bytes": 1, "error": "timeout"}]
        store.add_transfers("r1", 0, [], pages)
        store.add_tcp_counters("r1", 0, "ctpv1", {"TcpOutSegs": 1000, "TcpRetransSegs": 30})
        store.add_tcp_counters("r1", 0, "ctpv2", {"TcpOutSegs": 500, "TcpRetransSegs": 20})
        (point,) = by_sender.by_sender(store, "r1")
        with pytest.raises(KeyError):
            by_sender.by_sender(store, "nope")
    eca, reno = point["groups"]
    assert (eca["cc"], eca["pages"], eca["mean"], eca["retrans_fraction"]) == ("catnip_eca", 2, 2.0, 0.03)
    assert (reno["cc"], reno["pages"], reno["failed"], reno["mean"], reno["retrans_fraction"]) == \
        ("catnip_reno", 1, 1, 4.0, 0.04)
    assert "catnip_eca" in by_sender.render_text([point])
