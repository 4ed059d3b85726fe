"""The newCWV paper (Hossain and Fairhurst, 2023): its layouts (layouts.py: Figs 5, 7-9, 11,
Tables 2-3), the numbers its text gives (published.py) and the run page's charts with them beside
ours (views.py, view.html); the reports are analysis.py;
docs/reproduction-newcwv.md, how to read them docs/reports-newcwv.md."""

from __future__ import annotations

from catnip.papers.newcwv import layouts as _layouts  # noqa: F401 (registers the layouts)
from catnip.papers.newcwv import views
from catnip.papers.registry import Citation, Paper, View

PAPER = Paper(
    name="newcwv",
    title="newCWV, Figs 5-11 and Tables 2-3",
    citation=Citation("Z. Hossain, G. Fairhurst",
                      "Enhancing HTTP Web Protocol Performance with Updated Transport Layer Techniques",
                      "International Journal of Computer Networks & Communications (IJCNC) 15(4)", 2023),
    docs="docs/reproduction-newcwv.md", short="newCWV", paper_field=("Hossain",),
    scenarios=("newcwv-*.yaml",),
    layouts=("newcwv-gain", "newcwv-loss", "newcwv-trace", "ftp-throughput"),
    views=(View("charts", "view.html", views.charts),),
    published="catnip.papers.newcwv.published",
    claims="catnip.papers.newcwv.claims",
)
