"""`catnip run --cluster`: a sweep's points on the workers of a Dask scheduler (controller/cluster.py).

On one machine a cluster is imitated by Dask's LocalCluster: the scheduler in this process and two
workers as processes of their own, each offering the `machine` resource as `catnip cluster worker`
does, all speaking TLS with certificates made as `catnip cluster scheduler` makes them, in the
test's data folder where the coordinator finds them by default. Both workers share this kernel, so their points take turns at the machine lock, as two
points on one real machine would have to."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from catnip.controller import cluster, cluster_task, cluster_tls
from catnip.results import archive
from catnip.results.store import Store
from catnip.testbed.paths import REPO
from tests.conftest import catnip, need_engine
from tests.test_run import SMALL

QUICK = str(REPO / "scenarios" / "quick.yaml")
# Four points: two policies x one or two rounds of 10 pages for each of 3 clients, no think time.
FOUR_POINTS = ["--set", "sweep.router.policy=[{kind: droptail}, {kind: catnip_good}]",
               "--set", "sweep.workload.rounds=[1, 2]"]


def tls_cluster(**kwargs):
    """A LocalCluster on loopback speaking TLS with the certificates of the data folder's
    cluster/tls (made first if missing), as `catnip cluster` would."""
    from distributed import LocalCluster
    cluster_tls.ensure(cluster_tls.default_dir())
    return LocalCluster(threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0", host="127.0.0.1",
                        protocol="tls://", security=cluster_tls.security(cluster_tls.default_dir()), **kwargs)


@pytest.fixture
def local_cluster(isolated_data):
    """A scheduler here and two workers (processes) like `catnip cluster` starts them."""
    pytest.importorskip("distributed")
    import dask
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        lc = tls_cluster(n_workers=2, resources={"machine": 1})
    assert lc.scheduler_address.startswith("tls://")
    try:
        yield lc
    finally:
        lc.close()


def _points(db: Path) -> list[sqlite3.Row]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return con.execute("SELECT * FROM points ORDER BY point").fetchall()
    except sqlite3.OperationalError:  # polled between the file's creation and its schema's
        if con.execute("SELECT COUNT(*) FROM sqlite_master WHERE name='points'").fetchone()[0]:
            raise
        return []
    finally:
        con.close()


def _page_bytes(db: Path, run_id: str) -> dict[int, list[tuple]]:
    con = sqlite3.connect(db)
    out: dict[int, list[tuple]] = {}
    for point, client, page, rnd, nbytes in con.execute(
            "SELECT point, client, page, round, bytes FROM pages WHERE run_id=? AND error IS NULL"
            " ORDER BY point, client, round, page", (run_id,)):
        out.setdefault(point, []).append((client, page, rnd, nbytes))
    return out


# --- without a network ------------------------------------------------------------------------

def _worker_run(tmp_path: Path) -> dict:
    """An export of a run with two points (a point's two repetitions), as a worker returns it."""
    with Store(tmp_path / "worker.db") as w:
        w.create_run("r1", "s", "s.yaml", {}, {}, 1, "rev", {}, {})
        for point in (0, 1):
            w.create_point("r1", point, point, {"x": 1}, {"seed": 1}, 1 + 1000 * point)
            w.update_point("r1", point, status="done", environment={"kernel": "k"}, finished=time.time())
            w.add_progress("r1", point, 1.0, "done", 10, 10)
        w.finish_run("r1", "done")
        return archive.export_run(w, "r1")


def test_merge_points_renumbers_and_replaces(tmp_path):
    document = _worker_run(tmp_path)
    with Store(tmp_path / "coord.db") as c:
        c.create_run("run", "s", "s.yaml", {}, {}, 1, "rev", {}, {})
        c.create_point("run", 0, 0, {"x": 0}, {}, 1)  # another point, left alone
        c.create_point("run", 3, 0, {"x": 1}, {}, 1)  # recorded as running while on the worker
        c.add_progress("run", 3, 0.5, "running workload", 1, 10)
        written = archive.merge_points(c, document, "run", 3, environment={"worker": "tcp://w:1"})
        assert written == 4  # 2 points rows, 2 progress rows
        rows = {p["point"]: p for p in c.points("run")}
        assert sorted(rows) == [0, 3, 4]
        assert rows[0]["status"] == "running"
        assert [rows[p]["status"] for p in (3, 4)] == ["done", "done"]
        assert [rows[p]["seed"] for p in (3, 4)] == [1, 1001]
        assert json.loads(rows[4]["environment"]) == {"kernel": "k", "cluster": {"worker": "tcp://w:1"}}
        progress = c.db.execute("SELECT point, phase FROM progress WHERE run_id='run' ORDER BY point").fetchall()
        assert [tuple(r) for r in progress] == [(3, "done"), (4, "done")]  # the running row was replaced
        with pytest.raises(archive.ArchiveError, match="no run 'other'"):
            archive.merge_points(c, document, "other", 0)


def test_differences_name_what_differs():
    mine = {"code": "a", "builds": "b", "capabilities": {"root": True, "qdiscs": {"htb": True, "netem": False}}}
    assert cluster._differences(mine, mine) == []
    theirs = {"code": "z", "builds": "b", "capabilities": {"root": True, "qdiscs": {"htb": True, "netem": True}}}
    assert cluster._differences(mine, theirs) == ["testbed code z (ours a)", "qdiscs netem=True (ours False)"]


def test_comparable_capabilities_leave_out_the_machine_names():
    caps = {"kernel": "6.18.0", "engine_binary": "/x/engine", "root": True}
    assert cluster_task.comparable_capabilities(caps) == {"root": True}


def test_cluster_certificates_are_private_and_checked(tmp_path):
    """What `catnip cluster scheduler` makes, and what every user of the folder refuses."""
    import datetime
    import ssl
    import stat
    folder = tmp_path / "tls"
    files, made = cluster_tls.ensure(folder)
    assert made and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == {n: 0o600 for n in cluster_tls.FILES}
    assert cluster_tls.ensure(folder) == (files, False), "a second start keeps them"
    # Each side's TLS context (as Dask builds it) takes the key with the certificate, and the
    # certificate is signed by the CA, not by itself.
    for purpose in (ssl.Purpose.SERVER_AUTH, ssl.Purpose.CLIENT_AUTH):
        ctx = ssl.create_default_context(purpose, cafile=str(files["ca.pem"]))
        ctx.load_cert_chain(files["cert.pem"], files["key.pem"])
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec
    ca = x509.load_pem_x509_certificate(files["ca.pem"].read_bytes())
    cert = x509.load_pem_x509_certificate(files["cert.pem"].read_bytes())
    assert cert.issuer == ca.subject and cert.issuer != cert.subject
    ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    assert not any(b"PRIVATE KEY" in p.read_bytes() for p in (files["ca.pem"], files["cert.pem"])), "no CA key kept"
    sec = cluster_tls.security(folder)
    assert sec.require_encryption and sec.tls_client_key == str(files["key.pem"])

    def refused(match: str) -> None:
        with pytest.raises(cluster_tls.TLSError, match=match):
            cluster_tls.check(folder)

    folder.chmod(0o755)
    refused(f"{folder} has mode 0755, others may use it; allowed 0700 \\(chmod 700 {folder}\\)")
    folder.chmod(0o700)
    files["key.pem"].chmod(0o640)
    refused("key.pem has mode 0640, others may use it; allowed 0600")
    files["key.pem"].chmod(0o600)
    files["cert.pem"].rename(tmp_path / "elsewhere.pem")
    (folder / "cert.pem").symlink_to(tmp_path / "elsewhere.pem")
    refused("cert.pem is not a file \\(a symlink is refused too\\)")
    (folder / "cert.pem").unlink()
    refused("cert.pem is missing: copy the scheduler machine's whole folder again")
    with pytest.raises(cluster_tls.TLSError, match="no cluster certificates in .*nowhere: start `catnip cluster"):
        cluster_tls.check(tmp_path / "nowhere")
    # --new-certs: a new CA, so the old certificate is no longer accepted anywhere.
    new, made = cluster_tls.ensure(folder, new=True)
    new_ca = x509.load_pem_x509_certificate(new["ca.pem"].read_bytes())
    assert made and new_ca.public_key().public_numbers() != ca.public_key().public_numbers()
    with pytest.raises(InvalidSignature):
        new_ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tls-")] == [], "no temporary folder left"
    # Expired: refused naming the fix.
    real_now = datetime.datetime

    class Later(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return real_now.now(tz) + datetime.timedelta(days=cluster_tls.VALID_DAYS + 1)

    import unittest.mock
    with unittest.mock.patch.object(cluster_tls.datetime, "datetime", Later):
        refused("not now: make new ones with `catnip cluster scheduler --new-certs`")
    for address in ("tcp://h:8786", "h:8786"):
        with pytest.raises(cluster_tls.TLSError, match="the cluster speaks TLS only: give tls://h:8786"):
            cluster_tls.check_address(address, "--cluster")
    cluster_tls.check_address("tls://h:8786", "--cluster")


def test_cluster_options_are_checked_before_anything_starts(isolated_data):
    res = catnip("run", QUICK, "--cluster", "tcp://127.0.0.1:1", "--jobs", "2")
    assert res.returncode == 2 and "--cluster runs one point per worker machine" in res.stderr
    res = catnip("run", QUICK, "--resume", "abc")
    assert res.returncode == 2 and "give --cluster too" in res.stderr
    res = catnip("run", QUICK, "--tls-dir", str(isolated_data))
    assert res.returncode == 2 and "the cluster's certificates are for --cluster: give it too" in res.stderr


# --- with a scheduler and workers -------------------------------------------------------------

def test_a_point_folder_is_orphaned_only_when_its_worker_and_point_are_gone(tmp_path, monkeypatch):
    """A SIGKILLed worker skips its folder's removal; the folder is a leftover once the worker and
    the point process it started have both ended, and not before (the point may still tear down);
    without the point's pid, once a point would have had time to tear down."""
    from catnip.testbed import paths
    monkeypatch.setenv("CATNIP_STATE", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = subprocess.Popen(["sleep", "60"])
    try:
        folders = {"mine": f"cluster-{os.getpid()}-a", "dead": f"cluster-{dead.pid}-b",
                   "dying": f"cluster-{dead.pid}-c", "unnamed": "cluster-d",  # unnamed: from before the pid was in it
                   "starting": f"cluster-{dead.pid}-e"}  # killed before it wrote point.pid: its point may run
        folders = {k: tmp_path / name for k, name in folders.items()}
        for folder in folders.values():
            folder.mkdir()
        (folders["dying"] / "point.pid").write_text(str(live.pid))
        (folders["dead"] / "point.pid").write_text(str(dead.pid))
        long_ago = time.time() - paths.CLUSTER_POINT_TEARDOWN_S - 1
        os.utime(folders["unnamed"], (long_ago, long_ago))
        assert paths.orphaned_cluster_work() == sorted([folders["dead"], folders["unnamed"]])
        assert paths.cluster_work_prefix() == f"cluster-{os.getpid()}-"
    finally:
        live.kill()
        live.wait()


@pytest.mark.netns
def test_no_scheduler_is_one_line(isolated_data):
    need_engine()
    pytest.importorskip("distributed")
    res = catnip("run", QUICK, *SMALL, "--cluster", "tcp://127.0.0.1:9")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == ("Error: --cluster tcp://127.0.0.1:9: tcp:// is refused, the cluster"
                                                   " speaks TLS only: give tls://127.0.0.1:9"), res.stderr[-2000:]
    folder = cluster_tls.default_dir()
    res = catnip("run", QUICK, *SMALL, "--cluster", "tls://127.0.0.1:9")
    assert res.returncode == 1
    assert f"--tls-dir: no cluster certificates in {folder}: start `catnip cluster scheduler`" in res.stderr, \
        res.stderr[-2000:]
    cluster_tls.create(folder)
    res = catnip("run", QUICK, *SMALL, "--cluster", "tls://127.0.0.1:9")
    assert res.returncode == 1
    assert "--cluster tls://127.0.0.1:9: no Dask scheduler answers there" in res.stderr, res.stderr[-2000:]


@pytest.mark.netns
@pytest.mark.parametrize("kind", ["no-resource", "other-engine"])
def test_unfit_workers_are_refused(isolated_data, tmp_path, kind):
    """A worker without the `machine` resource, and one whose engine build is not the coordinator's
    (every worker here runs this checkout: its environment points it at another engine file)."""
    need_engine()
    pytest.importorskip("distributed")
    other = tmp_path / "other-engine"
    other.write_bytes(b"not the engine this coordinator has")
    kwargs = ({"env": {"CATNIP_ENGINE": str(other)}, "resources": {"machine": 1}} if kind == "other-engine"
              else {})
    with tls_cluster(n_workers=1, **kwargs) as lc:
        res = catnip("run", QUICK, *SMALL, "--cluster", lc.scheduler_address)
    assert res.returncode == 1, res.stderr[-2000:]
    assert "no worker can run this run's points" in res.stderr, res.stderr[-2000:]
    assert ("offers no 'machine' resource" if kind == "no-resource" else "engine/BPF builds") in res.stderr


@pytest.mark.netns
def test_four_points_over_two_workers_match_a_local_run(isolated_data, no_leftovers, local_cluster):
    need_engine()
    db = isolated_data / "data" / "catnip.db"
    res = catnip("run", QUICK, *SMALL, *FOUR_POINTS, "--seed", "5", "--run-id", "on-cluster", "--json",
                 "--cluster", local_cluster.scheduler_address)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["status"] == "done" and len(summary["points"]) == 4
    assert "2 worker(s) accepted" in res.stderr
    res = catnip("run", QUICK, *SMALL, *FOUR_POINTS, "--seed", "5", "--run-id", "local", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    points = [p for p in _points(db) if p["run_id"] == "on-cluster"]
    assert [p["status"] for p in points] == ["done"] * 4
    workers = {json.loads(p["environment"])["cluster"]["worker"] for p in points}
    assert len(workers) == 2, "both workers ran points"
    # The same seeds drew the same pages (sizes, order) on the workers as here.
    assert _page_bytes(db, "on-cluster") == _page_bytes(db, "local")
    assert [len(v) for v in _page_bytes(db, "local").values()] == [30, 60, 30, 60]
    # Each point's folder came back under its own number.
    folder = db.parent / "runs" / "on-cluster"
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("point")) == [f"point{i}" for i in range(4)]
    # Page times within noise of the local run's: the same network, the same engine.
    con = sqlite3.connect(db)
    mean = dict(con.execute("SELECT run_id, AVG(duration) FROM pages GROUP BY run_id").fetchall())
    assert 0.5 < mean["on-cluster"] / mean["local"] < 2, mean
    # The dashboard's and report's reader sees the run as a local one.
    rep = json.loads(catnip("report", "on-cluster", "--json").stdout)
    assert [p["pages_completed"] for p in rep["points"]] == [30, 60, 30, 60]


@pytest.mark.netns
def test_a_killed_worker_loses_only_its_point(isolated_data, no_leftovers, local_cluster):
    """SIGKILL the worker whose point is in its workload: its point's network goes down with it
    (the point's process gets SIGTERM as its parent dies), the point is sent again, and the run
    ends done with the lost attempt recorded."""
    need_engine()
    from distributed import Client
    from catnip.testbed import cleanup
    db = isolated_data / "data" / "catnip.db"
    with Client(local_cluster) as client:
        pids = client.run(os.getpid)  # worker address -> pid
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "run", QUICK, *SMALL, "--run-id", "kill",
                             "--set", "sweep.router.policy=[{kind: droptail}, {kind: catnip_good}]",
                             "--set", "workload.think_time={model: fixed, mean: 1s}", "--json",
                             "--cluster", local_cluster.scheduler_address],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while not any("catnip.workloads.client" in cmd for _, cmd in cleanup.our_processes()):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        # The worker below the process that holds the machine lock runs the point now.
        holder = cleanup.run_in_progress() or ""
        running = [a for a, pid in pids.items() if _has_ancestor(holder, pid)]
        assert len(running) == 1, (pids, holder)
        os.kill(pids[running[0]], signal.SIGKILL)
        out, err = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    points = _points(db)
    assert [p["status"] for p in points] == ["done", "done"]
    attempts = [json.loads(p["environment"])["cluster"]["attempts"] for p in points]
    lost = [a for a in attempts if len(a) == 2]
    assert len(lost) == 1, attempts
    assert [a["outcome"] for a in lost[0]] == ["the worker died while running it", "returned"]
    assert lost[0][0]["worker"] == running[0]
    # The killed worker could not remove its point's folder; the worker that ran the point again did.
    from catnip.testbed import paths
    assert not list(paths.state_dir().glob(f"{paths.CLUSTER_WORK_PREFIX}{pids[running[0]]}-*"))


def _has_ancestor(holder: str, pid: int) -> bool:
    """Whether the process the lock holder's text names ("pid N since ...") runs below `pid`."""
    if not holder.startswith("pid "):
        return False
    child = int(holder.split()[1])
    while child > 1:
        if child == pid:
            return True
        try:
            stat = Path(f"/proc/{child}/stat").read_text()
        except OSError:
            return False
        child = int(stat.rsplit(")", 1)[1].split()[1])
    return False


@pytest.mark.netns
def test_ctrl_c_on_the_coordinator_tears_the_points_down(isolated_data, no_leftovers, local_cluster):
    """Ctrl-C sets the run's Dask Event: the running point tears its network down on its worker and
    comes back cancelled with its records; the point still queued is dropped."""
    need_engine()
    from catnip.testbed import cleanup
    db = isolated_data / "data" / "catnip.db"
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "run", QUICK, *SMALL, "--run-id", "stop",
                             "--set", "sweep.router.policy=[{kind: droptail}, {kind: catnip_good}]",
                             "--set", "workload.rounds=20", "--set", "workload.think_time={model: fixed, mean: 1s}",
                             "--cluster", local_cluster.scheduler_address],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while not _pages_done(db, "stop"):  # the coordinator has heard of finished pages
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert "the workers tore their points down" in err
    assert cleanup.leftovers() == {}, "the worker's point tore its network down"
    points = _points(db)
    assert [p["status"] for p in points] == ["cancelled"], [dict(p) for p in points]
    assert json.loads(points[0]["environment"])["cluster"]["attempts"][-1]["outcome"] == "returned"
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs WHERE id='stop'").fetchone()[0] == "cancelled"
    assert con.execute("SELECT COUNT(*) FROM pages WHERE run_id='stop'").fetchone()[0] > 0, "its records came back"


def _pages_done(db: Path, run_id: str) -> bool:
    if not db.exists():
        return False
    con = sqlite3.connect(db)
    try:
        return (con.execute("SELECT MAX(pages_done) FROM progress WHERE run_id=?", (run_id,)).fetchone()[0] or 0) > 0
    except sqlite3.OperationalError:  # the schema is not there yet
        return False
    finally:
        con.close()


@pytest.mark.netns
def test_resume_after_the_coordinator_was_killed_runs_only_what_is_not_done(isolated_data, no_leftovers,
                                                                            local_cluster):
    """SIGKILL the coordinator once one of two points is done: the run is left `running` with no
    runner. `--resume` closes it as interrupted, keeps the finished point as it was and runs the
    other one into the same run."""
    need_engine()
    db = isolated_data / "data" / "catnip.db"
    args = [QUICK, *SMALL, "--set", "sweep.router.policy=[{kind: droptail}, {kind: catnip_good}]",
            "--cluster", local_cluster.scheduler_address]
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "run", *args, "--run-id", "again"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        deadline = time.monotonic() + 300
        while not any(p["status"] == "done" for p in (_points(db) if db.exists() else [])):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = {p["point"]: dict(p) for p in _points(db) if p["status"] == "done"}
    assert len(before) == 1, [dict(p) for p in _points(db)]
    # The killed coordinator's other point may still run on its worker (the scheduler forgets the
    # task, the worker's thread does not): wait until no point process is left, as a user
    # restarting the coordinator later would find it.
    from catnip.testbed import cleanup
    deadline = time.monotonic() + 300
    while any("catnip.controller.cluster_point" in cmd for _, cmd in cleanup.our_processes()) or cleanup.run_in_progress():
        assert time.monotonic() < deadline, "the orphaned point did not end"
        time.sleep(0.5)
    res = catnip("run", *args, "--resume", "again", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "run again: 1 point run(s) already done, 1 to go" in res.stderr, res.stderr[-3000:]
    after = {p["point"]: dict(p) for p in _points(db)}
    assert [p["status"] for p in after.values()] == ["done", "done"]
    (kept,) = before
    assert after[kept] == before[kept], "the finished point was left as it was"
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs WHERE id='again'").fetchone()[0] == "done"
    pages = dict(con.execute("SELECT point, COUNT(*) FROM pages WHERE run_id='again' AND error IS NULL"
                             " GROUP BY point").fetchall())
    assert pages == {0: 30, 1: 30}, pages
