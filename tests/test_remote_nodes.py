"""Mininet Cluster Edition's remote nodes and a VXLAN link between machines (testbed/remote.py),
on a second machine imitated by a namespace with its own sshd (testbed/machines.py)."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest

from catnip.testbed import machines, remote

pytestmark = pytest.mark.netns


@contextmanager
def _net():
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    setLogLevel("error")
    net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False, waitConnected=False)
    try:
        yield net
    finally:
        net.stop()


@contextmanager
def _two_hosts_with_a_helper():
    """Two linked hosts on an imitated machine, started in the cgroup of the point's helper there
    (testbed/machine_helper.py): yields (helper, h1, h2); the helper is closed at the end, and
    what it could not remove fails the test."""
    import dataclasses
    import shutil
    from pathlib import Path
    from catnip.testbed import machine_helper, paths, run_cgroup
    if not shutil.which("bpftool") or run_cgroup.hierarchy() is None:
        pytest.skip("needs bpftool and a cgroup-v2 hierarchy (scripts/setup.sh, the kernel)")
    with machines.imitated("m2") as m2:
        helper = machine_helper.MachineHelper(m2, "ctptest", paths.python(), str(paths.REPO))
        try:
            there = dataclasses.replace(m2, cgroup=helper.cgroup)
            with _net() as net:
                h1 = net.addHost("ctpq1", cls=remote.RemoteHost, machine=there, ip="10.79.0.1/24")
                h2 = net.addHost("ctpq2", cls=remote.RemoteHost, machine=there, ip="10.79.0.2/24")
                net.addLink(h1, h2, cls=remote.VxlanLink)
                net.build()
                net.start()
                yield helper, h1, h2
        finally:
            problems = helper.close()
        assert problems == [] and not Path(helper.cgroup).exists()


def _machines(here, there, m2):
    return {here.name: machines.THIS, there.name: m2}


def test_hosts_and_a_bridge_on_the_other_machine_reach_each_other(no_leftovers):
    with machines.imitated("m2") as m2, _net() as net:
        h1 = net.addHost("ctpq1", cls=remote.RemoteHost, machine=m2, ip="10.77.0.1/24")
        h2 = net.addHost("ctpq2", cls=remote.RemoteHost, machine=m2, ip="10.77.0.2/24")
        s1 = net.addSwitch("ctpqs1", cls=remote.RemoteLinuxBridge, machine=m2)
        net.addLink(h1, s1, cls=remote.VxlanLink)  # one machine: a veth pair
        net.addLink(h2, s1, cls=remote.VxlanLink)
        net.build()
        net.start()
        assert " 0% packet loss" in h1.cmd("ping -c 2 -i 0.2 -W 2 10.77.0.2")
        # The shells run through ssh, and the bridge sits in the other machine's namespace.
        assert h1.shell.args[0] == "ssh" and s1.shell.args[0] == "ssh"
        there = m2.run(["readlink", "/proc/self/ns/net"]).strip()
        assert s1.cmd("readlink /proc/self/ns/net").strip() == there != os.readlink("/proc/self/ns/net")
        assert "ctpqs1" in m2.run(["ls", "/sys/class/net"]).split()
        # A process there: arguments whole, its working folder there.
        out, _ = h2.popen(["sh", "-c", 'echo "$0"; pwd', "a 'b' c"], cwd="/tmp").communicate(timeout=30)
        assert out.decode().split("\n")[:2] == ["a 'b' c", "/tmp"]


def test_a_program_on_another_machine_gets_its_files_runs_on_our_clock_and_is_stopped(isolated_data, no_leftovers):
    """workloads/apps/elsewhere.py through Application.spawn: the config reaches the other machine
    (whose copy of the data folder is its own), the output comes back here, the instants the program
    reads are ours though its clock runs 5,000 s ahead, its READY line comes through, and a server
    there ends when the application stops it."""
    import time
    from catnip.testbed import paths
    from catnip.spec.apps import AppSpec
    from catnip.workloads.apps.base import AppContext, Application, Host, read_jsonl, wait_for_line
    with machines.imitated("m2", clock_shift=5000) as m2, _net() as net:
        node = net.addHost("ctpq1", cls=remote.RemoteHost, machine=m2)
        net.build()
        clock = m2.clock_offset(python=paths.python())
        assert abs(clock["offset"] - 5000) < clock["uncertainty"] + 0.001, clock
        ctx = AppContext(workdir=paths.data_dir() / "toy", seed=1, time_limit=60, python=paths.python(),
                         repo=paths.REPO, start_at=time.monotonic() + 1.5, clock_offsets={"m2": clock["offset"]})
        host = Host("ctpq1", "10.0.0.1", "g", 0, node=node)
        app = Application(AppSpec(kind="toy", clients="g"), ctx, [host], [])
        try:
            config = app.write_config("toy", {"start_at": ctx.start_at})
            assert m2.read_file(config) is None  # not there until it is sent
            out = ctx.workdir / "toy.jsonl"
            waits = ("import json, os, sys, time; start = json.load(open(sys.argv[1]))['start_at'];"
                     " time.sleep(max(0, start - time.monotonic()));"
                     " open(sys.argv[2], 'w').write(json.dumps({'t': time.monotonic(),"
                     " 'ns': os.readlink('/proc/self/ns/net')}) + '\\n')")
            client = app.spawn(host, "client", [ctx.python, "-c", waits, config, out], "toy", out=out)
            server = app.spawn(host, "server", [ctx.python, "-c", "import time; print('READY', flush=True);"
                                                " time.sleep(600)"], "srv", stdout_pipe=True)
            wait_for_line(server, "READY", time.monotonic() + 30)
            assert client.popen.wait(30) == 0, client.log.read_text()
            app.sync_files()
            (rec,) = read_jsonl(out)
            assert ctx.start_at <= rec["t"] < ctx.start_at + 1, (rec, ctx.start_at)  # ours, not 5000 s on
            assert rec["ns"] == node.cmd("readlink /proc/self/ns/net").strip()  # in the host's namespace
            pid = server.popen.pid  # there
            assert server.popen.poll() is None and m2.run(["kill", "-0", str(pid)]) == ""
        finally:
            app.stop()
        assert server.popen.poll() is not None
        with pytest.raises(machines.MachineError):  # gone there, not only its ssh client here
            m2.run(["kill", "-0", str(pid)])


def test_the_other_machines_helper_sets_the_initial_rto_there_and_its_cgroup_holds_the_nodes(no_leftovers):
    """testbed/machine_helper.py: the point's helper on the other machine makes a run cgroup there,
    every command for that machine starts in it (Machine.cgroup), and it sets `tcp.initial_rto` for
    a host there in that machine's kernel. Nothing is loaded here and only the host there is given
    6 s, so its SYN's 6 s is the far side's doing; the other host keeps Linux's 1 s. At the end of
    its input the helper removes its program and its cgroup."""
    import re
    import time
    from pathlib import Path
    from catnip.testbed import spm
    connect = ("import socket, time\ns = socket.socket(); s.setblocking(False)\n"
               "try: s.connect(('10.79.0.9', 80))\nexcept BlockingIOError: pass\ntime.sleep(30)\n")

    def syn_rto(node) -> int | None:
        m = re.search(r"\brto:(\d+)", node.cmd("ss -tni state syn-sent"))
        return int(m.group(1)) if m else None

    with _two_hosts_with_a_helper() as (helper, h1, h2):
        assert Path(f"/proc/{h1.pid}/cgroup").read_text().strip().endswith(Path(helper.cgroup).name)
        helper.ask({"initial_rto": h1.pid, "seconds": 6})
        procs = []
        try:
            for h in (h1, h2):  # a SYN to a MAC nobody has stays unanswered
                h.cmd(f"ip neigh add 10.79.0.9 lladdr 02:00:00:00:00:09 dev {h.defaultIntf()}")
                procs.append(h.popen(["python3", "-c", connect]))
            got: dict = {}
            deadline = time.monotonic() + 15
            while len(got) < 2 and time.monotonic() < deadline:
                got = {h.name: r for h in (h1, h2) if (r := syn_rto(h)) is not None}
            assert got == {"ctpq1": 6000, "ctpq2": 1000}, got
            assert helper.ask({"initial_rto_answers": True}) >= 1  # the SYN there took it (the point records it)
        finally:
            for p in procs:
                p.kill()
                p.wait(10)
    assert not (spm.PIN_ROOT / "rto-ctptest").exists()


def test_the_other_machines_helper_marks_its_hosts_by_tcp_state(no_leftovers):
    """TCP-state marking (testbed/tcpds.py) loaded by the helper in the other machine's kernel and
    attached to its hosts' interfaces there, nothing here: a transfer between two hosts there is
    counted by that marker (its SYNs, data and ACKs by level), and its pins go at the helper's end."""
    from catnip.testbed import spm
    with _two_hosts_with_a_helper() as (helper, h1, h2):
        helper.ask({"tcp_state": {"rules": [4, 8, False, []], "hosts": [["10.79.0.1", 2, 4]],
                                  "attach": [[h1.pid, "ctpq1-eth0"], [h2.pid, "ctpq2-eth0"]]}})
        serve = h2.popen(["python3", "-c", "import socket; s = socket.create_server(('10.79.0.2', 5001));"
                          " c, _ = s.accept(); n = 0\nwhile (d := c.recv(65536)): n += len(d)\nprint(n)"])
        out = h1.cmd("python3 -c \"import socket, time\nfor _ in range(50):\n    try:\n"
                     "        s = socket.create_connection(('10.79.0.2', 5001)); break\n"
                     "    except OSError: time.sleep(0.1)\ns.sendall(b'x' * 200000); s.close()\"")
        got, _ = serve.communicate(timeout=30)
        assert got.decode().strip() == "200000", (out, got)
        counts = helper.ask({"tcp_state_counters": True})
        # Linux's initial window of 10 is above the HIGH and MED thresholds: the data is LOW.
        data = counts["data_high"] + counts["data_med"] + counts["data_low"]
        acks = counts["ack_high"] + counts["ack_med"] + counts["ack_low"]
        assert counts["syn"] >= 2 and data > 0 and acks > 0, counts
    assert not (spm.PIN_ROOT / "tcpds-ctptest").exists()


