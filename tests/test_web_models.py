"""Nouredine and Tobagi's web models (section 2.2.1): the uniform think time, the probe page, the
random page pool and the web application's fields that choose them. No network."""

from __future__ import annotations

import hashlib
import math
import os
import statistics
import subprocess
import sys

import pytest
from pydantic import ValidationError

from catnip.spec import scenario as s
from catnip.testbed.paths import REPO
from catnip.workloads import client as client_mod
from catnip.workloads import pagepool as pp
from catnip.workloads.apps.web import ThinkTimeSpec, WebSpec
from catnip.workloads.docroot import html_floor, write_docroot
from catnip.workloads.ftp import pareto_scale
from catnip.workloads.pages import catnip_pages, probe_pages
from catnip.workloads.thinktime import sampler


# --- the uniform think time ------------------------------------------------------------------------

def test_uniform_think_time_has_its_mean_and_stays_in_zero_to_twice_the_mean():
    draw = sampler({"model": "uniform", "mean": 2.5}, 7)
    xs = [draw() for _ in range(40_000)]
    assert statistics.fmean(xs) == pytest.approx(2.5, abs=0.03)   # standard error 0.007
    assert 0.0 <= min(xs) < 0.01 and 4.99 < max(xs) <= 5.0       # the whole of [0, 5]
    assert statistics.pvariance(xs) == pytest.approx(5.0 ** 2 / 12, rel=0.03)
    again = sampler({"model": "uniform", "mean": 2.5}, 7)
    assert [again() for _ in range(20)] == xs[:20]


def test_uniform_think_time_needs_a_mean():
    assert ThinkTimeSpec(model="uniform", mean="2.5s").mean == 2.5
    with pytest.raises(ValidationError, match="think time model 'uniform' needs 'mean'"):
        ThinkTimeSpec(model="uniform")


# --- the probe page --------------------------------------------------------------------------------

def test_probe_page_is_1_kb_of_html_and_eight_10_kb_images(tmp_path):
    (probe,) = probe_pages()
    assert (probe.number, probe.html_bytes, probe.images) == (0, 1024, (10240,) * 8)
    write_docroot(probe_pages(), tmp_path)
    html = (tmp_path / "probe/page0.html").read_bytes()
    assert len(html) == 1024
    srcs = [m.decode() for m in client_mod.IMG_SRC.findall(html)]
    assert srcs == [f"/probe/p0/i{k}.gif" for k in range(1, 9)] == probe.objects[1:]
    assert all((tmp_path / u.lstrip("/")).stat().st_size == 10240 for u in srcs)
    assert probe.total_bytes == 82_944


# --- the random pool ---------------------------------------------------------------------------------

def _digest(pages) -> str:
    return hashlib.sha256(repr([(p.number, p.html_bytes, p.images, p.folder) for p in pages]).encode()).hexdigest()


def test_pool_is_the_same_in_every_process_and_for_every_run_seed():
    model = pp.PagePoolModel()
    here = _digest(pp.pool_pages(model))
    code = ("from workloads import pagepool as pp; import hashlib; ps = pp.pool_pages(pp.PagePoolModel());"
            " print(hashlib.sha256(repr([(p.number, p.html_bytes, p.images, p.folder) for p in ps]).encode()).hexdigest())")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout.strip()
    assert other == here
    pages = pp.pool_pages(model)
    assert [p.number for p in pages] == list(range(1001, 1201))
    assert len({p.folder for p in pages}) == 1 and pages[0].folder.startswith("/pool-")
    # A larger pool begins with the smaller one; other parameters give other pages elsewhere.
    assert pp.pool_pages(pp.PagePoolModel(pool_size=300))[:200] == pages
    other_model = pp.PagePoolModel(object_mean="12KB")
    assert other_model.folder != model.folder
    assert [p.images for p in pp.pool_pages(other_model)] != [p.images for p in pages]
    # The run's seed never reaches the pool: two scenarios differing only in seed serve one pool.
    a = WebSpec(clients="c", servers="s", page_set="random")
    assert a.served_pages() == pages and a.session_pages() == list(pages)


def test_pool_sizes_follow_the_model():
    model = pp.PagePoolModel(pool_size=5000)
    pages = pp.pool_pages(model)
    images = [x for p in pages for x in p.images]
    xm = pareto_scale(model.object_mean, model.object_shape)
    assert min(images) >= round(xm) and max(images) <= model.max_object
    assert max(len(p.images) for p in pages) <= model.max_objects
    assert all(p.html_bytes >= html_floor(p.number, len(p.images), p.folder) for p in pages)
    counts = [len(p.images) for p in pages]
    assert statistics.fmean(counts) == pytest.approx(model.objects_mean, abs=4 * statistics.stdev(counts) / 70.7)


