"""The congestion controls this project brings as BPF struct_ops (bpf/*.bpf.c), and what each
needs. The schema validates names against these and the kernel's own; testbed/sender.py
registers them. Kept here, at the bottom, so the schema never imports the testbed."""

from __future__ import annotations

# bpf/catnip_cc.bpf.c: CATNIP's sender heuristics (section III-B, Fig. 2) and Reno variants.
CATNIP = ("catnip_reno", "catnip_eca", "catnip_rbplw", "catnip_ecarbplw", "catnip_ns2reno")
# bpf/newcwv.bpf.c: RFC 7661 newCWV on Reno (Hossain & Fairhurst, section 3).
NEWCWV = "catnip_newcwv"
NAMES = (*CATNIP, NEWCWV)
# Which pace the last window of a document: they need TCP's pacing ratios at 100%.
PACING_LAST_WINDOW = ("catnip_rbplw", "catnip_ecarbplw")
# Which read the document's extent, announced by mod_catnip through the SPM object.
NEED_DOCUMENTS = ("catnip_eca", "catnip_rbplw", "catnip_ecarbplw")
# Which switch on TCP's internal pacing for every connection when a host's parameters ask for it
# (`tcp.groups.G.pacing: internal`): a congestion control is the only thing that can ask for it.
PACEABLE = ("catnip_reno", NEWCWV)
# Which keep cwnd across idle by themselves, so the kernel's RFC 2861 restart must be off in the
# sender's namespace (net.ipv4.tcp_slow_start_after_idle = 0; docs/reproduction-newcwv.md, gap 14).
KEEP_CWND_OVER_IDLE = (NEWCWV,)

# Period TCP profiles (`tcp.profile`): the `tcp` fields each sets where the scenario does not give
# them. linux-2.2 is the TCP-friendly marking paper's Linux 2.2.10 (section 6.1; reading notes
# 2.1.c item 12): Reno, no RACK (tcp_recovery 0), no F-RTO, no early retransmit or tail loss probe,
# no D-SACK, a 200 ms minimum RTO; SACK stays per configuration (`tcp.sack`, its Table 2).
# linux-2.4 is CATNIP's WAN server, Linux 2.4.16 (CATNIP V-G), as its source has it
# (docs/period-tcp.md cites file and function for each): initial RTO 3 s (TCP_TIMEOUT_INIT),
# minimum RTO 200 ms (TCP_RTO_MIN), an initial window of 2 (tcp_v4_init_sock; RFC 2414's larger
# one only with cached route metrics), one segment of slow-start growth per ACK (tcp_cong_avoid;
# byte counting came in 2.6.15: catnip_ns2reno grows that way), SACK, D-SACK and timestamps on,
# no RACK, F-RTO or tail loss probe (none existed).
# ns2-reno is CATNIP's simulations (sections III-A, IV; ns-2 Agent/TCP/Reno with Agent/TCPSink):
# initial window 1 (Appendix A), the 6 s initial timeout (III-A), growth per ACK, no SACK, no
# timestamps, and a sink that ACKs every packet (TCPSink has no delayed ACK). What Linux cannot
# drop (the handshake, NewReno's partial ACKs, ns-2's 100 ms RTT clock) is in docs/period-tcp.md.
# modern sets nothing: this kernel's defaults, the comparison series.
_NO_MODERN_RECOVERY = {"recovery": "off", "frto": False, "early_retrans": False}
TCP_PROFILES: dict[str, dict[str, object]] = {
    "linux-2.2": {"congestion_control": "reno", **_NO_MODERN_RECOVERY, "dsack": False, "rto_min": "200ms"},
    "linux-2.4": {"congestion_control": "catnip_ns2reno", **_NO_MODERN_RECOVERY, "dsack": True, "sack": True,
                  "timestamps": True, "initial_cwnd": 2, "initial_rto": "3s", "rto_min": "200ms"},
    "ns2-reno": {"congestion_control": "catnip_ns2reno", **_NO_MODERN_RECOVERY, "dsack": False, "sack": False,
                 "timestamps": False, "initial_cwnd": 1, "initial_rto": "6s", "rto_min": "200ms",
                 "delayed_ack": False},
    "modern": {},
}
# The sysctl of each period knob, with the value for on (the kernel's default) and off.
TCP_KNOB_SYSCTLS: dict[str, tuple[str, int, int]] = {
    "recovery": ("net.ipv4.tcp_recovery", 1, 0),            # 1: RACK loss detection
    "frto": ("net.ipv4.tcp_frto", 2, 0),                    # 2: F-RTO (RFC 5682) with SACK enhancement
    "early_retrans": ("net.ipv4.tcp_early_retrans", 3, 0),  # 3: tail loss probe (RACK took over early retransmit)
    "dsack": ("net.ipv4.tcp_dsack", 1, 0),
}


def profile_sets(name: str) -> list[str]:
    """A profile as `catnip run` options that set each of its fields explicitly (and name it)."""
    if name not in TCP_PROFILES:
        raise KeyError(f"unknown tcp.profile {name!r}; the profiles are {', '.join(TCP_PROFILES)}")
    out = ["--set", f"tcp.profile={name}"]
    for key, value in TCP_PROFILES[name].items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out += ["--set", f"tcp.{key}={text}"]
    return out


if __name__ == "__main__":  # python -m catnip.spec.senders --as-set NAME (scripts/table-xi.sh, sim-tables.sh)
    import sys
    if len(sys.argv) != 3 or sys.argv[1] != "--as-set":
        sys.exit("usage: python -m catnip.spec.senders --as-set PROFILE")
    try:
        print(" ".join(profile_sets(sys.argv[2])))
    except KeyError as exc:
        sys.exit(f"PROFILE: {exc.args[0]}")
