"""Sweeps over named schemes (`sweep.scheme`: several fields that change together), top-level `x-`
anchor keys, and the checks of the Nouredine-Tobagi knobs: TCP-state marking thresholds and the
initial RTO."""

from __future__ import annotations

import pytest

from catnip.spec import scenario as s
from catnip.testbed.paths import REPO

QUICK = (REPO / "scenarios" / "quick.yaml").read_text()


def write(tmp_path, extra: str):
    f = tmp_path / "sc.yaml"
    f.write_text(QUICK + extra)
    return f


def test_each_scheme_sets_its_fields_together_and_names_its_point(tmp_path):
    f = write(tmp_path, """
x-red: &red {kind: red, w_q: 0.002, min_th: 5, max_th: 15}
sweep:
  scheme:
    - {name: DT, set: {router.policy: {kind: droptail}}}
    - {name: RED-IW2, set: {router.policy: *red, tcp.initial_cwnd: 2}}
  topology.bottleneck.buffer: [20p, 40p]
""")
    sweep = s.load(f)
    got = [(a["scheme"], a["topology.bottleneck.buffer"], sc.router.policy.kind, sc.tcp.initial_cwnd)
           for a, sc in sweep.points]
    assert got == [("DT", "20p", "droptail", None), ("DT", "40p", "droptail", None),
                   ("RED-IW2", "20p", "red", 2), ("RED-IW2", "40p", "red", 2)]
    assert s.point_label(sweep.points[2][0]) == "scheme=RED-IW2, topology.bottleneck.buffer=20p"
    assert sweep.source == str(f)  # the file, whatever paths the schemes set


@pytest.mark.parametrize("scheme, message", [
    ("[]", "sweep: must map field paths to non-empty lists"),
    ("[1]", r"sweep.scheme\[0\]: give name and set"),
    ("[{name: A}]", r"sweep.scheme\[0\]: give name and set"),
    ("[{name: A, set: {}}]", r"sweep.scheme\[0\]: give name and set"),
    ("[{name: 'a b', set: {tcp.sack: false}}]", r"sweep.scheme\[0\].name: 'a b': 1-32 letters"),
    ("[{name: A, set: {tcp.sack: false}}, {name: A, set: {tcp.sack: true}}]", r"sweep.scheme\[1\].name: 'A' repeated"),
    ("[{name: A, set: {seed: 3}}]", r"sweep.scheme\[0\].set.seed: a scheme sets fields of the scenario"),
    ("[{name: A, set: {tcp.sack: maybe}}]", r"\[sweep scheme=A\] tcp.sack"),
])
def test_bad_schemes_are_named(tmp_path, scheme, message):
    with pytest.raises(s.ScenarioError, match=message):
        s.load(write(tmp_path, f"sweep:\n  scheme: {scheme}\n"))


def test_a_scheme_that_is_not_a_list_is_refused_with_a_plain_set_beside_it(tmp_path):
    # The check that a plain --set is not replaced by the sweep reads the schemes' paths; a scheme
    # set to a number by --set once raised TypeError there (found by tests/test_validate_props.py).
    with pytest.raises(s.ScenarioError, match="sweep: must map field paths to non-empty lists"):
        s.load(write(tmp_path, ""), ["name=5", "sweep.scheme=5"])


def test_a_set_under_a_path_a_scheme_sets_is_refused(tmp_path):
    f = write(tmp_path, "sweep:\n  scheme: [{name: A, set: {router.policy: {kind: droptail}}}]\n")
    with pytest.raises(s.ScenarioError, match="the sweep replaces router.policy in every point"):
        s.load(f, ["router.policy.kind=red"])


def test_x_keys_are_anchors_only(tmp_path):
    f = write(tmp_path, "x-notes: {anything: [1, 2]}\n")
    assert s.load(f).points[0][1].name == "quick"
    f.write_text(QUICK + "notes: {anything: 1}\n")
    with pytest.raises(s.ScenarioError, match="notes: unknown field"):
        s.load(f)


