"""Machines a topology's nodes can run on: this one, or another reached by ssh (docs/cluster.md,
"Topologies over several machines"). A command for another machine goes through ssh as one
quoted command line and runs in that machine's root network namespace, where its sshd runs.

`imitated(name)` makes a second machine on this one for tests: a network namespace with its own
sshd, reached over a veth pair, in a mount namespace of its own where this machine's run state and
results are hidden (a tmpfs over each), so a file written on one side is not found on the other,
as between real machines. What it cannot hide (one kernel, one process table, one clock, the BPF
file system) is listed in docs/cluster.md."""

from __future__ import annotations

import os
import shlex
import socket
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from catnip.workloads.readable import readable
from catnip.testbed import paths

# The imitation's underlay: RFC 2544's benchmarking block, clear of the testbed's 10/8 and 172.16/12;
# imitation number i uses 198.18.i.0/30 (this machine .1, the imitation .2).
UNDERLAY_LOCAL, UNDERLAY_REMOTE, UNDERLAY_PREFIX = "198.18.0.1", "198.18.0.2", 30


def underlay_addresses(index: int) -> tuple[str, str]:
    if not 0 <= index <= 255:
        raise MachineError(f"imitated machine number {index}: 0-255")
    return f"198.18.{index}.1", f"198.18.{index}.2"
# VXLAN over IPv4 adds 50 bytes (inner Ethernet 14, outer IPv4 20, UDP 8, VXLAN 8): the underlay
# carries the testbed's 1500-byte frames whole.
UNDERLAY_MTU = 1550
SSHD = "/usr/sbin/sshd"
MACHINE_MARK = f"{paths.PREFIX}-machine-"  # in the imitation's folder name, so cleanup knows its sshd
READY_TIMEOUT_S = 10


class MachineError(RuntimeError):
    """A machine cannot be reached or made; the message says which and why."""


