"""The start gate (workloads/gate.py): a gated client program says READY once loaded, waits for
GO, and only then reads its config, so the runner can set the common start after every client
has loaded instead of guessing how long the launch takes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from catnip.testbed.paths import REPO
from catnip.workloads import gate


def _start(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *argv], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _ready_then_held(proc: subprocess.Popen) -> None:
    assert proc.stdout.readline() == gate.READY + "\n"
    with pytest.raises(subprocess.TimeoutExpired):  # held: it does not go on by itself
        proc.wait(0.5)


def _held_then_go(argv: list[str]) -> tuple[int, str, str]:
    """Start a gated program, check it says READY and waits, send GO: (exit status, output, errors)."""
    proc = _start(argv)
    try:
        _ready_then_held(proc)
        proc.send_signal(gate.GO)
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    return proc.returncode, out, err


def test_a_gated_program_waits_for_go_and_then_writes_to_its_log():
    code, out, err = _held_then_go(["-c", "from workloads import gate; gate.wait_for_go(); print('went', flush=True)"])
    assert code == 0, err
    assert out == "" and "went" in err  # after GO its output is its log's, not the runner's pipe


def test_go_sent_as_soon_as_ready_is_read_is_not_lost():
    for _ in range(5):
        proc = _start(["-c", "from workloads import gate; gate.wait_for_go()"])
        try:
            assert proc.stdout.readline() == gate.READY + "\n"
            proc.send_signal(gate.GO)
            assert proc.wait(10) == 0, proc.stderr.read()
        finally:
            proc.kill()


@pytest.mark.parametrize("argv", [
    ["-m", "catnip.workloads.client", "{cfg}", "{out}", "--gate"],
    ["-m", "catnip.workloads.telnet", "client", "{cfg}", "{out}", "--gate"],
    ["-m", "catnip.workloads.ftp", "client", "{cfg}", "{out}", "--gate"],
    ["-m", "catnip.workloads.burst", "client", "{cfg}", "{out}", "--gate"],
], ids=["web", "telnet", "ftp", "burst"])
def test_a_gated_client_reads_its_config_only_after_go(argv, tmp_path):
    """Its config does not exist while it waits: it is not read before GO (nor after READY)."""
    cfg, out = tmp_path / "client.json", tmp_path / "out.jsonl"
    code, _, err = _held_then_go([a.format(cfg=cfg, out=out) for a in argv])
    assert code == 2 and str(cfg) in err, err  # read, and found missing, only now