@pytest.mark.parametrize("override, message", [
    ("marking.tcp_state={high_thresh: 4, med_thresh: 3}", "med_thresh: 3 is below high_thresh"),
    ("marking.tcp_state={always_high: [70000]}", "ports run 0-65535"),
    ("tcp.initial_rto=0s", "the initial RTO must be between 1ms and 120s"),
    ("tcp.rto_min=0s", "the minimum RTO must be between 1ms and 120s"),
    ("tcp.initial_rto=121s", "the initial RTO must be between 1ms and 120s"),
])
def test_service_differentiation_knobs_are_checked(tmp_path, override, message):
    with pytest.raises(s.ScenarioError, match=message):
        s.load(write(tmp_path, ""), [override])


def test_hosts_can_have_tcp_state_thresholds_of_their_own():
    """Fig. 16: the 200 ms connections' HIGH_thresh swept, MED at twice it by default; a delay-class
    tag, a group or a role selects the hosts (both ends of a pair share its tag)."""
    tree = REPO / "scenarios" / "sd-fig2-droptail.yaml"
    sc = s.load(tree, ["marking.tcp_state={high_thresh: 4, med_thresh: 8, per_host: [{hosts: rtt200ms, high_thresh: 16},"
                       " {hosts: rtt20ms, high_thresh: 2, med_thresh: 3}]}"]).points[0][1]
    got = sc.tcp_state_thresholds()
    assert {h for h, t in got.items() if t == (16, 32)} == {"s5", "s10", "s15", "s20", "d5", "d10", "d15", "d20"}
    assert {h for h, t in got.items() if t == (2, 3)} == {"s1", "s6", "s11", "s16", "d1", "d6", "d11", "d16"}
    assert len(got) == 16
    whole = s.load(tree, ["marking.tcp_state={per_host: [{hosts: destinations, high_thresh: 6}]}"]).points[0][1]
    assert whole.tcp_state_thresholds() == {f"d{i}": (6, 12) for i in range(1, 21)}


@pytest.mark.parametrize("per_host, message", [
    ("[{hosts: rtt21ms, high_thresh: 4}]", r"per_host\[0\].hosts: no host group, role or delay-class tag 'rtt21ms'"),
    ("[{hosts: rtt200ms, high_thresh: 8, med_thresh: 4}]", "med_thresh: 4 is below high_thresh"),
    ("[{hosts: rtt200ms, high_thresh: 8}, {hosts: dst1, high_thresh: 2}]",
     r"per_host\[1\].hosts: 'dst1' selects d5, which per_host\[0\] already gives thresholds"),
])
def test_bad_per_host_thresholds_are_named(per_host, message):
    with pytest.raises(s.ScenarioError, match=message):
        s.load(REPO / "scenarios" / "sd-fig2-droptail.yaml", [f"marking.tcp_state={{per_host: {per_host}}}"])


def test_spm_and_tcp_state_marking_exclude_each_other(tmp_path):
    with pytest.raises(s.ScenarioError, match="spm and tcp_state both mark the same segments"):
        s.load(write(tmp_path, ""), ["marking.spm=true", "marking.tcp_state={}"])


def test_initial_rto_reaches_every_host(tmp_path):
    sc = s.load(write(tmp_path, ""), ["tcp.initial_rto=6s"]).points[0][1]
    assert {t.initial_rto for t in sc.host_tcp().values()} == {6.0}


def test_receive_buffer_sets_tcp_rmem(tmp_path):
    sc = s.load(write(tmp_path, ""), ["tcp.receive_buffer=64KB"]).points[0][1]
    assert {t.sysctls()["net.ipv4.tcp_rmem"] for t in sc.host_tcp().values()} == {"4096 65536 65536"}
    with pytest.raises(s.ScenarioError, match="a receive buffer between 4KB and 64MB"):
        s.load(write(tmp_path, ""), ["tcp.receive_buffer=1KB"])


SCHEDULER = ("topology.client_link.up={policy: {kind: source_scheduler, high: {rate: 250kbit, bucket: 6000B},"
             " med: {rate: 110kbit, bucket: 6000B}, classes: [[80], [%s]]}}")


def test_a_source_scheduler_class_that_no_application_uses_is_named(tmp_path):
    sc = s.load(write(tmp_path, ""), [SCHEDULER.replace(", [%s]", "")]).points[0][1]  # the web app's port 80
    assert sc.graph().groups[0].link.source_queue()
    with pytest.raises(s.ScenarioError, match=r"link.up.policy.classes\[1\]: no application uses port 2121-2130"
                                              r" \(the applications' ports: 80\)"):
        s.load(write(tmp_path, ""), [SCHEDULER.replace("[[80], [%s]]", "[[80], ['2121-2130']]")])