@dataclass(frozen=True)
class Machine:
    """Where nodes run. `address` None: this machine. Otherwise ssh reaches it as root with the
    options of `ssh_config` (key, known host)."""

    name: str
    address: str | None = None
    ssh_config: Path | None = None
    underlay: str | None = None  # the address other machines' tunnels reach it at
    # The point's run cgroup there (testbed/machine_helper.py): every command starts in it.
    cgroup: str | None = None

    @property
    def local(self) -> bool:
        return self.address is None

    def argv(self, argv: list[str], tty: bool = False) -> list[str]:
        """The command line that runs `argv` there. ssh joins its arguments with spaces for the
        remote shell, so each is quoted here: an argument with spaces or quotes arrives whole."""
        if self.local:
            return list(argv)
        options = (["-F", str(self.ssh_config)] if self.ssh_config
                   else ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"])
        ssh = ["ssh", *options, "-tt" if tty else "-T", self.address, "--"]
        if self.cgroup:
            argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cgroup, *argv]
        return ssh + [" ".join(shlex.quote(a) for a in argv)]

    def run(self, argv: list[str], timeout: float = 60, input: str | None = None) -> str:  # noqa: A002
        """Run `argv` there (with `input` on its standard input) and return its output; raise with
        its error output if it fails."""
        try:
            res = subprocess.run(self.argv(argv), capture_output=True, text=True, timeout=timeout, input=input,
                                 stdin=subprocess.DEVNULL if input is None else None)
        except subprocess.TimeoutExpired:
            raise MachineError(f"machine {self.name}: `{shlex.join(argv)}` took longer than {timeout:g} s") from None
        if res.returncode != 0:
            where = "" if self.local else f" (over ssh to {self.address})"
            raise MachineError(f"machine {self.name}{where}: `{shlex.join(argv)}` failed with exit {res.returncode}:"
                               f" {(res.stderr or res.stdout).strip()[-500:]}")
        return res.stdout


    def signal_pid_files(self, pid_files: list[Path], signal_name: str) -> None:
        """Signal the programs of these pid files there (written by `with_pid_file`), in one
        command; those gone are skipped."""
        if pid_files:
            self.run(["sh", "-c", 'for f; do [ -s "$f" ] && kill -' + signal_name + ' "$(cat "$f")" 2>/dev/null;'
                      ' done; true', "stop", *map(str, pid_files)])

    def write_file(self, path: Path, text: str) -> None:
        """Write `text` to `path` there, making its folder."""
        self.run(["sh", "-c", 'mkdir -p "$(dirname "$0")" && cat > "$0"', str(path)], input=text)

    def read_file(self, path: Path) -> str | None:
        """The text of `path` there; None if it cannot be read."""
        try:
            return self.run(["cat", str(path)])
        except MachineError:
            return None

    def clock_offset(self, rounds: int = 16, python: str = "python3") -> dict[str, float]:
        """How far its CLOCK_MONOTONIC (Python's time.monotonic()) is ahead of ours, in seconds: the
        other machine reads its clock `rounds` times over one ssh session, each read bracketed by two
        of ours; the read with the shortest round trip is taken (as NTP does), its clock against the
        middle of that round trip. `uncertainty` is half that round trip: the true offset is within
        it whatever the asymmetry of the two directions. On this machine: 0."""
        if self.local:
            return {"offset": 0.0, "uncertainty": 0.0, "rounds": 0}
        echo = "import sys, time\nfor _ in sys.stdin:\n    print(repr(time.monotonic()), flush=True)"
        proc = subprocess.Popen(self.argv([python, "-c", echo]), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, bufsize=1)
        samples = []  # (round trip, their clock less the middle of ours)
        try:
            for _ in range(rounds + 1):  # the first round also waits for the interpreter: left out
                before = time.monotonic()
                proc.stdin.write("\n")
                proc.stdin.flush()
                ready = readable(proc.stdout, 30)
                line = proc.stdout.readline() if ready else ""
                after = time.monotonic()
                if not line:
                    why = proc.stderr.read().strip()[-300:] if proc.poll() is not None else "no answer in 30 s"
                    raise MachineError(f"machine {self.name}: its clock could not be read over ssh: {why}")
                samples.append((after - before, float(line) - (before + after) / 2))
        finally:
            proc.stdin.close()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        best = min(samples[1:])
        return {"offset": best[1], "uncertainty": best[0] / 2, "rounds": rounds}

    def copy_tree(self, local: Path, there: Path, timeout: float = 300) -> None:
        """Copy the folder `local` of this machine to `there` on that one (a tar stream over ssh)."""
        pack = subprocess.Popen(["tar", "-C", str(local), "-cf", "-", "."], stdout=subprocess.PIPE)
        try:
            res = subprocess.run(self.argv(["sh", "-c", 'mkdir -p "$0" && tar -C "$0" -xf -', str(there)]),
                                 stdin=pack.stdout, capture_output=True, text=True, timeout=timeout)
        finally:
            pack.stdout.close()
            pack.wait()
        if res.returncode != 0 or pack.returncode != 0:
            raise MachineError(f"machine {self.name}: copying {local} to {there} failed: {res.stderr.strip()[-300:]}")


THIS = Machine("local")


def with_pid_file(argv: list[str], pid_file: Path) -> list[str]:
    """`argv`, writing its pid to `pid_file` first (the shell becomes the program): a signal to the
    local ssh client of a program on another machine would not reach it."""
    return ["sh", "-c", 'mkdir -p "$(dirname "$0")" && echo $$ > "$0" && exec "$@"', str(pid_file), *argv]


def reached(name: str, address: str) -> Machine:
    """Another machine at `address` ([user@]host) that ssh reaches with this machine's own ssh
    settings and keys; checked with one command, and its address resolved for the tunnels."""
    host = address.rsplit("@", 1)[-1]
    try:
        underlay = socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
    except OSError as exc:
        raise MachineError(f"machine {name}: {host!r} does not resolve to an IPv4 address: {exc}") from None
    machine = Machine(name, address, None, underlay=underlay)
    machine.run(["true"], timeout=30)
    return machine


