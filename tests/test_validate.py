"""Validation that cannot hang, crash or be abused (issue 22), and the disks: one test per defect.

Each hostile input goes through the path users take (`catnip validate`, `catnip run`, the
dashboard's form and home page) and must be refused in one short line with exit code 2 and no
traceback, quickly, leaving nothing behind. No namespace is built here: `catnip run` is only
given inputs refused before it probes the machine. The disk tests use a private mount namespace
(a read-only bind mount, a small tmpfs) or another user: they need root, so they are in the
`netns` tier (make test) though they build no network and need no machine lock.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from catnip.controller import validate as validate_mod
from catnip.cli.main import main
from catnip.controller.run_queue import RunQueue
from catnip.results.store import Store, StoreReadOnly
from catnip.spec import bounded
from catnip.spec import scenario as s
from catnip.testbed.paths import REPO
from catnip.webui import forms
from catnip.webui.app import create_app

QUICK = (REPO / "scenarios" / "quick.yaml").read_text()
PY = str(REPO / ".venv" / "bin" / "python")

# Nine levels of nine: 9^9 (387 million) strings once expanded, in 340 characters.
LAUGHS = "\n".join(["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi")])
FLOW_LAUGHS = ("[&a [lol,lol,lol,lol,lol,lol,lol,lol,lol],&b [*a,*a,*a,*a,*a,*a,*a,*a,*a],"
               "&c [*b,*b,*b,*b,*b,*b,*b,*b,*b],&d [*c,*c,*c,*c,*c,*c,*c,*c,*c],&e [*d,*d,*d,*d,*d,*d,*d,*d,*d],"
               "&f [*e,*e,*e,*e,*e,*e,*e,*e,*e],&g [*f,*f,*f,*f,*f,*f,*f,*f,*f],*g]")


@pytest.fixture
def state(tmp_path, monkeypatch):
    """A private data directory and database; `created()` lists anything that appeared in it."""
    data = tmp_path / "data"
    # No engine: should a refusal regress, `catnip run` stops at "this machine cannot run scenarios".
    safe = {"CATNIP_DATA": str(data), "CATNIP_DB": str(data / "catnip.db"), "CATNIP_ENGINE": "/nonexistent"}
    for k, v in safe.items():
        monkeypatch.setenv(k, v)

    class State:
        path = data
        env = {**os.environ, **safe}

        @staticmethod
        def created() -> list[str]:
            return sorted(str(p.relative_to(tmp_path)) for p in data.rglob("*")) if data.exists() else []
    return State


def cli(*args: str, timeout: float = 30, env: dict | None = None) -> subprocess.CompletedProcess:
    """`catnip ARGS` as a user runs it (its own process: stderr and the exit code as they are)."""
    return subprocess.run([PY, "-m", "catnip.cli.main", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env=env)


def refused(result: subprocess.CompletedProcess | object, *words: str, lines: int = 1) -> str:
    """The refusal's text, checked: exit 2, no traceback, at most `lines` short lines, the words in it."""
    if isinstance(result, subprocess.CompletedProcess):
        code, out, err = result.returncode, result.stdout, result.stderr
    else:  # click's CliRunner result
        code, out, err = result.exit_code, result.stdout, result.stderr if result.stderr_bytes else ""
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    text = (err or out).strip()
    assert code == 2, (code, out[-500:], err[-500:])
    assert "Traceback" not in out + err
    assert 1 <= len(text.splitlines()) <= lines, text
    assert all(len(line) <= bounded.MAX_LINE + 20 for line in text.splitlines()), text[:500]
    for w in words:
        assert w in text, (w, text)
    return text


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def run_cli(*args: str):
    """`catnip ARGS` in this process (faster): stdout and stderr apart."""
    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2 mixes them unless told
    except TypeError:
        runner = CliRunner()
    return runner.invoke(main, list(args))


# --- catnip validate ------------------------------------------------------------------------

