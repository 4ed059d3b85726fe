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
