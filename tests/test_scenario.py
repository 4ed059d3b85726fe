"""Scenario validation: every shipped scenario loads; bad input gets a precise message."""

from __future__ import annotations

from pathlib import Path

import pytest

from catnip.spec import scenario as s
from catnip.spec import units
from catnip.testbed.paths import REPO

SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_shipped_scenarios_load(path: Path):
    sweep = s.load(path)
    assert sweep.points
    for _, sc in sweep.points:
        assert sc.description and sc.paper, "every scenario cites the paper it reproduces"


def test_wan_baseline_sweeps_buffers():
    sweep = s.load(REPO / "scenarios" / "catnip-wan-baseline.yaml")
    buffers = [sc.topology.bottleneck.buffer for _, sc in sweep.points]
    assert buffers == [{"bytes": k * 1024} for k in (64, 128, 256, 512)]
    sc = sweep.points[0][1]
    assert (sc.topology.clients, sc.topology.servers, sc.workload.parallel) == (100, 1, 1)
    assert sc.workload.think_time.model == "zero" and sc.topology.bottleneck.rate == 1_500_000


@pytest.mark.parametrize("text, expected", [
    ("1.5Mbit", 1_500_000), ("10Mbps", 10_000_000), ("64kbit", 64_000), (2000, 2000)])
def test_rates(text, expected):
    assert units.parse_rate(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("10p", {"packets": 10}), ("50 packets", {"packets": 50}), ("64KB", {"bytes": 65536}),
    ("1500B", {"bytes": 1500}), ({"packets": 3}, {"packets": 3})])
def test_buffers(text, expected):
    assert units.parse_buffer(text) == expected


@pytest.mark.parametrize("overrides, message", [
    (["topology.bottleneck.rate=1.5Mbt"], "topology.bottleneck.rate: '1.5Mbt' is not a rate"),
    (["topology.clientz=3"], "topology.clientz: unknown field"),
    (["router.policy.kind=fifo"], "router.policy: kind 'fifo' not allowed: droptail, catnip_good"),
    (["topology.clients=0"], "topology.clients: 0: Input should be greater than or equal to 1"),
    (["topology.bottleneck.buffer=10"], "is ambiguous"),
    (["workload.pages=[0, 11]"], "pages [0, 11] not allowed"),
    (["workload.think_time={model: fixed}"], "needs 'mean'"),
    (["topology.servers=5", "topology.clients=2"], "clients (2) must be at least servers (5)"),
    (["router.policy={kind: red}"], "router.policy.w_q: Field required"),
    (["router.policy={kind: red, min_th: 60%, max_th: 20%, w_q: 0.01}"], "min_th (60%) must be below max_th"),
    (["router.policy={kind: catnip_good, w_q: 0.01}"], "router.policy: w_q: not a parameter of policy 'catnip_good' (it takes none)"),
    (["router.policy={kind: rio, w_q: 0.02, levels: [{min_th: 40%, max_th: 70%}]}"], "router.policy: policy 'rio' needs levels: 2 of {min_th, max_th, max_p}"),
    (["router.policy={kind: red3, w_q: 0.5, levels: [{min_th: 9, max_th: 3}, {min_th: 1, max_th: 2}, {min_th: 1, max_th: 2}]}"],
     "router.policy.levels.0: min_th (9.0) must be below max_th (3.0)"),
    (["router.policy={kind: red, min_th: lots, max_th: 20%, w_q: 0.01}"], "'lots' is not a threshold"),
    (["router.policy={kind: catnip_loss, loss_p: 0.05}"], "router.policy.loss_p_high: Field required"),
    (["router.policy={kind: bernoulli, loss_p: 1.0}"], "router.policy.loss_p: 1.0: Input should be less than 1"),
    (["router.policy={kind: droptail, loss_p: 0.1}"], "router.policy: loss_p: not a parameter of policy 'droptail'"),
    (["router.policy={kind: fred, min_th: 4}"], "router.policy.max_th: Field required"),
    (["router.policy={kind: fred, min_th: 60%, max_th: 20%, w_q: 0.01}"], "min_th (60%) must be below max_th (20%)"),
    (["router.policy={kind: fred, min_th: 2, max_th: 6, w_q: 0.01, min_q: -1}"],
     "router.policy.min_q: -1: min_q is a packet count (2) or a size ('3KB')"),
    (["router.policy={kind: red, min_th: 2, max_th: 6, w_q: 0.01, min_q: 2}"], "router.policy: min_q: not a parameter of policy 'red' (it takes w_q, mean_pkt_bytes, min_th, max_th, max_p)"),
    (["router.policy={kind: frio, w_q: 0.002}"], "router.policy.levels: Field required"),
    (["router.policy={kind: frio, w_q: 0.002, levels: [{min_th: 40%, max_th: 70%}, {min_th: 50%, max_th: 10%}]}"],
     "router.policy.levels.1: min_th (50%) must be below max_th (10%)"),
    (["router.policy={kind: frio, min_th: 2, max_th: 6, w_q: 0.002}"],
     "router.policy: max_th, min_th: not parameters of policy 'frio' (it takes w_q, mean_pkt_bytes, levels, min_q)"),
    (["router.policy={kind: wrr}"], "router.policy.weights: Field required"),
    (["router.policy={kind: wrr, weights: [1, 2, 3, 4]}"], "policy 'wrr' needs weights"),
    (["router.policy={kind: wrr, weights: [1, 0]}"], "router.policy.weights.1: 0: Input should be greater than or equal to 1"),
    (["router.policy={kind: wrr, weights: [1, 4], w_q: 0.1}"], "router.policy: w_q: not a parameter of policy 'wrr' (it takes weights)"),
    (["router.policy={kind: droptail, weights: [1, 4]}"], "router.policy: weights: not a parameter of policy 'droptail' (it takes none)"),
    (["router.policy={kind: red3, w_q: 0.5, min_q: 2, levels: [{min_th: 1, max_th: 2}, {min_th: 1, max_th: 2}, {min_th: 1, max_th: 2}]}"],
     "router.policy: min_q: not a parameter of policy 'red3' (it takes w_q, mean_pkt_bytes, levels)"),
    (["workload.persistent=page"], "workload: persistent: 'page' needs http_version '1.1'"),
    (["workload.http_version=1.1", "workload.persistent=object"], "workload.persistent: 'object' not allowed: 'session' or 'page'"),
    (["tcp.congestion_control=nosuchcc"], "tcp.congestion_control: 'nosuchcc' is not a congestion control of this machine"),
    (["tcp.server_congestion_control=[reno, nosuchcc]"], "tcp.server_congestion_control.1: 'nosuchcc' is not a congestion"),
    (["tcp.groups.clientz={initial_cwnd: 3}"],
     "tcp.groups.clientz: no host group 'clientz' in the topology (its groups: clients, servers)"),
    (["tcp.groups.servers.pacing=internal"], "tcp.groups.servers.pacing: 'internal' is switched on by the sender, and"
                                             " only catnip_reno and catnip_newcwv can (this group's is cubic)"),
    (["tcp.groups.servers.newcwv={bins: 5}"], "tcp.groups.servers.newcwv: settings of catnip_newcwv, but this group's"),
])
def test_errors_name_field_value_and_rule(overrides, message):
    with pytest.raises(s.ScenarioError) as err:
        s.load(REPO / "scenarios" / "quick.yaml", overrides)
    assert message in str(err.value)


