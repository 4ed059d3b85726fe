"""Per-host-group TCP settings (`tcp.groups`): the checks made when a scenario loads or before a
run starts, how each host's settings resolve, that they reach the hosts' namespaces, and the
newCWV trace recorded as samples."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from catnip.controller import point_senders
from catnip.controller import runner
from catnip.spec import scenario as s
from catnip.spec import senders
from catnip.testbed.capabilities import Capabilities
from catnip.testbed.hostconfig import HostConfigError

BASE = {
    "name": "tcpgroups", "description": "tcp.groups tests", "paper": "newCWV section 4",
    "topology": {"kind": "two_pair_dumbbell", "pairs": 1, "cross_pairs": 1,
                 "access_link": {"rate": "100Mbit", "delay": "1ms", "buffer": "100p"},
                 "bottleneck": {"rate": "10Mbit", "delay": "5ms", "buffer": "50p"}},
    "tcp": {"congestion_control": "reno"},
    "applications": [{"kind": "burst", "clients": "clients", "servers": "servers", "bursts": ["5KB"],
                      "idles": ["0.2s"], "repeat": 2}],
    "run": {"time_limit": "1min"},
}


@pytest.fixture(autouse=True)
def kernel_list(tmp_path, monkeypatch):
    """The kernel's congestion controls as this test says (this machine's list varies)."""
    f = tmp_path / "tcp_available_congestion_control"
    f.write_text("reno cubic bbr\n")
    monkeypatch.setattr(s, "AVAILABLE_CC", f)
    return f


def load(tmp_path: Path, *overrides: str, raw: dict | None = None) -> s.Sweep:
    f = tmp_path / "sc.yaml"
    f.write_text(yaml.safe_dump(raw or BASE))
    return s.load(f, list(overrides))


def one(tmp_path: Path, *overrides: str, raw: dict | None = None) -> s.Scenario:
    return load(tmp_path, *overrides, raw=raw).points[0][1]


def error(tmp_path: Path, *overrides: str, raw: dict | None = None) -> str:
    with pytest.raises(s.ScenarioError) as err:
        load(tmp_path, *overrides, raw=raw)
    text = str(err.value)
    assert "\n" not in text, text
    return text


# --- checks when the scenario loads ------------------------------------------------------------
def test_unknown_group_lists_the_groups(tmp_path):
    assert error(tmp_path, "tcp.groups.server={congestion_control: reno}") == (
        "tcp.groups.server: no host group 'server' in the topology (its groups: clients, servers, cross_clients,"
        " cross_servers)")


@pytest.mark.parametrize("override, field", [
    ("tcp.congestion_control=vegas", "tcp.congestion_control"),
    ("tcp.server_congestion_control=[reno, vegas]", "tcp.server_congestion_control.1"),
    ("tcp.groups.servers.congestion_control=vegas", "tcp.groups.servers.congestion_control"),
])
def test_unknown_congestion_control(tmp_path, override, field):
    assert error(tmp_path, override) == (
        f"{field}: 'vegas' is not a congestion control of this machine (the kernel has bbr, cubic, reno; the"
        f" project adds {', '.join(senders.NAMES)})")


def test_known_congestion_controls_are_the_kernels_and_the_projects(tmp_path, kernel_list):
    kernel_list.write_text("reno cubic vegas catnip_reno\n")  # a registered sender is listed by the kernel too
    assert one(tmp_path, "tcp.groups.servers.congestion_control=vegas").tcp.all_cc() == {"reno", "vegas"}
    assert one(tmp_path, f"tcp.congestion_control={senders.NEWCWV}").tcp.congestion_control == senders.NEWCWV
    assert "the kernel has cubic, reno, vegas; the project adds" in error(tmp_path, "tcp.congestion_control=bbr")


def test_unreadable_kernel_list_accepts_any_well_formed_name(tmp_path, monkeypatch):
    monkeypatch.setattr(s, "AVAILABLE_CC", tmp_path / "missing")
    assert one(tmp_path, "tcp.groups.servers.congestion_control=vegas").host_tcp()["v1"].congestion_control == "vegas"
    assert "tcp.groups.servers.congestion_control: 'Vegas!'" in error(
        tmp_path, "tcp.groups.servers.congestion_control=Vegas!")


def test_internal_pacing_needs_a_sender_that_can_switch_it_on(tmp_path):
    assert error(tmp_path, "tcp.groups.servers={congestion_control: cubic, pacing: internal}") == (
        "tcp.groups.servers.pacing: 'internal' is switched on by the sender, and only catnip_reno and catnip_newcwv"
        " can (this group's is cubic); or pace with fq where the kernel has it")
    # The group's hosts inherit tcp.congestion_control: that is what is checked.
    assert "(this group's is reno)" in error(tmp_path, "tcp.groups.servers.pacing=internal")
    sc = one(tmp_path, f"tcp.groups.servers={{congestion_control: {senders.NEWCWV}, pacing: internal}}")
    assert sc.host_tcp()["v1"].sender_params["pace"] is True


def test_newcwv_settings_need_newcwv(tmp_path):
    assert error(tmp_path, "tcp.groups.servers.newcwv={nvp: 2s}") == (
        "tcp.groups.servers.newcwv: settings of catnip_newcwv, but this group's congestion control is reno")
    sc = one(tmp_path, f"tcp.congestion_control={senders.NEWCWV}", "tcp.groups.servers.newcwv={nvp: 2s}")
    assert sc.host_tcp()["v1"].newcwv.nvp == 2.0


def test_newcwv_without_the_filter_has_no_bins(tmp_path):
    sc = one(tmp_path, f"tcp.congestion_control={senders.NEWCWV}", "tcp.groups.servers.newcwv={filter: none}")
    assert sc.host_tcp()["v1"].sender_params == {"pace": False, "nvp_s": 300.0, "bins": 1, "trace": False,
                                                 "filter": "none"}
    assert "bins: the max filter's bins mean nothing with filter: none" in error(
        tmp_path, f"tcp.congestion_control={senders.NEWCWV}", "tcp.groups.servers.newcwv={filter: none, bins: 4}")
    assert "tcp.groups.servers.newcwv.filter" in error(
        tmp_path, f"tcp.congestion_control={senders.NEWCWV}", "tcp.groups.servers.newcwv={filter: min}")


@pytest.mark.parametrize("app, field", [
    ({"bursts": ["5KB", "40KB"], "idles": ["0s", "1s"]}, "idles"),
    ({"cells": [["5KB", "1s"], ["40KB", 0]]}, "cells"),
])
def test_newcwv_asked_to_idle_zero(tmp_path, app, field):
    raw = copy.deepcopy(BASE)
    burst = {k: v for k, v in raw["applications"][0].items() if k not in ("bursts", "idles")}
    raw["applications"] = [{**burst, **app}]
    assert one(tmp_path, raw=raw)  # idle 0 is fine for the baseline
    assert error(tmp_path, f"tcp.groups.servers.congestion_control={senders.NEWCWV}", raw=raw) == (
        f"applications.0.{field}: an idle period of 0 s, but the servers' sender is catnip_newcwv (newcwv asked to"
        " idle): its gain is what it keeps over an idle period; give idle periods above 0")


def test_burst_larger_than_the_server_sends_is_one_line(tmp_path):
    from catnip.workloads import burst as burst_prog
    from catnip.workloads.apps import burst as burst_app
    assert burst_app.MAX_BURST == burst_prog.MAX_SIZE  # the schema refuses what the server would refuse
    assert error(tmp_path, "applications=[{kind: burst, clients: clients, servers: servers, bursts: [1025MB],"
                           " idles: [1s]}]") == "applications.0: bursts: 1074790400 bytes is above the 1 GB limit"
    assert error(tmp_path, "applications=[{kind: burst, clients: clients, servers: servers, cells: [[1025MB, 1s]]}]"
                 ) == "applications.0: cells: 1074790400 bytes is above the 1 GB limit"


def test_web_servers_take_their_congestion_control_from_one_place(tmp_path):
    raw = {**copy.deepcopy(BASE), "applications": [{"kind": "web", "clients": "clients", "servers": "servers",
                                                    "pages": [1, 1]}]}
    assert error(tmp_path, "tcp.server_congestion_control=[cubic]", "tcp.groups.servers.congestion_control=bbr",
                 raw=raw) == (
        "tcp.groups.servers.congestion_control: the group serves the web application, whose servers' congestion"
        " controls tcp.server_congestion_control sets; give one of the two")
    sc = one(tmp_path, "tcp.server_congestion_control=[cubic]", "tcp.groups.servers.initial_cwnd=4", raw=raw)
    assert (sc.host_tcp()["v1"].congestion_control, sc.host_tcp()["v1"].initial_cwnd) == ("cubic", 4)


def test_value_ranges(tmp_path):
    assert "tcp.groups.servers.pacing: 'paced' not allowed: 'off', 'internal' or 'fq'" in error(
        tmp_path, "tcp.groups.servers.pacing=paced")
    assert "tcp.groups.servers.pacing_ratio: 1001: Input should be less than or equal to 1000" in error(
        tmp_path, "tcp.groups.servers.pacing_ratio=1001")
    assert "tcp.groups.servers.newcwv.bins: 0: Input should be greater than or equal to 1" in error(
        tmp_path, f"tcp.groups.servers={{congestion_control: {senders.NEWCWV}, newcwv: {{bins: 0}}}}")
    assert "tcp.groups.servers.newcwv.nvp: 'soon' is not a duration" in error(
        tmp_path, f"tcp.groups.servers={{congestion_control: {senders.NEWCWV}, newcwv: {{nvp: soon}}}}")
    assert "tcp.groups.servers.initial_cwnd: 0: Input should be greater than or equal to 1" in error(
        tmp_path, "tcp.groups.servers.initial_cwnd=0")
    assert "tcp.groups.servers.nvp: unknown field" in error(tmp_path, "tcp.groups.servers.nvp=2s")


# --- how each host's settings resolve ------------------------------------------------------------
def test_each_host_gets_its_groups_settings_over_the_defaults(tmp_path):
    sc = one(tmp_path, "tcp.initial_cwnd=3", f"tcp.groups.servers={{congestion_control: {senders.NEWCWV},"
             " pacing: internal, pacing_ratio: '150%', newcwv: {nvp: 500ms, bins: 5, trace: true}}",
             "tcp.groups.cross_servers={congestion_control: bbr, slow_start_after_idle: false, initial_cwnd: 10}")
    hosts = sc.host_tcp()
    v1, w1, c1 = hosts["v1"], hosts["w1"], hosts["c1"]
    assert v1.sysctls() == {"net.ipv4.tcp_congestion_control": senders.NEWCWV, "net.ipv4.tcp_slow_start_after_idle": 0,
                            "net.ipv4.tcp_pacing_ss_ratio": 150, "net.ipv4.tcp_pacing_ca_ratio": 150}
    assert v1.initial_cwnd == 3 and v1.sender_params == {"pace": True, "nvp_s": 0.5, "bins": 5, "trace": True,
                                                             "filter": "max"}
    assert w1.sysctls() == {"net.ipv4.tcp_congestion_control": "bbr", "net.ipv4.tcp_slow_start_after_idle": 0}
    assert w1.initial_cwnd == 10 and w1.sender_params is None
    assert c1.sysctls() == {"net.ipv4.tcp_congestion_control": "reno", "net.ipv4.tcp_slow_start_after_idle": 1}
    assert sc.tcp.all_cc() == {"reno", senders.NEWCWV, "bbr"}  # what the run registers and allows
    # newCWV keeps cwnd over idle by itself, unless told otherwise; the baseline restarts (RFC 2861).
    sc = one(tmp_path, f"tcp.groups.servers={{congestion_control: {senders.NEWCWV}, slow_start_after_idle: true}}")
    assert sc.host_tcp()["v1"].slow_start_after_idle is True


def test_last_window_senders_keep_their_pacing_ratio(tmp_path):
    raw = {**copy.deepcopy(BASE), "applications": [{"kind": "web", "clients": "clients", "servers": "servers",
                                                    "pages": [1, 1]}]}
    sc = one(tmp_path, "tcp.server_congestion_control=[catnip_rbplw]", raw=raw)
    assert sc.host_tcp()["v1"].pacing_ratio == 100 and sc.host_tcp()["w1"].pacing_ratio is None


def test_sweep_and_set_a_groups_field(tmp_path):
    sweep = load(tmp_path, f"sweep.tcp.groups.servers.congestion_control=[reno, {senders.NEWCWV}]")
    assert [a for a, _ in sweep.points] == [{"tcp.groups.servers.congestion_control": "reno"},
                                            {"tcp.groups.servers.congestion_control": senders.NEWCWV}]
    assert [sc.host_tcp()["v1"].slow_start_after_idle for _, sc in sweep.points] == [True, False]
    assert [sc.tcp.all_cc() for _, sc in sweep.points] == [{"reno"}, {"reno", senders.NEWCWV}]
    raw = {**copy.deepcopy(BASE), "sweep": {"tcp.groups.servers": [
        {"congestion_control": "reno"}, {"congestion_control": senders.NEWCWV, "pacing": "internal"}]}}
    sweep = load(tmp_path, raw=raw)
    assert [sc.host_tcp()["v1"].pacing_ratio for _, sc in sweep.points] == [None, 200]
    # A --set under the swept group would be replaced in every point: refused, not silently lost.
    assert "the sweep replaces tcp.groups.servers in every point" in error(
        tmp_path, "tcp.groups.servers.pacing_ratio=120", raw=raw)
    # YAML reads a bare `off` as false: it still means off.
    assert "[sweep tcp.groups.servers.pacing=internal] tcp.groups.servers.pacing: 'internal'" in error(
        tmp_path, "sweep.tcp.groups.servers.pacing=[off, internal]")
    assert one(tmp_path, "tcp.groups.servers.pacing=off").host_tcp()["v1"].pacing == "off"


# --- checks before a run starts ----------------------------------------------------------------------
def test_fq_pacing_needs_the_fq_qdisc(tmp_path):
    sweep = load(tmp_path, "tcp.groups.cross_servers.pacing=fq")
    assert sweep.points[0][1].host_qdiscs() == {"tcp.groups.cross_servers.pacing": "fq"}
    without, with_fq = Capabilities(qdiscs={"fq": False}), Capabilities(qdiscs={"fq": True})
    assert runner.machine_problems([sc for _, sc in sweep.points], with_fq) == []
    expected = ("tcp.groups.cross_servers.pacing: 'fq' needs the fq qdisc, which this kernel lacks (`catnip check`);"
                " pace with 'internal' (catnip_reno or catnip_newcwv) instead")
    assert runner.machine_problems([sc for _, sc in sweep.points], without) == [expected]
    without.blocking_problems = lambda: []
    with pytest.raises(HostConfigError) as err:  # before the run is created: the store is never touched
        runner.run(sweep, without, store=None)
    assert str(err.value) == expected


# --- fq under the host's shaper -------------------------------------------------------------------
class FakeNode:
    name = "ctpv1"

    def __init__(self, qdiscs: str):
        self.qdiscs, self.commands = qdiscs, []

    def cmd(self, text: str) -> str:
        self.commands.append(text.removesuffix("; echo __rc=$?"))
        return (self.qdiscs if text.startswith("tc qdisc show") else "") + "__rc=0"


def test_fq_goes_under_the_access_shaper():
    from catnip.testbed import hostconfig
    shaped = FakeNode("qdisc htb 1: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000\n"
                      " linklayer ethernet overhead -14\nqdisc pfifo 8001: parent 1:1 limit 1000p\n")
    assert hostconfig.pace_with_fq(shaped, "ctpv1-eth0") == "1:1"
    assert shaped.commands[-1] == "tc qdisc replace dev ctpv1-eth0 parent 1:1 handle 10: fq"
    bare = FakeNode("qdisc noqueue 0: root refcnt 2\n")
    assert hostconfig.pace_with_fq(bare, "ctpv1-eth0") == "root"
    assert bare.commands[-1] == "tc qdisc replace dev ctpv1-eth0 root fq"


# --- the trace as samples ------------------------------------------------------------------------
def test_trace_entries_become_sender_samples():
    entries = [
        {"t": 100.5, "netns": 4097, "ip": "10.2.0.2", "sport": 8070, "dport": 40000, "event": "ack", "cwnd": 10,
         "ssthresh": 0x7FFFFFFF, "pipeack": None, "sample": 14600, "validated": True, "inflight": 3},
        {"t": 101.0, "netns": 4097, "ip": "10.2.0.2", "sport": 8070, "dport": 40000, "event": "closedown", "cwnd": 5,
         "ssthresh": 8, "pipeack": 7300, "sample": None, "validated": False, "inflight": 0},
    ]
    rows = point_senders.trace_samples(entries, {4097: "ctpv1", 4098: "ctpv2"})
    got = [(r["metric"], r["t"], r["value"], r["unit"], r["tag"]) for r in rows]
    assert got == [("cwnd", 100.5, 10, "segments", "ack"), ("pipeack_sample", 100.5, 14600, "bytes", "ack"),
                   ("cwnd", 101.0, 5, "segments", "closedown"), ("pipeack", 101.0, 7300, "bytes", "closedown"),
                   ("ssthresh", 101.0, 8, "segments", "closedown")]
    assert {(r["app"], r["host"], r["flow"], r["peer"]) for r in rows} == {("sender", "ctpv1", "10.2.0.2:8070-40000",
                                                                           None)}


# --- the settings reach the hosts' namespaces ------------------------------------------------------
@pytest.mark.netns
def test_settings_reach_the_namespaces(tmp_path, kernel_list, no_leftovers):
    from catnip.controller.skeleton import kernel_resources
    from catnip.testbed import capabilities, hostconfig, network
    from tests.conftest import need_root
    need_root()
    kernel_list.write_text(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text())  # the real one
    caps = capabilities.probe()
    if caps.blocking_problems():
        pytest.skip("machine cannot run scenarios: " + "; ".join(caps.blocking_problems()))
    sc = one(tmp_path, "tcp.initial_cwnd=5", "tcp.receive_buffer=64KB",
             "tcp.groups.servers={congestion_control: catnip_reno, pacing: internal, pacing_ratio: 150,"
             " initial_cwnd: 3}",
             "tcp.groups.cross_servers={congestion_control: cubic, slow_start_after_idle: false, initial_cwnd: 7}")
    with kernel_resources(sc.tcp.all_cc()):
        net = network.build(sc, caps.choose_switch("auto", "auto"))
        try:
            got = {short: hostconfig.read_host_tcp(h.node, f"{h.name}-eth0") for short, h in net.hosts.items()}
        finally:
            network.stop(net)
    want = {"v1": ("catnip_reno", "1", "150", "150", 3), "w1": ("cubic", "0", "200", "120", 7),
            "c1": ("reno", "1", "200", "120", 5), "x1": ("reno", "1", "200", "120", 5)}
    for short, (cc, ssai, ss_ratio, ca_ratio, iw) in want.items():
        g = got[short]
        assert (g["net.ipv4.tcp_congestion_control"], g["net.ipv4.tcp_slow_start_after_idle"],
                g["net.ipv4.tcp_pacing_ss_ratio"], g["net.ipv4.tcp_pacing_ca_ratio"]) == (
            cc, ssai, ss_ratio, ca_ratio), short
        assert f" initcwnd {iw}" in g["default_route"], (short, g["default_route"])
        assert g["net.ipv4.tcp_rmem"].split() == ["4096", "65536", "65536"], g["net.ipv4.tcp_rmem"]
        assert g["qdiscs"].startswith("qdisc htb 1: root"), g["qdiscs"]  # the access shaper is still there


@pytest.mark.netns
def test_a_run_records_the_newcwv_trace_and_each_hosts_sender(tmp_path, kernel_list, isolated_data, no_leftovers):
    """A few bursts from one traced newCWV server: its events are samples of application 'sender' on
    the clock of the bursts' samples, and the point's environment says which host had which sender."""
    import json
    import re
    import sqlite3

    from tests.conftest import catnip, need_engine, need_root
    need_root()
    need_engine()
    raw = copy.deepcopy(BASE)
    raw["topology"].update(cross_pairs=0)
    raw["tcp"] = {"congestion_control": "reno", "initial_cwnd": 3,
                  "groups": {"servers": {"congestion_control": senders.NEWCWV, "newcwv": {"trace": True}}}}
    raw["applications"] = [{"kind": "burst", "clients": "clients", "servers": "servers", "bursts": ["40KB"],
                            "idles": ["0.3s"], "repeat": 3, "order": "fixed"}]
    f = tmp_path / "trace.yaml"
    f.write_text(yaml.safe_dump(raw))
    res = catnip("run", str(f), "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["status"] == "done"
    db = sqlite3.connect(isolated_data / "data" / "catnip.db")
    rows = db.execute("SELECT metric, host, flow, tag, t, value, unit FROM samples WHERE app='sender'").fetchall()
    bursts = db.execute("SELECT t, t + value FROM samples WHERE metric='burst_time' AND error IS NULL").fetchall()
    assert len(bursts) == 3
    metrics = {r[0] for r in rows}
    assert {"cwnd", "pipeack_sample"} <= metrics <= {"cwnd", "pipeack", "pipeack_sample", "ssthresh"}
    assert {r[1] for r in rows} == {"ctpv1"}
    assert all(re.fullmatch(r"10\.2\.0\.2:8070-\d+", r[2]) and r[3] for r in rows), rows[:3]
    assert {r[6] for r in rows if r[0] == "cwnd"} == {"segments"}
    # One clock: the server's events lie within the bursts' span (the connection opens just before).
    first, last = min(b[0] for b in bursts), max(b[1] for b in bursts)
    assert all(first - 5 <= r[4] <= last + 1 for r in rows), (first, last, min(r[4] for r in rows))
    assert min(r[5] for r in rows if r[0] == "cwnd") >= 1
    env = json.loads(db.execute("SELECT environment FROM points").fetchone()[0])["tcp_hosts"]
    assert env["ctpv1"]["congestion_control"] == senders.NEWCWV and env["ctpc1"]["congestion_control"] == "reno"
    assert env["ctpv1"]["sender_params"] == {"pace": False, "nvp_s": 300.0, "bins": 4, "trace": True,
                                               "filter": "max"}
    assert env["ctpv1"]["applied"]["net.ipv4.tcp_slow_start_after_idle"] == "0"
    assert env["ctpv1"]["applied"]["net.ipv4.tcp_congestion_control"] == senders.NEWCWV
    assert "applied" not in env["ctpc1"]  # no group settings: its group's sysctls are recorded as before
