"""The CATNIP paper's published numbers, entered as data (published figures are facts).

C. Williamson and Q. Wu, "A Case for Context-Aware TCP/IP", ACM SIGMETRICS Performance Evaluation
Review 29(4), 2002. Every table of the paper that carries numbers, exactly as printed:

- Tables II, III, V, VI, VIII, IX (sections V-A to V-C): per Web page, the min, median, max, mean
  and standard deviation of the page transfer time in seconds, ns-2 simulation, 100 clients, for
  Reno and ECA senders under DropTail, CATNIP-Good and CATNIP-Bad routers (the pages' Total Conns
  and Total Bytes columns are the same in every table: workloads/pages.py TABLE_II);
- Tables IV, VII and X: packets sent, dropped and the loss, in all and (VII, X) by priority;
- Table XI (section V-G, WAN emulation of the Linux prototype with partial SPM and CATNIP-Good
  against Linux TCP and FIFO routers): each page's relative download time per router buffer, the
  Mean and StdDev rows and the TCP packet loss.

In the text the paper was extracted to, the headings of Tables III and V stand together above two
tables; the first is Table III (ECA/DropTail: its minima for pages 3, 4 and 8, 0.205, 0.210 and
0.213 s, are ECA's, as in Table VI), the second Table V (Reno/CATNIP-Good: section V-B's "17% for
Web page 5 to 82% for Web page 9" and "60% (page 10) to 95% (pages 8 and 9)" are Table V against
Table II; tests/test_paper_published.py checks both).

The prose's numbers (section and claim) are in CLAIMS. Figures 5-7 are bar charts whose values the
text does not give (only Tables II-III, V-VI of the bars they draw): FIGURES_ONLY says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CITATION = ('C. Williamson, Q. Wu, "A Case for Context-Aware TCP/IP", ACM SIGMETRICS Performance Evaluation'
            " Review 29(4), 2002")
PAGES = tuple(range(1, 11))
STATS = ("min", "median", "max", "mean", "sdev")


@dataclass(frozen=True)
class PageTable:
    """One of the detailed tables: per page (1-10), (min, median, max, mean, sdev) in seconds."""
    number: str       # the paper's table number, "II"
    sender: str       # the TCP sender as the paper names it: Reno, ECA
    policy: str       # the router policy's kind (spec: droptail, catnip_good, catnip_bad)
    section: str
    rows: dict[int, tuple[float, float, float, float, float]]

    @property
    def caption(self) -> str:
        return f"Table {self.number}, {self.sender}/{POLICY_NAMES[self.policy]} ({self.section})"

    def row(self, page: int) -> dict[str, float] | None:
        values = self.rows.get(page)
        return None if values is None else dict(zip(STATS, values))


POLICY_NAMES = {"droptail": "DropTail", "red": "RED", "catnip_good": "CATNIP-Good", "catnip_bad": "CATNIP-Bad",
                "catnip_red": "CATNIP-RED"}

# Table II, "Detailed simulation results for Reno/DropTail" (section V-A).
TABLE_II = PageTable("II", "Reno", "droptail", "section V-A", {
    1: (0.134, 0.134, 18.131, 1.058, 2.613), 2: (0.450, 0.771, 18.630, 1.311, 2.266),
    3: (0.184, 0.186, 6.036, 0.302, 0.593), 4: (0.202, 0.215, 6.239, 0.325, 0.610),
    5: (0.844, 1.049, 18.098, 1.527, 1.970), 6: (0.276, 0.328, 6.939, 0.627, 1.078),
    7: (0.103, 0.103, 6.127, 0.587, 1.634), 8: (0.205, 0.213, 6.239, 0.779, 1.695),
    9: (0.190, 0.195, 18.353, 1.251, 3.414), 10: (0.103, 0.108, 6.147, 0.541, 1.534)})
# Table III, "Detailed simulation results for ECA/DropTail" (section V-A).
TABLE_III = PageTable("III", "ECA", "droptail", "section V-A", {
    1: (0.134, 0.134, 6.472, 0.694, 1.742), 2: (0.450, 0.573, 18.835, 1.223, 2.255),
    3: (0.205, 0.205, 6.446, 0.439, 1.032), 4: (0.210, 0.213, 6.236, 0.561, 1.301),
    5: (0.930, 1.051, 7.636, 1.569, 1.445), 6: (0.277, 0.299, 6.432, 0.605, 1.053),
    7: (0.103, 0.103, 6.141, 0.707, 1.806), 8: (0.213, 0.214, 6.255, 0.777, 1.698),
    9: (0.184, 0.185, 18.165, 0.645, 2.125), 10: (0.103, 0.103, 18.101, 0.652, 2.267)})
# Table V, "Detailed simulation results for Reno/CATNIP-Good" (section V-B).
TABLE_V = PageTable("V", "Reno", "catnip_good", "section V-B", {
    1: (0.134, 0.138, 6.136, 0.275, 0.842), 2: (0.450, 0.792, 2.245, 0.866, 0.463),
    3: (0.184, 0.184, 0.566, 0.230, 0.096), 4: (0.202, 0.209, 0.630, 0.266, 0.110),
    5: (0.702, 1.082, 2.733, 1.274, 0.430), 6: (0.276, 0.312, 1.465, 0.446, 0.217),
    7: (0.103, 0.103, 6.100, 0.173, 0.599), 8: (0.205, 0.208, 0.584, 0.254, 0.093),
    9: (0.190, 0.197, 0.445, 0.230, 0.070), 10: (0.103, 0.103, 6.064, 0.174, 0.595)})
# Table VI, "Detailed simulation results for ECA/CATNIP-Good" (section V-B).
TABLE_VI = PageTable("VI", "ECA", "catnip_good", "section V-B", {
    1: (0.134, 0.135, 0.390, 0.153, 0.040), 2: (0.450, 0.811, 2.440, 0.895, 0.443),
    3: (0.205, 0.206, 0.580, 0.239, 0.077), 4: (0.210, 0.214, 0.828, 0.264, 0.116),
    5: (0.935, 1.072, 6.225, 1.371, 0.924), 6: (0.277, 0.301, 0.929, 0.392, 0.181),
    7: (0.103, 0.103, 6.073, 0.170, 0.596), 8: (0.213, 0.215, 0.609, 0.246, 0.076),
    9: (0.184, 0.190, 6.167, 0.334, 0.839), 10: (0.103, 0.103, 6.088, 0.238, 0.839)})
# Table VIII, "Detailed simulation results for Reno/CATNIP-Bad" (section V-C).
TABLE_VIII = PageTable("VIII", "Reno", "catnip_bad", "section V-C", {
    1: (0.134, 0.134, 18.150, 1.019, 2.570), 2: (0.450, 0.475, 18.077, 1.445, 2.864),
    3: (0.184, 0.187, 42.037, 1.918, 5.192), 4: (0.202, 0.209, 42.171, 1.497, 5.046),
    5: (0.663, 1.049, 43.014, 4.410, 7.095), 6: (0.276, 0.291, 42.419, 1.859, 6.088),
    7: (0.103, 0.103, 18.131, 0.835, 2.461), 8: (0.205, 0.209, 6.282, 0.894, 1.870),
    9: (0.190, 0.195, 18.168, 1.083, 2.548), 10: (0.103, 0.103, 6.170, 0.601, 1.633)})
# Table IX, "Detailed simulation results for ECA/CATNIP-Bad" (section V-C).
TABLE_IX = PageTable("IX", "ECA", "catnip_bad", "section V-C", {
    1: (0.134, 0.134, 6.488, 0.697, 1.738), 2: (0.450, 0.474, 18.567, 1.162, 2.235),
    3: (0.205, 0.205, 18.210, 1.315, 3.102), 4: (0.210, 0.212, 18.476, 0.815, 2.292),
    5: (0.701, 0.967, 18.110, 2.523, 2.914), 6: (0.277, 0.289, 6.570, 0.662, 1.325),
    7: (0.103, 0.103, 42.098, 2.387, 5.704), 8: (0.213, 0.220, 6.944, 1.030, 2.025),
    9: (0.184, 0.186, 18.187, 1.604, 3.595), 10: (0.103, 0.103, 18.085, 1.020, 2.992)})

PAGE_TABLES = {t.number: t for t in (TABLE_II, TABLE_III, TABLE_V, TABLE_VI, TABLE_VIII, TABLE_IX)}


@dataclass(frozen=True)
class LossRow:
    """A row of Tables IV, VII, X: (sent, drops, loss %) in all, and by priority where printed."""
    table: str
    algorithm: str    # as printed, "Reno/CATNIP-Good"
    sent: int
    drops: int
    loss_pct: float   # as printed, in percent
    high: tuple[int, int, float] | None = None  # (sent, drops, loss %)
    low: tuple[int, int, float] | None = None

    @property
    def caption(self) -> str:
        return f"Table {self.table}, {self.algorithm}"


# Table IV, "Summary of packet loss results for DropTail routers" (section V-A): all packets only.
TABLE_IV = (LossRow("IV", "Reno/DropTail", 47_918, 1_656, 3.46),
            LossRow("IV", "Reno+RBPLW/DropTail", 47_632, 1_477, 3.10),
            LossRow("IV", "ECA/DropTail", 47_429, 1_359, 2.87),
            LossRow("IV", "ECA+RBPLW/DropTail", 47_641, 1_466, 3.08))
# Table VII, "Summary of packet loss results for CATNIP-Good routers" (section V-B). As printed, though
# ECA+RBPLW's high and low drops (96 + 1,743) add up to 1,839, not its 1,836 in all.
TABLE_VII = (LossRow("VII", "Reno/CATNIP-Good", 48_126, 1_799, 3.74, (19_126, 93, 0.49), (29_000, 1_706, 5.88)),
             LossRow("VII", "Reno+RBPLW/CATNIP-Good", 47_966, 1_751, 3.65, (19_228, 81, 0.42), (28_738, 1_670, 5.81)),
             LossRow("VII", "ECA/CATNIP-Good", 47_791, 1_505, 3.15, (18_836, 51, 0.27), (28_955, 1_454, 5.02)),
             LossRow("VII", "ECA+RBPLW/CATNIP-Good", 48_087, 1_836, 3.82, (19_876, 96, 0.48), (28_211, 1_743, 6.18)),
             LossRow("VII", "Reno/DropTail", 47_918, 1_656, 3.46, (19_008, 514, 2.70), (28_910, 1_142, 3.95)))
# Table X, "Summary of packet loss results for CATNIP-Bad routers" (section V-C).
TABLE_X = (LossRow("X", "Reno/CATNIP-Bad", 47_690, 1_847, 3.87, (19_317, 1_320, 6.83), (28_373, 527, 1.86)),
           LossRow("X", "ECA/CATNIP-Bad", 47_250, 1_501, 3.18, (18_842, 1_165, 6.18), (28_408, 336, 1.18)),
           LossRow("X", "Reno/DropTail", 47_918, 1_656, 3.46, (19_008, 514, 2.70), (28_910, 1_142, 3.95)))
LOSS_TABLES = {"IV": TABLE_IV, "VII": TABLE_VII, "X": TABLE_X}

# Table XI, "Relative download times for WAN emulation experiments with CATNIP-Good" (section V-G):
# per router buffer (KB), each page's CATNIP time over Linux TCP's with FIFO routers.
TABLE_XI_BUFFERS = (64, 128, 256, 512)
TABLE_XI = {
    1: (0.95, 0.88, 0.95, 0.96), 2: (0.79, 1.13, 1.10, 1.14), 3: (0.88, 0.67, 0.95, 0.98),
    4: (0.64, 0.69, 0.97, 0.98), 5: (0.93, 0.96, 1.00, 1.02), 6: (1.01, 1.05, 0.93, 0.97),
    7: (1.02, 0.89, 0.96, 0.96), 8: (1.38, 1.04, 0.99, 0.97), 9: (0.82, 0.77, 0.96, 0.96),
    10: (0.85, 0.86, 0.96, 0.98)}
TABLE_XI_MEAN = (0.93, 0.89, 0.98, 0.99)
TABLE_XI_STDDEV = (0.18, 0.15, 0.05, 0.05)
# "TCP Pkt Loss": the table does not say which side's; the text ties it to the buffer ("about 10%" at
# 64 KB, 0% at 512 KB), and docs/reproduction.md reads it as the baseline's, as the study does here.
TABLE_XI_LOSS_PCT = (9.66, 4.74, 0.22, 0.00)


@dataclass(frozen=True)
class Claim:
    """A number the paper's prose gives, as printed, with where."""
    where: str
    text: str


