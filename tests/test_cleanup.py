"""`catnip clean` never wrecks a run in progress; a dead node shell is never waited on."""

from __future__ import annotations

import subprocess

import pytest

from catnip.controller.skeleton import machine_lock
from catnip.testbed import cleanup, hostconfig
from tests.conftest import catnip, need_root


def test_clean_refuses_while_a_run_holds_the_machine_lock():
    need_root()
    with machine_lock():
        assert cleanup.run_in_progress()
        with pytest.raises(cleanup.RunInProgress, match="a run is in progress"):
            cleanup.clean()
        res = catnip("clean")
        assert res.returncode != 0 and "a run is in progress" in res.stderr
    assert cleanup.run_in_progress() is None


def test_a_node_whose_shell_died_is_known_dead():
    class Node:
        shell = subprocess.Popen(["true"])
    Node.shell.wait()
    assert not hostconfig.shell_alive(Node())
    Node.shell = subprocess.Popen(["sleep", "5"])
    try:
        assert hostconfig.shell_alive(Node())
    finally:
        Node.shell.kill()
        Node.shell.wait()
    Node.shell = None  # Mininet's node after its shell was cleaned up
    assert not hostconfig.shell_alive(Node())
    # A namespace asked a process per command (testbed/netline.py's NsNode) has no shell to die.
    assert hostconfig.shell_alive(object())
