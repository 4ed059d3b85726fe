"""Nouredine and Tobagi's published numbers, entered as data (published figures are facts).

W. Nouredine and F. Tobagi, "Improving the performance of interactive TCP applications using
service differentiation", Computer Networks 40(1), 19-43, 2002.

The paper's results are figures (CCDFs, Figs 2-4, 7-9, 12, 13, 15; throughput, Figs 14, 16, 17)
whose points the text does not give; it has no results table. What its prose gives is entered here
as printed, per figure, with the words that carry each number (`quote`, checked against the text
by tests/test_paper_published.py); a figure of which the text gives no value says so
(`given` empty: figure only). Keyed by the dashboard's and `catnip report --figure`'s figure names
(analysis.py FIGURES).

The paper's bottleneck speeds (45-175 Mbit/s, 400 pairs) are not ours (the tree scaled by users,
rates chosen for the paper's drop rates: docs/reproduction-service-differentiation.md), so a
number is read against ours at a like drop rate, not a like speed.
"""

from __future__ import annotations

from dataclasses import dataclass

CITATION = ('W. Nouredine, F. Tobagi, "Improving the performance of interactive TCP applications using service'
            ' differentiation", Computer Networks 40(1), 19-43, 2002')


@dataclass(frozen=True)
class Given:
    """A number the text gives about a figure."""
    what: str             # what it measures, as the servdiff table names it
    printed: str          # as printed
    condition: str        # the paper's setup for it
    value: float | None   # as a fraction or seconds (None: a range or words, see `printed`)
    stat: str | None      # the servdiff table's column ours is read from (layout servdiff), or None
    unit: str             # "fraction" | "s"
    quote: str            # the words of the text that carry it


@dataclass(frozen=True)
class FigureRef:
    figure: str
    section: str
    shows: str
    given: tuple[Given, ...] = ()   # (): figure only, values not given in the text

    @property
    def figure_only(self) -> bool:
        return not self.given


FIG2_TOP = FigureRef("Fig. 2 (top)", "section 3", "HTTP/1.0 probe downloads, drop tail everywhere, bottleneck"
                     " 45-175 Mbit/s, each curve labelled with its drop rate", (
    Given("HTTP/1.0 pages above 10 s", "about 15%", "100 Mbit/s, drop rate about 5%", 0.15, "h10_over_10s",
          "fraction", "about 15% of HTTP/1.0 page downloads for the 100 Mbps central link (30% for the 60 Mbps link)"),
    Given("HTTP/1.0 pages above 10 s", "30%", "60 Mbit/s, drop rate about 7%", 0.30, "h10_over_10s",
          "fraction", "about 15% of HTTP/1.0 page downloads for the 100 Mbps central link (30% for the 60 Mbps link)"),
    Given("bottleneck drop rate", "about 8.5% (45 Mbit/s) to about 1% (175 Mbit/s); about 5% at 100 and 7% at"
          " 60 Mbit/s", "45-175 Mbit/s", None, "loss", "fraction",
          "about 8.5% for the 45 Mbps link to about 1% for the 175 Mbps link")))
FIG2_BOTTOM = FigureRef("Fig. 2 (bottom)", "section 3", "HTTP/1.1 downloads, as Fig. 2 (top)", (
    Given("HTTP/1.1 pages above 10 s", "5%", "100 Mbit/s, drop rate about 5%", 0.05, "h11_over_10s", "fraction",
          "drops to 5% at 100 Mbps, and 20% at 60 Mbps"),
    Given("HTTP/1.1 pages above 10 s", "20%", "60 Mbit/s, drop rate about 7%", 0.20, "h11_over_10s", "fraction",
          "drops to 5% at 100 Mbps, and 20% at 60 Mbps")))
FIG3 = FigureRef("Fig. 3", "section 3", "Telnet echo delays of an 80 ms RTT connection, 60 and 100 Mbit/s, drop tail", (
    Given("echo delay p90", "1 in 10 echo delays takes about 1 s", "100 Mbit/s, 80 ms RTT", 1.0, "echo_p90", "s",
          "1 in 10 echo delays takes about 1 s"),))
FIG4 = FigureRef("Fig. 4", "section 3", "HTTP/1.0 downloads with a 1 s initial RTO (instead of 6 s)", (
    Given("bottleneck drop rate", "about 20% higher than with standard TCP", "1 s initial RTO", None, None,
          "fraction", "about 20% higher than with"),))
