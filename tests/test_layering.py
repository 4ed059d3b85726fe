"""The packages' layering (docs/architecture.md, "Layers"): each package imports only packages
below it, so data flows one way. An import that climbs is a failure, unless it is one of the
few still to be taken out (KNOWN), which are named with why; one of those that is gone must be
taken off the list too, so the list cannot hide anything."""

from __future__ import annotations

import ast

from tests.conftest import REPO

# Bottom to top. A package may import its own layer's other packages only where named in SAME.
LAYERS = [
    ["spec"],                       # scenario schemas, graph, units, the resolved record
    ["topologies", "workloads"],    # the topology library; applications and their programs
    ["testbed"],                    # everything that touches the machine
    ["results", "models"],          # the store and what reads it; the latency models
    ["papers"],                     # each paper's layouts, views, numbers (above results/, spec/)
    ["controller"],                 # runs
    ["webui", "api"],               # the dashboard; the researcher's API (catnip/api.py)
    ["cli"],                        # the `catnip` command
    ["benchmarks"],
]
SAME = {("models", "results")}  # the models are checked against stored runs
FILES = {"api": ["catnip/api.py"]}  # a layer that is a module of the package folder, not a folder
KNOWN: dict[tuple[str, str], str] = {}


def _layer(package: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if package in names)


def _imports() -> dict[tuple[str, str], set[str]]:
    """(importer package, imported package) -> the files importing, every import statement
    (also inside functions) of every project package."""
    packages = {p for names in LAYERS for p in names}
    found: dict[tuple[str, str], set[str]] = {}
    for package in packages:
        paths = [REPO / f for f in FILES[package]] if package in FILES else (REPO / package).rglob("*.py")
        for path in paths:
            for top in imported(ast.parse(path.read_text())) & packages - {package}:
                found.setdefault((package, top), set()).add(str(path.relative_to(REPO)))
    return found


def imported(tree: ast.AST) -> set[str]:
    """The project packages a module imports, however it is written: `import catnip.results.x`,
    `from catnip.results.x import y`, `from catnip import results` (a package as a name of
    catnip), `from catnip.api import run`."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [f"{node.module}.{a.name}" for a in node.names]
    return {parts[1] if parts[0] == "catnip" and len(parts) > 1 else parts[0] for parts in (n.split(".") for n in names)}


def climbing(found: dict[tuple[str, str], set[str]]) -> dict[tuple[str, str], set[str]]:
    return {(a, b): files for (a, b), files in found.items()
            if _layer(b) > _layer(a) or (_layer(b) == _layer(a) and (a, b) not in SAME)}


def test_no_package_imports_one_above_it():
    bad = {edge: files for edge, files in climbing(_imports()).items() if edge not in KNOWN}
    assert not bad, "imports that climb the layers (docs/architecture.md, Layers): " + "; ".join(
        f"{a} -> {b} in {', '.join(sorted(files))}" for (a, b), files in sorted(bad.items()))


def test_the_known_exceptions_are_still_there():
    gone = set(KNOWN) - set(climbing(_imports()))
    assert not gone, f"no longer imported: take {sorted(gone)} off KNOWN (and docs/architecture.md)"


def test_every_package_has_a_layer():
    top = {p.name for p in REPO.iterdir() if (p / "__init__.py").exists() and p.name not in ("tests", "catnip")}
    assert top <= {p for names in LAYERS for p in names}, top - {p for names in LAYERS for p in names}


def test_a_climbing_import_is_caught():
    """The check itself: a results module importing the controller is an import that climbs."""
    assert climbing({("results", "controller"): {"results/x.py"}}) == {("results", "controller"): {"results/x.py"}}
    assert climbing({("controller", "results"): {"controller/x.py"}}) == {}
    assert climbing({("topologies", "workloads"): {"topologies/x.py"}})  # same layer, not in SAME


def test_every_way_of_writing_an_import_is_read():
    """`from catnip import papers` names the papers package as surely as `import catnip.papers`."""
    code = ("import catnip.spec.units\nfrom catnip.results.store import Store\nfrom catnip import papers\n"
            "from catnip.api import run\nimport catnip\nfrom pydantic import Field\ndef f():\n    from catnip import webui\n")
    assert imported(ast.parse(code)) == {"spec", "results", "papers", "api", "webui", "pydantic", "catnip"}
