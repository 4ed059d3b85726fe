"""README and `make help` against the scenarios and the Makefile (issue 48, item 6): every scenario
file has its row in the README, under the heading of the paper its `paper:` field names, with its
sweep's point count and a time (measured, or "not measured"); every time `make help` states for a
target is the time the README's "Make targets" table states for it; every `make X` the README
names is a target of the Makefile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from catnip.spec import scenario, transfer
from catnip.spec.bounded import load_yaml

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
DURATION = re.compile(r"(?:about )?\d[\d,.]*(?:-\d[\d,.]*)? (?:s|min|minutes|hours?)\b(?: warm| cold)?")
# The paper a `paper:` field names (its start) -> a word its README heading must contain.
PAPERS = {"CATNIP": "CATNIP", "Hossain": "Hossain", "Lo Monaco": "Lo Monaco", "Nouredine": "Nouredine",
          "hysteresis": "Li and Williamson"}


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells (`\\|` is a pipe inside a cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _section(text: str, title: str) -> str:
    """The text of a `## title` section, up to the next `## ` heading."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def readme_scenarios(text: str = README) -> dict[str, dict[str, str]]:
    """Each scenario row of the README: file -> its heading, points and time cells."""
    rows, heading = {}, ""
    for line in _section(text, "Scenarios").splitlines():
        if line.startswith("### "):
            heading = line[4:]
        m = re.match(r"\| `([\w./-]+\.yaml)` \|", line)
        if m:
            cells = _cells(line)
            assert len(cells) == 4, f"README row of {m.group(1)}: want file | points | what | time, got {cells}"
            assert m.group(1) not in rows, f"README lists {m.group(1)} twice"
            rows[m.group(1)] = {"heading": heading, "points": cells[1], "time": cells[3]}
    return rows


def readme_times(text: str = README) -> dict[str, set[str]]:
    """The "Make targets" table: target -> the durations its rows' time cells state."""
    out: dict[str, set[str]] = {}
    for line in _section(text, "Make targets").splitlines():
        m = re.match(r"\| `make ([a-z][\w-]*)[^`]*` \|", line)
        if m:
            out.setdefault(m.group(1), set()).update(DURATION.findall(_cells(line)[2]))
    return out


def help_lines(makefile: str = MAKEFILE) -> list[str]:
    """What `make help` prints: the echo lines of its recipe."""
    recipe = makefile.split("\nhelp:\n", 1)[1].split("\n\n", 1)[0]
    return [m.group(1) for m in re.finditer(r'^\t@echo "(.*)"$', recipe, re.M)]


def help_times(lines: list[str]) -> dict[str, set[str]]:
    """Target -> the durations its help lines state (a line not starting `make X` continues the last)."""
    out: dict[str, set[str]] = {}
    target = None
    for line in lines:
        m = re.match(r"make ([a-z][\w-]*)", line)
        if m:
            target = m.group(1)
            out.setdefault(target, set())
        if target:
            out[target].update(DURATION.findall(line))
    return out


def makefile_targets(makefile: str = MAKEFILE) -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))


def readme_make_mentions(text: str = README) -> set[str]:
    """Targets the README names: `make X` in code spans, and lines starting `make X` in code blocks."""
    spans = set(re.findall(r"`make ([a-z][\w-]*)", text))
    blocks = re.findall(r"```\w*\n(.*?)```", text, re.S)
    return spans | {m for b in blocks for m in re.findall(r"^make ([a-z][\w-]*)", b, re.M)}


def scenario_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT / "scenarios")) for p in (ROOT / "scenarios").rglob("*.yaml"))


def test_every_scenario_file_has_its_row():
    rows = readme_scenarios()
    files = scenario_files()
    missing = [f for f in files if f not in rows]
    assert not missing, f"scenario files missing from the README's tables: {missing}"
    gone = [f for f in rows if f not in files]
    assert not gone, f"README rows of files that are not in scenarios/: {gone}"


@pytest.mark.parametrize("name", scenario_files())
def test_each_row_is_under_its_paper_with_its_points_and_a_time(name):
    row = readme_scenarios()[name]
    path = ROOT / "scenarios" / name
    raw = load_yaml(path.read_text(), name)
    paper = str(raw.get("paper", ""))
    want = next((word for start, word in PAPERS.items() if paper.startswith(start)), "not a paper")
    assert want.lower() in row["heading"].lower(), f"{name} (paper: {paper!r}) is under {row['heading']!r}"
    points = (len(transfer.load(path).points()) if raw.get("kind") == "transfers"
              else len(scenario.load(path).points))
    assert row["points"] == str(points), f"{name}: README says {row['points']} points, the file has {points}"
    assert DURATION.search(row["time"]) or row["time"] == "not measured", \
        f"{name}: time {row['time']!r}: a measured duration (with its unit) or 'not measured'"


def test_make_help_states_the_readme_times():
    readme, helped = readme_times(), help_times(help_lines())
    assert readme and helped
    for target in sorted(set(readme) | set(helped)):
        assert readme.get(target, set()) == helped.get(target, set()), \
            f"make {target}: README says {sorted(readme.get(target, ()))}, make help {sorted(helped.get(target, ()))}"


def test_every_make_target_named_exists():
    targets = makefile_targets()
    named = readme_make_mentions() | set(help_times(help_lines()))
    assert {"run", "test", "help"} <= named
    unknown = sorted(named - targets)
    assert not unknown, f"README or make help names targets the Makefile lacks: {unknown}"
    # Every target of the Makefile has its row in the README's table, and a help line.
    assert targets - {"help"} <= set(readme_times()), sorted(targets - set(readme_times()))
    assert targets - {"help"} <= set(help_times(help_lines())), sorted(targets - set(help_times(help_lines())))


# The checks themselves: each fails on the mistake it is there for.
def test_the_checks_catch_what_the_issue_found():
    # a scenario file missing from the table
    rows = readme_scenarios(README.replace("| `tree-split.yaml` |", "| tree-split |"))
    assert "tree-split.yaml" not in rows
    # make help's servdiff time disagreeing with the README's (the issue's 62 against 104 minutes)
    stale = help_times(help_lines(MAKEFILE.replace("about 104 minutes", "about 62 min")))
    assert stale["servdiff"] != readme_times()["servdiff"]
    # a target the Makefile lacks
    assert "tables" in readme_make_mentions(README + "\nRun `make tables`.\n") - makefile_targets()


# The introduction (the issue: it spoke of CATNIP only) and what a fresh machine needs first.
NUMBERS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def test_the_introduction_names_every_registered_paper_and_a_fresh_machines_first_step():
    from catnip import papers
    intro = README.split("\n## Two commands\n", 1)[0]
    assert f"It reproduces {NUMBERS[len(papers.PAPERS)]} papers" in intro
    bullets = re.findall(r"^- \*\*.*(?:\n  .*)*", intro, re.M)
    for p in papers.PAPERS.values():
        surname = p.citation.authors.split(",")[0].strip().split(". ")[-1]  # "G. Lo Monaco, ..." -> "Lo Monaco"
        mine = [b for b in bullets if surname in b and str(p.citation.year) in b]
        assert len(mine) == 1, f"README's introduction: {p.name} ({surname}, {p.citation.year}) has {len(mine)} bullets"
    block = _section(README, "Two commands").split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert block[0].startswith("apt-get install -y make git") and block[1].startswith("make run"), block
