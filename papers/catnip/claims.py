"""The CATNIP paper's claims for the reproduction report (papers/claims.py, docs/report.md): C.
Williamson and Q. Wu, "A Case for Context-Aware TCP/IP", ACM SIGMETRICS Performance Evaluation
Review 29(4), 2002. The paper's numbers are read from published.py (its tables as printed) or, for
the prose, quoted with their section. Each verdict and cause is docs/reproduction.md's, in the
section named ("Which of the paper's claims hold" for sections V-A to V-G, "Coverage" for what was
not run); our numbers are not typed here.

Table XI's claims compute ours from `make table-xi`'s three runs (baseline, partial SPM, full
SPM; today's TCP), archived: their ids are in TABLE_XI_RUNS. The router set's claims (sections
V-B to V-D: Tables VII, VIII, X, Fig. 7) compute ours from the router set's run kept in archive/
(ROUTERS_RUN: scenarios/catnip-sim-routers.yaml, seed 1, today's TCP), through the layouts
catnip-loss-beside (loss by priority, beside the paper's row) and catnip-vs-first-point (page
times over DropTail's); each point is found by the policy its record says it ran, never by its
label. Its verdicts stay those of docs/reproduction.md, "Which of the paper's claims hold", which
also weighs seeds 2-3 and the period set (not archived). The senders (Table IV), fairness (V-E)
and HTTP/1.1 (V-F) have no archived run: not archived.
"""

from __future__ import annotations

from typing import Callable

from catnip.papers.catnip import published as pub
from catnip.papers.claims import Claim, ClaimsError, Figure, Measure, table_xi
from catnip.results.table import Table

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


# The router set, Tables VIII-X and Fig. 7 (make sim-tables' catnip-sim-routers.yaml, today's TCP):
# seed 1 at 8f036a8 with --jobs 2, every point in real time at the first attempt (docs/reproduction.md,
# "Tables VIII-X from a run kept in archive/"). "" until archived.
ROUTERS_RUN = "20261128-174419-catnip-sim-routers-ed76"
_ROUTERS_WHAT = "the router set's seed 1, today's TCP (scenarios/catnip-sim-routers.yaml)"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


def _rows_by_policy(table: Table, policies: tuple[str, ...]) -> tuple[dict[str, dict], list[str]]:
    """The table's row of each policy (as published.POLICY_NAMES names it; the layout's `policy`
    column, from the point's record), as {column: value}, and the policies whose point missed real
    time. A policy with no point, or with two, is a ClaimsError: which point is meant is unclear."""
    names = [c.name for c in table.columns]
    for need in ("policy", "realtime_ok"):
        if need not in names:
            raise ClaimsError(f"layout {table.layout} has no {need} column (each point's policy from its record)")
    rows: dict[str, dict] = {}
    for r in table.rows:
        row = dict(zip(names, r))
        if row["policy"] in policies:
            if row["policy"] in rows:
                raise ClaimsError(f"layout {table.layout}: two points ran {row['policy']}")
            rows[row["policy"]] = row
    missing = [p for p in policies if p not in rows]
    if missing:
        raise ClaimsError(f"layout {table.layout}: no point ran {', '.join(missing)}")
    late = [p for p in policies
            if not all(v is True for k, v in rows[p].items() if k == "realtime_ok" or k.endswith("_realtime_ok"))]
    return rows, late


def router_loss(policies: tuple[str, ...], text: Callable[[dict[str, dict]], str]) -> Callable[[Table], Figure]:
    """catnip-loss-beside's figure: `text` of the rows of `policies` (all needed: a point that
    missed real time leaves no figure, and is named)."""
    def figure(table: Table) -> Figure:
        rows, late = _rows_by_policy(table, policies)
        if late:
            return Figure("no point in real time", 0, tuple(late))
        return Figure(text(rows), len(policies))
    return figure


def router_pages(policy: str) -> Callable[[Table], Figure]:
    """catnip-vs-first-point's figure for the point that ran `policy`: its page means over DropTail's
    (the mean over the ten pages with its 95% interval, and their range), the pages faster, and
    the pages whose interval is clear of 1.00 either way. The first point must have run DropTail
    (the paper compares each policy with DropTail): another baseline is a ClaimsError."""
    def figure(table: Table) -> Figure:
        rows, late = _rows_by_policy(table, (policy,))
        r = rows[policy]
        if r.get("baseline_policy") != "DropTail":
            raise ClaimsError(f"layout {table.layout}: {policy}'s point is compared with"
                              f" {r.get('baseline_policy')}, not DropTail")
        if late:
            return Figure("no point in real time", 0, tuple(late))
        return Figure(f"{r['relative_mean']:.2f} ±{r['relative_mean_ci95']:.2f} of DropTail's page times"
                      f" (per page {r['relative_min']:.2f}-{r['relative_max']:.2f}); faster on {r['pages_faster']}"
                      f" of {r['pages']} pages, {r['pages_faster_clear']} with the interval clear of 1.00,"
                      f" slower so on {r['pages_slower_clear']}", 1)
    return figure


