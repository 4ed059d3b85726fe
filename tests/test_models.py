"""The latency models on hand-computed values (hysteresis paper, section 3 and 5)."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest
from click.testing import CliRunner

from catnip.models import hysteresis as h
from catnip.models import partial_catnip
from catnip.models.params import ModelInputError, Path


def test_eq3_expected_packets_before_loss():
    # (1 - 0.9^10) * 0.9 / 0.1 = 0.6513216 * 9
    assert h.expected_sent_before_loss(10, 0.1) == pytest.approx(5.8618944)
    assert h.expected_sent_before_loss(10, 0.0) == 10


def test_eq5_and_eq6_without_and_with_the_window_cap():
    # d = 10, w1 = 1: E[W_ss] = 10/3 + 2/3 = 4; E[T_ss] = 0.2 * log_1.5(10 * 0.5 + 1) = 0.2 * 4.41902
    assert h.window_at_end(10, 1) == pytest.approx(4.0)
    assert h.slow_start_time(10, 1, 24, 0.2) == pytest.approx(0.2 * math.log(6, 1.5))
    # d = 100 > the 24-packet window: 0.2 * (log_1.5 24 + 1 + (100 - 70) / 24) = 0.2 * (7.83798 + 1 + 1.25)
    assert h.slow_start_time(100, 1, 24, 0.2) == pytest.approx(0.2 * (math.log(24, 1.5) + 1 + 30 / 24))


def test_eq8_timeout_probability_matches_the_papers_figures():
    # Section 4: for a window of 10, Q rises from 0.39 (p = 3%) to 0.57 (p = 10%).
    assert h.q_timeout(0.03, 10) == pytest.approx(0.39083, abs=1e-4)
    assert h.q_timeout(0.10, 10) == pytest.approx(0.57434, abs=1e-4)
    assert h.q_timeout(0.10, 3) == 1.0 and h.q_timeout(0.5, 4) == pytest.approx(0.99167, abs=1e-4)


def test_eq9_eq10_timeout_cost():
    assert h.f(0.1) == pytest.approx(1.124992)
    assert h.timeout_cost(0.1, 1.0) == pytest.approx(1.124992 / 0.9)


def test_no_loss_is_slow_start_plus_one_delayed_ack():
    path = Path(size=10 * 1433, p=0.0)
    assert h.latencies(path, 3) == pytest.approx([0.1 + 0.2 * math.log(6, 1.5)] * 3)
    big = Path(size=100 * 1433, p=0.0)  # window capped at W_max = 24
    assert h.latencies(big, 1)[0] == pytest.approx(0.1 + 0.2 * (math.log(24, 1.5) + 1 + 30 / 24))
    assert h.latencies(Path(size=1, p=0.0), 1)[0] == pytest.approx(0.1 + 0.2)  # N = 1


def test_one_packet_with_loss_pays_the_expected_timeout():
    # N = 1, p = 0.1: E[d_ss] = 0.9 in 0.2 * log_1.5(1.45) s after the delayed ACK; the window is
    # below 4, so the loss is a timeout: + p_ss * E[Z_TO] = 0.1 * 1.124992 / 0.9.
    want = 0.1 + 0.2 * math.log(0.9 * 0.5 + 1, 1.5) + 0.1 * 1.124992 / 0.9
    assert h.latencies(Path(size=1000, p=0.1), 5) == pytest.approx([want] * 5)


def test_sampling_is_seeded_and_latency_grows_with_loss():
    path = Path(size=32 * 1024, p=0.05)
    assert h.latencies(path, 200, seed=7) == h.latencies(path, 200, seed=7)
    assert h.latencies(path, 200, seed=7) != h.latencies(path, 200, seed=8)
    means = [statistics.fmean(h.latencies(Path(size=32 * 1024, p=p), 500)) for p in (0.0, 0.01, 0.05, 0.1)]
    assert means == sorted(means) and means[-1] > 3 * means[0]


def test_partial_catnip_reduces_to_the_plain_model_where_the_maths_says_it_must():
    # Exactly equal (not "within 25%"), in the two cases where the three steps are the plain model:
    # - six packets or fewer are all high priority, so with p' = p it is the plain model at p;
    # - without loss and below the W_max cap (step 3 starts from gamma E[W_ss] = (N - 1) / 2 <= 24,
    #   so N <= 49), eq. 6 is additive over the steps: step k+1 starts
    #   from w1 = gamma E[W_ss] = (gamma - 1) d_k + w1_k (eq. 5), so log_1.5((gamma-1) d_1 / w + 1)
    #   + log_1.5((gamma-1) d_2 / w' + 1) = log_1.5((gamma-1)(d_1 + d_2) / w + 1), and the steps
    #   after the first start above cwnd 1 (no extra delayed ACK).
    # With p > 0 and more than six packets there is no identity: step 2 counts N - 3 packets in
    # eq. 3 while sending N - 6 (section 5), so it is another model (32 KB, p = 5%: 21% lower).
    for n in (1, 4, 6):
        for p in (0.01, 0.05, 0.1):
            plain = h.latencies(Path(size=n * 1433, p=p), 300)
            assert h.latencies(Path(size=n * 1433, p=p, p_high=p), 300, draw=partial_catnip.sample) == plain
    for n in (7, 12, 23, 46, 49):
        plain = h.latencies(Path(size=n * 1433, p=0.0), 1)[0]
        assert h.latencies(Path(size=n * 1433, p=0.0, p_high=0.0), 1, draw=partial_catnip.sample)[0] == \
            pytest.approx(plain, rel=1e-12)


def test_partial_catnip_helps_with_p_high_zero():
    for kb in (8, 32, 128):
        plain = statistics.fmean(h.latencies(Path(size=kb * 1024, p=0.05), 2000))
        protected = statistics.fmean(h.latencies(Path(size=kb * 1024, p=0.05, p_high=0.0), 2000,
                                                 draw=partial_catnip.sample))
        assert protected < plain
    # Six packets or fewer are all high priority: p' = 0 means no loss at all.
    small = Path(size=6 * 1433, p=0.3, p_high=0.0)
    assert h.latencies(small, 1, draw=partial_catnip.sample)[0] == pytest.approx(h.latencies(Path(size=6 * 1433, p=0.0), 1)[0])


class _AlwaysFastRetransmit(random.Random):
    def random(self):
        return 1.0  # above any Q(p, w) < 1: every loss is a fast retransmit


def test_eq11_halves_the_window_reached_capped_at_wmax(monkeypatch):
    # 256 KB (183 packets) at p = 0.001: the first slow start sends E[d_ss] = 167.1 packets and
    # would end at E[W_ss] = 56.4 (eq. 5), but the sender stops at W_max = 24: after a fast
    # retransmit the next cycle starts from 24 / 2 = 12 (eq. 11), not 28.2.
    starts = []
    real = h.slow_start_time

    def spy(e_dss, w1, wmax, rtt):
        starts.append(w1)
        return real(e_dss, w1, wmax, rtt)

    monkeypatch.setattr(h, "slow_start_time", spy)
    path = Path(size=256 * 1024, p=0.001)
    assert h.window_at_end(h.expected_sent_before_loss(183, 0.001), 1) == pytest.approx(56.38, abs=0.01)
    h.sample(path, _AlwaysFastRetransmit())
    assert starts[:2] == [1.0, 12.0]


@pytest.mark.parametrize("kwargs, field", [
    ({"size": 0, "p": 0.1}, "size"), ({"size": 100, "p": 1.0}, "p"), ({"size": 100, "p": -0.1}, "p"),
    ({"size": 100, "p": 0.1, "rtt": -0.2}, "rtt"), ({"size": 100, "p": 0.1, "wmax": 0}, "wmax"),
    ({"size": 100, "p": 0.1, "p_high": 1.5}, "p_high"),
])
def test_bad_inputs_name_the_parameter(kwargs, field):
    with pytest.raises(ModelInputError, match=rf"^{field} = "):
        Path(**kwargs)


def test_cli_prints_predictions_and_refuses_bad_input():
    from catnip.cli.main import main
    run = CliRunner().invoke
    res = run(main, ["model", "hysteresis", "--size", "8KB", "--p", "0.03", "--samples", "50", "--json"])
    assert res.exit_code == 0 and '"packets": 6' in res.output
    res = run(main, ["model", "partial-catnip", "--size", "32KB", "--p", "0.05", "--p-high", "0"])
    assert res.exit_code == 0 and "23 packets" in res.output
    res = run(main, ["model", "hysteresis", "--size", "8KB", "--p", "1"])
    assert res.exit_code == 2 and "p = 1.0: must be a probability in [0, 1)" in res.output
    # Every model has its subcommand, each with --json.
    from catnip.models import cardwell, sikdar
    for name, fn in (("cardwell", cardwell.latency), ("sikdar", sikdar.latency)):
        res = run(main, ["model", name, "--size", "32KB", "--p", "0.03", "--json"])
        assert res.exit_code == 0, res.output
        out = json.loads(res.output)
        assert (out["packets"], out["mean_s"]) == (23, pytest.approx(fn(Path(size=32 * 1024, p=0.03))))
        res = run(main, ["model", name, "--size", "32KB", "--p", "0.03"])
        assert res.exit_code == 0 and "23 packets" in res.output


def test_cardwell_and_padhye_on_hand_values():
    from catnip.models import cardwell
    # Cardwell eq. 5 counts the lost packet: E[d_ss] = eq. 3 + 1, at most the d packets there are.
    assert cardwell.expected_sent_in_slow_start(10, 0.1) == pytest.approx(5.8618944 + 1)
    assert cardwell.expected_sent_in_slow_start(10, 0.001) == 10
    assert cardwell.expected_sent_in_slow_start(10, 0.0) == 10

    def q(p, w):  # eq. 8 written out again
        return min(1.0, (1 - (1 - p) ** 3) * (1 + (1 - p) ** 3 * (1 - (1 - p) ** (w - 3))) / (1 - (1 - p) ** w))

    # Padhye's full model (SIGCOMM 1998, eq. 31), b = 2, RTT 0.2 s, T0 1 s, W_max 24.
    # p = 1%: W(p) = 2/3 + sqrt(8 * 0.99 / 0.06 + 4/9) = 12.175 < 24, so
    # B = (99 + W + Q/0.99) / (0.2 (W + 1) + Q f(0.01) / 0.99).
    w = 2 / 3 + math.sqrt(132 + 4 / 9)
    f01 = 1 + 0.01 + 2e-4 + 4e-6 + 8e-8 + 16e-10 + 32e-12
    want = (99 + w + q(0.01, w) / 0.99) / (0.2 * (w + 1) + q(0.01, w) * f01 / 0.99)
    assert cardwell.padhye_throughput(0.01, 0.2, 1.0, 24) == pytest.approx(want, rel=1e-12)
    assert want == pytest.approx(38.16, abs=0.01)
    # p = 0.1%: W(p) = 37.2 > 24, the window-limited branch:
    # B = (999 + 24 + Q/0.999) / (0.2 (24/4 + 0.999 / (0.001 * 24) + 2) + Q f(0.001) / 0.999).
    f001 = sum(c * 0.001 ** k for k, c in enumerate((1, 1, 2, 4, 8, 16, 32)))
    want = (999 + 24 + q(0.001, 24) / 0.999) / (0.2 * (6 + 0.999 / 0.024 + 2) + q(0.001, 24) * f001 / 0.999)
    assert cardwell.padhye_throughput(0.001, 0.2, 1.0, 24) == pytest.approx(want, rel=1e-12)
    assert cardwell.padhye_throughput(0.0, 0.2, 1.0, 24) == pytest.approx(120.0)  # W_max / RTT
    # No loss: slow start and one delayed ACK, as the hysteresis model.
    path = Path(size=10 * 1433, p=0.0)
    assert cardwell.latency(path) == pytest.approx(0.1 + 0.2 * math.log(6, 1.5))
    # One packet at p = 10%: E[d_ss] = min(1, 0.9 + 1) = 1, nothing left for Padhye's rate;
    # slow start 0.2 log_1.5(1.5) = 0.2 s, and the loss (window 1: a timeout) costs
    # l_ss E[Z_TO] = 0.1 * f(0.1) / 0.9 s.
    assert cardwell.latency(Path(size=1000, p=0.1)) == pytest.approx(0.2 + 0.1 * 1.124992 / 0.9 + 0.1)
    # With loss the rest goes at Padhye's rate: latency grows with p.
    lat = [cardwell.latency(Path(size=64 * 1024, p=p)) for p in (0.01, 0.03, 0.1)]
    assert lat == sorted(lat)


def test_cardwell_eq5_gives_the_papers_ten_packets_before_a_loss_at_ten_percent():
    # Hysteresis paper, section 4 (Table 3's discussion): "with the packet loss probability of 10%,
    # about 10 packets are expected to be sent before a packet is lost", of a 92-packet transfer.
    # Cardwell's eq. 5 counts the lost packet: 0.9 (1 - 0.9^92) / 0.1 + 1 = 9.9994; eq. 3 gives 9.
    from catnip.models import cardwell
    assert cardwell.expected_sent_in_slow_start(92, 0.1) == pytest.approx(10, abs=0.001)
    assert h.expected_sent_before_loss(92, 0.1) == pytest.approx(9, abs=0.001)


def test_cardwell_eq22_not_padhyes_numerator():
    """Cardwell et al. 2000, eq. 22: the rate after the first loss counts (1-p)/p + W(p)/2 +
    Q(p, W(p)) packets per cycle, where Padhye's own full model (SIGCOMM 1998, eq. 31) counts
    (1-p)/p + W(p) + Q/(1-p). Neither paper prints a number that tells them apart (the hysteresis
    paper gives only V(p) against its ns-2 runs), so the values are eq. 22 written out by hand."""
    from catnip.models import cardwell
    f = lambda p: 1 + p + 2 * p**2 + 4 * p**3 + 8 * p**4 + 16 * p**5 + 32 * p**6  # noqa: E731 (G, eq. 19)

    def q(p, w):  # eq. 17 (the hysteresis paper's eq. 8)
        return min(1.0, (1 - (1 - p) ** 3) * (1 + (1 - p) ** 3 * (1 - (1 - p) ** (w - 3))) / (1 - (1 - p) ** w))

    # p = 10%, RTT 0.2 s, T0 1 s, b = 2: W(p) = 2/3 + sqrt(8 * 0.9 / (6 * 0.1) + 4/9) = 4.1943 < 24.
    w = 2 / 3 + math.sqrt(12 + 4 / 9)
    assert w == pytest.approx(4.1943, abs=1e-4)
    r = (9 + w / 2 + q(0.1, w)) / (0.2 * (w + 1) + q(0.1, w) * f(0.1) / 0.9)
    assert r == pytest.approx(5.762, abs=1e-3)  # packets/s; Padhye's eq. 31 gives 6.820
    assert cardwell.cardwell_throughput(0.1, 0.2, 1.0, 24) == pytest.approx(r, rel=1e-12)
    # p = 0.1%: W(p) = 37.2 > W_max = 24, the window-limited branch.
    r = (999 + 12 + q(0.001, 24)) / (0.2 * (6 + 0.999 / 0.024 + 2) + q(0.001, 24) * f(0.001) / 0.999)
    assert cardwell.cardwell_throughput(0.001, 0.2, 1.0, 24) == pytest.approx(r, rel=1e-12)
    assert cardwell.cardwell_throughput(0.0, 0.2, 1.0, 24) == pytest.approx(120.0)
    # The latency sends what slow start leaves at that rate (eq. 24: E[T_ca] = E[d_ca] / R).
    # 64 KB = 46 packets at p = 10%: E[d_ss] = 0.9 (1 - 0.9^46) / 0.1 + 1 = 9.9293, E[W_ss] =
    # 9.9293 / 3 + 2/3 = 3.9764 (Q's window), the rest 36.0707 packets at R.
    d = 0.9 * (1 - 0.9**46) / 0.1 + 1
    w_ss = d / 3 + 2 / 3
    t_ss = 0.2 * math.log(d * 0.5 + 1, 1.5)
    t_loss = (1 - 0.9**46) * (q(0.1, w_ss) * f(0.1) / 0.9 + (1 - q(0.1, w_ss)) * 0.2)
    r = cardwell.cardwell_throughput(0.1, 0.2, 1.0, 24)
    want = t_ss + t_loss + (46 - d) / r + 0.1
    assert cardwell.latency(Path(size=64 * 1024, p=0.1)) == pytest.approx(want, rel=1e-12)
    assert want == pytest.approx(8.32, abs=0.01)  # 7.35 s with Padhye's numerator


# --- Sikdar (eq. 1), Partial CATNIP's window rules, eq. 13 ------------------------------------

from catnip.models import sikdar, validation  # noqa: E402


def test_eq1_sikdar_window_pattern():
    # floor(2^((n-1)/2) + 2^((n-2)/2)) for n = 1..8
    assert [sikdar.packets_in_round(n) for n in range(1, 9)] == [1, 2, 3, 4, 6, 9, 13, 19]


def test_sikdar_without_loss_counts_rounds_and_the_window_cap():
    # 6 packets: rounds of 1, 2, 3 -> 3 RTTs, plus the delayed ACK once.
    assert sikdar.latency(Path(size=6 * 1433, p=0.0)) == pytest.approx(3 * 0.2 + 0.1)
    # W_max 2: 1, 2, 2, 2, 2 packets -> 9 after 5 rounds, the 10th in a 6th.
    assert sikdar.latency(Path(size=10 * 1433, p=0.0, wmax=2)) == pytest.approx(6 * 0.2 + 0.1)
    # one packet: one round
    assert sikdar.latency(Path(size=1, p=0.0)) == pytest.approx(0.3)


def test_sikdar_grows_with_loss():
    values = [sikdar.latency(Path(size=32 * 1024, p=p)) for p in (0.0, 0.01, 0.05, 0.1)]
    assert values == sorted(values) and values[-1] > 2 * values[0]


def test_partial_catnip_w1_rules():
    # Section 5: w1 = E[W_ss] * gamma, at most W_max, at least 2.
    assert partial_catnip._next_w1(1.0, 24) == 2.0
    assert partial_catnip._next_w1(4.0, 24) == pytest.approx(6.0)
    assert partial_catnip._next_w1(20.0, 24) == 24


def test_eq13_and_measured_cells():
    assert validation.eq13([(1.0, 2.0), (3.0, 3.0)]) == pytest.approx(0.5)
    rows = [{"point": 0, "profile": "x", "p": 0.01, "p_high": None, "size": 1024, "latency": v, "error": None}
            for v in (1.0, 2.0, 3.0)]
    rows.append({"point": 0, "profile": "x", "p": 0.01, "p_high": None, "size": 1024, "latency": None, "error": "t"})
    rows.append({"point": 1, "profile": "x", "p": 0.03, "p_high": None, "size": 1024, "latency": 9.0, "error": None})
    (cell,) = validation.cells(rows, excluded_points={1})
    assert (cell.mean, cell.failed, len(cell.values)) == (2.0, 1, 3)
    assert cell.ci95 == pytest.approx(4.3027 * 1.0 / math.sqrt(3), abs=1e-4)  # t(0.975, 2), not 1.96


def test_error_table_and_catnip_gain_from_cells():
    cells = [validation.Cell("reno2004", 0.01, None, 1024, [1.0, 1.0], 0),
             validation.Cell("reno2004", 0.01, None, 8192, [2.0, 2.0], 0),
             validation.Cell("reno2004", 0.01, 0.0, 8192, [1.5, 1.5], 0)]
    preds = {(m, "reno2004", 0.01, None, s): v for m in validation.MODELS for s, v in ((1024, 1.5), (8192, 2.0))}
    table = validation.error_table(cells, "reno2004", (0, 50), preds)
    assert table["Hysteresis"] == {0.01: pytest.approx(0.125)}  # ((0.5)^2 + 0) / 2
    assert validation.catnip_gain(cells, "reno2004") == [(0.01, 8.0, 2.0, 1.5, 25.0)]


def test_measured_loss_from_arrivals_and_from_older_departure_records():
    assert validation.measured_loss({"data_arrived": {"high": 200, "low": 1000},
                                     "data_dropped": {"high": 2, "low": 100}}) == {"high": 0.01, "low": 0.1}
    # Older records held departures: 900 departed + 100 dropped = 1000 arrived.
    assert validation.measured_loss({"data_sent": {"high": 0, "low": 900},
                                     "data_dropped": {"high": 0, "low": 100}}) == {"high": None, "low": 0.1}


def test_validate_prints_the_tables_and_writes_the_figures(tmp_path):
    import xml.etree.ElementTree as ET

    from catnip.cli.models import model
    from catnip.results import figures
    from catnip.results.store import Store
    missing = figures.export_missing()
    if missing:
        pytest.skip(f"figure export: {missing}")
    db = tmp_path / "t.db"
    scenario = {"kind": "transfers", "name": "hv", "path": {"mss": 1433, "rtt": 0.2, "wmax": 24, "min_rto": 1.0}}
    rng = random.Random(3)
    with Store(db) as store:
        store.create_run("hv1", "hv", "x", scenario, {}, 1, "abc", {}, {})
        for point, p_high in ((0, None), (1, 0.0)):
            store.create_point("hv1", point, 0, {"profile": "reno2004", "p": 0.01, "p_high": p_high}, {}, 1)
            fidelity = {"data_arrived": {"high": 50, "low": 400}, "data_dropped": {"high": 0, "low": 4},
                        "late_fraction": 0.0, "late_p99_us": 200}
            store.update_point("hv1", point, realtime_ok=1, status="done", fidelity=json.dumps(fidelity))
            store.add_transfer_trials("hv1", point, [
                {"profile": "reno2004", "p": 0.01, "p_high": p_high, "trial": t, "size": kb * 1024,
                 "packets": 1, "latency": 0.2 * kb ** 0.5 + rng.random() * 0.1, "error": None}
                for kb in (1, 8, 50, 100) for t in range(5)])
        store.create_run("web1", "quick", "x", {"name": "quick"}, {}, 1, "abc", {}, {})
    res = CliRunner().invoke(model, ["validate", "hv1", "--db", str(db), "--out", str(tmp_path / "figs"),
                                     "--samples", "100"])
    assert res.exit_code == 0, res.output
    assert "Table 2 (short flows" in res.output and "Table 3 (long flows" in res.output
    assert "high 0.00% low 1.00%  real time: yes" in res.output
    assert "[0.03]" in res.output  # the paper's hysteresis error at p = 1% beside ours
    assert "Partial CATNIP (p' = measured p_high) against Reno" in res.output
    assert sorted(f.name for f in (tmp_path / "figs").iterdir()) == [
        "fig3-reno2004-p0.01.svg", "fig4-reno2004-p0.01.svg", "fig6-long-reno2004-p0.01.svg",
        "fig6-reno2004-p0.01.svg"]
    # Drawn by results/figures.py: the title, and the series by name in the legend.
    svg = "{http://www.w3.org/2000/svg}"
    root = ET.parse(tmp_path / "figs" / "fig6-reno2004-p0.01.svg").getroot()
    texts = {t.get("class"): [] for t in root.iter(svg + "text")}
    for t in root.iter(svg + "text"):
        texts[t.get("class")].append("".join(t.itertext()))
    assert texts["gtitle"] == ["Partial CATNIP, p = 0.01, p' = 0 (reno2004); bars: 95% CI"]
    assert texts["legendtext"] == ["CATNIP measured", "Partial CATNIP", "Reno measured"]
    res = CliRunner().invoke(model, ["validate", "hv1", "--db", str(db), "--out", str(tmp_path / "pdf"),
                                     "--samples", "100", "--format", "pdf"])
    assert res.exit_code == 0, res.output
    pdfs = sorted((tmp_path / "pdf").iterdir())
    assert len(pdfs) == 4 and all(f.suffix == ".pdf" and f.read_bytes().startswith(b"%PDF-") for f in pdfs)
    res = CliRunner().invoke(model, ["validate", "hv1", "--db", str(db), "--out", str(tmp_path / "x"),
                                     "--format", "jpg"])
    assert res.exit_code == 2 and "'jpg' is not one of 'svg', 'pdf', 'png'" in res.output
    res = CliRunner().invoke(model, ["validate", "web1", "--db", str(db)])
    assert res.exit_code != 0 and "not a transfer measurement" in res.output
