"""The CATNIP paper's claims for the reproduction report (papers/claims.py, docs/report.md): C.
Williamson and Q. Wu, "A Case for Context-Aware TCP/IP", ACM SIGMETRICS Performance Evaluation
Review 29(4), 2002. The paper's numbers are read from published.py (its tables as printed) or, for
the prose, quoted with their section. Each verdict and cause is docs/reproduction.md's, in the
section named ("Which of the paper's claims hold" for sections V-A to V-G, "Coverage" for what was
not run); our numbers are not typed here.

Table XI's claims compute ours from `make table-xi`'s three runs (baseline, partial SPM, full
SPM; today's TCP), archived: their ids are in TABLE_XI_RUNS.
"""

from __future__ import annotations

from catnip.papers.catnip import published as pub
from catnip.papers.claims import Claim, Measure, table_xi

HOLD = "Which of the paper's claims hold"
GLANCE = "At a glance"
COVERAGE = "Coverage: every table and figure of the paper"
TABLE_XI = "Table XI (WAN emulation, section V-G)"

# `make table-xi`'s runs (scripts/table-xi.sh, today's TCP): archived ids, "" until archived.
TABLE_XI_RUNS = {  # make table-xi, 2026-11-28, seed 1; the baseline's late points re-run (docs/reproduction.md)
    "baseline": "20261128-134929-catnip-wan-baseline-3a62+20261128-143129-catnip-wan-baseline-5a0d"
                "+20261128-144238-catnip-wan-baseline-f5a4",
    "partial": "20261128-140638-catnip-wan-partial-spm-5ae5",
    "full": "20261128-141720-catnip-wan-catnip-c5a2"}


def _xi(side: str, value: str, buffers: tuple[int, ...], what: str) -> Measure:
    runs = (TABLE_XI_RUNS["baseline"], TABLE_XI_RUNS[side])
    # The beside layout uses only points that kept real time: pooled with its re-runs, the baseline
    # gives each buffer its real-time point.
    return Measure("catnip-table-xi-beside", runs if all(runs) else (), table_xi(value, buffers), what)


def _col(kb: int, key: str) -> str:
    value = pub.table_xi_column(kb)[key]
    return f"{100 * value:.2f}%" if key == "loss" else f"{value:.2f}"


_DT, _GOOD, _BAD = pub.loss_row("Reno", "droptail"), pub.loss_row("Reno", "catnip_good"), pub.loss_row("Reno", "catnip_bad")
_ECA_BAD = pub.loss_row("ECA", "catnip_bad")
assert _DT and _GOOD and _BAD and _ECA_BAD and _GOOD.high and _GOOD.low and _BAD.high and _BAD.low and _ECA_BAD.high

