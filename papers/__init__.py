"""The papers the testbed reproduces, each a plug-in folder (papers/NAME/): its report layouts,
its dashboard views, its published numbers with their citation, its docs page and its scenario
files (papers/registry.py, `Paper`). Registered here, one line a paper; the CLI (`catnip report
--layouts`, `--layout NAME`, `catnip docs`) and the dashboard (a run's paper views, layout
downloads) find them through this registry and name none. Importing this package registers them.

A paper of your own: a folder with an `__init__.py` defining `PAPER = Paper(...)` (see
papers/tcpf/), and a line `register("catnip.papers.NAME")` below, or `register(Path(FOLDER))`
for a folder elsewhere (tests/test_paper_plugin.py adds one in a test).
"""

from __future__ import annotations

from catnip.papers import claims as _claims  # noqa: F401 (the reproduction report's docs region, report=claims)
from catnip.papers.registry import PAPERS, Citation, Paper, PaperError, RunView, View, register, views_of

__all__ = ["PAPERS", "Citation", "Paper", "PaperError", "RunView", "View", "register", "views_of"]

register("catnip.papers.catnip")    # CATNIP (Williamson and Wu), Tables II-XI, and the gap study
register("catnip.papers.newcwv")    # newCWV (Hossain and Fairhurst), Figs 5-11, Tables 2-3
register("catnip.papers.tcpf")      # TCP-friendly marking (Lo Monaco et al.), Tables 4-7
register("catnip.papers.servdiff")  # service differentiation (Nouredine and Tobagi)
register("catnip.papers.hysteresis")  # the hysteresis model (Li and Williamson): its transfers' runs
