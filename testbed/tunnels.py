"""The tunnels between machines of a split topology (testbed/remote.py's VXLAN links), measured for
the fidelity record: each tunnel's own round trip before the engines emulate the link it carries,
and its underlay's counters over the workload (docs/cluster.md)."""

from __future__ import annotations

import json

from catnip.testbed.machines import Machine, MachineError


def tunnel_rtt(tunnel: dict, node, peer_ip: str, count: int = 20) -> dict:
    """The tunnel's own round-trip time, measured before any engine emulates the link it carries:
    `count` pings from `node` (one end's router) to `peer_ip` (the other end's address on the link)."""
    out = node.cmd(f"ping -n -q -c {int(count)} -i 0.01 -W 2 {peer_ip}")
    stats = [line for line in out.splitlines() if "min/avg/max" in line]
    received = [line for line in out.splitlines() if "received" in line]
    if not stats:
        raise MachineError(f"tunnel {tunnel['link']}: no answer across it: {out.strip()[-300:]}")
    low, avg, high = (float(x) for x in stats[0].split("=")[1].split("/")[:3])
    return {"pings": count, "received": int(received[0].split(",")[1].split()[0]) if received else None,
            "min_ms": low, "avg_ms": avg, "max_ms": high}


def underlay_counters(tunnel: dict, machines: dict[str, Machine]) -> dict[str, dict[str, int]]:
    """Each end's underlay device counters now (ip -s): packets, bytes, errors and drops both ways;
    `machines` by name."""
    out = {}
    for end in tunnel["ends"]:
        machine = machines[end["machine"]]
        stats = json.loads(machine.run(["ip", "-j", "-s", "link", "show", "dev", end["underlay_device"]]))[0]
        s64 = stats.get("stats64", stats.get("stats", {}))
        out[end["machine"]] = {f"{way}_{what}": int(s64[way][what]) for way in ("rx", "tx")
                               for what in ("packets", "bytes", "errors", "dropped")}
    return out


def counter_change(before: dict, after: dict) -> dict[str, dict[str, int]]:
    return {m: {k: after[m][k] - before[m].get(k, 0) for k in after[m]} for m in after if m in before}


# An underlay's receive drops also count frames a real NIC was given that no one wanted (other
# protocols, other hosts' traffic): recorded, not counted as the tunnel's losses.
DROP_COUNTERS = ("rx_errors", "tx_errors", "tx_dropped")


def drops(measured: list[dict]) -> int:
    """The packets the tunnels' underlays failed to carry over the workload, both ends, both ways."""
    return sum(c[k] for t in measured for c in t["underlay_change"].values() for k in DROP_COUNTERS)