CLAIMS = (
    Claim("droptail-loss", "Reno under DropTail loses this share of its packets at the bottleneck",
          f"{_DT.loss_pct}%", "Table IV (section V-A)", HOLD, "disagrees",
          "the initial window (Linux's 10 segments against ns-2's 1) is most of the gap; part remains with every"
          " period factor the study moves", GLANCE),
    Claim("good-split", "CATNIP-Good biases the loss to low priority",
          f"high {_GOOD.high[2]}% / low {_GOOD.low[2]}%", "Table VII (section V-B)", HOLD, "direction only",
          "CATNIP-Good's high-priority loss is the control segments marked high; near the paper's figure only"
          " with the handshake unmarked", GLANCE),
    Claim("good-total", "CATNIP-Good's total loss is a little above DropTail's",
          f"{_GOOD.loss_pct}% against {_DT.loss_pct}%", "Table VII, section V-B", HOLD, "agrees",
          note="in each reading, not tested for significance"),
    Claim("good-pages", "CATNIP-Good is faster than DropTail on every page: means 17-82% lower, standard deviations"
          " 60-95% lower", "17-82%, 60-95%", "Tables II and V, Fig. 6, section V-B", HOLD, "direction only",
          "with the handshake unmarked each lost SYN or SYN-ACK costs the 6 s initial RTO",
          note="holds while the handshake is protected; never on the long-transfer page with today's TCP"),
    Claim("bad-pages", "CATNIP-Bad (marking inverted) is slower than DropTail", "slower",
          "Table VIII, section V-C", HOLD, "agrees", note="with today's TCP; not separable under the period set"),
    Claim("bad-split", "CATNIP-Bad biases the loss to high priority",
          f"high {_BAD.high[2]}% / low {_BAD.low[2]}%", "Table X (section V-C)", HOLD, "direction only",
          "the loss of every Tables II-X point is several times the paper's (the initial window first)", GLANCE),
    Claim("red-pages", "RED is slightly slower than DropTail", "slightly slower", "section V-D", HOLD, "agrees",
          "its early drops take the control segments too", note="much more than slightly under the period set"),
    Claim("catnip-red-pages", "CATNIP-RED is consistently faster than DropTail", "faster on every page",
          "Fig. 7, section V-D", HOLD, "disagrees",
          "RED and CATNIP-RED, whose early drops take the control segments too, are slower than DropTail on every"
          " page under the period set", GLANCE),
    Claim("marked-high", "About 40% of the packets are marked high", "about 40%", "Table VII, section V-B", HOLD, "agrees",
          "a smaller initial window sends more segments while cwnd < 4, which SPM marks", note="roughly"),
    Claim("eca-droptail", "ECA and RBPLW lower DropTail's loss (Reno > RBPLW > ECA+RBPLW > ECA); the page-time"
          " differences are not significant",
          " > ".join(f"{r.algorithm.split('/')[0]} {r.loss_pct:.2f}%"
                     for r in sorted(pub.TABLE_IV, key=lambda r: -r.loss_pct)),
          "Table IV, section V-A", HOLD, "agrees", note="today's TCP only"),
    Claim("fairness", "ECA loses less than Reno on a shared bottleneck, with no page-time advantage",
          "3.05% against 3.68% (DropTail)", "section V-E", HOLD, "agrees", note="today's TCP only"),
    Claim("http11", "With HTTP/1.1, CATNIP-Good is 7-76% faster than DropTail, sdev 58-98% lower", "7-76%, 58-98%",
          "section V-F", HOLD, "direction only", note="smaller gains; the two largest pages slower"),
    Claim("xi-loss", "The WAN baseline's loss falls with the router buffer",
          " / ".join(_col(kb, "loss") for kb in pub.TABLE_XI_BUFFERS) + " at 64 / 128 / 256 / 512 KB",
          "Table XI (section V-G)", HOLD, "disagrees",
          "the initial window (Linux's 10 segments against Linux 2.4's 2) is most of the gap", GLANCE,
          measure=_xi("partial", "baseline_loss", pub.TABLE_XI_BUFFERS,
                      "the baseline's bottleneck loss, today's TCP (`make table-xi`)")),
    Claim("xi-64", "CATNIP (partial SPM) is faster than Linux TCP with FIFO routers at 64 KB",
          f"Mean {_col(64, 'mean')}", "Table XI (section V-G)", HOLD, "disagrees",
          "with 1448-byte segments nearly every packet at 64 KB is high, so CATNIP-Good has little to drop first",
          measure=_xi("partial", "relative_mean", (64,),
                      "partial SPM's page times over the baseline's, mean over pages ±95%, today's TCP")),
    Claim("xi-128", "CATNIP (partial SPM) is faster than Linux TCP with FIFO routers at 128 KB",
          f"Mean {_col(128, 'mean')}", "Table XI (section V-G)", HOLD, "direction only",
          note="faster by a few per cent against the paper's 11%, with the period TCP",
          measure=_xi("partial", "relative_mean", (128,),
                      "partial SPM's page times over the baseline's, mean over pages ±95%, today's TCP")),
    Claim("xi-256-512", "No difference with large buffers",
          f"Mean {_col(256, 'mean')} (256 KB), {_col(512, 'mean')} (512 KB)", "Table XI (section V-G)", HOLD, "agrees",
          measure=_xi("partial", "relative_mean", (256, 512),
                      "partial SPM's page times over the baseline's, mean over pages ±95%, today's TCP")),
    Claim("xi-full", "Full SPM would do better than partial SPM", "better (no number)", "section V-G", HOLD,
          "direction only", note="better at 128 KB in every seed; not separable at 64 KB",
          measure=_xi("full", "relative_mean", (64, 128),
                      "full SPM's page times over the baseline's, mean over pages ±95%, today's TCP")),
    Claim("eca-bad", "ECA under CATNIP-Bad: per-page times and the loss split",
          f"loss {_ECA_BAD.loss_pct}%, high {_ECA_BAD.high[2]}%", "Tables IX and X (section V-C)", COVERAGE,
          "not run", "no ECA point under CATNIP-Bad: the router sweep runs Reno only"),
    Claim("fig1", "The transfer time of a 14 KB document depends on which of its packets is lost",
          "1.1 s lossless; per lost packet in the figure only", "Fig. 1 (section III-A)", COVERAGE, "not run",
          "no scenario drops one chosen packet of a transfer; the queue engine drops by policy or at random"),
)
