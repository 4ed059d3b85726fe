"""`catnip shell`: a scenario's network up with its link directions in the engines, Mininet's CLI
on it, everything torn down after (issue 48)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import catnip, need_root


@pytest.mark.netns
def test_the_shell_brings_the_scenarios_links_up_and_tears_them_down(tmp_path, isolated_data, no_leftovers):
    need_root()
    script = tmp_path / "cmds"
    script.write_text("ctpc1 ping -c 3 -W 3 ctpv1\n")
    res = catnip("shell", "quick", "--set", "topology.clients=2", "--script", str(script), timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout + res.stderr
    assert re.search(r"c1 -> ctpc1\s+10\.", out) and "bottleneck-data" in out, out[-2000:]
    assert "3 received" in out, out[-2000:]
    # quick.yaml's path c1 -> v1: access 2 ms, bottleneck 5 ms, server link 5 ms each way. A ping
    # that went around the engines would take a tenth of a millisecond.
    rtt_min = float(re.search(r"rtt min/avg/max/mdev = ([\d.]+)/", out).group(1))
    assert 24.0 <= rtt_min < 200.0, rtt_min


def test_the_shell_describes_each_direction_as_the_record_has_it():
    """A host uplink is rated at its host's htb rate (the record's host_rate_bps), not "no rate
    limit"; each direction's policy is the record's."""
    from types import SimpleNamespace

    from catnip.controller.shell import describe
    from catnip.spec import scenario as s
    from catnip.testbed.links import LinkDirection
    from catnip.testbed.paths import REPO
    from catnip.testbed.plan import plan
    record = plan(s.load(REPO / "scenarios" / "quick.yaml", ["topology.clients=2"]).points[0][1])
    net = SimpleNamespace(hosts={}, routers={}, directions=[LinkDirection(d, None) for d in record.links])
    rows = {line.split()[0]: line for line in describe(net).splitlines() if line.startswith("  ctp")}
    assert rows["ctpc1>ctprc"].split(None, 2)[2] == "10 Mbit/s by the host's htb, 2 ms, droptail", rows
    assert rows["ctprs>ctprc"].split(None, 2)[2] == "1.5 Mbit/s, 5 ms, droptail", rows
    assert "no rate limit" not in "".join(rows.values())


def test_a_point_the_scenario_lacks_is_refused_before_anything_is_built():
    res = catnip("shell", "quick", "--point", "3")
    assert res.returncode == 2 and "--point" in res.stderr and "1 point(s), 0-0" in res.stderr, res.stderr
    res = catnip("shell", "quick", "--set", "run.link_backend=kernel")
    assert res.returncode == 1 and "run.link_backend: the shell runs every link direction" in res.stderr, res.stderr
