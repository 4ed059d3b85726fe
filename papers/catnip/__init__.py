"""The CATNIP paper (Williamson and Wu, 2002): Tables II, IV/VII/X and XI as layouts, and the gap
study against the period TCP (layouts.py); the paper's tables entered as data (published.py); the
dashboard's views (views.py): the paper's table beside each point of a run (beside.html), Table
XI's ratios on the compare page (table_xi.html), the study's targets (targets.html) and a study
seed's link to its table (view.html); docs/reproduction.md. Its tables' numbers are
results/report.py, compare.py and pooled.py, which the CLI's own views (report, --loss, compare)
share, and the gap study's study.py."""

from __future__ import annotations

from catnip.papers.catnip import layouts as _layouts  # noqa: F401 (registers the layouts)
from catnip.papers.catnip import views
from catnip.papers.registry import Citation, Paper, View

PAPER = Paper(
    name="catnip",
    title="CATNIP, Tables II-XI",
    citation=Citation("C. Williamson, Q. Wu", "A Case for Context-Aware TCP/IP",
                      "ACM SIGMETRICS Performance Evaluation Review 29(4)", 2002),
    docs="docs/reproduction.md", short="CATNIP", paper_field=("CATNIP",),
    scenarios=("catnip-*.yaml", "quick.yaml"),  # quick.yaml: make run's, Fig. 3 and Table II (its paper: field)
    layouts=("catnip-table-ii", "catnip-loss", "catnip-table-xi", "catnip-table-xi-beside", "catnip-study", "catnip-loss-beside", "catnip-vs-first-point"),
    views=(View("study-seed", "view.html", views.study_seed),
           View("beside-paper", "beside.html", views.beside_paper),
           View("table-xi", "table_xi.html", views.table_xi, where="compare"),
           View("study-targets", "targets.html", views.study_targets, where="study")),
    published="catnip.papers.catnip.published",
    claims="catnip.papers.catnip.claims",
)
