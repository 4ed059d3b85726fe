"""`tcp.initial_rto` (testbed/rto_init.py, bpf/rto_init.bpf.c): a connection opened in a namespace given
an initial RTO of 6 s (Nouredine and Tobagi 2002, section 3) shows rto:6000 while its SYN goes
unanswered, read from the kernel with `ss -ti`; a namespace without a value keeps Linux's 1 s.
The SYNs leave for a MAC address nobody has."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from catnip.testbed import netns, rto_init, run_cgroup, run_watchdog
from tests.conftest import need_root, wait_until

pytestmark = [pytest.mark.netns]

NS = ("ctpt-rto-a", "ctpt-rto-b")
CONNECT = ("import socket, time\n"
           "s = socket.socket(); s.setblocking(False)\n"
           "try: s.connect(('10.79.0.2', 80))\n"
           "except BlockingIOError: pass\n"
           "time.sleep(30)\n")


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout


def syn_sent_rto(ns: str) -> int | None:
    out = sh("ip", "netns", "exec", ns, "ss", "-tni", "state", "syn-sent")
    m = re.search(r"\brto:(\d+)", out)
    return int(m.group(1)) if m else None


def test_a_namespace_given_6_s_starts_its_connections_with_that_rto():
    need_root()
    if not shutil.which("bpftool"):
        pytest.skip("needs bpftool (scripts/setup.sh installs it)")
    if run_cgroup.hierarchy() is None:
        pytest.skip("needs a cgroup-v2 hierarchy (the program is attached to the run's cgroup)")
    procs, rto = [], None
    with run_watchdog.joined() as group:
        if group is None:
            pytest.skip("this machine refused a run cgroup")
        try:
            for ns in NS:
                sh("ip", "netns", "add", ns)
                # The SYNs go to a MAC nobody has, on a veth whose peer (no address) drops them.
                sh("ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
                sh("ip", "-n", ns, "addr", "add", "10.79.0.1/24", "dev", "v0")
                sh("ip", "-n", ns, "link", "set", "v0", "up")
                sh("ip", "-n", ns, "link", "set", "v1", "up")
                sh("ip", "-n", ns, "neigh", "add", "10.79.0.2", "lladdr", "02:00:00:00:00:02", "dev", "v0")
            holder = subprocess.Popen(["ip", "netns", "exec", NS[0], "sleep", "60"])
            procs.append(holder)
            wait_until(lambda: netns.cookie(holder.pid) != netns.cookie(os.getpid()), 5,
                       "the holder process in its namespace")
            rto = rto_init.InitialRto(name="test")
            rto.load()
            rto.set(holder.pid, 6.0)
            for ns in NS:
                procs.append(subprocess.Popen(["ip", "netns", "exec", ns, "python3", "-c", CONNECT]))
            got = {ns: wait_until(lambda ns=ns: syn_sent_rto(ns), 10, f"a SYN-SENT socket in {ns}") for ns in NS}
            assert got == {NS[0]: 6000, NS[1]: 1000}, got
            assert rto.answers() >= 1
        finally:
            for p in procs:
                p.kill()
                p.wait(5)
            problems = rto.unload() if rto else []
            for ns in NS:
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            assert not problems, problems