def _routers(layout: str, figure: Callable[[Table], Figure], what: str) -> Measure:
    return Measure(layout, (ROUTERS_RUN,) if ROUTERS_RUN else (), figure, f"{what}; {_ROUTERS_WHAT}")


def _pages(policy: str) -> Measure:
    return _routers("catnip-vs-first-point", router_pages(policy),
                    f"{policy}'s page means over DropTail's, mean over the ten pages ±95%")


def _split(rows: dict[str, dict], policy: str) -> str:
    return f"high {_pct(rows[policy]['high_loss'])} / low {_pct(rows[policy]['low_loss'])}"


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
          " period factor the study moves", GLANCE,
          measure=_routers("catnip-loss-beside", router_loss(("DropTail",), lambda r: _pct(r["DropTail"]["loss"])),
                           "DropTail's bottleneck loss, all packets")),
    Claim("good-split", "CATNIP-Good biases the loss to low priority",
          f"high {_GOOD.high[2]}% / low {_GOOD.low[2]}%", "Table VII (section V-B)", HOLD, "direction only",
          "CATNIP-Good's high-priority loss is the control segments marked high; near the paper's figure only"
          " with the handshake unmarked", GLANCE,
          measure=_routers("catnip-loss-beside", router_loss(("CATNIP-Good",), lambda r: _split(r, "CATNIP-Good")),
                           "CATNIP-Good's bottleneck loss by priority")),
    Claim("good-total", "CATNIP-Good's total loss is a little above DropTail's",
          f"{_GOOD.loss_pct}% against {_DT.loss_pct}%", "Table VII, section V-B", HOLD, "agrees",
          note="in each reading, not tested for significance",
          measure=_routers("catnip-loss-beside", router_loss(
              ("CATNIP-Good", "DropTail"),
              lambda r: f"{_pct(r['CATNIP-Good']['loss'])} against {_pct(r['DropTail']['loss'])}"),
              "CATNIP-Good's bottleneck loss against DropTail's, all packets")),
    Claim("good-pages", "CATNIP-Good is faster than DropTail on every page: means 17-82% lower, standard deviations"
          " 60-95% lower", "17-82%, 60-95%", "Tables II and V, Fig. 6, section V-B", HOLD, "direction only",
          "with the handshake unmarked each lost SYN or SYN-ACK costs the 6 s initial RTO",
          note="holds while the handshake is protected; with today's TCP never on page 2 (56 KB in two objects)",
          measure=_pages("CATNIP-Good")),
    Claim("bad-pages", "CATNIP-Bad (marking inverted) is slower than DropTail", "slower",
          "Table VIII, section V-C", HOLD, "agrees", note="with today's TCP; not separable under the period set",
          measure=_pages("CATNIP-Bad")),
    Claim("bad-split", "CATNIP-Bad biases the loss to high priority",
          f"high {_BAD.high[2]}% / low {_BAD.low[2]}%", "Table X (section V-C)", HOLD, "direction only",
          "the loss of every Tables II-X point is several times the paper's (the initial window first)", GLANCE,
          measure=_routers("catnip-loss-beside", router_loss(("CATNIP-Bad",), lambda r: _split(r, "CATNIP-Bad")),
                           "CATNIP-Bad's bottleneck loss by priority")),
    Claim("red-pages", "RED is slightly slower than DropTail", "slightly slower", "section V-D", HOLD, "agrees",
          "its early drops take the control segments too", note="much more than slightly under the period set",
          measure=_pages("RED")),
    Claim("catnip-red-pages", "CATNIP-RED is consistently faster than DropTail", "faster on every page",
          "Fig. 7, section V-D", HOLD, "disagrees",
          "RED and CATNIP-RED, whose early drops take the control segments too, are slower than DropTail on every"
          " page under the period set", GLANCE, measure=_pages("CATNIP-RED")),
    Claim("marked-high", "About 40% of the packets are marked high", "about 40%", "Table VII, section V-B", HOLD, "agrees",
          "a smaller initial window sends more segments while cwnd < 4, which SPM marks", note="roughly",
          measure=_routers("catnip-loss-beside", router_loss(
              ("CATNIP-Good",),
              lambda r: f"{_pct(r['CATNIP-Good']['marked_high'])} of the servers' data segments;"
                        f" {_pct(r['CATNIP-Good']['high_share'])} of the packets at the bottleneck, control"
                        " segments (marked high) included"),
              "marked high under CATNIP-Good")),
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