def _sh(*argv: str) -> str:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise MachineError(f"`{shlex.join(argv)}` failed: {res.stderr.strip()}")
    return res.stdout


def _sshd_config(folder: Path, address: str) -> str:
    return "\n".join([
        f"ListenAddress {address}", "Port 22",
        f"HostKey {folder / 'host_key'}", f"AuthorizedKeysFile {folder / 'authorized_keys'}",
        "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "UsePAM no", "UseDNS no", "StrictModes no", f"PidFile {folder / 'sshd.pid'}",
        # Mininet Cluster Edition keeps one ssh session per remote node and per remote process.
        "MaxSessions 200", "MaxStartups 200", ""])


def _ssh_config(folder: Path) -> str:
    return "\n".join([
        "Host *", "  User root", f"  IdentityFile {folder / 'client_key'}", "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {folder / 'known_hosts'}", "  StrictHostKeyChecking yes", "  BatchMode yes",
        "  LogLevel ERROR", "  ConnectTimeout 5", ""])


def _mount_script(hide: list[Path], sshd_config: Path) -> str:
    """Run in the imitation's own mount namespace: /sys/class/net listing its own interfaces (brctl
    reads it; a new sysfs over all of /sys would hide bpffs and cgroup2), a tmpfs over each folder
    this machine keeps to itself, then sshd."""
    hidden = " ".join(shlex.quote(str(p)) for p in hide)
    return (
        "set -e; t=$(mktemp -d); mount -t sysfs sysfs \"$t\";"
        " for s in class/net devices/virtual/net; do mount --bind \"$t/$s\" \"/sys/$s\"; done; umount -l \"$t\";"
        f" rmdir \"$t\"; for d in {hidden}; do mkdir -p \"$d\"; mount -t tmpfs tmpfs \"$d\"; done;"
        f" exec {SSHD} -D -e -f {shlex.quote(str(sshd_config))}")


