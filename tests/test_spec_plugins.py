"""spec/ finds topologies and applications through entry points (spec/plugins.py), so it imports
neither layer; a checkout whose entry points are not installed is told how to mend it."""

from __future__ import annotations

import pytest

from catnip.spec import apps, plugins
from catnip.spec import scenario as scenario_mod


def test_the_installed_entry_points_give_the_library_and_the_applications():
    kinds = [t.model_fields["kind"].default for t in scenario_mod.LIBRARY]
    assert kinds == ["dumbbell", "two_pair_dumbbell", "edge_bottleneck", "tree", "graph"]
    assert apps.kinds() == ["bulk", "burst", "ftp", "telnet", "web"]


def test_without_entry_points_the_error_says_to_set_up(monkeypatch):
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    with pytest.raises(plugins.PluginsMissing, match=r"no catnip.topologies entry points .*make setup"):
        plugins.load(plugins.TOPOLOGIES)


def test_an_unknown_application_kind_lists_the_registered_ones():
    with pytest.raises(ValueError, match="application kind 'nope' not allowed: bulk, burst, ftp, telnet, web"):
        apps.parse_spec({"kind": "nope", "clients": "c"})