def test_a_vxlan_link_carries_whole_frames_between_machines(no_leftovers):
    with machines.imitated("m2") as m2, _net() as net:
        here = net.addHost("ctpq1", ip="10.78.0.1/24")
        there = net.addHost("ctpq2", cls=remote.RemoteHost, machine=m2, ip="10.78.0.2/24")
        link = net.addLink(here, there, cls=remote.VxlanLink, vni=7, machines=_machines(here, there, m2))
        net.build()
        net.start()
        assert "vxlan id 7 " in here.cmd("ip -d link show ctpq1-eth0")
        assert "vxlan id 7 " in there.cmd("ip -d link show ctpq2-eth0")
        assert " 0% packet loss" in here.cmd("ping -c 2 -i 0.2 -W 2 -M do -s 1472 10.78.0.2")  # 1500 bytes
        assert "1 errors" in here.cmd("ping -c 1 -W 2 -M do -s 1473 10.78.0.2")  # 1501: refused here
        ends = link.tunnel_record["ends"]
        assert [(e["machine"], e["underlay_device"], e["underlay_mtu"]) for e in ends] == [
            ("local", "ctpum2", machines.UNDERLAY_MTU), ("m2", "ctpum2r", machines.UNDERLAY_MTU)]
        assert [e["underlay_speed_mbps"] for e in ends] == [10000, 10000]  # a veth's nominal speed


