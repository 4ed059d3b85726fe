"""The newCWV paper's claims for the reproduction report (papers/claims.py, docs/report.md): Z.
Hossain and G. Fairhurst, "Enhancing HTTP Web Protocol Performance with Updated Transport Layer
Techniques", IJCNC 15(4), 2023. The paper's numbers are its prose's (published.py: its Tables 1-3
are images the text does not carry). Each verdict and cause is docs/reproduction-newcwv.md's, in
the section named.

Fig. 7's range is computed from an archived run of its scenario narrowed to one cell (40 KB after
1 s idles, 30 bursts, seed 1; docs/equivalence.md ran it), not from the whole grid: the three-seed
grids of "Repetitions" are not archived.
"""

from __future__ import annotations

from catnip.papers.claims import Claim, Measure, newcwv_gain
from catnip.papers.newcwv import published as pub

REPS = "Repetitions: the whole set as one command, and the grids over seeds (2026-11-26)"
FIG7 = "Fig. 7: no rate limit (section 4.2)"
FIG8 = "Figs 8-9: 2 Mbit/s, 30 KB buffer, no cross traffic (section 4.3)"
TABLE2 = "Table 2: with one FTP flow, unpaced (section 4.4)"
TABLE3 = "Table 3: with pacing at the newCWV sender (section 4.5)"
FIG10 = "Fig. 10: one burst, unpaced and paced (section 4.5)"
FIG11 = "Fig. 11: the FTP flow beside the three HTTP senders (section 4.6)"
FIG5 = "Fig. 5: cwnd and pipeACK of a bursty flow (section 3)"

# scenarios/newcwv-fig7-unlimited.yaml, seed 1, one cell (40 KB, 1 s), at b9429b9 (docs/equivalence.md).
FIG7_CELL_RUN = "20261128-111851-newcwv-fig7-unlimited-8f1a"


def _level(ref: pub.Reference, what: str) -> str:
    level = next(lv for lv in ref.levels if lv.what == what)
    return level.printed


CLAIMS = (
    Claim("fig7-range", "Without a rate limit newCWV takes less time than the baseline in every cell of the grid",
          _level(pub.FIG7, "every cell"), "Fig. 7, section 4.2", FIG7, "direction only",
          "Linux lets cwnd grow to twice the data in flight in slow start and newCWV keeps that cwnd; after short"
          " idles the baseline halves cwnd instead of restarting; the paper's idle periods are not in its text",
          measure=Measure("newcwv-gain", (FIG7_CELL_RUN,), newcwv_gain(((40, 1.0),)),
                          "one cell of the grid (scenarios/newcwv-fig7-unlimited.yaml narrowed to 40 KB after 1 s"
                          " idles, 30 bursts), gain ±95% over the bursts")),
    Claim("fig7-mean", "Without a rate limit newCWV's gain averages about 50%",
          _level(pub.FIG7, "mean over the cells"), "Fig. 7, section 4.2", REPS, "agrees"),
    Claim("fig7-5kb", "5 KB bursts gain 50%", _level(pub.FIG7, "5 KB bursts"), "Fig. 7, section 4.2", FIG7, "agrees",
          "after 3 s idles newCWV sends the burst in one round trip, the baseline in two"),
    Claim("fig7-80kb", "80 KB bursts gain about 60%", _level(pub.FIG7, "80 KB bursts"), "Fig. 7, section 4.2", FIG7,
          "disagrees", "newCWV keeps a cwnd above the burst (Linux's slow start), so it sends it in one round trip;"
          " what held the paper's cwnd lower the text does not say"),
    Claim("fig8", "With a 2 Mbit/s bottleneck and a 30 KB buffer the gain is smaller; bursts above 5 KB gain 25-33%",
          f"{_level(pub.FIG8, 'every cell')}; {_level(pub.FIG8, 'bursts above 5 KB')}", "Fig. 8, section 4.3", FIG8,
          "direction only", "after its first losses newCWV's loss rule sets cwnd from pipeACK, keeping much less than"
          " the path's bandwidth-delay product"),
    Claim("fig9", "newCWV loses more than NewReno", "more (values not in the text)", "Fig. 9, section 4.3", FIG8,
          "agrees"),
    Claim("table2", "Sharing the bottleneck with an FTP flow, newCWV improves responses of 5 KB or more",
          _level(pub.TABLE2, "responses of 5 KB or more"), "Table 2, section 4.4", TABLE2, "direction only",
          "newCWV's loss rule sets cwnd from pipeACK, so it keeps a window between bursts where the baseline"
          " restarts from its initial window: larger gains than the paper's"),
    Claim("table2-80kb", "Sharing the bottleneck with an FTP flow, newCWV is slower for 80 KB responses",
          _level(pub.TABLE2, "80 KB responses"), "Table 2, section 4.4", TABLE2, "disagrees",
          "newCWV's loss rule sets cwnd from pipeACK after each recovery, so it rarely sends a large kept window"
          " into the full queue"),
    Claim("table3", "Paced newCWV gains in every cell", f"{_level(pub.TABLE3, 'every cell')};"
          f" 80 KB {_level(pub.TABLE3, '80 KB bursts')}", "Table 3, section 4.5", TABLE3, "direction only",
          "as Table 2: newCWV starts its bursts from a larger window than the restarted baseline"),
    Claim("fig10", "Paced, a burst's segments spread over about one RTT", "about 200 ms", "Fig. 10, section 4.5",
          FIG10, "disagrees", "the pacing rate is twice cwnd/SRTT and the kept cwnd is twice the burst"),
    Claim("fig11", "The FTP flow's throughput shows no significant difference between the three HTTP senders",
          "no starvation (values not in the text)", "Fig. 11, section 4.6", FIG11, "agrees"),
    Claim("fig5", "With the pipeACK filter cwnd grows to about 60 segments, against about 50 without",
          "about 60 / 50 segments", "Fig. 5, section 3", FIG5, "disagrees",
          "the bursts reach 160 KB on an unlimited path and Linux's slow start grows cwnd to twice what is in"
          " flight, before newCWV's rules act"),
)
