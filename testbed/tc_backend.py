"""The kernel backend: one link direction configured with tc, the same parameters the queue engine
takes (rate, delay, buffer, policy), to cross-check the engine against the kernel's own qdiscs.

htb gives the rate with a pfifo (packet buffer) or bfifo (byte buffer) leaf for DropTail, or red
for RED; netem adds the delay. Only what this kernel has can be configured: a missing qdisc is an
error naming it (this machine has htb, tbf, pfifo and bfifo, but not netem, red, gred or prio).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

from catnip.testbed.capabilities import probe_qdiscs
from catnip.testbed.ethernet import ETH_HEADER


class TcBackendError(RuntimeError):
    pass


@dataclass(frozen=True)
class TcLink:
    intf: str
    rate_bps: int
    delay_us: int = 0
    buffer_packets: int | None = None
    buffer_bytes: int | None = None
    policy: str = "droptail"  # droptail or red
    red: dict | None = None   # red's min_th, max_th (packets), max_p, mean_pkt_bytes: the record's, as given
    mtu: int = 1500

    def needed(self) -> list[str]:
        need = ["htb"]
        if self.policy == "droptail":
            need.append("bfifo" if self.buffer_bytes else "pfifo")
        elif self.policy == "red":
            need.append("red")
        else:
            raise TcBackendError(f"policy {self.policy!r}: the kernel backend has droptail and red")
        if self.delay_us:
            need.append("netem")
        return need

    def commands(self) -> list[list[str]]:
        """The tc commands, in order (root htb at the rate; leaf queue; netem delay below it)."""
        dev = ["dev", self.intf]
        burst = str(self.mtu)
        # htb counts skb->len, which on an Ethernet device includes the 14-byte MAC header; the
        # engine (and ns-2) count the IP packet. A size table with overhead -14 makes the rate
        # mean the same thing in both backends.
        cmds = [["tc", "qdisc", "replace", *dev, "root", "handle", "1:", "stab", "overhead", str(-ETH_HEADER),
                 "htb", "default", "1"],
                ["tc", "class", "add", *dev, "parent", "1:", "classid", "1:1", "htb", "rate", f"{self.rate_bps}bit",
                 "ceil", f"{self.rate_bps}bit", "burst", burst, "cburst", burst]]
        if not (self.buffer_bytes or self.buffer_packets):
            raise TcBackendError(f"{self.intf}: a buffer in packets or bytes is needed (the record's; no default here)")
        if self.policy == "droptail" and self.buffer_bytes:
            leaf = ["bfifo", "limit", str(self.buffer_bytes)]
        elif self.policy == "droptail":
            leaf = ["pfifo", "limit", str(self.buffer_packets)]
        else:
            # Every parameter as the record gives it (spec/policy.py applied the defaults).
            r = self.red or {}
            missing = [k for k in ("min_th", "max_th", "max_p", "mean_pkt_bytes") if k not in r]
            if missing:
                raise TcBackendError(f"{self.intf}: red needs {', '.join(missing)} (the record's; no default here)")
            avpkt = int(r["mean_pkt_bytes"])
            limit = self.buffer_bytes or self.buffer_packets * avpkt
            leaf = ["red", "limit", str(limit), "min", str(int(r["min_th"] * avpkt)),
                    "max", str(int(r["max_th"] * avpkt)), "avpkt", str(avpkt), "probability", str(r["max_p"]),
                    "bandwidth", f"{self.rate_bps}bit", "burst", str(max(1, int(r["min_th"])))]
        cmds.append(["tc", "qdisc", "add", *dev, "parent", "1:1", "handle", "10:", *leaf])
        if self.delay_us:
            cmds.append(["tc", "qdisc", "add", *dev, "parent", "10:", "handle", "20:", "netem", "delay",
                         f"{self.delay_us}us"])
        return cmds


def configure(link: TcLink, ns_prefix: list[str]) -> None:
    have = probe_qdiscs()
    missing = [q for q in link.needed() if not have.get(q)]
    if missing:
        raise TcBackendError(f"this kernel lacks the {', '.join(missing)} qdisc(s) the kernel backend needs "
                             f"for {link.intf} (the queue engine emulates the link instead)")
    for cmd in link.commands():
        res = subprocess.run([*ns_prefix, *cmd], capture_output=True, text=True, timeout=30)
        if res.returncode != 0:
            raise TcBackendError(f"`{' '.join(cmd)}` failed: {res.stderr.strip()}")


def stats(intf: str, ns_prefix: list[str]) -> dict[str, int]:
    """Packets sent and dropped by the leaf queue (handle 10:)."""
    out = subprocess.run([*ns_prefix, "tc", "-j", "-s", "qdisc", "show", "dev", intf], capture_output=True,
                         text=True, timeout=30).stdout
    for q in json.loads(out or "[]"):
        if q.get("handle") == "10:":
            return {"sent_packets": q.get("packets", 0), "dropped": q.get("drops", 0)}
    return {}


def remove(intf: str, ns_prefix: list[str]) -> None:
    subprocess.run([*ns_prefix, "tc", "qdisc", "del", "dev", intf, "root"], capture_output=True, timeout=30)