def test_an_underlay_too_small_for_the_frames_is_refused(no_leftovers):
    with machines.imitated("m2") as m2, _net() as net:
        here = net.addHost("ctpq1")
        there = net.addHost("ctpq2", cls=remote.RemoteHost, machine=m2)
        with pytest.raises(machines.MachineError, match=r"link ctpq1-ctpq2: machine local's underlay ctpum2 has MTU"
                                                        r" 1550, which carries 1500-byte frames through VXLAN, not"
                                                        r" the 9000 the nodes use"):
            net.addLink(here, there, cls=remote.VxlanLink, mtu=9000, machines=_machines(here, there, m2))


def test_a_tree_split_over_two_machines_routes_across_the_tunnel(no_leftovers):
    """The destinations' side of a small tree (routers da, dm1, de1 with their bridge and host) on
    the imitated machine; the bottleneck sa-da is the one link between machines: a VXLAN tunnel.
    Network only (addresses, routes, MTU, offloads); the engines are not started here."""
    from catnip.spec import scenario as s
    from catnip.testbed import network
    from catnip.testbed.paths import REPO
    sc = s.load(REPO / "scenarios" / "tree-small.yaml",
                ["topology.users_per_l1=1", "topology.l1_per_l2=1", "topology.l2_per_core=1"]).points[0][1]
    with machines.imitated("m2") as m2:
        split = {r: m2 for r in ("da", "dm1", "de1")}
        n = network.build(sc, "linuxbridge", split)
        try:
            assert n.machine_of == {"da": "m2", "dm1": "m2", "de1": "m2"}
            assert [(t["link"], t["vni"], [e["machine"] for e in t["ends"]]) for t in n.tunnels] == [
                ("ctpsa-ctpda", 5, ["local", "m2"])]  # the fifth router link of the graph
            src, dst = n.hosts_of("sources")[0], n.hosts_of("destinations")[0]
            assert src.node.shell.args[0] != "ssh" and dst.node.shell.args[0] == "ssh"
            out = src.node.cmd(f"ping -c 3 -i 0.2 -W 2 -M do -s 1472 {dst.ip}")
            assert " 0% packet loss" in out, out
            # The destination's replies leave the other machine through its own routers.
            assert "ctpde1-eth" in n.routers["de1"].cmd("ip -o link show")
        finally:
            network.stop(n)


