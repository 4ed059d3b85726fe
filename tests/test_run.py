"""End to end through the CLI: a small run, its report, and cleanup on every way a run can end."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from catnip.testbed import cleanup
from catnip.testbed.paths import REPO
from tests.conftest import catnip, need_engine, wait_until


SMALL = ["--set", "topology.clients=3", "--set", "workload.think_time={model: zero}",
         "--set", "workload.start_stagger=0.5s", "--set", "run.time_limit=3min"]


@pytest.fixture(autouse=True)
def _engine_for_runs(request):
    """Runs need the built engine (the netns marker brings the root gate)."""
    if request.node.get_closest_marker("netns"):
        need_engine()


@pytest.mark.netns
def test_malformed_scenario_one_line_error_touches_nothing(tmp_path, isolated_data):
    bad = tmp_path / "bad.yaml"
    bad.write_text((REPO / "scenarios" / "quick.yaml").read_text().replace("rate: 1.5Mbit", "rate: fast"))
    before = cleanup.leftovers()
    res = catnip("run", str(bad))
    assert res.returncode != 0
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, res.stderr
    assert "topology.bottleneck.rate: 'fast' is not a rate" in lines[0]
    assert cleanup.leftovers() == before
    assert not (isolated_data / "data" / "catnip.db").exists()


@pytest.mark.netns
def test_small_run_end_to_end(isolated_data, no_leftovers):
    res = catnip("run", str(REPO / "scenarios" / "quick.yaml"), *SMALL, "--seed", "7", "--json",
                 "--set", "run.capture=true")
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["status"] == "done"
    point = summary["points"][0]
    assert point["pages_completed"] == 30 and point["pages_failed"] == 0
    run_id = summary["run_id"]

    rep = json.loads(catnip("report", run_id, "--json").stdout)
    table = rep["points"][0]["table"]
    assert [r["page"] for r in table] == list(range(1, 11))
    assert all(r["n"] == 3 and 0 < r["min"] <= r["median"] <= r["max"] for r in table)
    # Page 1's floor: two request/response exchanges over a 24 ms RTT path (handshake + GET, twice).
    assert table[0]["min"] > 0.048
    assert rep["points"][0]["loss"]["bottleneck-data"]["arrived"] > 0
    assert rep["points"][0]["tcp"]["TcpOutSegs"] > 0

    rows = list(csv.DictReader(io.StringIO(catnip("report", run_id[:20], "--csv").stdout)))
    assert len(rows) == 10 and rows[0]["page"] == "1"
    text = catnip("report", run_id).stdout
    assert "Median" in text and "Bottleneck (server->client) packet loss" in text
    assert run_id in catnip("list").stdout

    db = sqlite3.connect(isolated_data / "data" / "catnip.db")
    run = db.execute("SELECT scenario, git_rev, versions, capabilities FROM runs").fetchone()
    assert json.loads(run[0])["topology"]["clients"] == 3
    assert "kernel" in json.loads(run[2]) and json.loads(run[3])["nfqueue"] is True
    objects = db.execute("SELECT COUNT(*), SUM(body_bytes) FROM objects WHERE error IS NULL").fetchone()
    assert objects[0] == 3 * 45  # 45 objects in the 10 pages (Table II connection counts)
    capture = db.execute("SELECT capture FROM points").fetchone()[0]
    assert capture and os.path.getsize(capture) > 10_000, "the bottleneck capture is kept with the run"
    offloads = json.loads(db.execute("SELECT offloads FROM points").fetchone()[0])
    assert offloads["client"]["tcp-segmentation-offload"].startswith("off")
    sysctls = json.loads(db.execute("SELECT sysctls FROM points").fetchone()[0])
    assert sysctls["server"]["net.ipv4.tcp_congestion_control"] == "cubic"


@pytest.mark.netns
def test_run_folders_go_beside_the_database(isolated_data, no_leftovers):
    """`--db` elsewhere keeps the run's folder (configs, logs, captures) beside that database, not
    under CATNIP_DATA (the repository's data/ by default)."""
    db = isolated_data / "elsewhere" / "results.db"
    res = catnip("run", str(REPO / "scenarios" / "quick.yaml"), *SMALL, "--set", "workload.rounds=1",
                 "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    run_id = json.loads(res.stdout)["run_id"]
    assert (db.parent / "runs" / run_id).is_dir()
    assert not (isolated_data / "data" / "runs").exists()


def test_unknown_run_is_a_clear_error(isolated_data):
    res = catnip("report", "no-such-run")
    assert res.returncode != 0 and "no run 'no-such-run'" in res.stderr


@pytest.fixture
def background_run():
    """Start a long run; whatever the test does, the run process does not outlive it."""
    procs = []

    def start(extra: list[str] = ()) -> subprocess.Popen:
        proc = _start_run(list(extra))
        procs.append(proc)
        return proc
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _start_run(extra: list[str]) -> subprocess.Popen:
    return subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "run", str(REPO / "scenarios" / "quick.yaml"),
                             *SMALL, "--set", "workload.rounds=20",
                             "--set", "workload.think_time={model: fixed, mean: 1s}", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=os.environ)


def _wait_for_clients(proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until the clients run and the run has recorded a finished page (the workload is under way)."""
    def pages_done() -> int:
        assert proc.poll() is None, proc.communicate()
        if not any("catnip.workloads.client" in cmd for _, cmd in cleanup.our_processes()):
            return 0
        try:
            db = sqlite3.connect(f"file:{os.environ['CATNIP_DB']}?mode=ro", uri=True)  # never creates it
            row = db.execute("SELECT MAX(pages_done) FROM progress").fetchone()
        except sqlite3.OperationalError:  # the database or the table not written yet
            return 0
        return row[0] or 0
    wait_until(pages_done, timeout, "clients running and a page done", poll=0.3)


def _status(isolated_data) -> tuple[str, str]:
    db = sqlite3.connect(isolated_data / "data" / "catnip.db")
    return db.execute("SELECT status, error FROM runs").fetchone()


@pytest.mark.netns
def test_ctrl_c_tears_everything_down(isolated_data, no_leftovers, background_run):
    proc = background_run()
    _wait_for_clients(proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert cleanup.leftovers() == {}, "the run's own teardown must leave nothing"
    assert _status(isolated_data)[0] == "cancelled"


@pytest.mark.netns
def test_failed_run_is_recorded_and_cleaned(isolated_data, no_leftovers, background_run):
    proc = background_run()
    _wait_for_clients(proc)
    for pid, cmd in cleanup.our_processes():
        if "catnip-engine" in cmd:
            os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert cleanup.leftovers() == {}
    status, error = _status(isolated_data)
    assert status == "failed" and "engine" in error


@pytest.mark.netns
def _watchdog_of(runner_pid: int) -> int:
    """The pid of a runner's watchdog (testbed/run_watchdog.py: its first argument is the runner's pid)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"catnip.testbed.run_watchdog" in argv and argv[argv.index(b"catnip.testbed.run_watchdog") + 1] == str(runner_pid).encode():
                return int(entry.name)
    raise AssertionError(f"runner {runner_pid} has no watchdog")


def test_clean_after_a_killed_run(isolated_data, no_leftovers, background_run):
    """The runner and its watchdog both killed: no teardown at all, only `catnip clean` can help
    (the runner alone killed is tests/test_runner_sigkill.py's: its watchdog cleans up)."""
    proc = background_run()
    _wait_for_clients(proc)
    os.kill(_watchdog_of(proc.pid), signal.SIGKILL)
    proc.kill()
    proc.wait()
    assert cleanup.leftovers(), "a SIGKILLed run should leave state for this test to be meaningful"
    res = catnip("clean")
    assert res.returncode == 0, res.stderr
    assert "removed" in res.stdout
    assert cleanup.leftovers() == {}


def _kernel_has_qdisc(*qdisc: str) -> bool:
    """Asked of the kernel directly (not through testbed.capabilities): add it in a fresh netns."""
    return subprocess.run(["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", *qdisc],
                          capture_output=True).returncode == 0


@pytest.mark.netns
def test_check_reports_and_exits_zero_here():
    res = catnip("check")
    assert res.returncode == 0, res.stdout
    assert "ready to run scenarios" in res.stdout
    data = json.loads(catnip("check", "--json").stdout)
    assert data["can_run"] and "engine" in data["link_backends"]
    # The netem verdict (printed whatever it is) must be the kernel's, and the kernel tc backend
    # offered exactly when netem and htb exist.
    netem = _kernel_has_qdisc("netem", "delay", "1ms")
    assert data["qdiscs"]["netem"] is netem
    assert f"netem {'yes' if netem else 'no'}" in res.stdout
    assert ("kernel" in data["link_backends"]) is (netem and _kernel_has_qdisc("htb"))
    # Each mechanism's independent reference and its status (testbed/references.py, issue 44).
    refs = {r["mechanism"]: r["status"] for r in data["references"]}
    assert refs["tcpf"].startswith("present (seen failing with:") and "tcpf: present" in res.stdout
    assert {"police", "shape", "red3", "wrr", "source_scheduler"} <= set(refs)


@pytest.mark.netns
def test_late_verdicts_flag_the_run(isolated_data, no_leftovers):
    # A 1 us lateness threshold is below what any scheduler can promise, so verdicts count as
    # late and the point must be flagged: the flag is computed from the engine's own counters.
    # It also runs with 512-byte segments (topology.mss), as the simulations did (section IV-A).
    res = catnip("run", str(REPO / "scenarios" / "quick.yaml"), *SMALL, "--set", "workload.pages=[1, 7]",
                 "--set", "run.late_threshold=1us", "--set", "topology.mss=512", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    point = json.loads(res.stdout)["points"][0]
    assert point["realtime_ok"] is False
    rep = json.loads(catnip("report", json.loads(res.stdout)["run_id"], "--json").stdout)
    fidelity = rep["points"][0]["fidelity"]
    assert fidelity["late_events"] > 0 and fidelity["late_threshold_us"] == 1
    # The causes: no verdict call finishes within 1 us, and a verdict is never later at issue
    # than when its call has returned.
    assert 0 < fidelity["slow_verdict_calls"] <= fidelity["verdict_calls"]
    assert fidelity["late_at_issue_events"] <= fidelity["late_events"]
    assert fidelity["max_late_at_issue_us"] <= fidelity["max_late_us"]
    text = catnip("report", json.loads(res.stdout)["run_id"]).stdout
    assert "real time kept: NO" in text and "Late verdicts' cause:" in text
    assert point["pages_completed"] == 6 and point["pages_failed"] == 0
    db = sqlite3.connect(isolated_data / "data" / "catnip.db")
    # 512-byte MSS: MTU 552 everywhere, so no packet through the bottleneck exceeds 552 bytes.
    sent = db.execute("SELECT SUM(sent_bytes), SUM(sent_pkts) FROM link_stats WHERE role='bottleneck-data'").fetchone()
    assert sent[1] > 0 and sent[0] / sent[1] <= 552


@pytest.mark.netns
def test_http11_run_uses_one_persistent_connection_per_client(isolated_data, no_leftovers):
    res = catnip("run", str(REPO / "scenarios" / "quick.yaml"), *SMALL, "--set", "workload.http_version=1.1",
                 "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    point = json.loads(res.stdout)["points"][0]
    assert point["pages_completed"] == 30 and point["pages_failed"] == 0
    db = sqlite3.connect(isolated_data / "data" / "catnip.db")
    conns = db.execute("SELECT client, COUNT(DISTINCT conn), COUNT(*) FROM objects GROUP BY client").fetchall()
    assert len(conns) == 3 and all(n_conn == 1 and n_obj == 45 for _, n_conn, n_obj in conns), conns


def test_missing_link_backend_fails_before_building(tmp_path, monkeypatch):
    # In-process against capabilities without netem, so it runs (and can fail) on any machine:
    # a kernel with netem would otherwise leave the refusal unreachable. The runner recording a
    # point that raised as failed is test_failed_run_is_recorded_and_cleaned's.
    from catnip.controller import point as point_mod
    from catnip.controller.point_plan import PointPlan
    from catnip.spec import scenario as s
    from catnip.testbed import network
    from catnip.testbed.capabilities import Capabilities

    sc = s.load(REPO / "scenarios" / "quick.yaml", ["run.link_backend=kernel"]).points[0][1]
    caps = Capabilities(root=True, qdiscs={"htb": True, "pfifo": True, "netem": False}, linux_bridge=True)
    monkeypatch.setattr(network, "build", lambda *a, **k: pytest.fail("built a network"))
    plan = PointPlan(0, 0, {}, sc, "", 1, tmp_path)
    run = point_mod.PointRun("r", plan, caps, store=None, artifacts=tmp_path, progress=lambda *a: None,
                             cancelled=lambda: False)
    with pytest.raises(RuntimeError, match="run.link_backend 'kernel' is not available on this machine: it lacks"
                                           " the qdiscs netem"):
        run.execute(None)


@pytest.mark.netns
def test_a_dead_client_fails_the_point_and_keeps_what_was_measured(isolated_data, no_leftovers, background_run):
    proc = background_run()
    _wait_for_clients(proc)
    # let every client finish some pages first, then kill one client
    db_path = isolated_data / "data" / "catnip.db"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        row = sqlite3.connect(db_path).execute("SELECT MAX(pages_done) FROM progress").fetchone()
        if row[0] and row[0] >= 6:
            break
        time.sleep(0.5)
    victim = next(pid for pid, cmd in cleanup.our_processes() if "catnip.workloads.client" in cmd)
    os.kill(victim, signal.SIGKILL)
    proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert cleanup.leftovers() == {}
    db = sqlite3.connect(db_path)
    status, error, fidelity = db.execute("SELECT status, error, fidelity FROM points").fetchone()
    assert status == "failed" and "client on ctpc" in error and "failed" in error, error
    assert db.execute("SELECT COUNT(*) FROM pages").fetchone()[0] >= 6, "pages measured before the failure are kept"
    assert json.loads(fidelity)["engine_events"] > 0, "the engines' counters are kept too"
    # The kernel's side, read before the engines stopped: each bound queue and what it was handed.
    assert json.loads(fidelity)["kernel_queues"] >= 2 and json.loads(fidelity)["kernel_queued"] > 0


@pytest.mark.netns
def test_split_placement_puts_the_engines_apart(isolated_data, no_leftovers):
    # run.placement: split (testbed/placement.py): the engines' threads on the last CPU, the hosts
    # (whose shells Apache and the clients inherit) on the others, and every veth's receive
    # processing steered there, all read back from the kernel into the fidelity record.
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("run.placement: split needs 2 CPUs")
    res = catnip("run", str(REPO / "scenarios" / "quick.yaml"), *SMALL, "--set", "workload.pages=[1]",
                 "--set", "run.placement=split", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    run_id = json.loads(res.stdout)["run_id"]
    fidelity = json.loads(catnip("report", run_id, "--json").stdout)["points"][0]["fidelity"]
    where = fidelity["placement"]
    assert where["kind"] == "split" and where["engine_cpus"] == cpus[-1:] and where["other_cpus"] == cpus[:-1]
    assert where["engine_threads_on"] and all(v == cpus[-1:] for v in where["engine_threads_on"].values())
    assert where["hosts_on"] == cpus[:-1]
    assert where["receive_steered_devices"] >= 10  # 3 clients, 1 server, 2 routers, the switches' ports
    assert len(fidelity["cpu_busy_each"]) == os.cpu_count() and fidelity["backlog_drops"] >= 0
    assert "Placement: split (engines on CPU" in catnip("report", run_id).stdout


@pytest.mark.netns
def test_split_placement_needs_two_cpus(isolated_data, no_leftovers):
    # One usable CPU: refused before a run starts, saying why and what to use.
    res = subprocess.run(["taskset", "-c", "0", str(REPO / ".venv" / "bin" / "catnip"), "run", str(REPO / "scenarios" / "quick.yaml"),
                          *SMALL, "--set", "run.placement=split"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 2 and "run " not in res.stdout
    assert "run.placement: split needs at least 2 CPUs and this process may use 1 (0)" in res.stderr