def test_override_and_seed_apply():
    sweep = s.load(REPO / "scenarios" / "quick.yaml", ["topology.clients=3", "workload.parallel=2"], seed=42)
    sc = sweep.points[0][1]
    assert (sc.topology.clients, sc.workload.parallel, sc.seed) == (3, 2, 42)


def test_sweep_errors_say_which_point(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((REPO / "scenarios" / "quick.yaml").read_text() +
                   "sweep:\n  topology.bottleneck.buffer: [10p, lots]\n")
    with pytest.raises(s.ScenarioError, match=r"\[sweep topology.bottleneck.buffer=lots\] topology.bottleneck.buffer"):
        s.load(bad)


def test_not_yaml_and_not_mapping(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("topology: [unclosed\n")
    with pytest.raises(s.ScenarioError, match="not valid YAML"):
        s.load(f)
    f.write_text("- a\n- b\n")
    with pytest.raises(s.ScenarioError, match="a scenario is a mapping"):
        s.load(f)
    with pytest.raises(s.ScenarioError, match="cannot read"):
        s.load(tmp_path / "missing.yaml")


def test_a_transfer_measurement_file_is_read_as_a_scenario_is(tmp_path):
    """spec/transfer.py reads its file through the scenarios' reader: the same errors, with the
    line of a YAML error."""
    from catnip.spec import transfer
    f = tmp_path / "x.yaml"
    f.write_text("name: t\npath: [unclosed\n")
    for load in (s.load, transfer.load):
        with pytest.raises(s.ScenarioError, match=r"x.yaml: not valid YAML at line 3: "):
            load(f)
    f.write_text("- a\n")
    with pytest.raises(s.ScenarioError, match="a scenario is a mapping"):
        transfer.load(f)


def test_red_thresholds_resolve_against_each_buffer():
    sc = s.load(REPO / "scenarios" / "quick.yaml",
                ["router.policy={kind: catnip_red, min_th: 20%, max_th: 60%, w_q: 0.01}"]).points[0][1]
    policy = sc.router.policy
    assert policy.engine_config({"packets": 10}) == {"kind": "catnip_red", "min_th": 2.0, "max_th": 6.0,
                                                     "w_q": 0.01, "max_p": 0.1, "mean_pkt_bytes": 1000}
    assert policy.engine_config({"bytes": 64_000})["max_th"] == pytest.approx(38.4)
    assert s.load(REPO / "scenarios" / "quick.yaml",
                  ["router.policy={kind: catnip_good}"]).points[0][1].router.policy.engine_config(None) == \
        {"kind": "catnip_good"}


def test_rio_levels_resolve_to_packets():
    sc = s.load(REPO / "scenarios" / "quick.yaml", [
        "router.policy={kind: rio, w_q: 0.002, levels: [{min_th: 40%, max_th: 70%, max_p: 0.02},"
        " {min_th: 10%, max_th: 50%, max_p: 0.1}]}"]).points[0][1]
    assert sc.router.policy.engine_config({"packets": 100}) == {
        "kind": "rio", "w_q": 0.002, "mean_pkt_bytes": 1000,
        "levels": [{"min_th": 40.0, "max_th": 70.0, "max_p": 0.02}, {"min_th": 10.0, "max_th": 50.0, "max_p": 0.1}]}


def test_fred_and_frio_resolve_to_packets():
    fred = s.load(REPO / "scenarios" / "quick.yaml",
                  ["router.policy={kind: fred, min_th: 20%, max_th: 60%, w_q: 0.002, max_p: 0.02, min_q: 4}"]
                  ).points[0][1].router.policy
    assert fred.engine_config({"packets": 50}) == {"kind": "fred", "min_th": 10.0, "max_th": 30.0, "w_q": 0.002,
                                                   "max_p": 0.02, "mean_pkt_bytes": 1000, "min_q": 4.0}
    frio = s.load(REPO / "scenarios" / "quick.yaml", [
        "router.policy={kind: frio, w_q: 0.002, levels: [{min_th: 40%, max_th: 70%, max_p: 0.02},"
        " {min_th: 10, max_th: 50}]}"]).points[0][1].router.policy
    assert frio.engine_config({"bytes": 100_000}) == {
        "kind": "frio", "w_q": 0.002, "mean_pkt_bytes": 1000, "min_q": 2,  # the schema's default, written out
        "levels": [{"min_th": 40.0, "max_th": 70.0, "max_p": 0.02}, {"min_th": 10.0, "max_th": 50.0, "max_p": 0.1}]}


def test_wrr_weights_pass_through_and_every_queue_needs_a_share_of_the_buffer():
    wrr = s.load(REPO / "scenarios" / "quick.yaml",
                 ["router.policy={kind: wrr, weights: [1, 4]}"]).points[0][1].router.policy
    assert wrr.engine_config({"packets": 10}) == {"kind": "wrr", "weights": [1, 4]}
    assert wrr.engine_config(None) == {"kind": "wrr", "weights": [1, 4]}
    with pytest.raises(ValueError, match=r"wrr: queue 0's share of the buffer \(1/5 of 4 packets\) is empty"):
        wrr.engine_config({"packets": 4})
    from catnip.spec.policy import Wrr
    three = Wrr(weights=[2, 5, 3])
    assert three.engine_config({"bytes": 64_000}) == {"kind": "wrr", "weights": [2, 5, 3]}


def test_each_point_repeats_as_its_own_scenario_says(tmp_path):
    """run.repetitions swept: the runner plans 1 + 3 point runs, not 1 + 1 (the first point's count
    for every point, as it did)."""
    from catnip.controller.point_plan import plan_points
    path = tmp_path / "reps.yaml"
    path.write_text((REPO / "scenarios" / "quick.yaml").read_text() + "sweep:\n  run.repetitions: [1, 3]\n")
    sweep = s.load(path)
    plans = plan_points(sweep, tmp_path / "runs")
    assert [(p.assignment["run.repetitions"], p.rep) for p in plans] == [(1, 0), (3, 0), (3, 1), (3, 2)]
    assert {p.points for p in plans} == {4} and [p.index for p in plans] == [0, 1, 2, 3]
    assert len({p.seed for p in plans[1:]}) == 3, "repetitions of a point get seeds of their own"


def test_router_set_under_the_period_set_matches_the_study_period_point():
    """catnip-sim-routers-period.yaml is the gap study's `period` point (catnip-study-sim.yaml) with
    the router set: the same TCP, marking, buffer and workload but the profile's timestamps (and
    its minimum RTO, set to the kernel's own 200 ms)."""
    study = {(sc.router.policy.kind, a.get("scheme")): sc
             for a, sc in s.load(REPO / "scenarios" / "catnip-study-sim.yaml").points}
    routers = {sc.router.policy.kind: sc for _, sc in s.load(REPO / "scenarios" / "catnip-sim-routers-period.yaml").points}
    assert set(routers) == {"droptail", "red", "catnip_good", "catnip_bad", "catnip_red"}
    for kind in ("droptail", "catnip_good"):
        mine, theirs = routers[kind], study[kind, "period"]
        other = {"profile", "timestamps", "rto_min"}
        assert mine.tcp.model_dump(exclude=other) == theirs.tcp.model_dump(exclude=other)
        assert (mine.tcp.timestamps, theirs.tcp.timestamps) == (False, True)
        assert (mine.tcp.rto_min, theirs.tcp.rto_min) == (0.2, None)  # None: Linux's own, 200 ms (TCP_RTO_MIN)
        assert mine.marking == theirs.marking
        assert mine.topology == theirs.topology
        assert mine.applications == theirs.applications