def test_a_split_is_checked_before_anything_is_built():
    from catnip.spec import scenario as s
    from catnip.testbed import network
    from catnip.testbed.paths import REPO
    sc = s.load(REPO / "scenarios" / "tree-small.yaml").points[0][1]
    m2 = machines.Machine("m2", "198.18.0.2", None, underlay="198.18.0.2")
    with pytest.raises(ValueError, match=r"split: 'zz' is not a router of this topology \(routers: sa, "):
        network.build(sc, "linuxbridge", {"zz": m2})
    with pytest.raises(ValueError, match="split: the access switches of another machine are Linux bridges; ovs-user"):
        network.build(sc, "ovs-user", {"da": m2})
    with pytest.raises(ValueError, match="split: machine m3 has no underlay address"):
        network.build(sc, "linuxbridge", {"da": machines.Machine("m3", "198.18.0.2", None)})


def test_the_engines_of_a_split_tree_run_where_their_routers_are(no_leftovers, tmp_path):
    """The engines start on the machine of their router: the far side's through ssh, its config on
    its input and its stats back on its output. A ping crosses every emulated direction of the
    path (the 20 ms RTT class); each engine stops with its final stats line here."""
    from catnip.spec import scenario as s
    from catnip.testbed import network
    from catnip.testbed.links import EngineBackend
    from catnip.testbed.paths import REPO
    from tests.conftest import need_engine
    need_engine()
    sc = s.load(REPO / "scenarios" / "tree-small.yaml",
                ["topology.users_per_l1=1", "topology.l1_per_l2=1", "topology.l2_per_core=1"]).points[0][1]
    with machines.imitated("m2") as m2:
        n = network.build(sc, "linuxbridge", {r: m2 for r in ("da", "dm1", "de1")})
        engines = EngineBackend(tmp_path, sc.seed, sc.run.late_threshold, sc.run.engine_spin)
        try:
            engines.start(list(n.routers.values()), n.directions)
            by_router = {e.router.name: e for e in engines.engines}
            far = by_router["ctpda"]
            assert far.remote_pid and far.remote_pid != far.proc.pid  # its pid there, not the ssh client's
            assert f"{far.remote_pid} " in m2.run(["ps", "-o", "pid=,args=", "-p", str(far.remote_pid)])
            assert by_router["ctpsa"].remote_pid is None
            src, dst = n.hosts_of("sources")[0], n.hosts_of("destinations")[0]
            out = src.node.cmd(f"ping -c 5 -i 0.2 -W 2 {dst.ip}")
            rtts = [float(x.split("=")[1].split()[0]) for x in out.split() if x.startswith("time=")]
            # rtt20ms: 20 ms of emulated delay, plus serialization at 150 kbit/s on the user links
            # (measured: 32.7-33.0 ms; without the engines the path answers in well under 1 ms). The
            # upper bound only keeps a stalled engine from passing.
            assert len(rtts) == 5 and all(20 < r < 100 for r in rtts), out
            assert far.cpu_seconds() is not None and far.silent_for() < far.silence_limit()
        finally:
            engines.stop()
            network.stop(n)
    for e in engines.engines:
        last = e.latest_stats()
        assert last is not None and last["final"] is True, e.router.name
    assert sum(v["arrived"]["all"][0] if "all" in v["arrived"] else sum(c[0] for c in v["arrived"].values())
               for v in by_router["ctpda"].latest_stats()["links"].values()) >= 5  # the pings crossed it


