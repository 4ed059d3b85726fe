"""Nouredine and Tobagi's claims for the reproduction report (papers/claims.py, docs/report.md): W.
Nouredine and F. Tobagi, "Improving the performance of interactive TCP applications using service
differentiation", Computer Networks 40(1), 19-43, 2002. Its results are figures; the numbers here
are its prose's (published.py), else its words. Each verdict and cause is
docs/reproduction-service-differentiation.md's, in the section named.

Fig. 8's DropTail side is computed from an archived real-time run of the schemes scenario's DT
point (seed 1; docs/equivalence.md ran it); the rest of the schemes, range and long-FTP runs are
not archived.
"""

from __future__ import annotations

from catnip.papers.claims import Claim, Measure, servdiff_stat

SCHEMES = 'The schemes at the "100 Mbit/s" point (Figs 4, 7-9, 12-15)'
RANGE = "APPL and TCP-DS over the bottleneck range (Figs 7, 12, 14)"
LONG = "Figs 16-17: long FTP and the fair share"
NOT_DONE = "Not done"

# scenarios/sd-schemes.yaml --only scheme=DT, seed 1, at b9429b9, in real time (docs/equivalence.md).
DT_RUN = "20261128-112345-sd-schemes-3d97"

CLAIMS = (
    Claim("fig4-rto", "An initial RTO of 1 s (instead of 6 s) gives perceptibly lower page times, at a higher loss",
          "loss about 20% higher than with standard TCP", "Fig. 4, section 3", SCHEMES, "agrees",
          note="more strongly than the paper says"),
    Claim("fig7-appl", "Application-based marking makes web pages good; a lower MED rate lengthens them",
          "figure only", "Fig. 7, section 5", SCHEMES, "agrees"),
    Claim("fig7-telnet", "With application-based marking Telnet (HIGH) is never dropped at the bottleneck",
          "no Telnet packet drops at any link speed", "Fig. 7, section 5", RANGE, "direction only",
          "the HIGH packets dropped were dropped when the 25-packet buffer was full (3-level RED's HIGH average"
          " counts HIGH packets only)", SCHEMES, note="nearly never"),
    Claim("fig8-dt", "Under DT and RED Telnet's echo delays reach seconds, RED better than DT; WRR needs a Telnet"
          " weight of 20% or more", "several seconds; weight 20% or more", "Fig. 8, sections 5 and 6.3", SCHEMES,
          "agrees", measure=Measure("servdiff", (DT_RUN,), servdiff_stat("rtt80ms", (("echo_p90", "p90"),
                                                                                      ("echo_p99", "p99"))),
                                    "DT only: the 80 ms Telnet echo delays, schemes scenario (tree scaled by users)")),
    Claim("fig12-tcpds", "TCP-state marking (TCP-DS) keeps every page within the limits from \"60 Mbit/s\" up",
          "all downloads within the desirable limits", "Fig. 12, section 6.3", RANGE, "disagrees",
          "TCP-DS's loss is twice APPL's at every congested rate: much of its traffic is HIGH and its LOW level is"
          " dropped heavily"),
    Claim("fig13-random", "Randomizing TCP-DS's marking has no large impact", "figure only", "Fig. 13, section 6.3",
          SCHEMES, "agrees"),
    Claim("fig13-ertbm", "ER-TBM is no better than DT or RED, possibly worse", "figure only", "Fig. 13, section 6.3",
          SCHEMES, "disagrees", "likely, not separated: it marks a user's aggregate, so Telnet is HIGH only while the"
          " user's web and FTP traffic leave tokens"),
    Claim("fig14-ftp", "Application-based marking is very poor for FTP below \"75 Mbit/s\"; TCP-DS is comparable"
          " to DT and RED", "figure only", "Fig. 14, section 6.3", RANGE, "direction only",
          note="TCP-DS is not quite DT's equal here"),
    Claim("fig15-ftp", "TCP-DS makes FTP transfer times more predictable", "figure only", "Fig. 15, section 6.3",
          SCHEMES, "agrees"),
    Claim("fig16-dt", "Drop tail leaves a 200 ms RTT long flow under 50% of its fair share", "less than 50%",
          "Fig. 16, section 6.3", LONG, "agrees"),
    Claim("fig16-tcpds", "TCP-DS with a higher HIGH threshold brings that flow above 85% of its share, then"
          " stabilizes", "more than 85%", "Fig. 16, section 6.3", LONG, "direction only",
          "with the highest threshold every segment of the flow is HIGH and the source scheduler serves it at the"
          " HIGH bucket's rate (these runs predate the scheduler's fix)"),
    Claim("fig16-cov", "TCP-DS's C.O.V. of the throughput is typically less than half of drop tail's",
          "less than half", "Fig. 16, section 6.3", LONG, "agrees"),
    Claim("fig8-own-network", "Fig. 8 on its own network, every rate divided by 10", "figure (p99 about 700 ms"
          " APPL, 800 ms TCP-DS)", "Fig. 8, section 5", NOT_DONE, "not run",
          "the paper says only that the traffic was comparable, which leaves the load, shapers and buffers to guess"),
)
