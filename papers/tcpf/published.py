"""The TCP-friendly marking paper's Tables 4-7, entered as data (published figures are facts).

G. Lo Monaco, A. Feroz, S. Kalyanaraman, Y. Xia, "TCP-Friendly Marking for Scalable Best-Effort
Services on the Internet", ACM SIGCOMM Computer Communication Review 31(5), October 2001,
section 6.2, Tables 4 (Config A: SACK, good RED), 5 (B: Reno, good RED), 6 (C: SACK, mistuned
RED) and 7 (D: Reno, mistuned RED). Per case and number of flows: total timeouts, packet loss at
the bottleneck (%), mean per-flow goodput (KB/s) and the C.O.V. of the per-flow goodputs.

Table 7's TCPF(O)+RIO goodput at 100 flows is printed "9892"; it is entered as 9.892 (the column
is KB/s between 7.8 and 11.4; docs/reproduction-tcpf.md).
"""

from __future__ import annotations

# Section 6.1, Table 2: the configurations.
CONFIGS = {"A": ("SACK", "good"), "B": ("Reno", "good"), "C": ("SACK", "mistuned"), "D": ("Reno", "mistuned")}
TABLE_OF = {"A": 4, "B": 5, "C": 6, "D": 7}
# Section 6.1, Table 3: the cases, in the order of the results tables.
CASES = ("TCPF+FRIO", "TCPF+RIO", "TCPF(O)+RIO", "TB+RIO", "NoMark+FRED", "NoMark+TailDrop", "NoMark+RED")

# (config, case) -> {flows: (timeouts, loss %, goodput KB/s, C.O.V.)}
_ROWS = {
    "A": [((41, 4.00, 11.421, 0.06), (2, 2.14, 22.236, 0.03)),
          ((120, 5.46, 10.575, 0.12), (9, 2.67, 20.742, 0.04)),
          ((390, 6.38, 10.020, 0.20), (49, 3.27, 19.514, 0.09)),
          ((911, 7.75, 9.705, 0.33), (253, 4.13, 18.892, 0.12)),
          ((1030, 8.02, 9.460, 0.22), (323, 4.76, 18.370, 0.10)),
          ((1140, 8.43, 8.970, 0.24), (415, 5.01, 17.232, 0.12)),
          ((1322, 9.01, 9.015, 0.38), (491, 5.25, 17.865, 0.17))],
    "B": [((62, 4.33, 11.391, 0.07), (8, 2.49, 22.079, 0.03)),
          ((176, 5.47, 10.472, 0.14), (16, 2.83, 20.635, 0.04)),
          ((578, 9.24, 9.992, 0.22), (129, 4.78, 19.034, 0.14)),
          ((1127, 12.49, 9.660, 0.31), (350, 6.66, 18.486, 0.19)),
          ((1209, 13.97, 9.235, 0.24), (398, 7.13, 18.125, 0.17)),
          ((1293, 14.63, 8.528, 0.26), (435, 8.08, 17.004, 0.22)),
          ((1405, 16.47, 8.807, 0.37), (610, 9.63, 17.319, 0.25))],
    "C": [((92, 5.02, 10.854, 0.07), (7, 2.79, 21.687, 0.05)),
          ((152, 6.17, 10.168, 0.13), (10, 3.63, 20.104, 0.06)),
          ((529, 8.34, 9.815, 0.25), (78, 4.65, 18.914, 0.13)),
          ((1200, 9.16, 9.092, 0.40), (320, 5.71, 17.277, 0.22)),
          ((1315, 9.45, 8.873, 0.29), (412, 6.02, 17.010, 0.15)),
          ((1518, 10.12, 8.024, 0.34), (518, 6.61, 16.291, 0.18)),
          ((1864, 10.75, 8.316, 0.45), (689, 7.03, 16.825, 0.25))],
    "D": [((130, 6.33, 10.668, 0.08), (13, 3.43, 21.315, 0.05)),
          ((239, 6.97, 10.214, 0.15), (19, 4.01, 20.168, 0.06)),
          ((715, 11.62, 9.892, 0.28), (175, 6.04, 18.231, 0.18)),
          ((1410, 13.98, 8.954, 0.43), (413, 7.8, 17.112, 0.33)),
          ((1586, 14.78, 8.345, 0.38), (512, 8.32, 16.993, 0.22)),
          ((1794, 17.11, 7.810, 0.41), (646, 9.55, 15.212, 0.27)),
          ((2163, 20.58, 8.046, 0.5), (844, 11.2, 16.152, 0.35))],
}

PAPER: dict[tuple[str, str, int], tuple[int, float, float, float]] = {
    (config, case, flows): values
    for config, rows in _ROWS.items()
    for case, (hundred, fifty) in zip(CASES, rows)
    for flows, values in ((100, hundred), (50, fifty))
}


def paper(config: str, case: str, flows: int) -> tuple[int, float, float, float] | None:
    """(timeouts, loss %, goodput KB/s, C.O.V.) the paper gives, or None (e.g. for another flow count)."""
    return PAPER.get((config, case, flows))