# --- through the runner -------------------------------------------------------------------------

def _split_scenario():
    from catnip.testbed.paths import REPO
    return REPO / "scenarios" / "tree-split.yaml"


@pytest.mark.parametrize("override, message", [
    ("run.machines={m2: {routers: [zz], address: imitated}}",
     "run.machines.m2.routers: 'zz' is not a router of the topology"),
    ("run.machines={m2: {routers: [da], address: imitated}, m3: {routers: [da], address: imitated}}",
     "run.machines.m3.routers: da is on machine m2 already"),
    ("run.machines={m2: {routers: [sa, sm1, se1, da, dm1, de1], address: imitated}}",
     "run.machines: every router is on another machine"),
    ("run.machines.m2.address=-oProxyCommand=x", "give `imitated` or \\[user@\\]host"),
    ('run.machines.m2.address="host\\n"', "give `imitated` or \\[user@\\]host"),
    ("run.machines={local: {routers: [da], address: imitated}}", "'local': that label names this machine"),
    ("run.machines={m2: {routers: [da], address: imitated}, m3: {routers: [sa], address: imitated}}",
     "the link sa-da joins machines m3 and m2; a link between two other machines does not run yet"),
    ("run.placement=split", "run.machines: run.placement: split does not run with hosts on another machine yet"),
    ("marking.spm=true", "run.machines: marking.spm does not run with hosts on another machine yet"),
    ("tcp.congestion_control=catnip_reno", "the project's BPF senders does not run with hosts on another machine"),
    ("run.machines.m2.address=root@h2.example --set run.machines.m2.clock_shift=10",
     "clock_shift: only an imitated machine's clock can be shifted"),
])
def test_what_does_not_run_split_yet_is_refused_before_anything_starts(override, message):
    from catnip.spec import scenario as s
    with pytest.raises(s.ScenarioError, match=message):
        s.load(_split_scenario(), override.split(" --set "))


def test_split_points_do_not_run_side_by_side_or_on_a_cluster(isolated_data):
    from tests.conftest import catnip
    res = catnip("run", str(_split_scenario()), "--jobs", "2", "--set", "sweep.run.time_limit=[1min, 2min]")
    assert res.returncode != 0 and "runs routers on other machines (run.machines): run it with --jobs 1" in res.stderr
    res = catnip("run", str(_split_scenario()), "--cluster", "tcp://127.0.0.1:9")
    assert res.returncode != 0 and "--cluster: the scenario puts routers on other machines" in res.stderr, res.stderr


