"""Every client program says when it was ready; one ready later than it was due fails real time.

At 80 client pairs on this machine the FTP clients got going about 14 s after the common start and
the point was recorded `done` in real time (docs/cluster.md): the workload was not the scenario's.
Now each client's first record is its ready instant, the fidelity record keeps them
(`client_start`), and one later than controller/fidelity.CLIENT_READY_LIMIT_S fails the point's
real-time verdict. The web, Telnet, FTP and burst clients load before the start is set
(workloads/gate.py, tests/test_gate.py)."""

from __future__ import annotations

import json

import pytest

from catnip.controller import fidelity
from catnip.results.store import Store
from catnip.spec import scenario as s
from catnip.testbed import capabilities, paths
from tests.conftest import need_engine, need_root


def test_client_start_lists_the_late_clients_by_application():
    f = fidelity.client_start({"telnet": {"h1": -1.9, "h2": 0.35}, "web": {"h1": -1.5}, "bulk": {}})
    assert f["clients"] == 3 and f["latest_s"] == 0.35 and f["late"] == {"telnet": ["h2"]}
    assert fidelity.client_start({}) == {"clients": 0, "latest_s": None, "limit_s": fidelity.CLIENT_READY_LIMIT_S,
                                         "late": {}, "first_units": 0, "first_latest_s": None, "first_late": {}}


def test_client_start_lists_the_clients_woken_late_for_their_first_page():
    f = fidelity.client_start({"web": {"h1": -1.5, "h2": -1.2}}, {"web": {"h1": 0.004, "h2": 0.25}})
    assert f["late"] == {} and f["first_units"] == 2 and f["first_latest_s"] == 0.25
    assert f["first_late"] == {"web": ["h2"]}


@pytest.mark.parametrize("late, first_late, ok", [({}, {}, True), ({"ftp": ["h3"]}, {}, False),
                                                  ({}, {"web": ["h1"]}, False)])
def test_a_late_client_fails_real_time(late, first_late, ok):
    record = {"late_fraction": 0.0, "kernel_queue_drops": 0, "engines_without_final_stats": [],
              "client_start": {"clients": 4, "late": late, "first_late": first_late}}
    assert fidelity.realtime_ok(record, 0.001) is ok


def _run_point() -> tuple[dict, dict]:
    """The sweep's one point, run: its row (done, its data complete) and its fidelity record."""
    from catnip.controller import runner
    with Store(paths.database()) as store:
        p = store.points(runner.run(_sweep(), capabilities.probe(), store))[0]
    assert p["status"] == "done", p["error"]
    return p, json.loads(p["fidelity"])


def _sweep() -> s.Sweep:
    link = {"rate": "10Mbit", "delay": "2ms", "buffer": "50p"}
    return s.Sweep(name="start", source="test", raw={}, sweep={}, points=[({}, s.validate({
        "name": "start",
        "topology": {"clients": 2, "servers": 1, "client_link": link, "server_link": link,
                     "bottleneck": {**link, "delay": "5ms"}},
        "applications": [
            {"kind": "web", "clients": "clients", "servers": "servers", "pages": [1], "start_stagger": "0s",
             "think_time": {"model": "zero"}},
            {"kind": "telnet", "clients": "clients", "servers": "servers", "duration": "2s"},
            {"kind": "bulk", "clients": "clients", "servers": "servers", "duration": "1s"}],
        "run": {"time_limit": "1min"}}))])


