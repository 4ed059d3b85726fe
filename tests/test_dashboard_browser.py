"""The dashboard in a real browser (Debian's headless Chromium through Selenium), against a real
`catnip web` serving real runs: start a short run from the form, watch live progress move, read
the finished table, start a second run, compare the two, download the CSV. The application
metrics' charts are checked on a run written by hand (no network). Every paper's pages (each
paper's run page, CATNIP's compare and gap study pages and its Fig. 2) are laid out at 1400 px without a chart's
titles, legend and tick labels covering each other, a chart spilling out of its box or over
another chart or the text around it (archived and hand-written runs, no network). A screenshot of
each page is saved in tests/artifacts/dashboard/ for a reviewer to look at.
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


# Archived real runs (archive/runs/, `catnip import`): CATNIP's default run twice and a TCPF grid.
ARCHIVED = {"catnip-quick-run": "20261128-083955-quick-26f8", "catnip-quick-compare": "20261128-084208-quick-15f6",
            "tcpf-run": "20261128-084421-tcpf-quick-c717", "newcwv-fig7-run": "20261128-084712-newcwv-fig7-unlimited-902f"}


@pytest.fixture
def papers_server(tmp_path):
    """`catnip web` on a database holding a run of every paper's pages (tests/test_paper_published.py
    populate: written by hand) and archived real runs; yields its address and {page name: path}."""
    from catnip.results import archive as export
    from catnip.results.store import Store
    from tests.test_paper_published import populate
    db = tmp_path / "catnip.db"
    with Store(db) as store:
        pages = populate(store)
        for run_id in ARCHIVED.values():
            document, sha = export.read(REPO / "archive" / "runs" / export.default_name(run_id))
            export.import_run(store, document, None, source="test", sha256=sha)
    a, b = ARCHIVED["catnip-quick-run"], ARCHIVED["catnip-quick-compare"]
    pages.update({"catnip-quick-run": f"/runs/{a}", "catnip-quick-compare": f"/compare?run={a}&run={b}",
                  "tcpf-run": f"/runs/{ARCHIVED['tcpf-run']}", "newcwv-fig7-run": f"/runs/{ARCHIVED['newcwv-fig7-run']}",
                  "catnip-fig2": "/figures/fig2"})  # drawn from docs/figures/fig2-senders.json
    with catnip_web("--db", str(db)) as address:
        yield address, pages


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


# Every drawn chart's parts as the browser lays them out, and what overlaps: within a chart its title,
# axis titles, tick labels, legend, annotations and colour bar (pairwise, but for the two axes' tick
# labels, which meet at the corner); a chart's drawing outside its box; two charts; a chart and any
# heading, paragraph, table, list or details block of the page that is not inside it.
OVERLAPS = """
const box = el => { const r = el.getBoundingClientRect(); return {l: r.left, t: r.top, r: r.right, b: r.bottom}; };
const real = b => b.r - b.l > 0.5 && b.b - b.t > 0.5;
const cross = (a, b) => Math.min(a.r, b.r) - Math.max(a.l, b.l) > 1 && Math.min(a.b, b.b) - Math.max(a.t, b.t) > 1;
const inside = (a, b) => a.l >= b.l - 1 && a.t >= b.t - 1 && a.r <= b.r + 1 && a.b <= b.b + 1;
const px = b => `${Math.round(b.r - b.l)}x${Math.round(b.b - b.t)} at (${Math.round(b.l)}, ${Math.round(b.t)})`;
const problems = [];
const charts = [...document.querySelectorAll(".js-plotly-plot")];
const PARTS = [["title", ".g-gtitle"], ["x axis title", ".g-xtitle"], ["y axis title", ".g-ytitle"],
               ["legend", ".legend"], ["x tick labels", ".xaxislayer-above"], ["y tick labels", ".yaxislayer-above"],
               ["annotation", ".annotation"], ["colour bar", ".colorbar"]];
for (const gd of charts) {
  const parts = [];
  for (const [kind, sel] of PARTS)
    gd.querySelectorAll(sel).forEach(e => { const b = box(e); if (real(b)) parts.push([kind, b, e.textContent.slice(0, 30)]); });
  for (let i = 0; i < parts.length; i++)
    for (let j = i + 1; j < parts.length; j++) {
      const [k1, b1, t1] = parts[i], [k2, b2, t2] = parts[j];
      if (new Set([k1, k2]).has("x tick labels") && new Set([k1, k2]).has("y tick labels")) continue;
      if (cross(b1, b2)) problems.push(`${gd.id}: ${k1} "${t1}" (${px(b1)}) overlaps ${k2} "${t2}" (${px(b2)})`);
    }
  const svg = gd.querySelector(".main-svg");
  if (svg && !inside(box(svg), box(gd)))
    problems.push(`${gd.id}: its plot (${px(box(svg))}) spills out of its box (${px(box(gd))})`);
}
const drawn = charts.map(gd => [gd, box(gd.querySelector(".main-svg") || gd)]);
for (let i = 0; i < drawn.length; i++)
  for (let j = i + 1; j < drawn.length; j++)
    if (cross(drawn[i][1], drawn[j][1])) problems.push(`${drawn[i][0].id} overlaps ${drawn[j][0].id}`);
const blocks = [...document.querySelectorAll("main h1, main h2, main h3, main h4, main p, main table, main ul, main pre, main details, main figcaption")]
  .filter(e => !charts.some(gd => gd.contains(e) || e.contains(gd)) && real(box(e)));
for (const [gd, b] of drawn)
  for (const e of blocks)
    if (cross(b, box(e)))
      problems.push(`${gd.id} covers <${e.tagName.toLowerCase()}${e.id ? " id=" + e.id : ""}> "${e.textContent.trim().slice(0, 40)}"`);
return problems;
"""


def _charts_drawn(d) -> bool:
    """Every chart box of the page drawn by Plotly, or marked as having no data."""
    return d.execute_script("""return [...document.querySelectorAll(".chart")].every(
        e => e.querySelector(".main-svg") || e.classList.contains("no-data"));""")


def _settled(d) -> list[str]:
    """The overlaps once the layout has settled: the same list twice in a row (Plotly redraws
    responsive charts after a window resize)."""
    seen: list = []

    def same():
        seen.append(d.execute_script(OVERLAPS))
        return len(seen) > 1 and seen[-1] == seen[-2]
    _wait("the charts' layout to settle", same, 20)
    return seen[-1]


def test_paper_pages_have_no_overlapping_plots(papers_server, browser):
    """Each paper's pages at 1400 px: no chart part covers another, no chart spills out of its box or
    over another chart or the page's text; measured as loaded and again once the window is as tall as
    the page (the screenshot's size, which makes responsive charts redraw)."""
    base, pages = papers_server
    d = browser
    found = {}
    for name, path in pages.items():
        d.set_window_size(1400, 1800)
        d.get(base + path)
        _wait(f"the charts of {name}", lambda: _charts_drawn(d), 30)
        assert not d.find_elements("css selector", "section.error"), f"{name}: an error page at {path}"
        problems = _settled(d)
        _shot(d, f"paper-{name}")
        problems += [p for p in _settled(d) if p not in problems]
        if problems:
            found[name] = problems
    assert not found, "\n".join(f"{name}: {p}" for name, problems in found.items() for p in problems)
