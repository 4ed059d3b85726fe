"""The scenario page's guide (issue 48, finding 5): every scenario file grouped by the paper that
registers it (catnip.papers: a `Paper` lists its files by glob pattern; a file no paper claims is
under "Other"), each paper's heading with its citation, and per file its expected duration, the
make target that runs it and an overrides placeholder that validates for it.

Where each comes from, so nothing is invented here:

* **Durations**: the README's "Scenarios" tables, the one place they are kept, each with its
  source (tests/test_readme_scenarios.py checks that every file has its row, with a measured time
  or "not measured"). The time cell is shown as written; a file without a measured time says so.
* **Make targets**: the Makefile's targets that run experiments, and the scenario files their
  recipes and scripts (scripts/NAME.sh) name; where the README's row names the target with its
  variables (`make tcpf QUICK=1`), that form.
* **Placeholders**: a key the scenario itself sets (or its sweep narrowed to its first value),
  with the value it has, checked through the same `validate.load` the form's overrides go
  through; none when no such line validates.
"""

from __future__ import annotations

import fnmatch
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from markupsafe import Markup, escape

from catnip import papers
from catnip.spec import bounded
from catnip.testbed import paths
from catnip.webui import forms

# Targets that run the testbed's own checks or set it up, not a scenario's experiment.
NOT_EXPERIMENTS = {"help", "setup", "clean", "docs"}
# Keys a reader most likely changes first, tried in this order before any other key of the file.
PREFERRED = ("topology.clients", "topology.bottleneck.buffer", "topology.bottleneck.rate", "workload.rounds",
             "run.time_limit", "topology.pairs")
_CODE = re.compile(r"`([^`\n]+)`")


def code_spans(text: Any) -> Markup:
    """Text with its Markdown code spans (`x`) as <code>x</code>, everything else escaped."""
    out, last = [], 0
    text = "" if text is None else str(text)
    for m in _CODE.finditer(text):
        out.append(escape(text[last:m.start()]))
        out.append(Markup("<code>%s</code>") % m.group(1))
        last = m.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


@dataclass
class Entry:
    """One scenario file as the page shows it."""
    file: forms.ScenarioFile
    rel: str                      # its path below scenarios/, e.g. transfers/hysteresis-validation.yaml
    duration: str | None          # the README's time cell, None: not measured
    make: list[str]               # e.g. ["make tcpf QUICK=1"]
    placeholder: str | None       # an overrides line that validates for it
    runnable: bool                # the form starts it (`catnip run`); transfer measurements are not
    command: str | None = None    # how to start one the form does not


@dataclass
class Group:
    name: str                     # the paper's registry name, "" for Other
    title: str
    citation: str | None
    docs: str | None
    entries: list[Entry] = field(default_factory=list)


def readme_rows(readme: str) -> dict[str, tuple[str, str]]:
    """File (below scenarios/) -> the "what" and "time" cells of its row in the README's
    Scenarios tables (| file | points | what | time |)."""
    start = readme.find("\n## Scenarios\n")
    if start < 0:
        return {}
    end = readme.find("\n## ", start + 1)
    out = {}
    for line in readme[start:end if end > 0 else None].splitlines():
        m = re.match(r"\| `([\w./-]+\.yaml)` \|", line)
        if not m:
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) == 4:
            out[m.group(1)] = (cells[2], cells[3])
    return out


def _recipes(makefile: str) -> dict[str, str]:
    """Target -> its recipe's text with the Makefile's own variables (`X ?= v`) put in."""
    variables = dict(re.findall(r"^([A-Z_]+)\s*[?:]?=\s*(.*)$", makefile, re.M))
    out, target = {}, None
    for line in makefile.splitlines():
        m = re.match(r"^([a-z][\w-]*):", line)
        if m:
            target = m.group(1)
            out[target] = ""
        elif target and line.startswith("\t"):
            out[target] += re.sub(r"\$\(([A-Z_]+)\)", lambda v: variables.get(v.group(1), ""), line) + "\n"
        elif line.strip() and not line.startswith("#"):
            target = None
    return out


def make_targets(makefile: str, scripts: Path, stems: list[str]) -> dict[str, list[str]]:
    """Scenario stem (or rel path without .yaml) -> the experiment targets whose recipe, or the
    script it runs, names the file (`scenarios/NAME.yaml`, or NAME alone as a word)."""
    out: dict[str, list[str]] = {}
    for target, recipe in _recipes(makefile).items():
        if target in NOT_EXPERIMENTS or target.startswith("test"):
            continue
        text = recipe
        for script in re.findall(r"scripts/([\w.-]+\.sh)", recipe):
            try:
                text += (scripts / script).read_text()
            except OSError:
                continue
        for stem in stems:
            if re.search(rf"(?<![\w-]){re.escape(stem)}(?![\w-])", text):
                out.setdefault(stem, []).append(f"make {target}")
    return out


def _yaml_value(value: Any) -> str | None:
    """A scalar as an override's value reads it back (a YAML flow scalar), else None."""
    if isinstance(value, (dict, list)) or value is None:
        return None
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip() or None


