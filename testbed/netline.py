"""A line of three network namespaces, sender -> router -> receiver, for benchmarks and tests that
exercise one emulated link without Mininet. Names carry the project prefix, so `catnip clean`
removes a line a killed process left."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass


def sh(*argv: str, check: bool = True) -> str:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and res.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed: {res.stderr.strip()}")
    return res.stdout


@dataclass(frozen=True)
class NsNode:
    """A namespace of the line, used the way testbed helpers use Mininet nodes (name, cmd, popen).
    nsenter --net, not `ip netns exec`: the latter remounts /sys, hiding bpffs and cgroup2."""

    name: str

    @property
    def prefix(self) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.name}"]

    def cmd(self, text: str) -> str:
        res = subprocess.run([*self.prefix, "sh", "-c", text], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=60)
        return res.stdout

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen([*self.prefix, *argv], **kwargs)


@dataclass
class NetLine:
    prefix: str  # e.g. "ctpb": namespaces ctpb-s, ctpb-r, ctpb-c
    net: int = 66  # 10.<net>.1.0/24 sender side, 10.<net>.2.0/24 receiver side

    @property
    def names(self) -> tuple[str, str, str]:
        return f"{self.prefix}-s", f"{self.prefix}-r", f"{self.prefix}-c"

    @property
    def sender_ip(self) -> str:
        return f"10.{self.net}.1.2"

    @property
    def receiver_ip(self) -> str:
        return f"10.{self.net}.2.2"

    @property
    def router_out(self) -> str:
        """The router's interface toward the receiver: where the emulated link's queue sits."""
        return f"{self.prefix}-r1"

    def node(self, which: str) -> NsNode:
        """`s`ender, `r`outer or `c` receiver."""
        return NsNode(dict(zip("src", self.names))[which])

    def ns(self, which: str) -> list[str]:
        return ["ip", "netns", "exec", dict(zip("src", self.names))[which]]

    def build(self) -> "NetLine":
        self.teardown()
        s, r, c = self.names
        p, n = self.prefix, self.net
        for name in self.names:
            sh("ip", "netns", "add", name)
            sh("ip", "-n", name, "link", "set", "lo", "up")
        sh("ip", "link", "add", f"{p}-s0", "netns", s, "type", "veth", "peer", "name", f"{p}-r0", "netns", r)
        sh("ip", "link", "add", f"{p}-r1", "netns", r, "type", "veth", "peer", "name", f"{p}-c0", "netns", c)
        for name, dev, addr in ((s, f"{p}-s0", f"10.{n}.1.2"), (r, f"{p}-r0", f"10.{n}.1.1"),
                                (r, f"{p}-r1", f"10.{n}.2.1"), (c, f"{p}-c0", f"10.{n}.2.2")):
            sh("ip", "-n", name, "addr", "add", f"{addr}/24", "dev", dev)
            sh("ip", "-n", name, "link", "set", dev, "up")
            sh("ip", "netns", "exec", name, "ethtool", "-K", dev, "gro", "off", "gso", "off", "tso", "off",
               check=False)
        sh("ip", "-n", s, "route", "add", "default", "via", f"10.{n}.1.1")
        sh("ip", "-n", c, "route", "add", "default", "via", f"10.{n}.2.1")
        sh("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        return self

    def teardown(self) -> None:
        for name in self.names:
            for pid in sh("ip", "netns", "pids", name, check=False).split():
                subprocess.run(["kill", "-9", pid], capture_output=True)
            subprocess.run(["ip", "netns", "del", name], capture_output=True)

    def __enter__(self) -> "NetLine":
        return self.build()

    def __exit__(self, *exc) -> None:
        self.teardown()
