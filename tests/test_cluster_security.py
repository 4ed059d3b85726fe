"""`catnip cluster` hands root to nobody else (issue 47, defect 1).

A scheduler and a worker started as `catnip cluster scheduler|worker` start them, as root, and
then, from this machine:

- every port their processes listen on is on loopback, and their HTTP servers serve no route;
- a Dask client run as user `nobody` (uid 65534) cannot read the cluster's key, and is refused by
  the scheduler, the worker and its nanny: without a certificate, with one of its own, and over
  plain TCP; so it never gets to `submit`, `Client.run` or `run_on_scheduler`;
- root, with the cluster's certificates, can (the cluster is up, and the refusal is the TLS).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from catnip.controller import cluster_tls
from catnip.testbed.paths import REPO
from tests.conftest import catnip, need_engine
from tests.test_cluster import QUICK
from tests.test_run import SMALL

pytestmark = pytest.mark.netns  # root: the worker refuses to start without it, and setpriv needs it
NOBODY = 65534
READY_S = 60.0

# What a local user would try, run as nobody. Prints one JSON object: per attempt its outcome.
PROBE = r'''
import json, os, socket, ssl, sys, datetime
address, folder, marker = sys.argv[1], sys.argv[2], sys.argv[3]
targets = json.loads(sys.argv[4])
out = {"uid": os.getuid()}

def attack(client):
    """What the issue's user did once connected: root code on the workers and the scheduler."""
    def touch():
        open(marker, "w").write("written")
        return os.getuid()
    return {"submit": client.submit(os.getuid, pure=False).result(timeout=20),
            "run": client.run(os.getuid), "run_on_scheduler": client.run_on_scheduler(touch)}

def tried(name, fn):
    try:
        out[name] = {"connected": True, "result": fn()}
    except BaseException as exc:
        out[name] = {"connected": False, "error": f"{type(exc).__name__}: {exc}"[:300]}

for name in ("ca.pem", "cert.pem", "key.pem"):
    tried("read " + name, lambda: len(open(os.path.join(folder, name)).read()))

from distributed import Client
from distributed.security import Security

def dask_client(addr, security=None):
    with Client(addr, security=security, timeout=5) as c:
        return attack(c)

tried("plain client", lambda: dask_client(address))
tried("plain client over tcp", lambda: dask_client(address.replace("tls://", "tcp://")))
tried("own certificate", lambda: dask_client(address, Security.temporary()))
own = os.path.join(folder, "key.pem")
tried("the cluster's certificate", lambda: dask_client(address, Security(
    tls_ca_file=os.path.join(folder, "ca.pem"), tls_client_cert=os.path.join(folder, "cert.pem"),
    tls_client_key=own, require_encryption=True)))

# The server's side of the refusal, without Dask: a TLS handshake to each listener that does not
# check the server, with no certificate and with a self-signed one; then a request.
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
key = ec.generate_private_key(ec.SECP256R1())
name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "intruder")])
now = datetime.datetime.now(datetime.timezone.utc)
cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
home = os.environ["HOME"]
open(home + "/intruder.pem", "wb").write(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))

def raw(host, port, with_cert):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if with_cert:
        ctx.load_cert_chain(home + "/intruder.pem")
    with socket.create_connection((host, port), timeout=5) as s, ctx.wrap_socket(s) as t:
        t.sendall(b"\x00" * 64)  # TLS 1.3: the server checks the client's certificate after the handshake
        data = t.recv(1)
        if not data:
            raise ConnectionError("closed without a word")
        return data.hex()

for label, (host, port) in targets.items():
    tried(f"raw TLS to {label}", lambda: raw(host, port, False))
    tried(f"raw TLS with a self-signed certificate to {label}", lambda: raw(host, port, True))