# The prose's numbers (paraphrased, the numbers as printed), keyed by what they are about.
CLAIMS: dict[str, tuple[Claim, ...]] = {
    "droptail": (
        Claim("section V-A", "RBPLW lowers Reno's loss from 3.46% to 3.10% (10% less), ECA to 2.87% (17% less)."),
        Claim("section V-A", "Page-time differences between the four senders are within their large standard"
                             " deviations (Fig. 5(b)): not statistically significant.")),
    "catnip_good": (
        Claim("section V-B", "Reno/CATNIP-Good against Reno/DropTail: mean page times 17% (page 5) to 82% (page 9)"
                             " lower, 24% to 70% for most pages; standard deviations 60% (page 10) to 95% (pages 8"
                             " and 9) lower."),
        Claim("section V-B", "About 40% of the packets are marked high; the loss is about 10% higher than"
                             " DropTail's (3.74% against 3.46% for Reno).")),
    "red": (
        Claim("section V-D", "RED with thresholds at 20% and 60% of the queue and weight 0.01 loses 3.8-4.1% in"
                             " all, a little more than DropTail; CATNIP-RED is faster on every page (Fig. 7, values"
                             " not given in the text)."),),
    "fairness": (
        Claim("section V-E", "50 ECA and 50 Reno sources: ECA loses 3.05% against Reno's 3.68% (DropTail) and"
                             " 3.23% against 3.95% (CATNIP-Good), with no difference in mean page time."),),
    "http11": (
        Claim("section V-F", "HTTP/1.1: Reno/CATNIP-Good's mean page times 7-76% below Reno/DropTail's,"
                             " standard deviations 58-98% lower; 20% of the packets marked high, 2.59% lost."),),
    "wan": (
        Claim("section V-G", "The buffers span the baseline's loss from about 10% (64 KB) to 0% (512 KB); below 1.0"
                             " CATNIP is faster; up to 40% shorter page times (section I)."),),
}

