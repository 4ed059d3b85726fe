"""The testbed installs one package, `catnip` (issue 48): its subpackages are the repository's
top-level folders, nothing is installed under a generic name (`spec`, `results`, `models`, ...)
that would shadow a researcher's own modules, and every import of the project goes through it."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import catnip

REPO = Path(__file__).resolve().parent.parent


def _project_folders() -> list[Path]:
    return [REPO / name for name in catnip.SUBPACKAGES if (REPO / name / "__init__.py").is_file()]


def test_pyproject_lists_every_subpackage_under_catnip():
    """A folder with an __init__.py that pyproject.toml does not list would be missing from a
    wheel (an editable install still finds it, which is how it would go unnoticed)."""
    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"catnip"} | {
        "catnip." + ".".join(init.parent.relative_to(REPO).parts)
        for top in _project_folders() for init in top.rglob("__init__.py")}
    assert set(setup["packages"]) == folders
    for name in catnip.SUBPACKAGES:
        if (REPO / name).is_dir():
            assert setup["package-dir"]["catnip." + name] == name


def test_every_import_of_the_project_goes_through_catnip():
    bare = []
    generic = set(catnip.SUBPACKAGES)
    for path in [*REPO.glob("*/**/*.py"), *REPO.glob("*.py")]:
        rel = path.relative_to(REPO)
        if rel.parts[0] in (".venv", "engine", "build", ".git") or rel.parts[0].endswith(".egg-info"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(rel))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                     else [])
            bare += [f"{rel}:{node.lineno}: {n}" for n in names if n.split(".")[0] in generic]
    assert not bare, "import these as catnip.<package>: " + "; ".join(bare[:20])


def test_no_generic_top_level_name_is_importable_outside_the_checkout(tmp_path):
    """From another folder (a notebook's), `catnip.spec` is there and `spec` is not."""
    code = ("import importlib.util as u, catnip.spec.scenario, catnip.results.store; "
            "print([n for n in catnip.SUBPACKAGES if u.find_spec(n) is not None])")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
