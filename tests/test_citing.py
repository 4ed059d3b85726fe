"""docs/citing.md's BibTeX says what CITATION.cff says: every reference's title, year, authors and
volume in one entry, and the testbed's own version."""

from __future__ import annotations

import re

import yaml

from tests.conftest import REPO


def _entries() -> list[dict[str, str]]:
    text = (REPO / "docs" / "citing.md").read_text()
    block = text.split("```bibtex", 1)[1].split("```", 1)[0]
    return [dict(re.findall(r"^\s*(\w+) = \{(.*)\},?$", body, re.M))
            for body in re.split(r"^@\w+\{", block, flags=re.M)[1:]]


def test_every_reference_of_citation_cff_has_its_bibtex_entry():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    by_title = {e["title"]: e for e in _entries()}
    assert by_title[cff["title"]]["version"] == str(cff["version"])
    for ref in cff["references"]:
        entry = by_title.get(ref["title"])
        assert entry is not None, f"docs/citing.md has no entry for {ref['title']!r}"
        assert entry["year"] == str(ref["year"])
        assert [a.split(",")[0] for a in entry["author"].split(" and ")] == [a["family-names"] for a in ref["authors"]]
        if "volume" in ref:
            assert entry["volume"] == str(ref["volume"])
    assert len(by_title) == len(cff["references"]) + 1


def test_every_registered_paper_is_a_reference_of_citation_cff():
    # A paper registered later (papers/__init__.py) and not added to CITATION.cff fails here, naming it.
    from catnip import papers
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    titles = {ref["title"].casefold() for ref in cff["references"]}
    missing = [p.name for p in papers.PAPERS.values() if p.citation.title.casefold() not in titles]
    assert not missing, f"CITATION.cff has no reference for the registered paper(s) {missing}"