# Figures whose values the text does not give.
FIGURES_ONLY = {
    "Fig. 1": "transfer time of a 14 KB document per lost packet (figure only, values not given in the text"
              " beyond the 1.1 s lossless transfer)",
    "Fig. 5": "DropTail, four senders: mean and sdev per page (figure only; Tables II and III give Reno and ECA)",
    "Fig. 6": "CATNIP-Good, four senders (figure only; Tables V and VI give Reno and ECA)",
    "Fig. 7": "RED and CATNIP-RED (figure only, values not given in the text)",
}

# The router policies the detailed tables cover, by the sender the paper names.
_PAGE_TABLE_OF = {(t.sender, t.policy): t for t in PAGE_TABLES.values()}


def page_table(sender: str, policy: str) -> PageTable | None:
    """The detailed table of a paper sender (Reno, ECA, ...) and router policy kind, if printed."""
    return _PAGE_TABLE_OF.get((sender, policy))


def loss_row(sender: str, policy: str) -> LossRow | None:
    """The loss table's row of a paper sender and router policy kind, the fullest printed (by
    priority where it is): Reno/DropTail from Table VII, which splits it by priority."""
    name = f"{sender}/{POLICY_NAMES.get(policy, policy)}"
    rows = [r for t in ("VII", "X", "IV") for r in LOSS_TABLES[t] if r.algorithm == name]
    return rows[0] if rows else None