def test_validate_prints_the_resolved_scenario_and_the_sweep_size(state):
    result = run_cli("validate", str(REPO / "scenarios" / "catnip-wan-baseline.yaml"), "--set", "seed=7")
    assert result.exit_code == 0, result.output
    text = result.stdout
    resolved = yaml.safe_load(text)
    assert resolved["seed"] == 7 and resolved["topology"]["bottleneck"]["rate"] == 1_500_000
    assert "4 sweep point(s) x 1 repetition(s) = 4 point run(s)" in text
    assert re.search(r"point 3: topology\.bottleneck\.buffer=512KB", text)
    info = json.loads(run_cli("validate", str(REPO / "scenarios" / "catnip-wan-baseline.yaml"), "--json").stdout)
    assert (info["points"], info["repetitions"], info["point_runs"]) == (4, 1, 4)
    assert state.created() == []


def test_validate_refuses_what_run_refuses_in_the_same_words(tmp_path, state):
    bad = ["--set", "topology.bottleneck.rate=fast"]
    v = refused(cli("validate", str(REPO / "scenarios" / "quick.yaml"), *bad, env=state.env),
                "topology.bottleneck.rate: 'fast' is not a rate")
    r = refused(cli("run", str(REPO / "scenarios" / "quick.yaml"), *bad, env=state.env))
    assert v == r
    assert state.created() == []


def test_validate_jobs_takes_sender_parameters_side_by_side(state):
    # Sender parameters are keyed by network namespace (testbed/sender.py): points side by side,
    # which reuse addresses, keep their own, so --jobs 2 is not refused for them.
    path = REPO / "scenarios" / "newcwv-fig5-pipeack.yaml"
    for jobs in ("1", "2"):
        result = run_cli("validate", str(path), "--jobs", jobs)
        assert result.exit_code == 0, result.output