out["marker written"] = os.path.exists(marker)
print(json.dumps(out))
'''


def _wait_for_line(log: Path, proc: subprocess.Popen, text: str) -> str:
    """The log's first line holding `text`, once the process has written it."""
    deadline = time.monotonic() + READY_S
    while True:
        for line in log.read_text().splitlines():
            if text in line:
                return line
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} from {proc.args[:4]} (exit {proc.poll()}): {log.read_text()[-2000:]}")
        time.sleep(0.1)


def _tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _listening(pids: list[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state the processes hold (/proc/net/tcp{,6})."""
    inodes = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    out = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: TCP_LISTEN
                continue
            hexaddr, hexport = fields[1].split(":")
            raw = bytes.fromhex(hexaddr)
            # The kernel prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            out.append((socket.inet_ntop(family, raw), int(hexport, 16)))
    return sorted(out)


def _loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1")


@pytest.fixture(scope="module")
def cluster_up():
    """`catnip cluster scheduler` and `catnip cluster worker` as a user starts them, with the
    certificates in a folder inside a folder anyone may enter: only their own modes keep nobody out."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the worker refuses to start without it")
    base = Path(tempfile.mkdtemp(prefix="catnip-cluster-security-"))
    from catnip.testbed import paths
    scratch = paths.state_dir() / "dask-scratch"
    scratch_was_there = scratch.exists()
    base.chmod(0o755)
    env = {**os.environ, "CATNIP_DATA": str(base / "data")}
    procs: list[subprocess.Popen] = []

    def start(log: Path, *args: str) -> subprocess.Popen:
        with open(log, "w") as f:
            procs.append(subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "cluster", *args], stdout=f,
                                          stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True))
        return procs[-1]

    try:
        scheduler = start(base / "scheduler.log", "scheduler", "--port", "0")
        address = _wait_for_line(base / "scheduler.log", scheduler, "Scheduler at:").split()[-1]
        worker = start(base / "worker.log", "worker", address)
        _wait_for_line(base / "worker.log", worker, "Registered to:")
        yield {"address": address, "scheduler": scheduler, "worker": worker, "base": base,
               "tls": base / "data" / "cluster" / "tls"}
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(base, ignore_errors=True)
        if not scratch_was_there:
            shutil.rmtree(scratch, ignore_errors=True)


def _listeners(cluster_up) -> dict[str, list[tuple[str, int]]]:
    return {"scheduler": _listening(_tree(cluster_up["scheduler"].pid)),
            "worker": _listening(_tree(cluster_up["worker"].pid))}


def test_no_port_of_the_scheduler_or_worker_is_bound_outside_loopback(cluster_up):
    listeners = _listeners(cluster_up)
    # The scheduler: its TLS port and Dask's HTTP server; the worker: its nanny's and its own TLS
    # ports and its HTTP server. Fewer would mean this reading missed some.
    assert len(listeners["scheduler"]) >= 2 and len(listeners["worker"]) >= 3, listeners
    outside = {who: [a for a in ls if not _loopback(a[0])] for who, ls in listeners.items()}
    assert outside == {"scheduler": [], "worker": []}, listeners
    # The HTTP servers answer, and serve no route (Dask's status pages, /health, Prometheus, JSON).
    answers = {}
    for _, port in listeners["scheduler"] + listeners["worker"]:
        for route in ("/health", "/json/identity.json", "/info/main/workers.html", "/metrics"):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{route}", timeout=5) as r:
                    answers[(port, route)] = r.status
            except urllib.error.HTTPError as exc:
                answers[(port, route)] = exc.code
            except (OSError, ValueError):  # a TLS port: no HTTP there
                pass
    assert len({port for port, _ in answers}) == 2, answers
    assert set(answers.values()) == {404}, answers


def _probe_as_nobody(cluster_up, targets: dict[str, tuple[str, int]]) -> dict:
    base, folder = cluster_up["base"], cluster_up["tls"]
    home = base / "nobody"
    home.mkdir(exist_ok=True)
    os.chown(home, NOBODY, NOBODY)
    script = base / "probe.py"
    script.write_text(PROBE)
    script.chmod(0o644)
    res = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                          str(REPO / ".venv" / "bin" / "python"), str(script), cluster_up["address"], str(folder),
                          str(home / "written-by-root"), json.dumps(targets)],
                         capture_output=True, text=True, timeout=300, cwd=home,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
                              "DASK_CONFIG": str(home / "dask")})
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    print(json.dumps(out, indent=1))  # what nobody got, for the record (pytest -s)
    out["marker exists"] = (home / "written-by-root").exists()
    return out


def test_an_unprivileged_user_is_refused_and_root_is_not(cluster_up):
    folder, address = cluster_up["tls"], cluster_up["address"]
    listeners = _listeners(cluster_up)
    # Every listener but the HTTP ones (the test above's): the scheduler's, the nanny's, the worker's,
    # as their logs name them.
    targets = {}
    for label, log, text in [("scheduler", "scheduler.log", "Scheduler at:"), ("nanny", "worker.log", "Start Nanny at:"),
                             ("worker", "worker.log", "Start worker at:")]:
        line = _wait_for_line(cluster_up["base"] / log, cluster_up[label if label == "scheduler" else "worker"], text)
        host, port = line.split()[-1].strip("'").split("://")[1].rsplit(":", 1)
        targets[label] = (host, int(port))
        assert (host, int(port)) in listeners["scheduler"] + listeners["worker"], (label, line, listeners)
    out = _probe_as_nobody(cluster_up, targets)
    assert out["uid"] == NOBODY
    attempts = {k: v for k, v in out.items() if isinstance(v, dict)}
    assert len(attempts) == 3 + 4 + 2 * 3, out
    assert [k for k, v in attempts.items() if v["connected"]] == [], json.dumps(out, indent=1)
    assert out["marker written"] is False and out["marker exists"] is False
    for name in cluster_tls.FILES:
        assert "PermissionError" in out[f"read {name}"]["error"], out
    # The servers themselves refused (not only the client's side): a TLS alert or a closed connection.
    for label in targets:
        for kind in ("raw TLS to", "raw TLS with a self-signed certificate to"):
            error = attempts[f"{kind} {label}"]["error"]
            assert any(s in error for s in ("CERTIFICATE_REQUIRED", "UNKNOWN_CA", "certificate required",
                                            "unknown ca", "closed without a word", "ConnectionResetError",
                                            "EOF occurred in violation of protocol")), error
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == {n: 0o600 for n in cluster_tls.FILES}
    # Root, with the cluster's certificates, gets in: the cluster is up and what refused nobody is the TLS.
    from distributed import Client
    with Client(address, security=cluster_tls.security(folder), timeout=10) as client:
        workers = client.scheduler_info()["workers"]
        assert client.run(os.getuid) == {w: 0 for w in workers}
        assert client.submit(os.getuid, pure=False).result(timeout=30) == 0
        # The worker's files (spilled pickles it loads back) are in a folder only root can enter.
        local = client.run(lambda dask_worker: dask_worker.local_directory)
    scratch = cluster_tls.scratch_dir()
    assert all(Path(d).is_relative_to(scratch) for d in local.values()), (local, scratch)
    assert stat.S_IMODE(scratch.stat().st_mode) == 0o700 and scratch.stat().st_uid == 0


def test_a_coordinator_with_another_clusters_certificates_is_refused(cluster_up, isolated_data):
    other = isolated_data / "other-tls"
    cluster_tls.create(other)
    res = catnip("run", QUICK, *SMALL, "--cluster", cluster_up["address"], "--tls-dir", str(other))
    assert res.returncode == 1, res.stderr[-2000:]
    assert res.stderr.strip().splitlines()[-1] == (
        f"Error: --cluster {cluster_up['address']}: the scheduler there was not started with the certificates of"
        f" {other} (copy its folder here, docs/cluster.md)"), res.stderr[-2000:]


def test_a_point_runs_on_a_catnip_cluster_worker_over_tls(cluster_up, isolated_data, no_leftovers):
    """The coordinator, `catnip cluster scheduler` and `catnip cluster worker` still work together."""
    need_engine()
    res = catnip("run", QUICK, *SMALL, "--json", "--run-id", "over-tls", "--cluster", cluster_up["address"],
                 "--tls-dir", str(cluster_up["tls"]))
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["status"] == "done" and [p["pages_completed"] for p in summary["points"]] == [30], summary
    assert "1 worker(s) accepted: tls://127.0.0.1:" in res.stderr, res.stderr[-2000:]
