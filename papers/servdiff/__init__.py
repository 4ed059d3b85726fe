"""Nouredine and Tobagi's service differentiation (2002): the layouts servdiff and servdiff-fair
(layouts.py), what the paper's text gives per figure (published.py) and the run page's reports with it
beside ours (views.py, view.html); the reports are analysis.py;
docs/reproduction-service-differentiation.md, how to read them docs/reports-servdiff.md."""

from __future__ import annotations

from catnip.papers.registry import Citation, Paper, View
from catnip.papers.servdiff import layouts as _layouts  # noqa: F401 (registers the layouts)
from catnip.papers.servdiff import views

PAPER = Paper(
    name="servdiff",
    title="Service differentiation for interactive TCP applications",
    citation=Citation("W. Nouredine, F. Tobagi",
                      "Improving the performance of interactive TCP applications using service differentiation",
                      "Computer Networks 40(1), 19-43", 2002),
    docs="docs/reproduction-service-differentiation.md", short="service differentiation", paper_field=("Nouredine",),
    scenarios=("sd-*.yaml", "tree-*.yaml"),
    layouts=("servdiff", "servdiff-fair"),
    views=(View("reports", "view.html", views.reports),),
    published="catnip.papers.servdiff.published",
    claims="catnip.papers.servdiff.claims",
)