def _leaves(raw: dict, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in raw.items():
        if not isinstance(k, str):
            continue
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out += _leaves(v, key + ".")
        else:
            out.append((key, v))
    return out


def placeholder_candidates(raw: dict) -> list[str]:
    """Lines to try, best first: the sweep narrowed to its first value (one point instead of
    many), then the preferred keys the file sets, then any other scalar it sets, each with the
    file's own value (so the scenario is the same, and the line shows how to change it)."""
    out = []
    sweep = raw.get("sweep") if isinstance(raw.get("sweep"), dict) else {}
    for key, values in sweep.items():
        if isinstance(key, str) and isinstance(values, list) and len(values) > 1:
            first = _yaml_value(values[0])
            if first is not None:
                out.append(f"sweep.{key}=[{first}]")
    swept = [k for k in sweep if isinstance(k, str)]
    leaves = dict(_leaves({k: v for k, v in raw.items() if k not in ("sweep", "name", "description", "paper", "kind")}))
    ordered = [k for k in PREFERRED if k in leaves] + [k for k in leaves if k not in PREFERRED and k != "seed"]
    for key in ordered:
        if any(key == s or key.startswith(s + ".") for s in swept):
            continue
        value = _yaml_value(leaves[key])
        if value is not None:
            out.append(f"{key}={value}")
    return out


def placeholder(path: Path) -> str | None:
    """The first candidate line the form takes for the file: forms.parse_run_request, the check
    a submitted form goes through (the line's shape, then `validate.load` as `catnip run`)."""
    try:
        raw = bounded.load_yaml(bounded.read_text(path), str(path))
    except (ValueError, yaml.YAMLError):
        return None
    if not isinstance(raw, dict):
        return None
    for line in placeholder_candidates(raw)[:6]:
        _, errors = forms.parse_run_request({"scenario": path.stem, "overrides": line}, path.parent)
        if not errors:
            return line
    return None


def _paper_of(rel: str) -> papers.Paper | None:
    return next((p for p in papers.PAPERS.values() if any(fnmatch.fnmatchcase(rel, pat) for pat in p.scenarios)),
                None)


def _entry(f: forms.ScenarioFile, rel: str, times: dict[str, tuple[str, str]], targets: dict[str, list[str]],
           kind: str | None) -> Entry:
    what, time_cell = times.get(rel, ("", ""))
    duration = None if not time_cell or time_cell.lower() == "not measured" else time_cell
    key = rel.removesuffix(".yaml")
    make = targets.get(key, [])
    # The README's row may name the target with its variables: `make tcpf QUICK=1`.
    named = [m for m in re.findall(r"`(make [a-z][\w-]*(?: [A-Z_]+=\S+)*)`", what) if m.split()[1] in
             {t.split()[1] for t in make} or not make]
    make = named or make
    transfers = kind == "transfers"
    return Entry(f, rel, duration, make, None if transfers or f.error else placeholder(f.path), not transfers,
                 f"catnip model measure scenarios/{rel}" if transfers else None)


def _files(directory: Path) -> list[tuple[forms.ScenarioFile, str, str | None]]:
    """The form's files (scenarios/*.yaml) and the transfer measurements (scenarios/transfers/)."""
    out = [(f, f.path.name, None) for f in forms.scenario_files(directory)]
    sub = directory / "transfers"
    if sub.is_dir():
        out += [(f, f"transfers/{f.path.name}", "transfers") for f in forms.transfer_files(sub)]
    return out


def groups(directory: Path, root: Path | None = None) -> list[Group]:
    """Every scenario file of `directory`, grouped by paper in the registry's order, "Other" last."""
    root = root or paths.REPO
    try:
        times = readme_rows((root / "README.md").read_text())
    except OSError:
        times = {}
    files = _files(directory)
    try:
        targets = make_targets((root / "Makefile").read_text(), root / "scripts",
                               [rel.removesuffix(".yaml") for _, rel, _ in files])
    except OSError:
        targets = {}
    by_paper: dict[str, Group] = {name: Group(name, p.title, str(p.citation) if p.citation else None, p.docs)
                                  for name, p in papers.PAPERS.items()}
    other = Group("", "Other", None, None)
    for f, rel, kind in files:
        paper = _paper_of(rel)
        (by_paper[paper.name] if paper else other).entries.append(_entry(f, rel, times, targets, kind))
    return [g for g in (*by_paper.values(), other) if g.entries]


class GuideCache:
    """The guide is read from files (each scenario validated twice): kept, per scenarios folder,
    until one of the files it reads changes."""

    def __init__(self, size: int = 4):
        self.lock = threading.Lock()
        self.size = size
        self.items: dict[tuple[str, str], tuple[Any, list[Group]]] = {}

    @staticmethod
    def _stamp(directory: Path, root: Path) -> tuple:
        found = [*directory.glob("*.yaml"), *directory.glob("transfers/*.yaml"), root / "README.md",
                 root / "Makefile", *(root / "scripts").glob("*.sh")]
        stamps = []
        for p in sorted(found):
            try:
                st = p.stat()
                stamps.append((str(p), st.st_mtime_ns, st.st_size))
            except OSError:
                stamps.append((str(p), None, None))
        return (tuple(stamps), tuple(papers.PAPERS))

    def get(self, directory: Path, root: Path | None = None) -> list[Group]:
        root = root or paths.REPO
        where, stamp = (str(directory), str(root)), self._stamp(directory, root)
        with self.lock:
            kept = self.items.get(where)
            if kept is None or kept[0] != stamp:
                self.items.pop(where, None)
                while len(self.items) >= self.size:
                    self.items.pop(next(iter(self.items)))
                kept = self.items[where] = (stamp, groups(directory, root))
            return kept[1]


SHARED = GuideCache()  # one for every app of the process (the dashboard has one; tests make many)