def test_a_source_scheduler_goes_on_an_uplink_only(tmp_path):
    policy = ("{kind: source_scheduler, high: {rate: 250kbit, bucket: 6000B}, med: {rate: 1Mbit, bucket: 6000B},"
              " classes: [[80]]}")
    with pytest.raises(s.ScenarioError, match="it goes on a host group's link.up.policy, not on the routers"):
        s.load(write(tmp_path, ""), [f"router.policy={policy}"])
    with pytest.raises(s.ScenarioError, match="not on a router link"):
        s.load(write(tmp_path, ""), [f"topology.bottleneck.policy={policy}"])
    with pytest.raises(s.ScenarioError, match=r"put it on the uplink only"):
        s.load(write(tmp_path, ""), [f"topology.client_link.down={{policy: {policy}}}"])


def test_only_narrows_the_sweep_to_named_values(tmp_path):
    # `catnip run --only`: a subset of the full sweep's points, with their values and seeds.
    f = write(tmp_path, """
sweep:
  router.policy: [{kind: droptail}, {kind: catnip_good}]
  scheme:
    - {name: today, set: {tcp.initial_cwnd: 10}}
    - {name: iw, set: {tcp.initial_cwnd: 1}}
    - {name: rto, set: {tcp.initial_rto: 3s}}
""")
    full = s.load(f)
    part = s.load(f, only=["scheme=iw", "scheme=rto", "router.policy=catnip_good"])
    assert [a for a, _ in part.points] == [{"router.policy": {"kind": "catnip_good"}, "scheme": n} for n in ("iw", "rto")]
    assert part.sweep["router.policy"] == [{"kind": "catnip_good"}] and len(part.sweep["scheme"]) == 2
    full_points = {s.point_label(a): sc for a, sc in full.points}
    for a, sc in part.points:
        assert sc == full_points[s.point_label(a)]


@pytest.mark.parametrize("only, message", [
    (["scheme"], "--only scheme: give KEY=NAME"),
    (["schem=iw"], "--only schem: not a sweep key of this scenario; its sweep keys are scheme"),
    (["scheme=IW"], "--only scheme=IW: no such value of sweep.scheme; it has today, iw"),
])
def test_only_says_what_it_cannot_select(tmp_path, only, message):
    f = write(tmp_path, """
sweep:
  scheme:
    - {name: today, set: {tcp.initial_cwnd: 10}}
    - {name: iw, set: {tcp.initial_cwnd: 1}}
""")
    with pytest.raises(s.ScenarioError, match=message):
        s.load(f, only=only)


def test_only_takes_plain_values_as_set_reads_them(tmp_path):
    f = write(tmp_path, """
sweep:
  tcp.sack: [true, false]
  topology.bottleneck.buffer: [10p, 64KB]
""")
    part = s.load(f, only=["tcp.sack=false", "topology.bottleneck.buffer=64KB"])
    assert [a for a, _ in part.points] == [{"tcp.sack": False, "topology.bottleneck.buffer": "64KB"}]


def test_a_profile_as_set_options_wins_over_the_scenario():
    # `make table-xi PROFILE=linux-2.4` (spec.senders.profile_sets): the WAN scenarios name cubic,
    # and the profile's Reno must replace it in every point, with every other field of the profile.
    from catnip.spec import senders
    argv = senders.profile_sets("linux-2.4")
    overrides = [argv[i + 1] for i in range(0, len(argv), 2)]
    assert argv[::2] == ["--set"] * len(overrides)
    sweep = s.load(REPO / "scenarios" / "catnip-wan-baseline.yaml", overrides)
    for _, sc in sweep.points:
        assert sc.tcp.profile == "linux-2.4" and sc.tcp.congestion_control == "catnip_ns2reno"
        assert (sc.tcp.initial_cwnd, sc.tcp.initial_rto, sc.tcp.rto_min) == (2, 3.0, 0.2)
        assert (sc.tcp.recovery, sc.tcp.frto, sc.tcp.early_retrans, sc.tcp.sack) == ("off", False, False, True)
    with pytest.raises(KeyError, match="unknown tcp.profile 'x'"):
        senders.profile_sets("x")
