"""What a run records about the environment it ran in: code revision, versions, and per point the
TCP sysctls in force on each kind of node, interface offloads, and the qdiscs and engine
configuration of every router before and after the workload (enough to explain a result).
"""

from __future__ import annotations

import os
import time
import subprocess
from typing import Any

from catnip.testbed import hostconfig, paths


def _cmd_output(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def git_revision() -> str:
    rev = _cmd_output(["git", "-C", str(paths.REPO), "rev-parse", "HEAD"])
    if rev and _cmd_output(["git", "-C", str(paths.REPO), "status", "--porcelain", "--untracked-files=no"]):
        rev += "-dirty"
    return rev or "unknown"


def _first_line(args: list[str]) -> str:
    out = _cmd_output(args)
    return out.splitlines()[0] if out else "unknown"


def versions() -> dict[str, str]:
    import mininet.net
    return {
        "kernel": os.uname().release,
        "mininet": mininet.net.VERSION,
        "ovs": _first_line(["ovs-vsctl", "--version"]),
        "apache": _first_line(["/usr/sbin/apache2", "-v"]),
        "iperf3": _first_line(["iperf3", "--version"]),
        "engine": _first_line([str(paths.engine_binary()), "--version"]),
        # The version line names the crate, not the build: the binary's hash pins what ran.
        "engine_sha256": _sha256(paths.engine_binary()),
        "python": _first_line([paths.python(), "--version"]),
    }


def _sha256(path) -> str:
    import hashlib
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


def qdiscs(node, interfaces: list[str]) -> dict[str, str]:
    """`tc -s qdisc show` per interface of a node (with counters)."""
    return {intf: node.cmd(f"tc -s qdisc show dev {intf}").strip() for intf in interfaces}


def point_environment(network, engines: list, when: str) -> dict[str, Any]:
    """The environment of a built network: one host per group and every router (sysctls, offloads,
    qdiscs) and each engine's configuration. `when` is 'before' or 'after' the workload."""
    env: dict[str, Any] = {"when": when, "hosts": {}, "routers": {}}
    seen_groups = set()
    for host in network.hosts.values():
        if host.group in seen_groups:
            continue
        seen_groups.add(host.group)
        intf = f"{host.name}-eth0"
        env["hosts"][host.group] = {"host": host.name, "qdiscs": qdiscs(host.node, [intf])}
        if when == "before":
            env["hosts"][host.group].update(sysctls=hostconfig.read_sysctls(host.node),
                                            offloads=hostconfig.offloads(host.node, intf))
    for name, router in network.routers.items():
        intfs = [i.name for i in router.intfList() if i.name != "lo"]
        env["routers"][name] = {"qdiscs": qdiscs(router, intfs)}
        if when == "before":
            env["routers"][name]["sysctls"] = hostconfig.read_sysctls(router, ("net.ipv4.ip_forward",
                                                                                "net.ipv4.conf.all.rp_filter"))
    if when == "before":
        env["engines"] = {e.router.name: e.config() for e in engines}
    # Clock anchors: one reading of both clocks (pages and samples are on time.monotonic(), the
    # engines' stats on their own clock from clock_start), so a reader can put any of them on the
    # wall clock and beside each other.
    env["clock"] = {"wall": time.time(), "monotonic": time.monotonic(),
                    "engine_clock_start": {e.router.name: getattr(e, "clock_start", None) for e in engines}}
    return env
