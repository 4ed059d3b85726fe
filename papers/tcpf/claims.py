"""The TCP-friendly marking paper's claims for the reproduction report (papers/claims.py,
docs/report.md): G. Lo Monaco, A. Feroz, S. Kalyanaraman, Y. Xia, "TCP-Friendly Marking for
Scalable Best-Effort Services on the Internet", ACM SIGCOMM Computer Communication Review 31(5),
2001, section 6.2, Tables 4-7 (read from published.py). Each verdict and cause is
docs/reproduction-tcpf.md's ("The paper's claims, checked against these runs" and "Where we
differ, and why"). None of the grid's runs is archived yet (docs/archive.md, "Not generated yet").
"""

from __future__ import annotations

from catnip.papers.claims import Claim
from catnip.papers.tcpf.published import paper

CLAIMS_SECTION = "The paper's claims, checked against these runs (Linux 2.2 profile, seeds 1-3)"
DIFFER = "Where we differ, and why"


def _timeouts(config: str, case: str, flows: int) -> int:
    row = paper(config, case, flows)
    assert row is not None, (config, case, flows)
    return row[0]


def _to(config: str, a: str, b: str, flows: int = 100) -> str:
    return f"{_timeouts(config, a, flows)} -> {_timeouts(config, b, flows)} timeouts"


CLAIMS = (
    Claim("fewest-timeouts", "TCPF+FRIO has the fewest timeouts in every table",
          " / ".join(f"{c}: {_timeouts(c, 'TCPF+FRIO', 100)}, {_timeouts(c, 'TCPF+FRIO', 50)}" for c in "ABCD")
          + " (100, 50 flows)", "Tables 4-7, section 6.2", CLAIMS_SECTION, "disagrees",
          "TailDrop times out far less than in the paper, and SACK makes the difference: today's Linux recovers"
          " several losses per window", DIFFER, note="holds in Config A and in B at 100 flows only"),
    Claim("a50-red-frio", "Config A, 50 flows: TCPF+FRIO virtually eliminates RED's timeouts",
          _to("A", "NoMark+RED", "TCPF+FRIO", 50), "Table 4, section 6.2.1", CLAIMS_SECTION, "agrees"),
    Claim("a-tb-frio", "TCPF+FRIO cuts TB+RIO's timeouts by a factor of 22",
          _to("A", "TB+RIO", "TCPF+FRIO"), "Table 4, section 6.2.1", CLAIMS_SECTION, "agrees"),
    Claim("a-tcpf-rio", "TCPF's marking alone (TCPF+RIO) times out far less than TB+RIO",
          f"{_timeouts('A', 'TCPF+RIO', 100)} against {_timeouts('A', 'TB+RIO', 100)}", "Table 4, section 6.2.1",
          CLAIMS_SECTION, "direction only", note="a weaker ratio than the paper's"),
    Claim("a-old-marker", "The old marker without retransmission protection, TCPF(O)+RIO, times out less than TB+RIO",
          f"{_timeouts('A', 'TCPF(O)+RIO', 100)} against {_timeouts('A', 'TB+RIO', 100)}", "Table 4, section 6.2.1",
          CLAIMS_SECTION, "disagrees", note="without retransmission protection TCPF's spacing alone does worse than TB here"),
    Claim("a-fred-red", "FRED is better than RED", f"{_timeouts('A', 'NoMark+FRED', 100)} against"
          f" {_timeouts('A', 'NoMark+RED', 100)} timeouts", "Table 4, section 6.2.1", CLAIMS_SECTION, "agrees"),
    Claim("a-taildrop-red", "TailDrop is better than RED under multiplexing", f"{_timeouts('A', 'NoMark+TailDrop', 100)}"
          f" against {_timeouts('A', 'NoMark+RED', 100)} timeouts", "Table 4, section 6.2.1", CLAIMS_SECTION, "agrees"),
    Claim("a-tb-taildrop", "TB+RIO is only marginally better than TailDrop", f"{_timeouts('A', 'TB+RIO', 100)} against"
          f" {_timeouts('A', 'NoMark+TailDrop', 100)} timeouts", "Table 4, section 6.2.1", CLAIMS_SECTION, "disagrees",
          "TailDrop times out far less than in the paper, and SACK makes the difference", DIFFER),
    Claim("b-reno", "Without SACK (Config B) TCPF+FRIO still cuts TB+RIO's timeouts",
          _to("B", "TB+RIO", "TCPF+FRIO"), "Table 5, section 6.2.2", CLAIMS_SECTION, "agrees"),
    Claim("c-mistuned", "Mistuned RED almost doubles TCPF+FRIO's timeouts",
          f"{_timeouts('A', 'TCPF+FRIO', 100)} -> {_timeouts('C', 'TCPF+FRIO', 100)}", "Tables 4 and 6, section 6.2.3",
          CLAIMS_SECTION, "agrees", "mistuned RED is close to a 30 KB tail drop for OUT packets, harsher in our"
          " emulation", DIFFER, note="far more than doubled"),
    Claim("a-loss", "TCPF+FRIO lowers RED's loss, 100 flows, Config A", f"{paper('A', 'NoMark+RED', 100)[1]:.2f}% ->"
          f" {paper('A', 'TCPF+FRIO', 100)[1]:.2f}%", "Table 4, section 6.2.1", CLAIMS_SECTION, "direction only",
          "our flows fill the link, the paper's left it idle, and a link that idles drops less", DIFFER),
    Claim("a-goodput", "TCPF+FRIO raises the per-flow goodput over RED's", f"{paper('A', 'NoMark+RED', 100)[2]} ->"
          f" {paper('A', 'TCPF+FRIO', 100)[2]} KB/s", "Table 4, section 6.2.1", CLAIMS_SECTION, "disagrees",
          "every case already fills the link here, so goodput cannot separate the cases", DIFFER),
    Claim("a-cov", "TCPF+FRIO shares the link more evenly than RED (C.O.V. of the goodputs)",
          f"{paper('A', 'NoMark+RED', 100)[3]} against {paper('A', 'TCPF+FRIO', 100)[3]}", "Table 4, section 6.2.1",
          CLAIMS_SECTION, "agrees"),
)
