"""What this machine can do, probed at run time (never assumed).

Qdiscs are probed by adding them to the loopback device of a throwaway network namespace, so the
machine's own interfaces are never touched. The result decides the backends: the link backend
(the userspace engine always; the kernel tc backend only where netem exists) and the access
switch (OVS kernel datapath, OVS userspace datapath, or the Linux bridge).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from catnip.testbed import paths

QDISCS = ("htb", "tbf", "pfifo", "bfifo", "clsact", "netem", "red", "gred", "prio", "fq", "fq_codel")
# sshd: an imitated second machine for split topologies (testbed/machines.py); not needed otherwise.
TOOLS = ("ip", "tc", "iptables", "ethtool", "tcpdump", "nstat", "ovs-vsctl", "apache2", "bpftool", "clang", "sshd")


def _run(args: list[str], timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


@dataclass
class Capabilities:
    root: bool = False
    kernel: str = ""
    netns: bool = False
    qdiscs: dict[str, bool] = field(default_factory=dict)
    nfqueue: bool = False
    tools: dict[str, bool] = field(default_factory=dict)
    ovs_running: bool = False
    ovs_kernel_datapath: bool = False
    ovs_userspace_datapath: bool = False
    linux_bridge: bool = False
    bpf_btf: bool = False
    cgroup2: bool = False
    mininet: bool = False
    engine_binary: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def link_backends(self) -> list[str]:
        backends = ["engine"] if self.nfqueue and self.engine_binary else []
        if self.qdiscs.get("netem") and self.qdiscs.get("htb"):
            backends.append("kernel")
        return backends

    @property
    def access_switches(self) -> list[str]:
        found = []
        if self.ovs_running and self.ovs_kernel_datapath:
            found.append("ovs-kernel")
        if self.ovs_running and self.ovs_userspace_datapath:
            found.append("ovs-user")
        if self.linux_bridge:
            found.append("linuxbridge")
        return found

    @property
    def can_run(self) -> bool:
        return not self.blocking_problems()

    def blocking_problems(self) -> list[str]:
        out = list(self.problems)
        if not self.root:
            out.append("not root: namespaces and iptables need root")
        if not self.netns:
            out.append("cannot create network namespaces")
        if not self.link_backends:
            out.append("no link backend: needs NFQUEUE and the built engine (make setup), or netem")
        if not self.qdiscs.get("htb"):
            out.append("no htb qdisc: host links cannot be rate limited")
        if not self.mininet:
            out.append("Mininet's Python API is not importable (apt-get install mininet)")
        if not self.access_switches:
            out.append("no access switch: neither Open vSwitch nor the Linux bridge works")
        missing = [t for t in ("ip", "tc", "iptables", "ethtool", "apache2") if not self.tools.get(t)]
        if missing:
            out.append("missing tools: " + ", ".join(missing))
        return out

    def choose_switch(self, wanted: str, datapath: str) -> str:
        """The access switch for a scenario's `access_switch`/`ovs_datapath`, or ValueError."""
        have = self.access_switches
        if wanted == "linuxbridge":
            options = ["linuxbridge"]
        elif wanted == "ovs":
            options = {"kernel": ["ovs-kernel"], "user": ["ovs-user"]}.get(datapath, ["ovs-kernel", "ovs-user"])
        else:
            # auto: OVS with the kernel datapath where the kernel has it; otherwise the Linux
            # bridge, because OVS's userspace datapath was measured too jittery for these link
            # rates (docs/fidelity.md: 10 hosts pinging at once saw up to 12 ms, 50 hosts lost
            # every packet; the bridge stayed under 0.15 ms). `access_switch: ovs` still picks it.
            options = {"kernel": ["ovs-kernel"], "user": ["ovs-user"]}.get(
                datapath, ["ovs-kernel", "linuxbridge", "ovs-user"])
        for option in options:
            if option in have:
                return option
        raise ValueError(f"access switch {wanted!r} with datapath {datapath!r} is not available here "
                         f"(this machine has: {', '.join(have) or 'none'}; see `catnip check`)")

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(link_backends=self.link_backends, access_switches=self.access_switches,
                    can_run=self.can_run)
        return data


def _probe_in_netns(caps: Capabilities) -> None:
    name = f"ctpprobe{uuid.uuid4().hex[:6]}"
    if _run(["ip", "netns", "add", name]).returncode != 0:
        return
    caps.netns = True
    try:
        ns = ["ip", "netns", "exec", name]
        _run(ns + ["ip", "link", "set", "lo", "up"])
        for qdisc in QDISCS:
            if qdisc == "clsact":
                args = ns + ["tc", "qdisc", "add", "dev", "lo", "clsact"]
            else:
                args = ns + ["tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", qdisc]
                if qdisc == "red":
                    args += ["limit", "100000", "avpkt", "1000", "bandwidth", "10Mbit", "min", "10000", "max", "30000", "burst", "20"]
                elif qdisc == "gred":
                    args += ["setup", "DPs", "3", "default", "1", "grio"]
                elif qdisc == "tbf":
                    args += ["rate", "1mbit", "burst", "10k", "latency", "50ms"]
            caps.qdiscs[qdisc] = _run(args).returncode == 0
            _run(ns + ["tc", "qdisc", "del", "dev", "lo", "clsact" if qdisc == "clsact" else "root"])
        rule = ["iptables", "-t", "filter", "-A", "FORWARD", "-j", "NFQUEUE", "--queue-num", "1"]
        caps.nfqueue = _run(ns + rule).returncode == 0
        if caps.linux_bridge:
            ok = _run(ns + ["ip", "link", "add", "ctpbr", "type", "bridge"]).returncode == 0
            caps.linux_bridge = ok
    finally:
        _run(["ip", "netns", "del", name])


def probe_qdiscs() -> dict[str, bool]:
    """Which qdiscs this kernel has (probed in a throwaway namespace)."""
    caps = Capabilities(linux_bridge=False)
    _probe_in_netns(caps)
    return caps.qdiscs


def _probe_ovs(caps: Capabilities) -> None:
    if not caps.tools.get("ovs-vsctl"):
        return
    caps.ovs_running = _run(["ovs-vsctl", "--timeout=3", "show"]).returncode == 0
    if not caps.ovs_running:
        return
    types = _run(["ovs-vsctl", "--timeout=3", "get", "Open_vSwitch", ".", "datapath_types"]).stdout
    caps.ovs_userspace_datapath = "netdev" in types
    # The kernel datapath exists only if the openvswitch genetlink family does.
    dp = _run(["ovs-dpctl", "show"])
    caps.ovs_kernel_datapath = dp.returncode == 0 and "does not exist" not in dp.stderr


def probe() -> Capabilities:
    caps = Capabilities()
    caps.root = os.geteuid() == 0
    caps.kernel = os.uname().release
    caps.tools = {t: shutil.which(t) is not None or Path("/usr/sbin", t).exists() for t in TOOLS}
    caps.linux_bridge = caps.tools["ip"]
    if caps.root:
        _probe_in_netns(caps)
    else:
        caps.linux_bridge = False
    if caps.root:
        _probe_ovs(caps)
    caps.bpf_btf = Path("/sys/kernel/btf/vmlinux").exists()
    from catnip.testbed.kernel_fs import cgroup2_root
    caps.cgroup2 = cgroup2_root() is not None
    try:
        import mininet.net  # noqa: F401  (Debian's package, seen through the venv)
        caps.mininet = True
    except ImportError:
        caps.mininet = False
    engine = paths.engine_binary()
    caps.engine_binary = str(engine) if engine.exists() else None
    return caps
