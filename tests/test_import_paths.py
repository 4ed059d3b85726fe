"""One import path per name (issue 43, item 5; docs/architecture.md, "Layers"): a name is imported
from the module that defines it, never through another module that merely imported it too (as
controller/runner.py once handed on 17 names). A module reached as `mod.name` counts alike. The
few faces still handing names on are KNOWN, each with why; one that no longer does must be taken
off the list, so the list cannot hide anything."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("spec", "topologies", "workloads", "testbed", "results", "models", "papers", "controller", "webui",
            "cli", "benchmarks", "catnip")
# module -> why it still hands on names that another module of the project defines.
KNOWN: dict[str, str] = {
    "catnip.papers": "the papers' registry's face (PAPERS, register, views_of, Paper): papers/registry.py and the"
                     " folders' __init__.py were being changed for the report page when this was written",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts and parts[0] == "catnip":
        parts.pop(0)
    return ".".join(["catnip", *parts])


def _top_level(body: list[ast.stmt]):
    """The module's own statements, also inside top-level if/try/with (TYPE_CHECKING, fallbacks),
    not inside functions or classes."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from _top_level(inner)


def bindings(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """(names the module defines, names it binds by importing them from a project module -> that
    module)."""
    defined: set[str] = set()
    imported: dict[str, str] = {}
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "catnip":
            for a in node.names:
                imported[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name.split(".")[0] == "catnip":
                    imported[a.asname] = a.name
    return defined, imported


def handed_on(sources: dict[str, str], modules: dict[str, str]) -> dict[tuple[str, str], set[str]]:
    """(module, name) -> the files that take `name` through `module`, which only imported it.
    sources: file -> its text; modules: module name -> its text."""
    parse = functools.cache(ast.parse)  # a project file is both a module and a user: parsed once
    binds = {m: bindings(parse(text)) for m, text in modules.items()}

    def through(module: str, name: str) -> bool:
        if module not in binds or f"{module}.{name}" in modules:  # a submodule is its own path
            return False
        defined, imported = binds[module]
        return name in imported and name not in defined

    found: dict[tuple[str, str], set[str]] = {}
    for file, text in sources.items():
        tree = parse(text)
        aliases: dict[str, str] = {}  # local name -> project module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if through(node.module, a.name):
                        found.setdefault((node.module, a.name), set()).add(file)
                    if f"{node.module}.{a.name}" in modules:
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname and a.name in modules:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and through(aliases[node.value.id], node.attr)):
                found.setdefault((aliases[node.value.id], node.attr), set()).add(file)
    return found


@functools.cache
def _project_found() -> dict[tuple[str, str], set[str]]:
    """What the project's packages, tests and examples take through a module that only imported it."""
    files = [p for package in PACKAGES for p in (REPO / package).rglob("*.py")]
    modules = {module_name(p): p.read_text() for p in files}
    users = files + list((REPO / "tests").rglob("*.py")) + list((REPO / "examples").rglob("*.py"))
    return handed_on({str(p.relative_to(REPO)): p.read_text() for p in users}, modules)


def test_every_name_is_imported_from_the_module_defining_it():
    found = _project_found()
    bad = {key: files for key, files in found.items() if key[0] not in KNOWN}
    assert not bad, "names taken through a module that only imported them (import them from where they are defined): " \
        + "; ".join(f"{m}.{name} in {', '.join(sorted(files))}" for (m, name), files in sorted(bad.items()))


def test_the_known_faces_still_hand_names_on():
    used = {m for m, _ in _project_found()}
    gone = set(KNOWN) - used
    assert not gone, f"no longer handing names on: take {sorted(gone)} off KNOWN"


def test_a_name_handed_on_is_caught():
    """The check itself, on a made-up project: b imports f from a; c takes it from b, by name and
    as an attribute; d takes it from a, and a submodule through its package."""
    modules = {"catnip.x.a": "def f(): pass\n", "catnip.x.b": "from catnip.x.a import f\nG = f\n",
               "catnip.x": "", "catnip.x.sub": "H = 1\n"}
    sources = {"c.py": "from catnip.x.b import f\nfrom catnip.x import b\nb.f()\nb.G\n",
               "d.py": "from catnip.x.a import f\nfrom catnip.x import sub\nsub.H\n"}
    assert handed_on(sources, modules) == {("catnip.x.b", "f"): {"c.py"}}