FIG7 = FigureRef("Fig. 7", "section 5", "HTTP/1.0 downloads with application-based marking, MED profiles 110"
                 " and 250 kbit/s (6000 B), HIGH 250 kbit/s, over the bottleneck speeds", (
    Given("HIGH (Telnet) loss", "no Telnet packet drops at the bottleneck for any link speed", "Telnet at HIGH",
          0.0, "high_loss", "fraction", "eliminates Telnet packet drops at the bottleneck link for all link speeds"),))
FIG8 = FigureRef("Fig. 8", "sections 5, 6.3", "Telnet echo delays of an 80 ms RTT connection, links scaled down"
                 " 10 times (10 Mbit/s bottleneck, 150 kbit/s users): DT, RED, APPL, TCP-DS, WRR weights", (
    Given("echo delay p99", "about 700 ms for every echo (APPL)", "application-based marking", 0.7, "echo_p99", "s",
          "with all echos taking about 700 ms"),
    Given("echo delay p99", "about 800 ms (TCP-DS)", "TCP-state based marking", 0.8, "echo_p99", "s",
          "(800 vs 700 ms)"),
    Given("echo delays of DT and RED", "several seconds; a WRR weight of 20% or more for Telnet's queue gives"
          " the quality it needs", "drop tail, RED, WRR", None, None, "s", "scheduler weight (e.g., 20% or more)")))
FIG9 = FigureRef("Fig. 9", "section 5", "CCDF of FTP file transfer times, application-based marking against DT and"
                 " RED at 75 Mbit/s (larger with marking, growing with the MED rate)")
FIG12 = FigureRef("Fig. 12", "section 6.3", "HTTP/1.0 downloads with TCP-state marking (HIGH 250, MED 500 kbit/s)"
                  " over the bottleneck speeds", (
    Given("HTTP/1.0 pages above 5 s", "none from 60 Mbit/s up: all downloads within the desirable limits",
          "TCP-DS, 60 Mbit/s and above", 0.0, "h10_over_5s", "fraction",
          "all Web downloads complete within desirable delay limits"),))
FIG13 = FigureRef("Fig. 13", "section 6.3", "HTTP/1.0 downloads and Telnet echoes per scheme (DT, RED, APPL 250 and"
                  " 110 k, TCP-DS regular and randomized, ER-TBM) at 100 Mbit/s")
FIG15 = FigureRef("Fig. 15", "section 6.3", "CCDF of the 200 KB probe transfer times per scheme")
FIG16 = FigureRef("Fig. 16", "section 6.3", "a 200 ms RTT long FTP flow's throughput over its fair share against"
                  " its HIGH threshold, DT and TCP-DS at 100 and 200 Mbit/s, C.O.V. dotted", (
    Given("throughput / fair share", "more than 85% (TCP-DS) against less than 50% (drop tail)", "200 ms RTT flow",
          None, None, "fraction",
          "more than 85% of its fair share for TCP-DS, compared to less than 50% for drop tail"),
    Given("C.O.V. of the throughput samples", "TCP-DS typically less than half of drop tail's or RED's",
          "200 ms RTT flow", None, None, "fraction", "typically less than half that for regular")))
FIG17 = FigureRef("Fig. 17", "section 6.3", "that flow's throughput sampled every 2 s over 100 s, TCP-DS and DT")

FIGURES: dict[str, tuple[FigureRef, ...]] = {
    "web-1.0": (FIG2_TOP, FIG4, FIG7, FIG12, FIG13),
    "web-1.1": (FIG2_BOTTOM,),
    "telnet": (FIG3, FIG8, FIG13),
    "ftp-probes": (FIG15,),
    "ftp-files": (FIG9,),
    "fair-share": (FIG16,),
    "flow-throughput": (FIG17,),
}

# Section 1: the limits the CCDFs draw (analysis.py TELNET_ECHO_LIMIT, PAGE_LIMIT, PAGE_POOR).
LIMITS = (("Telnet echo", 0.150, "should be below 150 ms"), ("page download", 5.0, "less than 5 s"),
          ("page download, poor", 10.0, "the limit beyond which quality is typically perceived as low"))
