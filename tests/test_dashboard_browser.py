"""The dashboard in a real browser (Debian's headless Chromium through Selenium), against a real
`catnip web` serving real runs: start a short run from the form, watch live progress move, read
the finished table, start a second run, compare the two, download the CSV. The application
metrics' charts are checked on a run written by hand (no network). A screenshot of each page is
saved in tests/artifacts/dashboard/ for a reviewer to look at.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ARTIFACTS, REPO, need_engine, need_root

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
SHOTS = ARTIFACTS / "dashboard"
SHORT = ["topology.clients=2", "workload.pages=[1, 3, 5]", "workload.think_time={model: zero}",
         "workload.start_stagger=0.5s", "run.time_limit=3min"]


@contextlib.contextmanager
def catnip_web(*args: str):
    """`catnip web --port 0 ARGS` running; yields its address, then stops it with SIGTERM, which
    must end it cleanly within 60 s."""
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "web", "--port", "0", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    try:
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, f"catnip web did not announce its address: {line!r}"
        yield f"http://127.0.0.1:{match.group(1)}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("catnip web did not stop within 60 s of SIGTERM")
        assert proc.returncode == 0, proc.stdout.read()


@pytest.fixture
def server(isolated_data, no_leftovers):
    need_root()
    need_engine()
    with catnip_web() as address:
        yield address


@pytest.fixture
def apps_server(isolated_data):
    """`catnip web` on a database holding a run of two applications written by hand (no network)."""
    from catnip.results.store import Store
    from tests.test_web import APPS, _record_apps
    db = isolated_data / "data" / "catnip.db"
    with Store(db) as store:
        _record_apps(store)
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "catnip"), "web", "--port", "0", "--db", str(db)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    try:
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, f"catnip web did not announce its address: {line!r}"
        yield f"http://127.0.0.1:{match.group(1)}", APPS
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("catnip web did not stop within 30 s of SIGTERM")


@pytest.fixture
def browser(tmp_path):
    if not CHROMIUM or not DRIVER:
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/setup.sh --test installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800",
                "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    driver.downloads = downloads
    try:
        yield driver
    finally:
        driver.quit()


def _wait(what: str, cond, timeout: float, step: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(step)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def _text(driver, by, what) -> str | None:
    """An element's text, or None while the page is being replaced (live pages update and reload)."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    try:
        return driver.find_element(by, what).text
    except (NoSuchElementException, StaleElementReferenceException):
        return None