def test_pool_mean_page_size_matches_the_models_formula():
    model = pp.PagePoolModel(pool_size=5000)
    totals = [p.total_bytes for p in pp.pool_pages(model)]
    standard_error = statistics.stdev(totals) / math.sqrt(len(totals))
    assert abs(statistics.fmean(totals) - pp.mean_page_bytes(model)) < 4 * standard_error
    assert pp.pool_mean_bytes(model) == statistics.fmean(totals)
    # The defaults: a 33,587-byte mean page (calibration target, docs/workload.md).
    assert pp.mean_page_bytes(pp.PagePoolModel()) == pytest.approx(33_587, abs=1)


def test_mean_formula_counts_the_html_floor_and_the_cap():
    # Small HTML next to the room eight img tags need: the floor dominates the HTML's mean.
    model = pp.PagePoolModel(pool_size=5000, objects_model="fixed", objects_mean=8, html_mean="200B")
    pages = pp.pool_pages(model)
    html = [p.html_bytes for p in pages]
    floor = html_floor(1001, 8, model.folder)
    expected_html = floor + 200 * math.exp(-floor / 200)       # E[max(s, H)], H exponential
    assert statistics.fmean(html) == pytest.approx(expected_html, abs=4 * statistics.stdev(html) / math.sqrt(5000))
    image = pp.capped_pareto_mean(model.object_mean, model.object_shape, model.max_object)
    assert pp.mean_page_bytes(model) == pytest.approx(expected_html + 8 * image)
    # A fixed HTML smaller than its markup is the markup exactly.
    fixed = pp.PagePoolModel(pool_size=10, objects_model="fixed", objects_mean=8, html_model="fixed", html_mean="1B")
    assert {p.html_bytes for p in pp.pool_pages(fixed)} == {html_floor(1001, 8, fixed.folder)}
    # The cap: E[min(X, c)] by numerical integration of P(X > x) = (xm / x)^a.
    xm, a, c = pareto_scale(10240, 1.2), 1.2, 1 << 20
    steps = 200_000
    ratio = (c / xm) ** (1 / steps)
    integral = xm + sum((xm / (xm * ratio ** (i + 0.5))) ** a * xm * (ratio ** (i + 1) - ratio ** i)
                        for i in range(steps))
    assert pp.capped_pareto_mean(10240, a, c) == pytest.approx(integral, rel=1e-6)


@pytest.mark.parametrize("kind", ["geometric", "poisson"])
def test_object_count_distributions_have_their_means(kind):
    pmf = pp.object_count_pmf(pp.PagePoolModel(objects_model=kind, objects_mean=4.0, max_objects=999))
    assert sum(pmf) == pytest.approx(1.0)
    assert sum(n * p for n, p in enumerate(pmf)) == pytest.approx(4.0, rel=1e-9)
    variance = sum((n - 4.0) ** 2 * p for n, p in enumerate(pmf))
    assert variance == pytest.approx(4.0 * 5.0 if kind == "geometric" else 4.0, rel=1e-6)
    capped = pp.object_count_pmf(pp.PagePoolModel(objects_model=kind, objects_mean=4.0, max_objects=5))
    assert len(capped) == 6 and capped[:5] == pmf[:5] and capped[5] == pytest.approx(1 - sum(pmf[:5]))


def test_offered_bit_rate():
    # 400 clients, 2.5 s think time, pages of 25,781 B with no download time: 33 Mbit/s.
    assert pp.offered_bit_rate(25_781.25, 2.5, 0.0, 400) == pytest.approx(33e6)


@pytest.mark.parametrize("fields, message", [
    ({"objects_mean": 70}, "objects_mean: 70 is above max_objects (64)"),
    ({"objects_model": "fixed", "objects_mean": 2.5}, "objects_mean: 2.5 images per page: 'fixed' needs a whole number"),
    ({"max_object": "1KB"}, "max_object: 1024 bytes is not above the smallest Pareto size 1707"),
    ({"object_mean": 10}, "object_mean\n  Input should be greater than or equal to 64"),
    ({"pool_size": 5001}, "pool_size\n  Input should be less than or equal to 5000"),
    ({"html_mean": 2.5}, "html_mean\n  Value error, 2.5 is ambiguous"),
    ({"shape": 1.5}, "shape\n  Extra inputs are not permitted"),
])
def test_pool_model_errors(fields, message):
    with pytest.raises(ValidationError) as err:
        pp.PagePoolModel(**fields)
    assert message in str(err.value)


