"""A runner killed with SIGKILL (issue 47, defect 7): nothing of its run keeps running, without anyone
calling `catnip clean` (its watchdog, testbed/run_watchdog.py); what its clients wrote reaches the
database, marked recovered (controller/recover.py); a new run over a dead run's leftovers is
refused in one line naming `catnip clean` (controller/skeleton.machine_lock).

The real-run tests use test_kills' small quick.yaml (3 clients, 2 rounds of 10 pages, 1 s think).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from catnip.controller.recover import close_abandoned_runs
from catnip.controller import recover
from catnip.results.store import Store
from catnip.spec.scenario import load
from catnip.testbed import cleanup, processes, run_cgroup, run_watchdog
from catnip.testbed.paths import REPO, machine_lock_path
from tests.conftest import catnip, need_engine, need_root, wait_until
from tests.test_kills import RUN_ARGS, _db_rows, _pages_done_live

QUICK = REPO / "scenarios" / "quick.yaml"


# --- recovery, from files written as a run's clients write them (no root, no network) ------------

def _dead_identity() -> str:
    proc = subprocess.Popen(["true"])
    ident = processes.identity(proc.pid)
    proc.wait()
    return ident


def _page(client: str, page: int, rnd: int, start: float) -> list[dict]:
    obj = {"kind": "object", "client": client, "server": "ctpv1", "page": page, "round": rnd,
           "url": f"/p{page}.html", "conn": 1, "start": start, "connect_done": start + 0.01,
           "first_byte": start + 0.02, "end": start + 0.1, "body_bytes": 1000, "header_bytes": 200,
           "status": 200, "error": None}
    return [obj, {"kind": "page", "client": client, "server": "ctpv1", "page_set": "catnip", "page": page,
                  "round": rnd, "start": start, "end": start + 0.1, "duration": 0.1, "objects": 1, "bytes": 1000,
                  "error": None}]


def _dead_run(tmp_path: Path, pages_per_client: dict[str, int]) -> tuple[Store, str, Path]:
    """A run recorded as running by a runner that is gone, with the client files of its point 0 as
    the web clients write them (a start line, objects and pages, a line cut by the kill)."""
    sweep = load(QUICK, ["topology.clients=3"])
    store = Store(tmp_path / "data" / "catnip.db")
    run_id = "killed"
    store.create_run(run_id, sweep.name, sweep.source, sweep.raw, sweep.sweep, 1, "abc", {}, {},
                     runner=_dead_identity())
    store.create_point(run_id, 0, 0, {}, sweep.points[0][1].model_dump(), 1)
    folder = tmp_path / "data" / "runs" / run_id / "point0"
    folder.mkdir(parents=True)
    for client, n in pages_per_client.items():
        (folder / f"client-{client}.json").write_text(json.dumps({"client": client, "start_at": 100.0}))
        lines = [{"kind": "start", "client": client, "wall": 0, "mono": 99.5}]
        for i in range(n):
            lines += _page(client, i % 10 + 1, i // 10, 100.0 + i)
        (folder / f"client-{client}.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + '\n{"kind": "obj')
    return store, run_id, folder


def test_a_dead_runs_client_records_are_recovered_once_and_marked(tmp_path):
    store, run_id, _ = _dead_run(tmp_path, {"ctpc1": 4, "ctpc2": 3, "ctpc3": 0})
    with store:
        assert close_abandoned_runs(store) == [run_id]
        run, (point,) = store.run(run_id), store.points(run_id)
        assert run["status"] == "recovered" and point["status"] == "recovered", (run["status"], point["status"])
        assert "7 pages, 7 objects, 7 samples" in point["error"] and "recovered" in run["error"], run["error"]
        pages = store.pages(run_id, 0)
        assert len(pages) == 7 and {p["client"] for p in pages} == {"ctpc1", "ctpc2"}
        samples = store.samples(run_id, 0, app="web", metric="page_time")
        assert len(samples) == 7 and all(s["value"] == pytest.approx(0.1) for s in samples)
        # Read once: another look (a later `catnip list`, `catnip clean`) stores nothing twice.
        assert close_abandoned_runs(store) == [] and recover.recover_interrupted(store) == []
        assert len(store.pages(run_id, 0)) == 7


def test_records_the_runner_had_stored_are_not_stored_twice(tmp_path):
    store, run_id, _ = _dead_run(tmp_path, {"ctpc1": 2})
    with store:
        store.add_transfers(run_id, 0, [], [{"client": "ctpc1", "page": 1}])  # a kill during collection
        close_abandoned_runs(store)
        assert len(store.pages(run_id, 0)) == 1 and store.run(run_id)["status"] == "interrupted"


def test_a_point_still_written_to_is_left_for_later(tmp_path):
    """A dead runner whose clients still run (no watchdog): reading now would lose their later
    lines, so the run stays interrupted until nothing writes there; `catnip clean` reads it then."""
    store, run_id, folder = _dead_run(tmp_path, {"ctpc1": 2})
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", str(folder / "client-ctpc1.jsonl")])
    try:
        with store:
            started = time.monotonic()
            assert close_abandoned_runs(store) == [run_id]
            assert time.monotonic() - started >= recover.WRITERS_WAIT_S * 0.9, "it waited for the writer to go"
            assert store.run(run_id)["status"] == "interrupted" and store.pages(run_id, 0) == []
            writer.kill()
            writer.wait()
            lines = recover.after_clean(store.path)
            assert lines and "2 pages" in lines[0], lines
            assert store.run(run_id)["status"] == "recovered" and len(store.pages(run_id, 0)) == 2
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()


# --- the watchdog: a runner's group ended after a SIGKILL (root: cgroups) -------------------------

FAKE_RUNNER = """
import subprocess, sys, time
from catnip.controller.skeleton import LeftoversFound, machine_lock
deadline = time.monotonic() + 600
while True:
    try:
        with machine_lock(wait=True):
            child = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300"])  # grandchildren: no parent-death signal
            print("READY", flush=True)
            time.sleep(300)
    except LeftoversFound:  # a test of someone else's building a network without the lock, on a shared machine
        if time.monotonic() > deadline:
            raise
        time.sleep(1)
