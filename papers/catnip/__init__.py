"""The CATNIP paper (Williamson and Wu, 2002): Tables II, IV/VII/X and XI as layouts, and the gap
study against the period TCP (layouts.py); the run page's link from a study seed to its table
(views.py, view.html); docs/reproduction.md. Its tables' numbers are results/report.py,
compare.py, pooled.py and study.py, which the CLI's own views (report, --loss, compare) share."""

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
    scenarios=("catnip-*.yaml",),
    layouts=("catnip-table-ii", "catnip-loss", "catnip-table-xi", "catnip-study"),
    views=(View("study-seed", "view.html", views.study_seed),),
)
