"""The papers' registry: what a paper folder declares (`Paper`), and registering one.

A paper folder (papers/NAME/, or any folder with an `__init__.py`) defines `PAPER`, a `Paper`:
its name, title, citation, its docs pointer, which scenario files are its experiments (and how
their `paper:` field starts, with the short name the dashboard's runs page lists them by), the names
of its report layouts (registered in results/layouts.py when the folder's module imports its
`layouts.py`) and its dashboard views. A view is a data function `(store, run_id, page) -> dict |
None` (None: the view does not apply to that run; `page` holds what the run page already read,
e.g. `apps`) and a Jinja partial in the folder, which the dashboard renders with that dict as
`view` (webui/app.py asks `views_of`; it names no paper).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from catnip.results import layouts
from catnip.results.store import Store
from catnip.testbed import paths


@dataclass(frozen=True)
class Citation:
    authors: str
    title: str
    venue: str
    year: int

    def __str__(self) -> str:
        return f"{self.authors}, \"{self.title}\", {self.venue}, {self.year}"


@dataclass(frozen=True)
class View:
    """A page's section: `data(store, run_id, page)` returns the template's `view`, or None
    where the view does not apply to the run; `template` is a file of the paper's folder. `where`
    is the page it belongs to: "run" (a run's page), "compare" (`page["compare"]` holds the
    comparison, run_id is the baseline) or "study" (`page["study"]` the study's report, run_id its
    first seed)."""
    name: str
    template: str
    data: Callable[[Store, str, dict[str, Any]], dict[str, Any] | None]
    where: str = "run"


@dataclass(frozen=True)
class Paper:
    name: str
    title: str
    citation: Citation | None  # None: the testbed's own study, no paper to cite
    docs: str  # the docs page that says how it is reproduced (docs/reproduction-*.md)
    scenarios: tuple[str, ...]  # glob patterns of its scenario files, in `scenario_dir`
    layouts: tuple[str, ...] = ()  # names of its layouts (results/layouts.py LAYOUTS)
    views: tuple[View, ...] = ()
    published: str | None = None  # the module holding its published numbers, if entered as data
    claims: str | None = None  # the module holding its claims (CLAIMS, papers/claims.py: the reproduction report)
    short: str = ""  # the name the dashboard's runs page lists its runs by (default: `name`)
    paper_field: tuple[str, ...] = ()  # how a scenario's `paper:` field naming it starts (any case)
    scenario_dir: Path | None = None  # default: the repository's scenarios/
    folder: Path = field(default=Path("."), compare=False)  # set by register()

    def scenario_files(self) -> list[Path]:
        where = self.scenario_dir or paths.REPO / "scenarios"
        return sorted({p for pattern in self.scenarios for p in where.glob(pattern) if p.is_file()})

    @property
    def short_name(self) -> str:
        """The name the runs page lists its runs by."""
        return self.short or self.name


PAPERS: dict[str, Paper] = {}


class PaperError(ValueError):
    """A paper folder that cannot be registered: no PAPER, a name taken, a layout it names missing."""


def _module(where: str | Path) -> ModuleType:
    """A paper's module: a dotted name (catnip.papers.tcpf) or a folder holding __init__.py."""
    if isinstance(where, str):
        return importlib.import_module(where)
    folder = Path(where)
    name = f"catnip_paper_{folder.name}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])
    if spec is None or spec.loader is None:
        raise PaperError(f"{folder} is no paper folder: it has no __init__.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def register(where: str | Path) -> Paper:
    """Registers the paper of a folder (its module name, or its path): its PAPER, whose layouts its
    module registered when imported. Raises PaperError for a folder that is not a paper's."""
    module = _module(where)
    paper = getattr(module, "PAPER", None)
    if not isinstance(paper, Paper):
        raise PaperError(f"{where}: a paper folder defines PAPER = Paper(...) in its __init__.py")
    if paper.name in PAPERS:
        raise PaperError(f"paper {paper.name!r} registered twice")
    missing = [n for n in paper.layouts if n not in layouts.LAYOUTS]
    if missing:
        raise PaperError(f"paper {paper.name!r} names layouts it did not register: {', '.join(missing)}")
    folder = Path(module.__file__).resolve().parent
    for view in paper.views:
        if not (folder / view.template).is_file():
            raise PaperError(f"paper {paper.name!r}: view {view.name!r} has no template {view.template} in {folder}")
    paper = Paper(**{**paper.__dict__, "folder": folder})
    PAPERS[paper.name] = paper
    return paper


def unregister(name: str) -> None:
    """Takes a paper and its layouts off the registry (a test's toy paper)."""
    paper = PAPERS.pop(name)
    for n in paper.layouts:
        layouts.LAYOUTS.pop(n, None)


def paper_of_layout(name: str) -> Paper | None:
    return next((p for p in PAPERS.values() if name in p.layouts), None)


def paper_of_field(text: str) -> Paper | None:
    """The registered paper a scenario's `paper:` field names: the first whose `paper_field` starts
    it, in any case (the runs page, webui/runlist.py); None for any other text."""
    text = text.strip().lower()
    return next((p for p in PAPERS.values() if text and any(text.startswith(s.lower()) for s in p.paper_field)), None)


@dataclass(frozen=True)
class RunView:
    paper: Paper
    view: View
    data: dict[str, Any]

    @property
    def template(self) -> str:
        """The partial's name for the dashboard's loader (webui/app.py): papers/PAPER/FILE."""
        return f"papers/{self.paper.name}/{self.view.template}"


def views_of(store: Store, run_id: str, page: dict[str, Any], where: str = "run") -> list[RunView]:
    """Every registered paper's views of a page (`where`, View.where) that apply to a run, in
    registration order."""
    return [RunView(paper, view, data) for paper in PAPERS.values() for view in paper.views
            if view.where == where and (data := view.data(store, run_id, page)) is not None]


def template_source(name: str) -> tuple[str, Path] | None:
    """The text and path of a template papers/PAPER/FILE, or None."""
    parts = name.split("/")
    if len(parts) != 3 or parts[0] != "papers" or parts[1] not in PAPERS:
        return None
    paper = PAPERS[parts[1]]
    view = next((v for v in paper.views if v.template == parts[2]), None)
    if view is None:
        return None
    path = paper.folder / view.template
    return path.read_text(), path