"""


def test_a_sigkilled_runners_group_is_ended_by_its_watchdog():
    need_root()
    if run_cgroup.hierarchy() is None:
        pytest.skip("no cgroup-v2 hierarchy mounted here")
    proc = subprocess.Popen([sys.executable, "-c", FAKE_RUNNER], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert proc.stdout.readline().strip() == "READY"
        group = run_cgroup.hierarchy() / f"{run_cgroup.PREFIX}{proc.pid}"
        # The runner, sh and its two sleeps.
        pids = wait_until(lambda: len(run_cgroup.processes(group)) == 4 and run_cgroup.processes(group), 10,
                          "the runner's four processes in its group")
        members = [processes.identity(p) for p in pids]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_until(lambda: not group.exists() and not any(processes.alive(m) for m in members), 10,
                   "the dead runner's group ended and removed")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if (run_cgroup.hierarchy() / f"{run_cgroup.PREFIX}{proc.pid}").exists():
            run_cgroup.remove(run_cgroup.hierarchy() / f"{run_cgroup.PREFIX}{proc.pid}")


def test_a_runner_that_ends_its_run_sends_its_watchdog_away():
    need_root()
    if run_cgroup.hierarchy() is None:
        pytest.skip("no cgroup-v2 hierarchy mounted here")
    with run_watchdog.joined() as group:
        watchdogs = [p for p, cmd in _cmdlines() if f"catnip.testbed.run_watchdog {os.getpid()} " in cmd]
        assert len(watchdogs) == 1 and watchdogs[0] not in run_cgroup.processes(group), "born outside the group"
    assert not Path(f"/proc/{watchdogs[0]}").exists(), "it left with the run"
    watchdog = run_watchdog.start(None)
    assert watchdog is not None
    watchdog.finished()
    assert watchdog.proc.returncode == 0, "it left when told, not killed after waiting"


def _running(ident: str) -> bool:
    """The process still runs: alive, and not a zombie waiting for its reaper (here pid 1 reaps
    orphans, measured up to about 2 s late; a zombie holds no namespace, socket or file)."""
    if not processes.alive(ident):
        return False
    try:
        return Path(f"/proc/{ident.split('/')[1]}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cmdlines() -> list[tuple[int, str]]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out.append((int(entry.name), entry.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode()))
            except OSError:
                continue
    return out


# --- a real run --------------------------------------------------------------------------------

BUSY = "another catnip run is using this machine"


def _start_run(data: Path, db: Path, pages: int) -> tuple[subprocess.Popen, Path]:
    """The run, once `pages` pages are done; started again while another run holds the machine
    (a shared machine: the lock is free when asked, taken by another run a moment later)."""
    log = data / "runner.log"
    deadline = time.monotonic() + 900
    while True:
        wait_until(lambda: cleanup.run_in_progress() is None, max(1.0, deadline - time.monotonic()),
                   "the machine lock free")
        with open(log, "w") as fh:  # a file, not a pipe: the watchdog writes its line there too
            proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "run", str(QUICK), *RUN_ARGS],
                                    stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, env=os.environ)
        wait_until(lambda: proc.poll() is not None or _pages_done_live(db) >= pages, 120, f"{pages} pages done",
                   poll=0.1)
        if proc.poll() is None or BUSY not in log.read_text():
            return proc, log


@contextmanager
def _machine_quiet(timeout: float = 900):
    """The machine lock held here (as a run holds it), so that no other run's namespaces are on
    the machine while leftovers are counted (the tests share the machine with other runs)."""
    fh = open(machine_lock_path(), "a+")
    try:
        wait_until(lambda: _try_lock(fh), timeout, "the machine lock free", poll=0.2)
        yield
    finally:
        fh.close()  # releases it


def _try_lock(fh) -> bool:
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _leftovers() -> dict:
    """cleanup.leftovers() but another process's capability probe (a throwaway `ctpprobe*`
    namespace, made before its run asks for the lock)."""
    left = cleanup.leftovers()
    spare = [n for n in left.pop("namespaces", []) if not n.startswith("ctpprobe")]
    return {**left, "namespaces": spare} if spare else left


def _clean() -> subprocess.CompletedProcess:
    """`catnip clean`, asked again while another run holds the machine (it refuses then)."""
    res = None

    def cleaned() -> bool:
        nonlocal res
        res = catnip("clean")
        return res.returncode == 0 or "a run is in progress" not in res.stderr
    wait_until(cleaned, 900, "`catnip clean` not refused for another run", poll=1.0)
    return res


def _file_pages(folder: Path) -> int:
    return sum(f.read_bytes().count(b'"kind": "page"') for f in folder.glob("point*/client-*.jsonl"))


@pytest.mark.netns
def test_a_sigkilled_runner_leaves_nothing_running_and_its_pages_are_recovered(isolated_data):
    need_engine()
    db = isolated_data / "data" / "catnip.db"
    proc, log = _start_run(isolated_data, db, 4)
    try:
        assert proc.poll() is None, f"the run ended before the kill: {log.read_text()[-800:]}"
        group = run_cgroup.hierarchy() / f"{run_cgroup.PREFIX}{proc.pid}"
        members = {pid: cmd for pid, cmd in cleanup.our_processes() if pid in run_cgroup.processes(group)}
        kinds = {k for k, needle in (("engine", "catnip-engine run"), ("apache", "apache2"),
                                     ("client", "catnip.workloads.client"), ("shell", "mininet:ctp"))
                 for cmd in members.values() if needle in cmd}
        assert kinds == {"engine", "apache", "client", "shell"}, members
        idents = [processes.identity(p) for p in members]
        killed_at = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_until(lambda: not any(_running(i) for i in idents), 30,
                   "every process of the SIGKILLed run gone, nobody calling `catnip clean`", poll=0.01)
        gone_after = time.monotonic() - killed_at
        wait_until(lambda: not any(processes.alive(i) for i in idents), 30, "the run's processes reaped", poll=0.01)
        reaped_after = time.monotonic() - killed_at
        wait_until(lambda: not [p for p, cmd in _cmdlines() if f"catnip.testbed.run_watchdog {proc.pid} " in cmd], 150,
                   "the watchdog done")
        with _machine_quiet():
            assert _leftovers() == {}, "its watchdog removes the links, bridges and pins too"
        print(f"\n{len(idents)} processes of the run gone {gone_after:.3f} s after the SIGKILL"
              f" (reaped after {reaped_after:.3f} s)")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        group = run_cgroup.hierarchy() / f"{run_cgroup.PREFIX}{proc.pid}"
        if group.exists():  # the watchdog failed: what the run left is removed here, not left to others
            run_cgroup.remove(group)
            with _machine_quiet():
                cleanup.remove_all()
    (run_id, status), = _db_rows(db, "SELECT id, status FROM runs")
    on_disk = _file_pages(db.parent / "runs" / run_id)
    assert on_disk >= 4 and _db_rows(db, "SELECT COUNT(*) FROM pages") == [(0,)], "collected only at a point's end"
    res = _clean()
    assert res.returncode == 0, res.stderr
    assert f"run {run_id}: records recovered" in res.stdout and f"{on_disk} pages" in res.stdout, res.stdout
    assert _db_rows(db, "SELECT COUNT(*) FROM pages") == [(on_disk,)]
    assert _db_rows(db, "SELECT COUNT(*) FROM samples WHERE metric='page_time'") == [(on_disk,)]
    (status, error), = _db_rows(db, "SELECT status, error FROM runs")
    assert status == "recovered" and "ended without finishing it" in error, (status, error)
    print(f"{on_disk} pages recovered from the client files")
    report = catnip("report", run_id)
    assert "status recovered" in report.stdout, report.stdout[:600]
    assert recover.after_clean(db) == [] and _db_rows(db, "SELECT COUNT(*) FROM pages") == [(on_disk,)], "read once"


@pytest.mark.netns
def test_a_run_over_a_dead_runs_leftovers_is_refused_naming_catnip_clean(isolated_data):
    """A dead run's switch port `ctps1-eth1` (the veth its first client's live shell keeps in the
    machine's namespace): the run is refused in one line before it records anything, instead of
    failing seconds into building its network with RTNETLINK's "File exists"."""
    need_engine()
    res = None
    try:
        while res is None or BUSY in res.stderr:  # another run took the machine meanwhile: again
            with _machine_quiet():
                assert _leftovers() == {}
                subprocess.run(["ip", "link", "add", "ctps1-eth1", "type", "veth", "peer", "name", "ctpx1-eth0"], check=True)
            started = time.monotonic()
            res = catnip("run", str(QUICK), *RUN_ARGS, timeout=300)
            took = time.monotonic() - started
            subprocess.run(["ip", "link", "del", "ctps1-eth1"], capture_output=True)
    finally:
        subprocess.run(["ip", "link", "del", "ctps1-eth1"], capture_output=True)
    errors = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode != 0 and len(errors) == 1, res.stderr[-1500:]
    assert "`catnip clean`" in errors[0] and "ctps1-eth1" in errors[0] and "RTNETLINK" not in res.stderr, errors
    assert not (isolated_data / "data" / "catnip.db").exists() or _db_rows(
        isolated_data / "data" / "catnip.db", "SELECT COUNT(*) FROM runs") == [(0,)], "nothing recorded"
    print(f"\nrefused in {took:.1f} s: {errors[0]}")
