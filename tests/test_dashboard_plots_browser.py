"""The plot view, the paper figures and the grouped scenario page in a real browser (Debian's
headless Chromium through Selenium, the fixtures of tests/test_dashboard_browser.py), at 1400 px,
against `catnip web` serving archived runs imported into a temporary database (no network, no
root). Screenshots in tests/artifacts/dashboard/ (plots-view.png, paper-figures-models.png,
paper-figures-burst-seq.png, paper-figures-fig2.png, scenarios-grouped.png)."""

from __future__ import annotations


import pytest

from catnip.controller import fig2
from catnip.testbed.paths import REPO
from catnip.webui import figure_pages
from tests.test_dashboard_browser import _shot, _wait, browser, catnip_web  # noqa: F401 - the fixture, by import
from tests.test_web_plots import HV, NEWCWV, QUICK, _capture, _import, _transfers


@pytest.fixture
def plots_server(isolated_data):
    from catnip.results.store import Store
    db = isolated_data / "data" / "catnip.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    with Store(db) as store:
        for run_id in (QUICK, NEWCWV):
            _import(store, run_id)
        _transfers(store)
        _capture(store, db)
    with catnip_web("--db", str(db)) as url:
        yield url


def _overlap(a: dict, b: dict) -> bool:
    return not (a["right"] <= b["left"] or b["right"] <= a["left"] or a["bottom"] <= b["top"] or b["bottom"] <= a["top"])


RECT = "const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom};"


def test_plot_view_draws_one_trace_per_point_of_every_chosen_run(plots_server, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    base = plots_server
    # Choose two runs in the picker, then a series: the form's own way.
    browser.get(base + "/plot")
    runs = Select(browser.find_element(By.ID, "plot-runs"))
    runs.select_by_value(QUICK)
    runs.select_by_value(NEWCWV)
    browser.find_element(By.CSS_SELECTOR, "#plot-form button").click()
    _wait("the series list", lambda: browser.find_elements(By.ID, "plot-series"), 20)
    Select(browser.find_element(By.ID, "plot-series")).select_by_value("throughput")
    browser.find_element(By.CSS_SELECTOR, "#plot-form button").click()
    count = "return document.querySelectorAll('#figure-plot .scatterlayer .trace').length"
    assert _wait("three traces drawn", lambda: browser.execute_script(count) == 3, 30)
    legend = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#figure-plot .legendtext")]
    assert legend == [f"{QUICK} · 0: single point", f"{NEWCWV} · 0: Reno", f"{NEWCWV} · 1: newCWV"]
    xtitle = browser.find_element(By.CSS_SELECTOR, "#figure-plot .xtitle")
    assert xtitle.text == "s since the point's start"
    box = browser.execute_script(f"const e = arguments[0]; {RECT}", xtitle)
    legend_box = browser.execute_script(f"const e = document.querySelector('#figure-plot .legend'); {RECT}")
    assert not _overlap(box, legend_box), (box, legend_box)
    assert "Plot" in browser.find_element(By.CSS_SELECTOR, "header nav").text
    _shot(browser, "plots-view")


def test_paper_figures_are_drawn_from_the_clis_functions(plots_server, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    base = plots_server
    browser.get(f"{base}/runs/{HV}/figures/models?samples=100")
    drawn = "return document.querySelectorAll('#figures .js-plotly-plot').length"
    assert _wait("Figs. 3, 4, 6 drawn", lambda: browser.execute_script(drawn) == 4, 60)
    titles = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#figures .gtitle")]
    assert "Partial CATNIP, p = 0.01, p' = 0 (reno2004); bars: 95% CI" in titles
    _shot(browser, "paper-figures-models")
    browser.get(f"{base}/runs/{NEWCWV}/figures/burst-seq?size=any")
    assert _wait("Fig. 10 drawn", lambda: browser.execute_script(drawn) == 1, 30)
    assert browser.find_elements(By.CSS_SELECTOR, "#figures .scatterlayer .trace")
    _shot(browser, "paper-figures-burst-seq")
    # A run without the data says why, in the page.
    browser.get(f"{base}/runs/{QUICK}/figures/burst-seq")
    assert "has no captured point" in browser.find_element(By.ID, "figure-note").text
    # CATNIP Fig. 2 from the series `catnip fig2` kept: a panel per sender, a mark per stored segment.
    browser.get(f"{base}/figures/fig2")
    assert _wait("Fig. 2 drawn", lambda: browser.execute_script(drawn) == 1, 30)
    results, _ = fig2.read_data(REPO / figure_pages.FIG2_DATA)
    marks = browser.execute_script("return [...document.querySelectorAll('#figures .scatterlayer .trace')]"
                                   ".map(t => t.querySelectorAll('.point').length)")
    assert marks == [len(results[name]) for name, _ in fig2.SENDERS] and sum(marks) >= 4 * 14, marks
    _shot(browser, "paper-figures-fig2")


def test_scenario_page_grouped_by_paper(plots_server, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    browser.get(plots_server + "/")
    headings = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".paper-group > h2")]
    assert len(headings) >= 5 and headings[-1] == "Other"  # the registry's papers with files, then Other
    box = browser.find_element(By.CSS_SELECTOR, "#scenario-newcwv-fig7-unlimited textarea")
    assert box.get_attribute("placeholder").startswith("topology.bottleneck.buffer=")
    described = browser.find_element(By.CSS_SELECTOR, "#scenario-catnip-sim-fairness").text
    assert "`" not in described  # its description's code spans are <code>, not backticks
    assert browser.find_elements(By.CSS_SELECTOR, "#scenario-catnip-sim-fairness p code")
    _shot(browser, "scenarios-grouped")
