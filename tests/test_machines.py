"""Machines nodes can run on (testbed/machines.py): commands over ssh, and the second machine a
test imitates with a network namespace running its own sshd (docs/cluster.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from catnip.testbed import cleanup, machines, paths
from catnip.testbed.paths import REPO


def test_a_command_for_another_machine_is_one_quoted_line_for_ssh():
    there = machines.Machine("m2", "198.18.0.2", Path("/x/ssh_config"))
    argv = there.argv(["sh", "-c", "echo \"$0\"", "a 'b' c"])
    assert argv[:6] == ["ssh", "-F", "/x/ssh_config", "-T", "198.18.0.2", "--"]
    # ssh joins what follows with spaces for the remote shell: one argument, quoted, keeps it whole.
    assert len(argv) == 7 and argv[6] == "sh -c 'echo \"$0\"' 'a '\"'\"'b'\"'\"' c'"
    assert machines.THIS.argv(["true"]) == ["true"]


def test_an_imitation_without_sshd_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(machines, "SSHD", "/nonexistent/sshd")
    with pytest.raises(machines.MachineError, match=r"needs the OpenSSH server \(/nonexistent/sshd\): `make setup`"):
        with machines.imitated("m9"):
            pass


@pytest.mark.netns
def test_an_imitated_machine_is_another_network_that_sees_none_of_our_files(isolated_data, no_leftovers):
    marker = paths.data_dir() / "ctp-machines-test.txt"
    paths.data_dir().mkdir(parents=True, exist_ok=True)
    marker.write_text("here only")
    try:
        with machines.imitated("m2") as m2:
            # Its commands run in the network namespace of its sshd, not ours.
            assert m2.run(["readlink", "/proc/self/ns/net"]).strip() != os.readlink("/proc/self/ns/net")
            assert machines.UNDERLAY_REMOTE in m2.run(["ip", "-o", "-4", "addr", "show"])
            assert sorted(m2.run(["ls", "/sys/class/net"]).split()) == ["ctpum2r", "lo"]  # its own interfaces
            # A file of this machine's results is not there; the BPF file system is (one kernel).
            assert m2.run(["sh", "-c", f"test -e {marker} && echo seen || echo absent"]).strip() == "absent"
            assert m2.run(["sh", "-c", "test -d /sys/fs/bpf && echo bpffs"]).strip() == "bpffs"
            # Arguments arrive whole.
            assert m2.run(["sh", "-c", "printf '%s|' \"$@\"", "x", "a 'b' c", "$HOME"]) == "a 'b' c|$HOME|"
            # The underlay carries 1500-byte frames plus VXLAN's 50 bytes.
            subprocess.run(["ping", "-c", "1", "-W", "2", "-M", "do", "-s", str(machines.UNDERLAY_MTU - 28),
                            machines.UNDERLAY_REMOTE], check=True, capture_output=True)
            with pytest.raises(machines.MachineError, match=r"machine m2 \(over ssh to 198.18.0.2\): `sh -c 'exit 3'`"
                                                            r" failed with exit 3"):
                m2.run(["sh", "-c", "exit 3"])
            # Its own machine lock, held once: a second run cannot take that machine meanwhile.
            with machines.held(m2):
                with pytest.raises(machines.MachineError, match=r"machine m2: another run holds its machine lock"):
                    with machines.held(m2, timeout=10):
                        pass
            with machines.held(m2):  # released with the first
                pass
            # Neither the same name nor the same underlay twice.
            with pytest.raises(machines.MachineError, match=r"imitated machine m2: namespace ctpm2 or folder"):
                with machines.imitated("m2", index=1):
                    pass
            # A second imitation on the same underlay would make two routes to one address.
            with pytest.raises(machines.MachineError, match=r"imitated machine m4: 198.18.0.1/30 is in use on ctpum2"):
                with machines.imitated("m4", index=0):
                    pass
            left = cleanup.leftovers()
            assert left["namespaces"] == ["ctpm2"] and "ctpum2" in left["links"], left
            assert any("ctp-machine-m2/sshd_config" in p for p in left["processes"]), left
    finally:
        marker.unlink()


@pytest.mark.netns
def test_a_killed_imitation_is_left_over_and_cleaned(no_leftovers):
    """SIGKILL the process holding an imitation: its namespace, veth, sshd and folder stay behind,
    `leftovers()` names each and `clean()` removes them."""
    code = ("import sys, time; from testbed import machines\n"
            "with machines.imitated('m3'):\n    print('up', flush=True); time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = cleanup.leftovers()
    assert left.get("namespaces") == ["ctpm3"] and left.get("machine_folders") == ["/run/ctp-machine-m3"], left
    assert "ctpum3" in left.get("links", []), left
    assert any("sshd" in p for p in left.get("processes", [])), left
    cleanup.clean()
    deadline = time.monotonic() + 10
    while cleanup.leftovers() and time.monotonic() < deadline:  # the sshd's SIGTERM takes effect
        time.sleep(0.1)
    assert cleanup.leftovers() == {}


@pytest.mark.netns
def test_the_clock_offset_of_a_machine_is_measured_to_well_under_a_millisecond(no_leftovers):
    """An imitation shares this clock (offset 0), unless its sessions run in a time namespace: then
    the shift is found, both within the measurement's own uncertainty."""
    assert machines.THIS.clock_offset() == {"offset": 0.0, "uncertainty": 0.0, "rounds": 0}
    for shift in (0, 3000):
        with machines.imitated("m2", clock_shift=shift) as m2:
            clock = m2.clock_offset(python=sys.executable)
        assert clock["rounds"] == 16 and 0 < clock["uncertainty"] < 0.001, clock  # 0.03 ms measured here
        assert abs(clock["offset"] - shift) <= clock["uncertainty"], clock


def test_a_program_on_the_controllers_clock_reads_it_less_the_offset():
    code = "import time; print(repr(time.monotonic()))"
    before = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "catnip.workloads.onclock", "100.5", "-c", code], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    after = time.monotonic()
    assert out.returncode == 0, out.stderr
    assert before - 100.5 <= float(out.stdout) <= after - 100.5
    bad = subprocess.run([sys.executable, "-m", "catnip.workloads.onclock", "1s", "-c", code], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "OFFSET '1s' is not a number of seconds" in bad.stderr
    exits = subprocess.run([sys.executable, "-m", "catnip.workloads.onclock", "0", "-c", "import sys; sys.exit(3)"],
                           cwd=REPO, capture_output=True, timeout=60)
    assert exits.returncode == 3  # the program's own status
