"""The hysteresis paper (Li and Williamson, 2004): single Web/TCP transfers under random loss
against its latency models (scenarios/transfers/hysteresis-*.yaml, `catnip model measure`);
docs/models.md. No layout or dashboard view of its own: its tables are `catnip model`'s. Registered
so the dashboard's runs page lists its runs by it (Paper.short, Paper.paper_field)."""

from __future__ import annotations

from catnip.papers.registry import Citation, Paper

PAPER = Paper(
    name="hysteresis",
    title="A hysteresis model for Web/TCP transfer latency",
    citation=Citation("Y. Li, C. Williamson", "A Hysteresis Model for Web/TCP Transfer Latency", "IEEE MASCOTS",
                      2004),
    docs="docs/models.md", short="hysteresis", paper_field=("hysteresis", "Li and Williamson"),
    scenarios=("transfers/hysteresis-*.yaml",),
    claims="catnip.papers.hysteresis.claims",
)