def test_a_split_tree_runs_a_web_workload_and_records_its_tunnel(isolated_data, no_leftovers):
    """The issue's case: the one-branch tree with its destinations' side on the imitated machine,
    through `catnip run`: every page recorded, the point in real time, the fidelity record naming
    the tunnel with its round trip before the engines and its underlay's counters."""
    import json
    import sqlite3
    from tests.conftest import catnip, need_engine
    need_engine()
    res = catnip("run", str(_split_scenario()), "--run-id", "split", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["status"] == "done"
    con = sqlite3.connect(isolated_data / "data" / "catnip.db")
    fidelity = json.loads(con.execute("SELECT fidelity FROM points WHERE run_id='split'").fetchone()[0])
    (tunnel,) = fidelity["tunnels"]
    assert tunnel["link"] == "ctpsa-ctpda" and tunnel["vni"] == 5
    assert [e["machine"] for e in tunnel["ends"]] == ["local", "m2"]
    rtt = tunnel["rtt_before_engines"]
    # No engine on the link yet: a veth and VXLAN answer in well under a millisecond (0.046 ms measured).
    assert rtt["received"] == rtt["pings"] == 20 and 0 < rtt["min_ms"] <= rtt["avg_ms"] < 50, rtt
    # The workload crossed the underlay: 2 rounds of pages 1 and 3 (CATNIP's) and their ACKs.
    crossed = tunnel["underlay_change"]["local"]
    assert crossed["rx_packets"] > 100 and crossed["tx_packets"] > 100, crossed
    assert fidelity["tunnel_drops"] == 0
    pages = con.execute("SELECT COUNT(*) FROM pages WHERE run_id='split' AND error IS NULL").fetchone()[0]
    assert pages == 4
    report = catnip("report", "split").stdout
    assert "Tunnel ctpsa-ctpda (VXLAN 5, local - m2): round trip before the engines" in report, report


def test_clients_and_servers_of_every_kind_run_on_the_other_machine_on_our_clock(isolated_data, no_leftovers):
    """Telnet clients, a burst server (with its statistics file) and Apache on the destinations'
    side, on an imitated machine whose clock runs 5,000 s ahead: every unit recorded, each sample's
    instant inside the point's workload on this machine's clock, the offset in the fidelity record."""
    import json
    import sqlite3
    from tests.conftest import catnip, need_engine
    need_engine()
    apps = ('applications=[{kind: web, clients: sources, servers: destinations, http_version: "1.0", parallel: 4,'
            ' pages: [1, 3], rounds: 2, think_time: {model: zero}},'
            ' {kind: telnet, clients: destinations, servers: sources, keystrokes: 20, mean: 50ms},'
            ' {kind: burst, clients: sources, servers: destinations, bursts: [8KB], idles: [0.2s], repeat: 2}]')
    res = catnip("run", str(_split_scenario()), "--run-id", "apps", "--json", "--set", apps,
                 "--set", "run.machines.m2.clock_shift=5000", "--set", "run.keep_awake=true", "--set", "run.capture=true")
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["status"] == "done"
    con = sqlite3.connect(isolated_data / "data" / "catnip.db")
    counts = dict(con.execute("SELECT metric, COUNT(*) FROM samples WHERE run_id='apps' AND error IS NULL"
                              " GROUP BY metric").fetchall())
    # burst_cwnd comes from the server's statistics file, written on the other machine.
    assert counts == {"page_time": 4, "echo_delay": 20, "burst_time": 2, "burst_cwnd": 2, "burst_retrans": 2}, counts
    first, last = con.execute("SELECT MIN(start), MAX(\"end\") FROM pages WHERE run_id='apps'").fetchone()
    t_min, t_max = con.execute("SELECT MIN(t), MAX(t) FROM samples WHERE run_id='apps' AND app != 'web'").fetchone()
    assert first - 5 < t_min and t_max < last + 5, (first, last, t_min, t_max)  # not 5,000 s on
    fidelity = json.loads(con.execute("SELECT fidelity FROM points WHERE run_id='apps'").fetchone()[0])
    clock = fidelity["clocks"]["m2"]
    assert abs(clock["offset_start_s"] - 5000) < 0.01 and abs(clock["drift_s"]) < 0.01, clock
    # The other machine's own CPU shares and receive backlog drops (an imitation's are this kernel's).
    other = fidelity["machines"]["m2"]
    assert other["cpus"] and len(other["cpu_busy_each"]) == len(other["cpus"]) and other["backlog_drops"] == 0
    # run.capture at the bottleneck's data direction, whose router (da) is on the other machine: the
    # capture came back into the local file, complete (tcpdump stopped there, its last packets written).
    import subprocess
    (pcap,) = con.execute("SELECT capture FROM points WHERE run_id='apps'").fetchone()
    read = subprocess.run(["tcpdump", "-nr", pcap], capture_output=True, text=True, timeout=60)
    assert read.returncode == 0 and len(read.stdout.splitlines()) > 50, read.stderr
    # run.keep_awake: a loop per CPU there too, read back (an imitation's CPUs are this machine's).
    assert fidelity["placement"]["keep_awake_cpus_by_machine"] == {"m2": other["cpus"]}, fidelity["placement"]
    import re
    report = catnip("report", "apps").stdout
    assert re.search(r"Clock of machine m2: \+(4999\.99|5000\.00)\d+ s from ours", report), report
    assert re.search(r"Machine m2: busy CPU 0 \d+%.*; receive backlog drops 0", report), report


def test_a_link_faster_than_its_tunnels_underlay_is_refused(no_leftovers):
    """The imitation's underlay is a veth of nominal 10,000 Mbit/s: a 20 Gbit/s bottleneck across it
    would be shaped by the underlay, not the engine."""
    from catnip.spec import scenario as s
    from catnip.testbed import network
    sc = s.load(_split_scenario(), ["topology.bottleneck.rate=20Gbit"]).points[0][1]
    with machines.imitated("m2") as m2:
        with pytest.raises(ValueError, match=r"links sa-da: its 20000 Mbit/s would cross machine local's underlay"
                                             r" ctpum2 of 10000 Mbit/s"):
            network.build(sc, "linuxbridge", {r: m2 for r in ("da", "dm1", "de1")})
