"""The CATNIP testbed as one Python package: `import catnip`.

The code lives in the repository's top-level folders (spec/, topologies/, workloads/, testbed/,
results/, models/, papers/, controller/, webui/, cli/), mapped here as subpackages
(`catnip.spec`, `catnip.results`, ...), so nothing is installed under a generic top-level name
that could shadow a researcher's own modules. The researcher's API (load, validate, run, results
as DataFrames) is `catnip.api`, and its names are reachable from here as well, imported only when
first used: this file is imported by every program the testbed starts in an emulated host, and
must stay light.
"""

from __future__ import annotations

from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
# Run from a checkout (or an editable install): the subpackages are the folders beside this one.
# An installed wheel carries them inside this package instead (pyproject.toml, package-dir).
if (_REPO / "spec" / "__init__.py").is_file() and str(_REPO) not in __path__:
    __path__.append(str(_REPO))

SUBPACKAGES = ("spec", "topologies", "workloads", "testbed", "results", "models", "papers", "controller",
               "webui", "cli")

# The researcher's API (catnip/api.py), imported on first use.
API = ("load", "run", "runs", "open_run", "prepare", "scenario_file", "Run", "Refused")


def __getattr__(name: str):
    if name in API:
        from catnip import api
        return getattr(api, name)
    raise AttributeError(f"module 'catnip' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API])