def buffer_kb(value: Any) -> int | None:
    """A router buffer as Table XI's column (64, 128, 256, 512 KB), from a scenario's value
    ("64KB", "128 KB") or a resolved one ({"bytes": 65536}; 1 KB = 1024 bytes, spec/units.py), or
    None for any other buffer."""
    if isinstance(value, dict):
        size = value.get("bytes")
        kb = size // 1024 if isinstance(size, int) and size % 1024 == 0 else None
        return kb if kb in TABLE_XI_BUFFERS else None
    text = str(value).replace(" ", "").upper()
    if not text.endswith("KB") or not text[:-2].isdigit():
        return None
    kb = int(text[:-2])
    return kb if kb in TABLE_XI_BUFFERS else None


def table_xi_column(kb: int) -> dict[str, Any]:
    """Table XI's column of one buffer: per-page ratios, Mean, StdDev, and the loss as a fraction."""
    i = TABLE_XI_BUFFERS.index(kb)
    return {"buffer_kb": kb, "pages": {p: v[i] for p, v in TABLE_XI.items()}, "mean": TABLE_XI_MEAN[i],
            "sdev": TABLE_XI_STDDEV[i], "loss": TABLE_XI_LOSS_PCT[i] / 100}


def mean_page_ratio(mine: PageTable, ref: PageTable) -> float:
    """The mean over pages of mine's mean time over ref's: Table XI's Mean row, for two of the
    simulation's tables (computed from the printed means; the paper prints no such number)."""
    return sum(mine.rows[p][3] / ref.rows[p][3] for p in PAGES) / len(PAGES)