@contextmanager
def held(machine: Machine, timeout: float = 30) -> Iterator[Machine]:
    """Another machine's own machine lock (paths.machine_lock_path there), held while the point uses
    it, so no other run takes that machine meanwhile: `flock` there, for as long as our ssh lives."""
    lock = str(paths.machine_lock_path())
    proc = subprocess.Popen(machine.argv(["sh", "-c", 'mkdir -p "$(dirname "$0")" && exec flock -n "$0" sh -c'
                                         ' "echo LOCKED; exec cat"', lock]),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # held through the teardown after a Ctrl-C
    try:
        ready = readable(proc.stdout, timeout)
        if not ready or proc.stdout.readline().strip() != "LOCKED":
            raise MachineError(f"machine {machine.name}: another run holds its machine lock ({lock} there), or it did"
                               f" not answer within {timeout:g} s")
        yield machine
    finally:
        proc.stdin.close()  # `cat` ends, the lock goes with it
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def imitation_folders() -> list[Path]:
    """The folders of imitated machines (keys, configs, sshd's log): a killed test's are leftovers."""
    return sorted(Path("/run").glob(f"{MACHINE_MARK}*"))


@contextmanager
def imitated(name: str = "m2", index: int = 0, clock_shift: int = 0) -> Iterator[Machine]:
    """A second machine on this one: network namespace `ctp<name>` with its own sshd on
    198.18.<index>.2, reached from here over the veth `ctpu<name>` (198.18.<index>.1). Removed on
    exit, also on failure; `catnip clean` finds a killed one's namespace, veth and sshd by the prefix.
    `clock_shift` (whole seconds, 0 or more) puts its sshd's sessions in a time namespace whose
    monotonic clock runs that far ahead of ours, as a real machine's would (time_namespaces(7); a
    shift back could make the clock negative on a machine up for less than it, which the kernel
    refuses)."""
    if clock_shift < 0:
        raise MachineError(f"imitated machine {name}: clock_shift {clock_shift}: 0 or more seconds")
    if not Path(SSHD).exists():
        raise MachineError(f"an imitated machine needs the OpenSSH server ({SSHD}): `make setup` installs it")
    local, there = underlay_addresses(index)
    netns, veth = f"{paths.PREFIX}{name}", f"{paths.PREFIX}u{name}"
    folder = Path(f"/run/{MACHINE_MARK}{name}")  # outside what the imitation hides, so its sshd sees it
    # Another imitation (or one left over) of this name or on this underlay is never touched.
    if Path(f"/run/netns/{netns}").exists() or folder.exists():
        raise MachineError(f"imitated machine {name}: namespace {netns} or folder {folder} exists already (another"
                           f" imitation, or one left over: `catnip clean`)")
    taken = _sh("ip", "-o", "-4", "addr", "show", "to", f"{local}/{UNDERLAY_PREFIX}").split()
    if taken:  # two routes to one address would reach the wrong sshd
        raise MachineError(f"imitated machine {name}: {local}/{UNDERLAY_PREFIX} is in use on {taken[1]} (another"
                           f" imitation, or one left over: `catnip clean`); give it another index")
    sshd = None
    try:
        folder.mkdir(mode=0o700, parents=True)
        _sh("ip", "netns", "add", netns)
        _sh("ip", "link", "add", veth, "mtu", str(UNDERLAY_MTU), "type", "veth", "peer", "name", f"{veth}r",
            "mtu", str(UNDERLAY_MTU), "netns", netns)
        _sh("ip", "addr", "add", f"{local}/{UNDERLAY_PREFIX}", "dev", veth)
        _sh("ip", "link", "set", veth, "up")
        inside = ["nsenter", f"--net=/run/netns/{netns}"]
        _sh(*inside, "ip", "addr", "add", f"{there}/{UNDERLAY_PREFIX}", "dev", f"{veth}r")
        _sh(*inside, "ip", "link", "set", f"{veth}r", "up")
        _sh(*inside, "ip", "link", "set", "lo", "up")
        for key in ("host_key", "client_key"):
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"catnip {name}", "-f", str(folder / key))
        shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
        host_key = (folder / "host_key.pub").read_text().split()[:2]
        (folder / "known_hosts").write_text(f"{there} {' '.join(host_key)}\n")
        (folder / "sshd_config").write_text(_sshd_config(folder, there))
        (folder / "ssh_config").write_text(_ssh_config(folder))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        hide = sorted({paths.state_dir(), paths.MACHINE_DIR, paths.data_dir()})
        with open(folder / "sshd.log", "w") as log:
            # With --time and no --fork, sh and the sshd it becomes stay in our time namespace; the
            # sessions sshd forks are in the new one.
            shift = ["--time", "--monotonic", str(int(clock_shift))] if clock_shift else []
            sshd = subprocess.Popen([*inside, "unshare", "--mount", "--propagation", "private", *shift, "sh", "-c",
                                     _mount_script(hide, folder / "sshd_config")],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        machine = Machine(name, there, folder / "ssh_config", underlay=there)
        _wait_ready(machine, sshd, folder / "sshd.log")
        yield machine
    finally:
        if sshd is not None and sshd.poll() is None:
            sshd.terminate()
            try:
                sshd.wait(timeout=5)
            except subprocess.TimeoutExpired:
                sshd.kill()
                sshd.wait()
        # The sessions' processes outlive the listener (OpenSSH): whatever still runs in the
        # imitation's namespace goes with it.
        pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, timeout=30).stdout
        for pid in pids.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", netns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", veth], capture_output=True, timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_ready(machine: Machine, sshd: subprocess.Popen, log: Path) -> None:
    """Until sshd says it listens (its own log line), then one command over ssh."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "Server listening" not in log.read_text():
        if sshd.poll() is not None:
            raise MachineError(f"machine {machine.name}: sshd ended at start: {log.read_text().strip()[-500:]}")
        if time.monotonic() > deadline:
            raise MachineError(f"machine {machine.name}: sshd did not listen within {READY_TIMEOUT_S} s")
        time.sleep(0.05)
    machine.run(["true"])
