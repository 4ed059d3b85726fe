"""The newCWV paper's published numbers, entered as data (published figures are facts).

Z. Hossain and G. Fairhurst, "Enhancing HTTP Web Protocol Performance with Updated Transport Layer
Techniques", International Journal of Computer Networks & Communications (IJCNC) 15(4), 2023.

Its Tables 1-3 are images the text does not carry (docs/reproduction-newcwv.md, "Gaps in the text"),
and Figs 5 and 7-11 are plots; what the text gives are ranges and levels in its prose, entered here
as printed (percent gains: (Tr - Tc)/Tr x 100, section 4.1), each with its section. Where a figure
or table has no number in the text, NOT_IN_TEXT says so.
"""

from __future__ import annotations

from dataclasses import dataclass

CITATION = ('Z. Hossain, G. Fairhurst, "Enhancing HTTP Web Protocol Performance with Updated Transport Layer'
            ' Techniques", IJCNC 15(4), 2023')


@dataclass(frozen=True)
class Level:
    """One number (or range) of the prose about the gain grid: over which bursts, as printed."""
    what: str                      # "every cell", "80 KB bursts"
    sizes_kb: tuple[int, ...]      # the burst sizes it is about (KB); () = every size
    stat: str                      # "range": the cells' lowest to highest gain; "mean": their mean
    printed: str                   # as the text prints it
    low: float                     # percent
    high: float                    # percent (= low for a single "about" value)
    where: str
    quote: str                     # the words of the text that carry the number (tests check them)


@dataclass(frozen=True)
class Reference:
    key: str
    name: str                      # "Fig. 7", "Table 2"
    section: str
    setup: str
    levels: tuple[Level, ...]


# Section 4.2, Fig. 7: no rate limit, 200 ms, no cross traffic.
FIG7 = Reference("fig7", "Fig. 7", "section 4.2", "no bandwidth limit, 200 ms delay, no cross traffic", (
    Level("every cell", (), "range", "37-62% less time", 37, 62, "section 4.2",
          "37- 62% less time"),
    Level("mean over the cells", (), "mean", "an approximate average of 50%", 50, 50, "section 4.2",
          "approximate average of 50% improvement"),
    Level("5 KB bursts", (5,), "mean", "50%", 50, 50, "section 4.2", "5KB bursts (50%)"),
    Level("80 KB bursts", (80,), "mean", "60% (about 10% more than 5 KB)", 60, 60, "section 4.2",
          "bursts of 80KB (60%)")))
# Section 4.3, Fig. 8: 2 Mbit/s bottleneck, 30 KB buffer, no cross traffic.
FIG8 = Reference("fig8", "Fig. 8", "section 4.3", "2 Mbit/s bottleneck, 30 KB router buffer, no cross traffic", (
    Level("every cell", (), "range", "10-35%", 10, 35, "section 4.3", "varies from 10-35%"),
    Level("bursts above 5 KB", (40, 80), "mean", "about 25-33% less time on average", 25, 33, "section 4.3",
          "about 25-33% less time on average")))
# Section 4.4, Table 2 (an image: its cells are not in the text): one FTP flow shares the bottleneck.
TABLE2 = Reference("table2", "Table 2", "section 4.4", "2 Mbit/s bottleneck shared with one FTP flow, newCWV unpaced", (
    Level("responses of 5 KB or more", (), "range", "18-20%", 18, 20, "section 4.4",
          "improvement in transfer times of 18- 20%"),
    Level("80 KB responses", (80,), "range", "newCWV about 10-15% more time (negative gains)", -15, -10,
          "section 4.4", "take about 10-15% more time")))
# Section 4.5, Table 3 (an image): as Table 2, newCWV paced.
TABLE3 = Reference("table3", "Table 3", "section 4.5", "as Table 2, with pacing at the newCWV sender", (
    Level("every cell", (), "range", "10-20%", 10, 20, "section 4.5", "varies between 10-20%"),
    Level("80 KB bursts", (80,), "range", "13-16%", 13, 16, "section 4.5",
          "achieves 13-16% performance improvement")))
REFERENCES = {r.key: r for r in (FIG7, FIG8, TABLE2, TABLE3)}

# The other figures: what the text gives, or that it gives no values.
NOT_IN_TEXT = {
    "Fig. 5": "cwnd grows to about 60 segments with the pipeACK filter against about 50 without (section 3);"
              " the other values are in the figure only",
    "Fig. 9": "newCWV loses more than NewReno on average (section 4.3); values not given in the text",
    "Fig. 10": "with pacing a burst's segments spread over about one 200 ms RTT (section 4.5); figure only",
    "Fig. 11": "the FTP flow's throughput shows no significant difference between the three HTTP senders"
               " (section 4.6); values not given in the text",
    "Tables 1-3": "images the text does not carry: the prose's ranges above stand for Tables 2 and 3",
}


def reference_for(paced: bool, cross_traffic: bool, rate_limited: bool) -> Reference:
    """The paper's experiment a comparison's setup matches (section 4's four setups)."""
    if paced:
        return TABLE3
    if cross_traffic:
        return TABLE2
    return FIG8 if rate_limited else FIG7
