"""The TCP-friendly marking paper (Lo Monaco et al., 2001): Tables 4-7 as the layout tcpf-tables
(layouts.py), their cells (analysis.py), the paper's numbers (published.py), the run page's
tables (views.py, view.html); docs/reproduction-tcpf.md."""

from __future__ import annotations

from catnip.papers.registry import Citation, Paper, View
from catnip.papers.tcpf import layouts as _layouts  # noqa: F401 (registers the layouts)
from catnip.papers.tcpf import views

PAPER = Paper(
    name="tcpf",
    title="TCP-friendly marking, Tables 4-7",
    citation=Citation("G. Lo Monaco, A. Feroz, S. Kalyanaraman, Y. Xia",
                      "TCP-Friendly Marking for Scalable Best-Effort Services on the Internet",
                      "ACM SIGCOMM Computer Communication Review 31(5)", 2001),
    docs="docs/reproduction-tcpf.md", short="TCP-friendly marking", paper_field=("Lo Monaco",),
    scenarios=("tcpf-*.yaml",),
    layouts=("tcpf-tables",),
    views=(View("tables", "view.html", views.tables),),
    published="catnip.papers.tcpf.published",
    claims="catnip.papers.tcpf.claims",
)