@pytest.mark.netns
@pytest.mark.parametrize("start_delay", [None, -0.5])
def test_clients_ready_after_the_common_start_fail_the_point(start_delay, isolated_data, no_leftovers,
                                                             monkeypatch):
    """With the runner's margin, every client is ready before the common start; with the common
    start put 0.5 s before the release (as on a machine too slow to release and launch them all in
    time), every client is late, and the point, its data complete, fails real time, naming them."""
    need_root()
    need_engine()
    from catnip.controller import point
    from catnip.results import report
    if start_delay is not None:
        monkeypatch.setattr(point, "START_DELAY_S", start_delay)
        monkeypatch.setattr(point, "LAUNCH_S_PER_CLIENT", 0.0)
    p, fid = _run_point()
    start = fid["client_start"]
    assert start["clients"] == 6  # 2 web, 2 telnet, 2 bulk flows
    assert start["first_units"] == 4  # the web clients' first pages, the Telnet clients' first keystrokes
    if start_delay is None:  # ready before their instants, with the launch margin to spare
        assert start["late"] == {} and start["latest_s"] < -0.5, start
        assert start["first_late"] == {} and start["first_latest_s"] < 0.1, start
    else:
        assert start["latest_s"] > 0.5
        assert start["late"] == {"web": ["ctpc1", "ctpc2"], "telnet": ["ctpc1", "ctpc2"],
                                 "bulk": ["ctpc1/0", "ctpc2/0"]}, start
        assert start["first_late"] == {"web": ["ctpc1", "ctpc2"], "telnet": ["ctpc1", "ctpc2"]}, start
        assert not p["realtime_ok"]
        line = next(x for x in report.fidelity_lines(fid) if x.startswith("  Clients:"))
        assert "later than 0.1 s (the workload was not the scenario's): " in line, line
        assert all(f"{app} ctpc1" in line for app in ("web", "telnet", "bulk")), line


@pytest.mark.netns
def test_gated_clients_are_in_time_with_a_start_set_after_their_launch(isolated_data, no_leftovers, monkeypatch):
    """The web and Telnet clients are launched and loaded before the common start is set
    (workloads/gate.py). Each is made to take 1 s to load (a shell's sleep before it becomes the
    client, as a client takes on a loaded machine; on an idle one it loads in 0.03-0.06 s), and
    the start is set 0.3 s after the last READY: all are still ready in time. A start set when
    the launch began would make every one of them late by about 0.7 s."""
    need_root()
    need_engine()
    from catnip.controller import point
    from catnip.workloads.apps import base
    monkeypatch.setattr(point, "START_DELAY_S", 0.3)
    monkeypatch.setattr(point, "LAUNCH_S_PER_CLIENT", 0.0)
    spawn = base.Application.spawn

    def slow_to_load(self, host, role, argv, *rest, **kw):
        if kw.get("gated"):  # the shell execs the client: the same pid, which gets GO
            argv = ["sh", "-c", 'sleep 1; exec "$0" "$@"', *argv]
        return spawn(self, host, role, argv, *rest, **kw)

    monkeypatch.setattr(base.Application, "spawn", slow_to_load)
    start = _run_point()[1]["client_start"]
    assert start["clients"] == 6
    assert "web" not in start["late"] and "telnet" not in start["late"], start


@pytest.mark.netns
def test_a_client_ready_in_time_but_late_for_its_first_page_fails_the_point(isolated_data, no_leftovers,
                                                                            monkeypatch):
    """Each web and Telnet client is told a common start 0.5 s after the one the runner holds (its
    first page or keystroke then begins as a client woken that late would): every one is ready in
    time, every first unit is late, and the point, its data complete, fails real time, naming
    them."""
    need_root()
    need_engine()
    from catnip.results import report
    from catnip.workloads.apps import base
    write_config = base.Application.write_config

    def woken_late(self, name, cfg):
        if "page_set" in cfg or "payload" in cfg:  # a web client's, a Telnet client's
            cfg = {**cfg, "start_at": cfg["start_at"] + 0.5}
        return write_config(self, name, cfg)

    monkeypatch.setattr(base.Application, "write_config", woken_late)
    p, fid = _run_point()
    start = fid["client_start"]
    assert start["late"] == {} and start["first_units"] == 4, start
    assert start["first_late"] == {"web": ["ctpc1", "ctpc2"], "telnet": ["ctpc1", "ctpc2"]}, start
    assert 0.5 <= start["first_latest_s"] < 1.5, start
    assert not p["realtime_ok"]
    line = next(x for x in report.fidelity_lines(fid) if x.startswith("  First units"))
    assert "later than 0.1 s (woken late): " in line, line
    assert "web ctpc1, ctpc2" in line and "telnet ctpc1, ctpc2" in line, line
