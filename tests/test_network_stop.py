"""Tearing a network down when one of its nodes' shells was killed (someone's cleanup, the OOM
killer): Mininet would wait forever on that node's shell; testbed/network.py stop() deletes its
links from their live ends and goes on."""

from __future__ import annotations

import threading

import pytest

from catnip.controller.skeleton import machine_lock
from catnip.spec import scenario as s
from catnip.testbed import hostconfig, network
from tests.conftest import REPO, need_root

pytestmark = pytest.mark.netns


def test_a_node_whose_shell_died_does_not_hang_the_teardown(no_leftovers):
    need_root()
    sc = s.load(REPO / "scenarios" / "quick.yaml", ["topology.clients=2"]).points[0][1]
    with machine_lock(wait=True):
        net = network.build(sc, "linuxbridge")
        try:
            client = net.hosts["c1"].node
            client.shell.kill()
            client.shell.wait()
            assert not hostconfig.shell_alive(client)
        finally:
            stopper = threading.Thread(target=network.stop, args=(net,), daemon=True)
            stopper.start()
            stopper.join(60)
        assert not stopper.is_alive(), "network.stop waited on a dead node's shell"
