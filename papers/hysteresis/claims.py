"""The hysteresis paper's claims for the reproduction report (papers/claims.py, docs/report.md): Y.
Li and C. Williamson, "A Hysteresis Model for Web/TCP Transfer Latency", IEEE MASCOTS 2004. Each
verdict and cause is docs/models.md's, in the section named; its runs (`hv-full-3`) are not
archived, and its model columns predate four model corrections (docs/models.md says so).
"""

from __future__ import annotations

from catnip.papers.claims import Claim

TABLES = "Tables 2 and 3: eq. 13 error V(p), s^2, reno2004 profile"
PARTIAL = "Partial CATNIP (section 5, Fig. 6): p' = 0"
COVERAGE = "Coverage: every table and figure of the paper"

CLAIMS = (
    Claim("smallest-error", "The hysteresis model has the smallest error of the three models (against Cardwell-00 and"
          " Sikdar), for short and long flows", "hysteresis 0.03-0.08 (Table 2, short flows), the others larger",
          "Tables 2 and 3, section 4", TABLES, "disagrees",
          "eq. 8 predicts that most losses are detected by timeout; Linux without SACK still recovers several"
          " losses of one window with NewReno partial ACKs",
          note="on run hv-full-3, whose model columns predate four model corrections"),
    Claim("partial-faster", "Partial CATNIP (high-priority packets never lost) is faster than Reno for short flows",
          "5-32% (p = 1%), 20-42% (p = 10%)", "Fig. 6, section 5", PARTIAL, "agrees",
          note="at p = 1% our gains are at the low end of the paper's range"),
    Claim("partial-model", "The Partial CATNIP model fits the measurements closely", "relative error less than 22%",
          "section 5", PARTIAL, "disagrees",
          "the same overprediction as the plain hysteresis model at high loss and larger sizes",
          note="on run hv-full-3, whose model columns predate four model corrections"),
    Claim("partial-vs-catnip", "Partial CATNIP's transfer times are within 15% of CATNIP's", "within 15%",
          "Fig. 5, sections 5 and 6", COVERAGE, "not run",
          "needs Fig. 5's runs with full CATNIP marking, not made"),
)
