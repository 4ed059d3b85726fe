"""Shared fixtures and the test tiers.

Tiers: a test that needs root (namespaces, iptables, qdiscs, BPF) is marked `netns` (by its
file, or here when it or a fixture it uses asks for root); the `netns` marker alone gates it on
root (no per-file autouse gate), so everything else runs anywhere. Root-free tests that take
seconds by design (a real browser, vagrant validating a VM definition, a server's idle timeout,
the whole docs check against archive/) are marked `slow` here. `make test-fast` runs -m "not netns and not slow"; `make test` all.

Skips: tests skip with the reason named. A kernel that lacks a feature (`need_kernel`) is the
one environment skip that CI accepts: with CI=true any other skip (no root, no built engine, a
busy hypervisor...) fails the test, so a CI run cannot turn green by skipping.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import time

import pytest

import catnip.papers  # noqa: F401 (the papers' layouts registered, as the CLI and the dashboard do)
from catnip.testbed import cleanup, paths

REPO = paths.REPO
ARTIFACTS = REPO / "tests" / "artifacts"


KERNEL_LACKS = "kernel lacks "  # the start of the only skip reason CI accepts


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces, iptables and OVS")


def need_kernel(feature: str, present: bool, why: str = "") -> None:
    """Skip, naming the missing kernel feature (the one skip CI accepts), unless it is present."""
    if not present:
        pytest.skip(KERNEL_LACKS + feature + (f": {why}" if why else ""))


def _needs_root(item) -> bool:
    """The test or any fixture it uses asks for root (read from their source)."""
    funcs = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        defs = info.name2fixturedefs.get(name) if info else None
        funcs += [d.func for d in defs or ()]
    for f in funcs:
        try:
            if f is not None and any(k in inspect.getsource(f) for k in ("need_root()", "os.geteuid() != 0")):
                return True
        except (OSError, TypeError):
            continue
    return False


# Root-free but seconds each by design; measured 7-60 s apiece on a 2-core VM.
SLOW_FIXTURES = {"browser"}           # Chromium through Selenium
SLOW_FILES = {"test_vagrant.py"}      # `vagrant validate`, systemd-analyze, a served dashboard
SLOW_TESTS = {"test_idle_sockets_do_not_take_a_thread_each"}  # waits out the server's idle timeout
# The whole docs check or build, or every archived run imported (docs/archive.md): 20-120 s each in
# `make test`'s --durations on 2026-11-28; with them make test-fast took 8 min 36 s (issue 48).
# `make docs` runs the same check, and `make test` these tests (tests/test_tiers.py keeps the names true).
SLOW_FILES |= {"test_web_archive_pages.py"}  # imports all of archive/ into one database
SLOW_TESTS |= {
    "test_the_repository_docs_match_the_archive", "test_a_changed_archived_number_fails_the_check",
    "test_an_archived_file_changed_behind_the_manifest_fails", "test_a_region_citing_a_run_not_archived_fails",
    "test_a_file_the_manifest_does_not_list_fails", "test_build_mends_an_edited_region",
    "test_points_that_missed_real_time_are_left_out_unless_marked", "test_an_unknown_layout_or_column_is_named",
    "test_a_manifest_edited_by_hand_fails",  # tests/test_docs_check.py
    "test_docs_report_is_what_the_claims_and_the_archive_give",
    "test_a_changed_verdict_or_a_claim_naming_a_run_not_archived_fails_the_check",
    "test_build_writes_the_report_into_an_emptied_region",
    "test_the_dashboard_report_shows_every_papers_rows_from_the_same_function",  # tests/test_report_claims.py
}


def pytest_collection_modifyitems(config, items):
    # A test that needs root is in the netns tier whether its file marks it or not, so
    # `-m "not netns"` (make test-fast) never builds a network, as root or not.
    for item in items:
        if item.get_closest_marker("netns") is None and _needs_root(item):
            item.add_marker(pytest.mark.netns)
        if (SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or item.path.name in SLOW_FILES
                or getattr(item, "originalname", item.name) in SLOW_TESTS):
            item.add_marker(pytest.mark.slow)


_CONDITIONS: list[str] = []


def not_measured(reason: str) -> None:
    """The machine kept a test from measuring (e.g. hypervisor steal): said in the session's
    summary, and skipped, which CI=true turns into a failure; never a silent pass."""
    _CONDITIONS.append(f"{os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}: {reason}")
    pytest.skip(f"not measured: {reason}")


def pytest_terminal_summary(terminalreporter):
    if _CONDITIONS:
        terminalreporter.section("not measured (the machine, not the code)")
        for line in _CONDITIONS:
            terminalreporter.write_line(line)


def pytest_runtest_setup(item):
    if item.get_closest_marker("netns") is not None:
        need_root()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if in_ci() and rep.skipped and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if not reason.removeprefix("Skipped: ").startswith(KERNEL_LACKS):
            rep.outcome = "failed"
            rep.longrepr = f"CI=true: an environment skip other than a missing kernel feature fails the run: {reason}"


def need_engine():
    if not paths.engine_binary().exists():
        pytest.skip(f"queue engine not built ({paths.engine_binary()}); run `make setup`")


def wait_until(condition, timeout: float, what: str, poll: float = 0.05):
    """Wait for readiness by asking, never by sleeping a guessed time: `condition()` until it
    returns something true (returned), failing the test after `timeout` s naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"not ready after {timeout:g} s: {what}")
        time.sleep(poll)


def listening(prefix: list[str], port: int, proc: subprocess.Popen | None = None) -> bool:
    """A TCP socket listens on `port` inside the namespace run by `prefix` (as apache.wait_ready
    asks); a server process that has exited fails the test at once."""
    if proc is not None and proc.poll() is not None:
        pytest.fail(f"the server for port {port} exited ({proc.returncode}) before listening")
    out = subprocess.run([*prefix, "ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout
    return bool(out.strip())


@pytest.fixture
def isolated_data(tmp_path, monkeypatch):
    """A private results database and data directory per test."""
    monkeypatch.setenv("CATNIP_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("CATNIP_DB", str(tmp_path / "data" / "catnip.db"))
    return tmp_path


@pytest.fixture
def no_leftovers():
    """Fails the test if it leaves namespaces, processes or bridges behind (and cleans them)."""
    yield
    left = cleanup.leftovers()
    if left:
        cleanup.clean()
        pytest.fail(f"test left state behind: {left}")


def catnip(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / ".venv" / "bin" / "catnip"), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=REPO)
