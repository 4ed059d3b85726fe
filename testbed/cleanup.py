"""Find and remove everything the project creates: processes, bridges, links, namespaces, BPF pins.

Everything is recognised by our markers (the `ctp` name prefix, our paths on a command line),
so nothing else on the machine is touched. `leftovers()` lists what is still there; `clean()`
removes it and says what it removed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from catnip.testbed import machines, paths, run_cgroup, sender, spm
from catnip.workloads import apache
from catnip.testbed.hostconfig import restore_allowed_congestion_control

PREFIX = paths.PREFIX
BPF_PIN_DIR = Path("/sys/fs/bpf/catnip")


def _markers() -> list[str]:
    """Markers that name our programs: enough on their own."""
    return [str(paths.engine_binary()), "catnip.workloads.client", "catnip.workloads.transfers", "catnip.workloads.telnet",
            "catnip.workloads.burst", "catnip.workloads.ftp", "catnip.workloads.agent", "catnip.workloads.onclock", "catnip.testbed.machine_helper",
            f"mininet:{PREFIX}", machines.MACHINE_MARK]


def _path_markers() -> list[str]:
    """Our directories (this shell's and the defaults, so a clean from another environment still
    finds a run's Apache): they mark a process as ours only inside an emulated host's network
    namespace, so a `tail -f` or `sqlite3` on a file under data/ in the root namespace is left alone."""
    dirs = {paths.data_dir(), paths.state_dir(), paths.MACHINE_DIR, paths.REPO / "data"}
    return [str(d) + "/" for d in dirs]


def _net_ns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _named_net_namespaces() -> set[str]:
    """The namespaces under /run/netns with our prefix (an imitated machine's), as /proc shows them."""
    found = set()
    for entry in Path("/run/netns").glob(f"{PREFIX}*"):
        try:
            found.add(f"net:[{entry.stat().st_ino}]")
        except OSError:
            continue
    return found


def _is_controller(argv: list[str]) -> bool:
    """The catnip CLI and test runners carry our paths as arguments but are not ours to kill."""
    head = [Path(a).name for a in argv[:3]]
    return "catnip" in head or "pytest" in head or "py.test" in head


def our_processes() -> list[tuple[int, str]]:
    """(pid, command line) of processes the project started: those in a run's cgroup (what the
    kernel recorded, testbed/run_cgroup.py), and, for runs without one, those our markers name."""
    me = os.getpid()
    found = []
    in_runs = {pid for group in run_cgroup.run_groups() for pid in run_cgroup.processes(group)}
    markers, path_markers, root_ns = _markers(), _path_markers(), _net_ns("self")
    named = _named_net_namespaces()  # whatever runs in one of them is ours (an imitated machine's sshd)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        argv = raw.decode(errors="replace").split("\0")
        cmdline = " ".join(argv).strip()
        if int(entry.name) in in_runs:  # a run's own runner too: it holds the lock, or it was killed
            found.append((int(entry.name), cmdline or f"[{_comm(entry)}]"))
            continue
        if not cmdline or _is_controller(argv):
            continue
        if named and _net_ns(entry.name) in named:
            found.append((int(entry.name), cmdline))
            continue
        if any(m in cmdline for m in markers) or _our_apache(argv) or (
                any(m in cmdline for m in path_markers) and _net_ns(entry.name) not in (None, root_ns)):
            found.append((int(entry.name), cmdline))
    return found


def _our_apache(argv: list[str]) -> bool:
    """An Apache of ours in any namespace: marked -DCATNIP_TESTBED (workloads/apache.py), or, from
    before the mark, configured in a folder named with our prefix (the tests' ctp-apache-*)."""
    if not argv or not argv[0].endswith("apache2"):
        return False
    return f"-D{apache.MARK}" in argv or any(f"/{PREFIX}-" in a for a in argv[1:])


def _comm(entry: Path) -> str:
    try:
        return (entry / "comm").read_text().strip()
    except OSError:
        return "?"


def _lines(args: list[str]) -> list[str]:
    try:
        res = subprocess.run(args, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return res.stdout.splitlines() if res.returncode == 0 else []


def our_ovs_bridges() -> list[str]:
    return [b for b in _lines(["ovs-vsctl", "--timeout=5", "list-br"]) if b.startswith(PREFIX)]


def our_links() -> list[str]:
    """Interfaces in the root namespace carrying our prefix (switch ports, Linux bridges)."""
    names = []
    for line in _lines(["ip", "-o", "link", "show"]):
        parts = line.split(":", 2)
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith(PREFIX):
                names.append(name)
    return names


def our_namespaces() -> list[str]:
    return [l.split()[0] for l in _lines(["ip", "netns", "list"]) if l.startswith(PREFIX)]


def our_bpf_pins() -> list[str]:
    # Maps pinned by name: the document map, the senders' per-host parameters and newCWV's trace
    # (testbed/sender.PINS), and whatever a killed marker load left.
    shared = [str(p) for p in sorted(BPF_PIN_DIR.parent.glob("catnip_*"))]
    if not BPF_PIN_DIR.exists():
        return shared
    return [str(p) for p in BPF_PIN_DIR.rglob("*")] + shared or [str(BPF_PIN_DIR)]


def leftovers() -> dict[str, list]:
    state = {
        "processes": [f"{pid} {cmd[:120]}" for pid, cmd in our_processes()],
        "ovs_bridges": our_ovs_bridges(),
        "links": our_links(),
        "namespaces": our_namespaces(),
        "bpf_pins": our_bpf_pins(),
        "cgroups": [str(g) for g in [*run_cgroup.run_groups(), *spm.our_cgroups()]],
        "congestion_controls": sender.registered(),
        "machine_folders": [str(p) for p in machines.imitation_folders()],
        "cluster_point_folders": [str(p) for p in paths.orphaned_cluster_work()],
    }
    if (paths.state_dir() / "allowed_cc.orig").exists():
        state["sysctl"] = ["net.ipv4.tcp_allowed_congestion_control not yet restored"]
    return {k: v for k, v in state.items() if v}


# What a new run cannot start over: it would collide on their names (Mininet's "RTNETLINK answers:
# File exists" seconds into building) or share the machine with a dead run's processes. BPF pins
# are left out: the shared ones are taken over by name, a point's own carry its run's id.
BLOCKING = ("processes", "ovs_bridges", "links", "namespaces", "cgroups")


def in_imitated_machine() -> bool:
    """This process runs in an imitated machine (testbed/machines.py: a named `ctp*` namespace),
    which shares /run/netns, /proc and the cgroup tree with the machine it runs on: what it sees
    with our prefix there is the imitation itself and the real machine's."""
    return _net_ns("self") in _named_net_namespaces()


def start_blockers() -> dict[str, list]:
    """Leftovers a run must not start over (BLOCKING); none inside an imitated machine. Asked
    while holding the machine lock, so nothing of a live run is among them."""
    if in_imitated_machine():
        return {}
    found = {k: v for k, v in leftovers().items() if k in BLOCKING}
    # Another `catnip run`'s or `catnip check`'s capability probe (testbed/capabilities.py) runs
    # before it takes the lock, in a throwaway namespace of its own: no collision, not a dead run's.
    spare = [n for n in found.pop("namespaces", []) if not n.startswith(f"{PREFIX}probe")]
    if spare:
        found["namespaces"] = spare
    # A process counts if a dead run's group holds it or it is one of a run's lasting parts; not a
    # short probe of `catnip check` or another run's start (`catnip-engine check`, `apache2 -t`).
    in_runs = {pid for group in run_cgroup.run_groups() for pid in run_cgroup.processes(group)}
    lasting = [f"{paths.engine_binary()} run ", f"mininet:{PREFIX}", "-DFOREGROUND", "workloads."]
    procs = [line for line in found.pop("processes", [])
             if int(line.split()[0]) in in_runs or any(m in line for m in lasting)]
    return {**found, "processes": procs} if procs else found


def describe(left: dict[str, list], per_kind: int = 3) -> str:
    """Leftovers in one line: each kind with its first few names."""
    parts = []
    for kind, items in left.items():
        names = [str(i).split()[0] if kind != "processes" else str(i)[:60] for i in items[:per_kind]]
        more = f" (+{len(items) - per_kind} more)" if len(items) > per_kind else ""
        parts.append(f"{kind.replace('_', ' ')} {', '.join(names)}{more}")
    return "; ".join(parts)


class RunInProgress(RuntimeError):
    """A run holds the machine lock: what exists now is its, not left over."""


def run_in_progress() -> str | None:
    """Who holds the machine lock (controller/skeleton.machine_lock: "pid N since T: command"),
    if a run does. The lock is at a fixed path, so this answers the same in every environment."""
    path = paths.machine_lock_path()
    if not path.exists():
        return None
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            return fh.read().strip() or "unknown holder"
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


def holder_pid(holder: str) -> int | None:
    parts = holder.split()
    return int(parts[1]) if len(parts) > 1 and parts[0] == "pid" and parts[1].isdigit() else None


def _stop(pids: list[int]) -> None:
    """SIGTERM, up to 3 s to go, then SIGKILL."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 3
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists()]
        time.sleep(0.1)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def clean(force: bool = False) -> list[str]:
    """Remove every trace; returns a line per thing removed. Refused while a run holds the machine
    lock: its namespaces and processes are in use, and removing them would wreck it. `force` (a
    stuck run) stops the lock's holder first, then removes everything."""
    holder = run_in_progress()
    if holder and not force:
        raise RunInProgress(f"a run is in progress ({holder}; lock {paths.machine_lock_path()}): nothing removed;"
                            " stop it first (Ctrl-C or SIGTERM tears it down cleanly), or --force if it is stuck")
    done = []
    if holder and holder_pid(holder):
        _stop([holder_pid(holder)])
        done.append(f"run holding the machine lock: {holder}")
    return done + remove_all()


def remove_all() -> list[str]:
    """What `clean` removes, without asking who holds the machine lock: for a caller that holds it
    itself (a dead run's watchdog, testbed/run_watchdog.py). Returns a line per thing removed."""
    done = []
    procs = our_processes()
    done += [f"process {pid}: {cmd[:100]}" for pid, cmd in procs]
    _stop([pid for pid, _ in procs])
    for br in our_ovs_bridges():
        subprocess.run(["ovs-vsctl", "--timeout=5", "--if-exists", "del-br", br], capture_output=True)
        done.append(f"OVS bridge {br}")
    for name in our_links():
        if subprocess.run(["ip", "link", "del", name], capture_output=True).returncode == 0:
            done.append(f"link {name}")
    for ns in our_namespaces():
        for pid in _lines(["ip", "netns", "pids", ns]):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        done.append(f"namespace {ns}")
    for pin in sorted(our_bpf_pins(), key=len, reverse=True):
        p = Path(pin)
        try:
            p.rmdir() if p.is_dir() else p.unlink()
            done.append(f"BPF pin {pin}")
        except OSError:
            pass
    done += [f"congestion control {name}" for name in sender.unregister()]
    done += [f"congestion control {name}: unregistered; the kernel frees it when its last sockets close"
             for name in sender.being_freed()]
    if BPF_PIN_DIR.is_dir() and not any(BPF_PIN_DIR.iterdir()):
        BPF_PIN_DIR.rmdir()
        done.append(f"BPF pin directory {BPF_PIN_DIR}")
    for group in spm.our_cgroups():
        if not spm.remove_cgroup(group):
            done.append(f"cgroup {group}")
    for group in run_cgroup.run_groups():  # a killed run's: whatever survived the SIGTERMs above goes now
        if not run_cgroup.remove(group):
            done.append(f"cgroup {group}")
    for folder in machines.imitation_folders():  # after its sshd and namespace are gone
        shutil.rmtree(folder, ignore_errors=True)
        done.append(f"imitated machine's folder {folder}")
    for folder in paths.orphaned_cluster_work():  # a killed cluster worker's point folder
        shutil.rmtree(folder, ignore_errors=True)
        done.append(f"cluster point folder {folder}")
    orig = paths.state_dir() / "allowed_cc.orig"
    if orig.exists():
        restore_allowed_congestion_control(orig.read_text().strip())
        orig.unlink()
        done.append("restored net.ipv4.tcp_allowed_congestion_control")
    return done