def study_targets(context: str) -> dict[tuple[str, str], tuple[float, str]]:
    """The gap study's targets (docs/reproduction.md, "The gap, factor by factor") for one of its
    contexts ("" for catnip-study-sim.yaml's Tables II-X setup, "topology.bottleneck.buffer=64KB"
    for catnip-study-wan.yaml's): {(side, metric): (value, where)}, metric as study.py's
    METRICS, a loss as a fraction."""
    if not context:
        reno_dt, reno_good = loss_row("Reno", "droptail"), loss_row("Reno", "catnip_good")
        assert reno_dt and reno_good and reno_good.high and reno_good.low
        return {("fifo", "loss"): (reno_dt.loss_pct / 100, "Table IV, Reno/DropTail"),
                ("catnip", "loss"): (reno_good.loss_pct / 100, "Table VII, Reno/CATNIP-Good"),
                ("catnip", "high_loss"): (reno_good.high[2] / 100, "Table VII, high priority"),
                ("catnip", "low_loss"): (reno_good.low[2] / 100, "Table VII, low priority"),
                ("catnip", "vs_fifo"): (round(mean_page_ratio(TABLE_V, TABLE_II), 2),
                                        "Tables V over II, mean of the page ratios (computed, not printed)")}
    key, _, value = context.partition("=")
    kb = buffer_kb(value) if key == "topology.bottleneck.buffer" and "," not in value else None
    if kb is None:
        return {}
    col = table_xi_column(kb)
    return {("fifo", "loss"): (col["loss"], f"Table XI, TCP Pkt Loss at {kb} KB"),
            ("catnip", "vs_fifo"): (col["mean"], f"Table XI, Mean at {kb} KB")}
