"""The plug-ins a scenario names by `kind`, found through the package's entry points
(pyproject.toml, `[project.entry-points."catnip.*"]`), so that spec/ imports none of the layers
above it (docs/architecture.md, Layers): the topology library (`catnip.topologies`) and the
applications (`catnip.applications`). Another package may add its own under the same groups.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

TOPOLOGIES = "catnip.topologies"
APPLICATIONS = "catnip.applications"


class PluginsMissing(RuntimeError):
    """The package's entry points are not installed (a checkout not set up, or set up before they
    existed): say how to mend it."""


def load(group: str) -> list[Any]:
    """What each entry point of `group` names, in the order of their names."""
    found = sorted(entry_points(group=group), key=lambda ep: ep.name)
    if not found:
        raise PluginsMissing(f"no {group} entry points are installed: run `make setup` (pip install -e .) so the"
                             " testbed's plug-ins are registered")
    return [ep.load() for ep in found]