def test_validate_checks_a_transfer_measurement_as_model_measure_reads_it():
    path = str(REPO / "scenarios" / "transfers" / "hysteresis-validation.yaml")
    result = run_cli("validate", path, "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["kind"] == "transfers" and info["points"] >= 1 and info["resolved"]["path"]["rate"] == 0
    refused(run_cli("validate", path, "--set", "path.rate=1500"), "invalid transfer scenario", "path.rate: 1500 is a"
            " bare number")


# --- bounded input ---------------------------------------------------------------------------

def test_billion_laughs_file_refused_at_once(tmp_path, state):
    path = write(tmp_path, "laughs.yaml", "name: laughs\nanchors:\n" + textwrap.indent(LAUGHS, "  ") + "\n")
    t = time.monotonic()
    text = refused(cli("validate", str(path), env=state.env), f"more than {bounded.MAX_NODES} values", "alias")
    assert time.monotonic() - t < 10 and "anchors." in text
    assert state.created() == []


def test_billion_laughs_from_set_refused(state):
    t = time.monotonic()
    refused(run_cli("validate", str(REPO / "scenarios" / "quick.yaml"), "--set", f"description={FLOW_LAUGHS}"),
            "--set description", f"more than {bounded.MAX_NODES} values")
    assert time.monotonic() - t < 5


def test_billion_laughs_from_the_dashboard_form(tmp_path):
    scen = tmp_path / "scenarios"
    scen.mkdir()
    shutil.copy(REPO / "scenarios" / "quick.yaml", scen / "quick.yaml")
    assert len(f"description={FLOW_LAUGHS}") < forms.MAX_OVERRIDE_LEN  # it passes the form's own length check
    t = time.monotonic()
    req, errors = forms.parse_run_request({"scenario": "quick", "overrides": f"description={FLOW_LAUGHS}"}, scen)
    assert req is None and f"more than {bounded.MAX_NODES} values" in errors["overrides"]
    assert time.monotonic() - t < 5


def test_nesting_deeper_than_the_limit_refused(tmp_path, state):
    path = write(tmp_path, "deep.yaml", "name: deep\ndescription: " + "[" * 5000 + "]" * 5000 + "\n")
    refused(cli("validate", str(path), env=state.env), f"nested deeper than {bounded.MAX_DEPTH} levels")
    refused(run_cli("validate", str(REPO / "scenarios" / "quick.yaml"), "--set", "x=" + "{a: " * 100 + "1" + "}" * 100),
            "nested deeper")
    refused(run_cli("validate", str(REPO / "scenarios" / "quick.yaml"), "--set", ".".join(["a"] * 100) + "=1"),
            "a field path is up to")


def test_integer_over_python_digit_limit_refused_naming_the_field(tmp_path, state):
    path = write(tmp_path, "bigint.yaml", QUICK.replace("seed: 1", "seed: " + "9" * 5000))
    refused(cli("validate", str(path), env=state.env), "seed: an integer of 5000 digits")
    refused(run_cli("validate", str(REPO / "scenarios" / "quick.yaml"), "--set", "topology.clients=" + "1" * 4400),
            "an integer of 4400 digits")


def test_non_utf8_file_refused(tmp_path, state):
    path = write(tmp_path, "latin1.yaml", QUICK.encode().replace(b"name: quick", b"name: caf\xe9"))
    refused(cli("validate", str(path), env=state.env), "not UTF-8 text (byte 0xe9")


def test_input_size_capped(tmp_path, state):
    path = write(tmp_path, "huge.yaml", QUICK + "paper: '" + "x" * (bounded.MAX_FILE_BYTES + 10) + "'\n")
    refused(cli("validate", str(path), env=state.env), f"larger than {bounded.MAX_FILE_BYTES // 1024} KB")
    refused(run_cli("validate", str(REPO / "scenarios" / "quick.yaml"), "--set", "paper=" + "y" * 70_000),
            f"at most {bounded.MAX_OVERRIDE_CHARS}")


def test_a_rejected_value_is_echoed_shortened(tmp_path, state):
    path = write(tmp_path, "long.yaml", QUICK.replace("rate: 1.5Mbit", "rate: '" + "9" * 500_000 + "Mbit'"))
    result = cli("validate", str(path), env=state.env)
    # The value is echoed in about 80 characters, so the line still says what is wrong with it.
    text = refused(result, "topology.bottleneck.rate", "...", "is not a finite rate")
    assert len(result.stderr) < 300, len(result.stderr)
    pages = "rounds: 1\n  pages: [" + ", ".join(["x"] * 5000) + "]"  # 5000 problems
    many = write(tmp_path, "many.yaml", QUICK.replace("rounds: 1", pages))
    text = refused(cli("validate", str(many), env=state.env), "more problems", lines=bounded.MAX_LINES + 1)
    assert len(text) < 4000


def _cdf_scenario(tmp_path: Path, cdf: str) -> Path:
    return write(tmp_path, "cdf.yaml", QUICK.replace("think_time: {model: exponential, mean: 8s}",
                                                     f"think_time: {{model: empirical, cdf: '{cdf}'}}"))


def test_a_cdf_path_must_be_a_small_regular_file(tmp_path, state):
    good = write(tmp_path, "think.cdf", "0 0 0.0\n1 1 0.5\n4 1 1.0\n")
    assert run_cli("validate", str(_cdf_scenario(tmp_path, str(good)))).exit_code == 0
    refused(run_cli("validate", str(_cdf_scenario(tmp_path, "/dev/zero"))), "/dev/zero: is a device, not a regular")
    big = write(tmp_path, "big.cdf", "0 0 0.0\n" * (bounded.MAX_DATA_FILE_BYTES // 8 + 1))
    refused(run_cli("validate", str(_cdf_scenario(tmp_path, str(big)))), "big.cdf: larger than")
    refused(run_cli("validate", str(_cdf_scenario(tmp_path, str(tmp_path)))), "is a directory")


def test_a_cdf_fifo_is_refused_without_blocking(tmp_path, state):
    fifo = tmp_path / "think.fifo"
    os.mkfifo(fifo)
    result = cli("validate", str(_cdf_scenario(tmp_path, str(fifo))), env=state.env, timeout=20)
    refused(result, "think.fifo: is a FIFO, not a regular file")


def test_a_scenario_fifo_is_refused_without_blocking(tmp_path, state):
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    refused(cli("validate", str(fifo), env=state.env, timeout=20), "is a FIFO")


def test_sweep_size_limited_before_expanding(tmp_path, state):
    axes = "".join(f"  x{i}.y: [{', '.join(str(j) for j in range(10))}]\n" for i in range(10))  # 10^10 points
    path = write(tmp_path, "sweep.yaml", QUICK + "sweep:\n" + axes)
    t = time.monotonic()
    refused(cli("validate", str(path), env=state.env), f"sweep: more than {bounded.MAX_SWEEP_POINTS} points")
    assert time.monotonic() - t < 10
    reps = write(tmp_path, "reps.yaml", QUICK.replace("time_limit: 6min", "time_limit: 6min\n  repetitions: 100") +
                 "sweep:\n  seed: [" + ", ".join(str(j) for j in range(60)) + "]\n")
    refused(cli("validate", str(reps), env=state.env), "60 points with their repetitions make 6000",
            f"at most {bounded.MAX_POINT_RUNS}")


@pytest.mark.parametrize("field, value, words", [
    ("topology.bottleneck.delay", "5", ["delay: 5 is a bare number", "'5s' or '5ms'"]),
    ("topology.bottleneck.rate", "1500", ["rate: 1500 is a bare number", "'1500bit'"]),
    ("topology.client_link.delay", "0.002", ["'0.002s' or '0.002ms'"]),
    ("topology.bottleneck.delay", ".inf", ["inf is not a finite duration"]),
    ("run.time_limit", "1e300s", ["'1e300s': at most 1e+09 s"]),
    ("run.time_limit", "1e8s", ["1e+08 s: a point's time limit is above 0 and at most 7 days"]),
    ("run.time_limit", "0s", ["0 s: a point's time limit is above 0"]),
])
def test_bare_numbers_for_rate_and_delay_and_absurd_time_limits_refused(field, value, words):
    refused(run_cli("validate", str(REPO / "scenarios" / "quick.yaml"), "--set", f"{field}={value}"), field, *words)


def test_bare_numbers_refused_in_graph_links_and_edge_functions():
    raw = yaml.safe_load((REPO / "scenarios" / "parking-lot.yaml").read_text())
    s.validate(raw)
    links = raw["topology"]["links"]
    with pytest.raises(s.ScenarioError, match=r"topology\.links\.0\.rate: 10000000 is a bare number"):
        s.validate({**raw, "topology": {**raw["topology"], "links": [{**links[0], "rate": 10_000_000}, *links[1:]]}})
    police = {"kind": "police", "rate": 250_000, "bucket": "6000B"}
    with pytest.raises(s.ScenarioError, match=r"topology\.links\.0\.edge\.0\.rate: 250000 is a bare number"):
        s.validate({**raw, "topology": {**raw["topology"], "links": [{**links[0], "edge": [police]}, *links[1:]]}})
    s.validate({**raw, "topology": {**raw["topology"], "links": [
        {**links[0], "edge": [{**police, "rate": "250kbit"}]}, *links[1:]]}})


@pytest.mark.parametrize("override, words", [
    ("router.policy={kind: [droptail]}", "router.policy: kind ['droptail'] not allowed"),
    ("workload.kind=[web]", "workload.kind: ['web'] is not an application kind"),
])
def test_a_kind_that_is_not_a_name_is_refused(override, words):
    # Found by tests/test_validate_props.py: a list as `kind` was looked up in a dict (TypeError).
    refused(run_cli("validate", str(REPO / "scenarios" / "quick.yaml"), "--set", override), words)


# --- run ids and refused runs -----------------------------------------------------------------

@pytest.mark.parametrize("run_id", ["..", ".", ".hidden", "-rf", "a/b", "../x", "x" * 101, ""])
def test_path_like_run_ids_refused(run_id, state):
    # The run id is checked first; the scenario is refused too, so no regression can start a run.
    result = cli("run", str(REPO / "scenarios" / "quick.yaml"), "--run-id", run_id, "--set",
                 "topology.bottleneck.delay=5", env=state.env)
    refused(result, "--run-id")
    assert "run " not in result.stdout and state.created() == []


def test_a_refused_run_prints_no_run_id_and_creates_no_database(tmp_path, state):
    db = tmp_path / "elsewhere" / "my.db"
    for args in (["--set", "topology.bottleneck.delay=5"], ["--set", f"description={FLOW_LAUGHS}"]):
        result = cli("run", str(REPO / "scenarios" / "quick.yaml"), "--db", str(db), *args, env=state.env)
        refused(result)
        assert not re.search(r"\brun \d{8}-", result.stdout + result.stderr)
    # --jobs 2 with the engines split onto their own CPUs: refused before the machine is probed
    result = cli("run", str(REPO / "scenarios" / "quick.yaml"), "--jobs", "2", "--set", "run.placement=split",
                 "--db", str(db), env=state.env)
    refused(result, "--jobs 1")
    assert not db.exists() and not db.parent.exists() and state.created() == []


# --- the dashboard ------------------------------------------------------------------------------

@pytest.fixture
def dashboard(tmp_path):
    scen = tmp_path / "scenarios"
    scen.mkdir()
    shutil.copy(REPO / "scenarios" / "quick.yaml", scen / "quick.yaml")
    queue = RunQueue(tmp_path / "catnip.db", tmp_path / "logs", machine_busy=lambda: True, poll=0.05)
    app = create_app(db=tmp_path / "catnip.db", scenarios_dir=scen, queue=queue)
    yield scen, app.test_client()
    queue.shutdown(timeout=5)


def test_bad_files_in_scenarios_are_listed_not_a_500_or_a_hang(dashboard, monkeypatch):
    scen, client = dashboard
    write(scen, "laughs.yaml", "name: laughs\ndescription: haha\nanchors:\n" + textwrap.indent(LAUGHS, "  ") + "\n")
    write(scen, "latin1.yaml", b"name: caf\xe9\n")
    write(scen, "deep.yaml", "description: " + "[" * 3000 + "]" * 3000)
    write(scen, "bigint.yaml", QUICK.replace("seed: 1", "seed: " + "7" * 5000))
    write(scen, "huge.yaml", QUICK + "paper: '" + "x" * (bounded.MAX_FILE_BYTES + 1) + "'\n")
    write(scen, "list.yaml", "- just\n- a list\n")
    os.mkfifo(scen / "fifo.yaml")
    (scen / "dir.yaml").mkdir()
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(page=client.get("/")), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the home page hangs"
    page = box["page"]
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    for name, words in [("laughs", "more than 20000 values"), ("latin1", "not UTF-8"), ("deep", "nested deeper"),
                        ("bigint", "an integer of 5000 digits"), ("huge", "larger than"), ("list", "a mapping"),
                        ("fifo", "is a FIFO"), ("dir", "is a directory")]:
        assert name in html and words in html, name
    assert "haha" not in html or "laughs" in html
    assert "quick" in html and "Table II layout" in html  # the good file still listed with its details


def test_a_file_that_breaks_the_checker_is_listed_not_a_500(dashboard, monkeypatch):
    scen, client = dashboard
    real = s.load

    def broken(path, *a, **k):
        if Path(path).stem == "quick":
            raise TypeError("a checker bug")
        return real(path, *a, **k)
    monkeypatch.setattr(s, "load", broken)
    page = client.get("/")
    assert page.status_code == 200 and "could not be checked (TypeError: a checker bug)" in page.get_data(as_text=True)


# --- disks --------------------------------------------------------------------------------------

def _need_root():
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"):
        pytest.skip("needs root, unshare and setpriv (a private mount namespace, another user)")


def _recorded_db(path: Path) -> None:
    with Store(path) as store:
        store.create_run("r1", "quick", "scenarios/quick.yaml", {"name": "quick"}, {}, 1, "abc", {}, {})
        store.create_point("r1", 0, 0, {}, {"topology": {"clients": 1}, "workload": {"pages": [1], "rounds": 1}}, 1)
        store.add_transfers("r1", 0, [], [{"client": "c1", "server": "v1", "page": 1, "round": 0, "start": 0.0,
                                           "end": 2.0, "duration": 2.0, "objects": 1, "bytes": 10}])
        store.update_point("r1", 0, status="done", realtime_ok=1, finished=1.0)
        store.finish_run("r1", "done")


@pytest.fixture
def open_folder():
    """A folder every user can reach (pytest's tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="catnip-test-ro-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.netns  # root: a mount namespace of its own (no network is built)
def test_a_read_only_database_is_read_or_refused_in_one_line(tmp_path, open_folder):
    _need_root()
    folder = open_folder
    _recorded_db(folder / "catnip.db")
    # A read-only bind mount in a mount namespace of its own: what root sees on a read-only disk.
    db, new = folder / "catnip.db", folder / "new.db"
    script = (f"mount --bind -o ro {folder} {folder} && for a in 'list --db {db}' 'report r1 --db {db}'"
              f" 'list --db {new}' 'report r1 --db {new}'; do echo \"== $a\"; {PY} -m catnip.cli.main $a 2>&1;"
              " echo \"rc=$?\"; done")
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], capture_output=True,
                         text=True, timeout=120, cwd=REPO).stdout
    assert "Traceback" not in out, out
    listing, report, new_list, new_report = out.split("== ")[1:]
    assert "r1" in listing and "done" in listing and "rc=0" in listing
    assert "Run r1" in report and "rc=0" in report
    # A database that cannot be created there: one line and exit 1.
    for text in (new_list, new_report):
        body = [line for line in text.splitlines()[1:] if not line.startswith("rc=")]
        assert len(body) == 1 and "cannot create" in body[0] and "rc=1" in text, text
    # Another user who cannot write the folder reads it too (the -shm file cannot be made there).
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PY, "-m", "catnip.cli.main",
                          "list", "--db", str(folder / "catnip.db")], capture_output=True, text=True, timeout=60,
                         cwd=REPO, env={**os.environ, "HOME": str(tmp_path)})
    assert out.returncode == 0 and "r1" in out.stdout and "Traceback" not in out.stderr, out


READ_ONLY_RUN = r"""
import sys
sys.path.insert(0, sys.argv[2])
from types import SimpleNamespace
from click.testing import CliRunner
import catnip.controller.runner as runner
import catnip.controller.skeleton as skeleton
import catnip.testbed.capabilities as capabilities
from catnip.cli.main import main
# A machine that could run (no probe), no other run, and a run that must never start.
capabilities.probe = lambda: SimpleNamespace(blocking_problems=lambda: [], qdiscs={})
skeleton.machine_busy = lambda: False
def never(*a, **k):
    raise AssertionError("the run started")
runner.run = never
result = CliRunner().invoke(main, ["run", sys.argv[2] + "/scenarios/quick.yaml", "--db", sys.argv[1] + "/catnip.db"])
print(result.exit_code, repr(result.exception), result.output.replace(chr(10), " | "))
"""


@pytest.mark.netns  # root: a mount namespace of its own (no network is built)
def test_a_run_on_a_read_only_database_is_refused_before_its_run_id(tmp_path, open_folder):
    _need_root()
    _recorded_db(open_folder / "catnip.db")
    script = tmp_path / "ro_run.py"
    script.write_text(READ_ONLY_RUN)
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                          f"mount --bind -o ro {open_folder} {open_folder} && {PY} {script} {open_folder} {REPO}"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    code, exception, output = out.stdout.strip().split(" ", 2)
    assert code == "1" and exception in ("None", "SystemExit(1)"), out.stdout + out.stderr[-1000:]
    assert "can only be read here" in output and "give another --db" in output
    assert not re.search(r"\brun \d{8}-", output), output


def test_a_run_refused_for_a_busy_machine_prints_no_run_id_and_creates_no_database(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import catnip.controller.runner as runner
    import catnip.controller.skeleton as skeleton
    import catnip.testbed.capabilities as capabilities
    from catnip.testbed import cleanup
    # A machine that could run, but another run holds its lock; the run must never start.
    monkeypatch.setattr(capabilities, "probe", lambda: SimpleNamespace(blocking_problems=lambda: [], qdiscs={}))
    monkeypatch.setattr(skeleton, "machine_busy", lambda: True)
    monkeypatch.setattr(cleanup, "run_in_progress", lambda: "pid 1 since 2026-01-01T00:00:00Z: catnip run x.yaml")
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("the run started"))
    db = tmp_path / "new" / "catnip.db"
    result = run_cli("run", str(REPO / "scenarios" / "quick.yaml"), "--db", str(db))
    assert result.exit_code == 1 and "another catnip run is using this machine (pid 1" in result.stderr, result.output
    assert not re.search(r"\brun \d{8}-", result.output) and not db.parent.exists()


def test_writing_a_read_only_store_says_so():
    # Store.readonly: the write refused with StoreReadOnly before SQLite is asked.
    store = Store.__new__(Store)
    store.path, store.readonly = Path("/x/catnip.db"), True
    with pytest.raises(StoreReadOnly, match="opened read-only"):
        with store._writing():
            pass


DISK_FULL = r"""
import json, sqlite3, sys
sys.path.insert(0, sys.argv[2])
from catnip.controller.skeleton import record_point
from catnip.results.store import Store, StoreFull
folder, mode = sys.argv[1], sys.argv[3]
path = folder + "/catnip.db"
store = Store(path)
store.create_run("r1", "quick", "q.yaml", {"name": "quick"}, {}, 1, "abc", {}, {})
store.create_point("r1", 0, 0, {}, {}, 1)
seen = []
def execute():
    if mode == "capture":  # another file of the run (a capture, logs) fills the disk
        with open(folder + "/capture.pcap", "wb") as fh:
            while True:
                fh.write(bytes(65536))
                fh.flush()
    for i in range(100000):  # the point's own samples fill it
        try:
            store.add_samples("r1", 0, [{"app": "bulk", "metric": "goodput", "value": float(j), "t": float(j),
                                         "host": "x" * 200} for j in range(200)])
        except StoreFull as exc:
            seen.append(str(exc))
            raise
try:
    error = record_point(store, "r1", 0, execute)
    store.finish_run("r1", "failed" if error else "done", error)  # as controller/runner.py ends a run
    raised = None
except Exception as exc:
    error, raised = None, f"{type(exc).__name__}: {exc}"
store.close()
check = sqlite3.connect(path)
print(json.dumps({"seen": seen, "error": error, "raised": raised,
                  "run": list(check.execute("SELECT status, error FROM runs").fetchone()),
                  "point": list(check.execute("SELECT status, error FROM points WHERE point=0").fetchone()),
                  "integrity": check.execute("PRAGMA integrity_check").fetchone()[0]}))
"""


@pytest.mark.netns  # root: a mount namespace of its own (no network is built)
@pytest.mark.parametrize("mode", ["database", "capture"])
def test_a_disk_filling_mid_run_records_the_run_failed_with_the_reason(tmp_path, mode):
    # A 3 MB tmpfs in a mount namespace of its own. 'database': the point's samples fill it;
    # 'capture': another file does, and the status can be written only thanks to the reserve.
    _need_root()
    folder = tmp_path / "small"
    folder.mkdir()
    script = tmp_path / "fill.py"
    script.write_text(DISK_FULL)
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                          f"mount -t tmpfs -o size=3m tmpfs {folder} && {PY} {script} {folder} {REPO} {mode}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["raised"] is None, got["raised"]
    if mode == "database":
        assert len(got["seen"]) == 1 and "is full" in got["seen"][0] and "--db" in got["seen"][0]
        assert got["error"].startswith("point 0: the disk holding")
        assert got["point"][0] == "failed" and "StoreFull: the disk holding" in got["point"][1]
    else:
        assert got["point"] == ["failed", "OSError: [Errno 28] No space left on device"]
    assert got["run"][0] == "failed" and got["run"][1] == got["error"]
    assert got["integrity"] == "ok"


def test_validate_module_touches_no_machine():
    # catnip validate imports nothing that builds networks or probes the machine.
    out = subprocess.run([PY, "-c", "import sys; import controller.validate; print(sorted(m for m in sys.modules if "
                          "m.startswith(('catnip.testbed.network', 'catnip.testbed.capabilities', 'mininet'))))"],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    assert validate_mod.Refused("x").exit_code == 2
