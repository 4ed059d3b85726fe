"""docs/dashboard.md names the papers by hand in two places; they must be the paper registry's
(catnip.papers, papers/registry.py; issue 48): the runs page's paper column lists every
registered paper's short name (webui/runlist.py reads them from the registry), and "The paper's
numbers beside ours" has a bullet, citing the paper, for every registered paper whose published
numbers are entered as data (`Paper.published`). A paper registered later and not written into
the page fails here, naming it."""

from __future__ import annotations

import re

from catnip import papers
from catnip.testbed.paths import REPO

DOC = REPO / "docs" / "dashboard.md"


def _surname(paper) -> str:
    # "C. Williamson, Q. Wu" -> "Williamson"; "G. Lo Monaco, A. Feroz, ..." -> "Lo Monaco"
    return paper.citation.authors.split(",")[0].strip().split(". ")[-1]


def test_the_runs_page_row_lists_every_registered_papers_short_name():
    text = DOC.read_text()
    m = re.search(r"the \*\*paper\*\* it reproduces \(a short name, (.*?), from the `paper:` field", text)
    assert m, "docs/dashboard.md's /runs row no longer lists the papers' short names where this test looks"
    *head, last = m.group(1).split(", ")
    first, _, rest = last.partition(" or ")
    named = head + [first] + ([rest] if rest else [])
    registered = [p.short_name for p in papers.PAPERS.values()]
    assert named == registered, (f"docs/dashboard.md's /runs row names {named}; the registry (in its order) has"
                                 f" {registered}: missing {sorted(set(registered) - set(named))},"
                                 f" not registered {sorted(set(named) - set(registered))}")


def test_every_paper_with_published_numbers_has_its_bullet_with_its_citation():
    text = DOC.read_text()
    section = text.split("**The paper's numbers beside ours.**", 1)[1].split("\nThe hooks:", 1)[0]
    bullets = {m.group(1): m.group(0) for m in re.finditer(r"^- \*\*(.+?)\*\*.*(?:\n  .*)*", section, re.M)}
    assert bullets, "no bullets found under \"The paper's numbers beside ours\""
    with_numbers = [p for p in papers.PAPERS.values() if p.published]
    assert with_numbers
    claimed = set()
    for p in with_numbers:
        # A bullet is the paper's when it is headed by its short name or its first author.
        mine = [name for name in bullets if name == p.short_name or _surname(p) in name]
        assert len(mine) == 1, (f"docs/dashboard.md, \"The paper's numbers beside ours\": {p.name} ({p.short_name},"
                                f" {p.published}) has {len(mine)} bullets, not 1: {mine}")
        body = bullets[mine[0]]
        assert _surname(p) in body and str(p.citation.year) in body, (
            f"the bullet of {p.name} does not cite {p.citation} (first author and year)")
        claimed.add(mine[0])
    assert claimed == set(bullets), f"bullets for no registered paper with published numbers: {set(bullets) - claimed}"
