"""docs/api.md's table of issue 48's findings (what fixed each, what shows it) names tests and
screenshots that exist: every finding 1-10 has its row, every test named is a test function of
the file named, every screenshot is one a browser test takes (tests/artifacts/ is written by
those tests, not kept in git). A test renamed or removed fails here, naming the row."""

from __future__ import annotations

import re

from tests.conftest import REPO

DOC = REPO / "docs" / "api.md"
TESTS = REPO / "tests"


def _rows() -> list[list[str]]:
    text = DOC.read_text()
    section = text.split("\n## Issue 48's findings: what fixed each, and what shows it\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = [[c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            for line in section.splitlines() if line.startswith("| ") and not line.startswith("| finding")]
    assert rows, f"{DOC}: no table under the issue 48 heading"
    return rows


def _named(cell: str) -> tuple[list[tuple[str, str | None]], list[str]]:
    """(test file, function or None) pairs and screenshot names a "shown by" cell gives."""
    tests, shots = [], []
    for clause in cell.split(";"):
        clause = clause.strip()
        m = re.match(r"screenshots? (.*)", clause)
        if m:
            shots += [s.strip() for s in m.group(1).split(",")]
            continue
        for file, rest in re.findall(r"(test_\w+\.py)(::\w+|: [\w, ]+)?", clause):
            if not rest:
                tests.append((file, None))
            elif rest.startswith("::"):
                tests.append((file, rest[2:]))
            else:
                tests += [(file, name.strip()) for name in rest[2:].split(",") if name.strip()]
    return tests, shots


def _shot_taken(name: str) -> bool:
    """A browser test saves it: `_shot(..., "NAME")`, or the paper pages' `paper-{KEY}` loop
    (tests/test_dashboard_browser.py) over keys written as strings in its fixtures."""
    sources = {p.name: p.read_text() for p in TESTS.glob("test_*.py")}
    if any(re.search(rf'_shot\(\w+, "{re.escape(name)}"\)', s) for s in sources.values()):
        return True
    key = name.removeprefix("paper-")
    return name.startswith("paper-") and any(f'"{key}":' in sources[f] for f in
                                             ("test_paper_published.py", "test_dashboard_browser.py"))


def test_every_finding_has_its_row():
    numbered = [r[0].split(".", 1)[0] for r in _rows() if re.match(r"\d+\. ", r[0])]
    assert numbered == [str(n) for n in range(1, 11)], numbered


def test_every_test_and_screenshot_named_exists():
    for row in _rows():
        tests, shots = _named(row[-1])
        assert tests or shots, f"row {row[0]!r} names no test and no screenshot"
        for file, name in tests:
            path = TESTS / file
            assert path.is_file(), f"row {row[0]!r}: no {path}"
            if name is not None:
                assert re.search(rf"^(?:async )?def {name}\(", path.read_text(), re.M), \
                    f"row {row[0]!r}: {file} has no test {name}"
        for shot in shots:
            assert _shot_taken(shot), f"row {row[0]!r}: no browser test takes the screenshot {shot}"
