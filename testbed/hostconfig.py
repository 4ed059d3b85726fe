"""Per-node settings inside a Mininet node's namespace: offloads, MTU, TCP sysctls, host shaping.

Every function takes a Mininet node (anything with `.cmd(str)` and `.intfList()`), and raises
`HostConfigError` naming the node and command when the kernel refuses a setting, so a run never
goes ahead with a half-configured network.
"""

from __future__ import annotations

import json
import shlex

from catnip.testbed.ethernet import ETH_HEADER


class HostConfigError(RuntimeError):
    pass


def shell_alive(node) -> bool:
    """Whether a Mininet node's shell still runs: `cmd` on a node whose shell was killed blocks forever.
    A node without a shell of its own (testbed/netline.py's NsNode: a process per command, with a
    timeout) can always be asked."""
    if not hasattr(node, "shell"):
        return True
    shell = node.shell
    return shell is not None and shell.poll() is None


def run(node, *args: object) -> str:
    """Run a command in the node's namespace; raise with its output if it fails."""
    cmd = " ".join(shlex.quote(str(a)) for a in args)
    out = node.cmd(f"{cmd}; echo __rc=$?")
    body, _, rc = out.rpartition("__rc=")
    if rc.strip() != "0":
        raise HostConfigError(f"{node.name}: `{cmd}` failed: {body.strip() or 'exit ' + rc.strip()}")
    return body


def disable_offloads(node, intf: str) -> None:
    """One skb is one wire packet: queues, marks and counts are per real packet (design rule)."""
    # Features a veth does not offer are refused by ethtool even when off; set each on its own.
    for feature in ("tso", "gso", "gro", "lro", "ufo"):
        node.cmd(f"ethtool -K {shlex.quote(intf)} {feature} off 2>/dev/null")
    feats = node.cmd(f"ethtool -k {shlex.quote(intf)}")
    for name in ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload"):
        for line in feats.splitlines():
            if line.strip().startswith(name + ":") and " on" in line.split(":", 1)[1]:
                raise HostConfigError(f"{node.name}: {name} still on for {intf}")


def one_packet_per_skb(node, intf: str) -> None:
    """TCP builds GSO super-packets even with offloads off (they are split later, after tc);
    a per-segment marker at tc egress needs one skb per wire packet."""
    run(node, "ip", "link", "set", "dev", intf, "gso_max_segs", "1")


def offloads(node, intf: str) -> dict[str, str]:
    """The segmentation/receive offload state of an interface, kept with the run's records."""
    wanted = ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload",
              "large-receive-offload", "tx-checksumming", "rx-checksumming")
    out = {}
    for line in node.cmd(f"ethtool -k {shlex.quote(intf)}").splitlines():
        key, sep, value = line.strip().partition(":")
        if sep and key in wanted:
            out[key] = value.strip()
    return out


def set_mtu(node, intf: str, mtu: int) -> None:
    run(node, "ip", "link", "set", "dev", intf, "mtu", mtu)


def set_sysctls(node, values: dict[str, object]) -> None:
    for key, value in values.items():
        run(node, "sysctl", "-q", "-w", f"{key}={value}")


def read_sysctls(node, prefixes: tuple[str, ...] = ("net.ipv4.tcp_", "net.core.default_qdisc")) -> dict[str, str]:
    """The TCP sysctls in force in this namespace (kept with the run's records)."""
    out: dict[str, str] = {}
    for line in node.cmd("sysctl -a 2>/dev/null").splitlines():
        key, sep, value = line.partition(" = ")
        if sep and key.startswith(prefixes):
            out[key] = value.strip()
    return out


def tcp_sysctls(congestion_control: str, sack: bool, timestamps: bool) -> dict[str, object]:
    return {
        "net.ipv4.tcp_congestion_control": congestion_control,
        "net.ipv4.tcp_sack": int(sack),
        "net.ipv4.tcp_timestamps": int(timestamps),
        # Metrics cached from an earlier connection to the same host would carry one page's
        # losses into the next page's ssthresh; every transfer should start fresh.
        "net.ipv4.tcp_no_metrics_save": 1,
    }