def _shot(driver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    # The whole page, not just the window: size the window to the document first.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(900, height), 8000))
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def _start(driver, base: str, overrides: list[str]) -> str:
    from selenium.webdriver.common.by import By
    driver.get(base + "/")
    form = driver.find_element(By.CSS_SELECTOR, "#scenario-quick form")
    box = form.find_element(By.NAME, "overrides")
    box.clear()
    box.send_keys("\n".join(overrides))
    form.find_element(By.NAME, "seed").send_keys("3")
    return form


@pytest.mark.netns
@pytest.mark.slow
def test_start_watch_read_compare_download(server, browser):
    from selenium.webdriver.common.by import By
    d = browser

    # A bad override is shown next to its field, and nothing starts.
    form = _start(d, server, SHORT + ["topology.clients=lots"])
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    # The click only submits: wait for the answer page rather than reading the old one.
    error = _wait("the override's error", lambda: _text(d, By.ID, "error-overrides"), 10)
    assert "topology.clients" in error and "lots" in error
    _shot(d, "1-scenarios-with-error")

    # A real short run: live progress must move before the report appears.
    form = _start(d, server, SHORT)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait("the run page", lambda: "/runs/" in d.current_url, 10)
    first = d.current_url.rsplit("/", 1)[1]
    seen = set()

    def progressed():
        try:
            status = d.find_element(By.ID, "run-status").text
            row = d.find_elements(By.CSS_SELECTOR, "#progress-table tr[data-point]")
            state = (row[0].find_element(By.CLASS_NAME, "p-phase").text,
                     row[0].find_element(By.CLASS_NAME, "p-pages").text) if row else None
        except Exception:  # noqa: BLE001 - the page reloads when the run ends
            return False
        if state and status == "running":
            seen.add(state)
            if len(seen) >= 2:
                _shot(d, "2-live-run")
        return d.find_elements(By.CSS_SELECTOR, ".report-table")
    _wait("the finished report", progressed, 150)
    assert len(seen) >= 2, f"live progress never moved: saw only {seen}"
    assert d.find_element(By.ID, "run-status").text == "done"
    rows = d.find_elements(By.CSS_SELECTOR, ".report-table tr")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows[1:]] == ["1", "3", "5"]
    assert "packet loss" in d.find_element(By.ID, "report").text
    _wait("the charts", lambda: d.find_elements(By.CSS_SELECTOR, "#chart-bars .main-svg"), 10)
    _shot(d, "3-finished-run")

    # A second run with CATNIP-Good routers, then Table XI-style comparison.
    form = _start(d, server, SHORT + ["router.policy={kind: catnip_good}"])
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait("the second run page", lambda: "/runs/" in d.current_url and first not in d.current_url, 10)
    _wait("the second report", lambda: d.find_elements(By.CSS_SELECTOR, ".report-table"), 150)
    d.get(server + "/runs")
    boxes = d.find_elements(By.CSS_SELECTOR, "input[name=run]")
    assert len(boxes) == 2
    for b in boxes:
        b.click()
    _shot(d, "4-runs")
    d.find_element(By.CSS_SELECTOR, "#compare-form button").click()
    table = _wait("the comparison", lambda: d.find_elements(By.ID, "compare-relative"), 10)[0]
    cells = [c.text for c in table.find_elements(By.CSS_SELECTOR, "tr td")]
    # Each ratio with its 95% interval (or none for a page measured once on a side).
    assert cells[:3] == ["1", "3", "4,945"] and re.fullmatch(
        r"\d+\.\d\d (\[-?\d+\.\d+, -?\d+\.\d+\]|\(no interval\))", cells[3]), cells
    # The baseline is the oldest ticked run (the first, DropTail), though the runs page lists it last.
    assert first in d.find_element(By.ID, "compare-baseline").text
    _shot(d, "5-compare")

    # The CSV download of the first run.
    d.get(f"{server}/runs/{first}")
    d.find_element(By.ID, "download-csv").click()
    path = _wait("the CSV download", lambda: next(iter(d.downloads.glob(f"{first}.csv")), None), 20)
    lines = Path(path).read_text().splitlines()
    assert lines[0].startswith("run_id,point,rep,assignment,page") and len(lines) == 4

    # Cancel a running run: the runner tears its network down (no_leftovers checks) and keeps it as cancelled.
    form = _start(d, server, SHORT + ["workload.rounds=50"])
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait("the workload to run", lambda: _text(d, By.CLASS_NAME, "p-phase") == "running workload", 60)
    d.find_element(By.CSS_SELECTOR, "#cancel-form button").click()
    _wait("the cancelled run, torn down", lambda: _text(d, By.ID, "run-status") == "cancelled"
          and not d.find_elements(By.ID, "cancel-form"), 90)
    assert "cancelled" in d.find_element(By.ID, "progress-table").text
    _shot(d, "6-cancelled-run")


def test_application_ccdf_chart_renders(apps_server, browser):
    """A point's Applications section: the CCDF of telnet's echo delays is drawn, one curve per tag,
    on a log y axis, with a markup tag shown as text; the goodput chart has a line per flow."""
    from selenium.webdriver.common.by import By
    base, run_id = apps_server
    d = browser
    d.get(f"{base}/runs/{run_id}")
    _wait("the CCDF charts", lambda: len(d.find_elements(By.CSS_SELECTOR, ".apps-ccdf .main-svg")) >= 2, 20)
    chart = d.execute_script("""const gd = document.getElementById("apps-ccdf-0-1");
        return {title: gd.layout.title.text, y: gd.layout.yaxis.type, names: gd.data.map(t => t.name),
                n: gd.data.map(t => t.x.length)};""")
    assert chart["y"] == "log" and chart["title"] == "telnet: echo_delay CCDF", chart
    assert chart["n"] == [3, 4]  # <b>x</b>: 0.1 0.2 0.3; rtt20ms: 4 delays (the timeout left out)
    shown = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#apps-ccdf-0-1 .legendtext")]
    assert shown == ["<b>x</b>", "rtt20ms"], shown  # the tag's markup as text, not bold
    assert len(d.find_elements(By.CSS_SELECTOR, "#apps-ccdf-0-1 .scatterlayer .trace")) == 2
    lines = d.find_elements(By.CSS_SELECTOR, "#apps-goodput-0-0 .scatterlayer .trace")
    assert len(lines) == 2 and "C.O.V. across flows 0.429" in d.find_element(By.ID, "apps-goodput-0-0").text
    _shot(d, "7-applications")