# --- the web application's fields ---------------------------------------------------------------------

def _web(**fields) -> WebSpec:
    return WebSpec(clients="clients", servers="servers", **fields)


@pytest.mark.parametrize("fields, message", [
    ({"pipeline": True}, "pipeline: true needs http_version '1.1'"),
    ({"duration": "60s", "rounds": 3}, "rounds: 3 passes and duration 60 s exclude each other; give one"),
    ({"page_set": "probe", "pages": [1, 2]}, "pages: a choice of CATNIP's pages needs page_set 'catnip' (page_set"
                                             " 'probe' serves its one page)"),
    ({"page_set": "random", "pages": [3]}, "page_set 'random' serves its pool"),
    ({"random_pages": {"pool_size": 10}}, "random_pages: the pool's model needs page_set 'random' (not 'catnip')"),
    ({"page_set": "random", "random_pages": {"pool_size": 0}}, "random_pages.pool_size"),
    ({"page_set": "fixed"}, "page_set\n  Input should be 'catnip', 'probe' or 'random'"),
    ({"duration": 0}, "duration\n  Input should be greater than 0"),
])
def test_web_field_errors(fields, message):
    with pytest.raises(ValidationError) as err:
        _web(**fields)
    assert message in str(err.value)


def test_web_page_sets_and_what_each_session_loads():
    assert [p.number for p in _web().session_pages()] == list(range(1, 11))
    assert [p.number for p in _web(pages=[3, 5]).session_pages()] == [3, 5]
    assert _web().served_pages() == catnip_pages()
    probe = _web(page_set="probe", http_version="1.1", persistent="page", pipeline=True, duration="300s")
    assert probe.served_pages() == probe_pages() and probe.planned_seconds() == ("duration", 300.0)
    assert _web().planned_seconds() is None
    random_set = _web(page_set="random")
    assert random_set.random_pages == pp.PagePoolModel()    # recorded, defaults included
    assert len(random_set.session_pages()) == 200


def test_a_dumped_web_spec_loads_again():
    # The store keeps dumped specs (defaults included): they must validate as they were.
    for spec in (_web(page_set="random", duration=30, random_pages={"object_mean": "8KB"}),
                 _web(page_set="probe", rounds=4), _web(http_version="1.1", pipeline=True)):
        assert WebSpec(**spec.model_dump()) == spec


def test_scenarios_take_the_new_fields_and_check_the_duration_fits():
    quick = REPO / "scenarios" / "quick.yaml"
    sc = s.load(quick, ["workload.page_set=random", "workload.duration=20s", "workload.http_version=1.1",
                        "workload.persistent=page", "workload.pipeline=true",
                        "workload.think_time={model: uniform, mean: 2.5s}"]).points[0][1]
    web = sc.workload
    assert (web.page_set, web.duration, web.pipeline, web.think_time.mean) == ("random", 20.0, True, 2.5)
    with pytest.raises(s.ScenarioError, match=r"duration: the planned 100000 s do not fit in run.time_limit"):
        s.load(quick, ["workload.duration=100000s"])


def test_docroot_holds_the_chosen_page_sets_files(tmp_path):
    for spec in (_web(), _web(page_set="probe"), _web(page_set="random", random_pages={"pool_size": 20})):
        root = tmp_path / spec.page_set
        umask = os.umask(0o077)  # a private umask (root's shell, a service): Apache's www-data must still read
        try:
            write_docroot(spec.served_pages(), root)
        finally:
            os.umask(umask)
        written = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
        wanted = {u.lstrip("/") for page in spec.served_pages() for u in page.objects}
        assert written == wanted
        for page in spec.served_pages():
            html = (root / page.objects[0].lstrip("/")).read_bytes()
            assert len(html) == page.html_bytes
            assert [m.decode() for m in client_mod.IMG_SRC.findall(html)] == page.objects[1:]
            assert [(root / u.lstrip("/")).stat().st_size for u in page.objects[1:]] == list(page.images)
        assert all(oct(p.stat().st_mode & 0o777) in ("0o644", "0o755") for p in [root, *root.rglob("*")])