def shape_egress(node, intf: str, rate_bps: int, mtu: int) -> None:
    """Serialize the host's transmissions at the access link rate with htb (this kernel has it).

    A burst of one MTU keeps the pacing packet by packet: a larger htb burst would let a
    window leave at veth speed and reach the router faster than the emulated link allows.
    The size table removes the MAC header from htb's count, so the rate counts IP bytes as the
    engine's links do.
    """
    burst = mtu + ETH_HEADER
    node.cmd(f"tc qdisc del dev {shlex.quote(intf)} root 2>/dev/null")
    run(node, "tc", "qdisc", "add", "dev", intf, "root", "handle", "1:", "stab", "overhead", str(-ETH_HEADER),
        "htb", "default", "1")
    run(node, "tc", "class", "add", "dev", intf, "parent", "1:", "classid", "1:1", "htb",
        "rate", f"{rate_bps}bit", "ceil", f"{rate_bps}bit", "burst", f"{burst}b", "cburst", f"{burst}b",
        "quantum", str(burst))


def pace_with_fq(node, intf: str) -> str:
    """The fq qdisc on the host's egress, which paces each TCP flow at its sk_pacing_rate (the
    tcp_pacing_*_ratio share of cwnd/SRTT; newCWV paper section 4.5 paced with it). Under the
    access-link shaper of `shape_egress` when the interface has one (fq as the leaf of its htb
    class, so the link rate still holds), else at the root. fq's own defaults, as the paper's
    Linux had them (its initial_quantum lets a new flow's first 10 packets out unpaced).
    Returns where it went ('1:1' or 'root')."""
    shown = run(node, "tc", "qdisc", "show", "dev", intf)
    if any(line.split()[:4] == ["qdisc", "htb", "1:", "root"] for line in shown.splitlines()):
        run(node, "tc", "qdisc", "replace", "dev", intf, "parent", "1:1", "handle", "10:", "fq")
        return "1:1"
    run(node, "tc", "qdisc", "replace", "dev", intf, "root", "fq")
    return "root"


HOST_TCP_SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_slow_start_after_idle",
                    "net.ipv4.tcp_pacing_ss_ratio", "net.ipv4.tcp_pacing_ca_ratio", "net.ipv4.tcp_sack",
                    "net.ipv4.tcp_recovery", "net.ipv4.tcp_frto", "net.ipv4.tcp_early_retrans", "net.ipv4.tcp_dsack",
                    "net.ipv4.tcp_rmem")


def read_host_tcp(node, intf: str) -> dict[str, str]:
    """What a host's namespace has of its per-host TCP settings (spec.scenario.HostTcp), read back:
    the sysctls, the default route (initcwnd) and the interface's qdiscs."""
    out = {}
    for key in HOST_TCP_SYSCTLS:
        out[key] = run(node, "sysctl", "-n", key).strip()
    out["default_route"] = run(node, "ip", "route", "show", "default").strip()
    out["qdiscs"] = " | ".join(line.strip() for line in run(node, "tc", "qdisc", "show", "dev", intf).splitlines()
                               if line.strip())
    return out


def nstat(node) -> dict[str, int]:
    """Absolute kernel SNMP counters of the node's namespace (fresh namespace: counts of this run)."""
    text = node.cmd("nstat -asz --json 2>/dev/null")
    start = text.find("{")
    if start < 0:
        return {}
    try:
        data = json.loads(text[start:])
    except json.JSONDecodeError:
        return {}
    counters = data.get("kernel", data)
    return {k: int(v) for k, v in counters.items() if isinstance(v, (int, float))}


ALLOWED_CC = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"


def allow_congestion_control(name: str) -> str | None:
    """Make `name` settable as a namespace's default congestion control.

    Outside the initial namespace the kernel only accepts algorithms listed in the (global)
    tcp_allowed_congestion_control. Returns the previous list when it had to be extended, so the
    caller restores it after the run (cleanup does too, from the run's state directory).
    """
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as fh:
        available = fh.read().split()
    if name not in available:
        raise HostConfigError(f"congestion control {name!r} is not available in this kernel "
                              f"(available: {', '.join(available)})")
    with open(ALLOWED_CC) as fh:
        allowed = fh.read().split()
    if name in allowed:
        return None
    with open(ALLOWED_CC, "w") as fh:
        fh.write(" ".join(allowed + [name]))
    return " ".join(allowed)


def restore_allowed_congestion_control(previous: str) -> None:
    with open(ALLOWED_CC, "w") as fh:
        fh.write(previous)
