"""The Vagrant VM's files, checked here without a hypervisor (these machines have no nested
virtualisation): the Vagrantfile validates, its provisioning runs the same set-up entry point as
`make setup`, the dashboard's systemd unit verifies, and the exact command of its ExecStart
starts the dashboard, answers on the guest side of the forwarded port, and stops cleanly."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from tests.conftest import REPO

UNIT = REPO / "deploy" / "catnip-dashboard.service"


def _vagrant_validate(directory) -> subprocess.CompletedProcess:
    if not shutil.which("vagrant"):
        pytest.skip("needs Debian's vagrant package (scripts/setup.sh --test installs it)")
    env = {**os.environ, "VAGRANT_HOME": str(directory / ".vagrant.d"), "VAGRANT_CHECKPOINT_DISABLE": "1"}
    return subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=directory, capture_output=True,
                          text=True, timeout=120, env=env)


def test_vagrantfile_validates_and_a_broken_one_does_not(tmp_path):
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(REPO / "Vagrantfile", good / "Vagrantfile")
    res = _vagrant_validate(good)
    assert res.returncode == 0 and "validated successfully" in res.stdout, res.stdout + res.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "Vagrantfile").write_text((REPO / "Vagrantfile").read_text().replace("config.vm.hostname", "config.vm.hostnme"))
    res = _vagrant_validate(bad)
    assert res.returncode != 0 and "hostnme" in res.stdout + res.stderr


def test_provisioning_runs_the_same_setup_as_make_setup():
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^setup:\n\t@?(.+)$", makefile, re.M).group(1).strip()
    vagrantfile = (REPO / "Vagrantfile").read_text()
    inline = re.search(r'provision "setup", type: "shell", privileged: true, inline: "([^"]+)"', vagrantfile).group(1)
    assert recipe == "scripts/setup.sh"
    assert inline.endswith("&& " + recipe), inline
    # ... and the service it installs is the unit tested below.
    assert "deploy/catnip-dashboard.service" in vagrantfile


def _exec_start() -> list[str]:
    line = next(l for l in UNIT.read_text().splitlines() if l.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def test_systemd_unit_verifies():
    if not shutil.which("systemd-analyze"):
        pytest.skip("needs systemd-analyze (Debian's systemd package)")
    if not os.access(_exec_start()[0], os.X_OK):
        pytest.skip(f"{_exec_start()[0]} is not installed here: run `make setup` (it links the catnip command)")
    res = subprocess.run(["systemd-analyze", "verify", str(UNIT)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def _port_free(port: int) -> bool:
    """Whether a server could listen on the port now. With SO_REUSEADDR, as waitress and every
    server binds: the connection this test made leaves a TIME_WAIT socket on the port when the
    server closes first, which refuses a plain bind for a minute though nothing listens."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def test_exec_start_serves_the_dashboard_and_stops_cleanly(tmp_path):
    argv = _exec_start()
    if not os.access(argv[0], os.X_OK):
        pytest.skip(f"{argv[0]} is not installed here: run `make setup` (it links the catnip command)")
    port = int(argv[argv.index("--port") + 1])
    assert argv[1:] == ["web", "--host", "0.0.0.0", "--port", str(port)]
    if not _port_free(port):
        pytest.skip(f"port {port} is in use on this machine (is a dashboard running?)")
    env = {**os.environ, "CATNIP_DB": str(tmp_path / "catnip.db"), "CATNIP_DATA": str(tmp_path)}
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, body = time.monotonic() + 30, None
        while time.monotonic() < deadline and body is None:
            try:
                # The guest side of the forward: the VM's own address, here the loopback one.
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    body = r.read().decode()
            except OSError:
                time.sleep(0.3)
        assert body and json.loads(body)["ok"] is True, body
    finally:
        proc.send_signal(signal.SIGTERM)  # what `systemctl stop` sends (KillSignal=SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("the dashboard did not stop within 30 s of SIGTERM")
    assert proc.returncode == 0, out
    assert "SIGTERM, stopping" in out
    assert _port_free(port)
