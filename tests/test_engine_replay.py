"""The engine binary's offline replay mode and its config errors, through its command line."""

from __future__ import annotations

import csv
import json
import subprocess

import pytest

from catnip.testbed import paths
from tests.conftest import need_engine


def _engine(*args):
    return subprocess.run([str(paths.engine_binary()), *args], capture_output=True, text=True, timeout=30)


def _config(tmp_path, **link):
    cfg = {"seed": 1, "links": [{"name": "b", "queue_num": 0, "rate_bps": 1_500_000, "delay_us": 5000,
                                 "buffer": {"packets": 10}, "policy": {"kind": "droptail"}, **link}]}
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    return path


def test_replay_overload_keeps_rate_and_buffer(tmp_path):
    need_engine()
    # 200 packets of 1500 B arriving every 1 ms (12 Mbit/s) into a 1.5 Mbit/s link holding 10.
    trace = tmp_path / "t.csv"
    trace.write_text("time_us,size,dscp,flow\n" + "".join(f"{i * 1000},1500,{10 if i % 3 else 12},1\n"
                                                         for i in range(200)))
    res = _engine("replay", "--config", str(_config(tmp_path)), "--trace", str(trace), "--out", str(tmp_path / "f.csv"))
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(open(tmp_path / "f.csv")))
    sent = [float(r["fate_us"]) for r in rows if r["fate"] == "sent"]
    assert [r["fate"] for r in rows[:11]] == ["sent"] * 11
    assert sent[0] == 8000 + 5000
    assert all(abs(b - a - 8000) < 1e-6 for a, b in zip(sent, sent[1:])), "saturated: exactly 8 ms apart"
    # Waiting packets at each arrival: accepted, arrived by then, not yet on the wire.
    accepted = [(float(r["time_us"]), float(r["fate_us"]) - 5000 - 8000) for r in rows if r["fate"] == "sent"]
    waiting = [sum(1 for a, start in accepted if a <= t and start > t) for t, _ in accepted]
    assert max(waiting) == 10
    dropped = [r for r in rows if r["fate"] == "dropped"]
    assert len(dropped) == 200 - len(sent) and len(dropped) > 150


@pytest.mark.parametrize("change, message", [
    ({"policy": {"kind": "fifo"}}, "unknown kind \"fifo\"; allowed: droptail, catnip_good, catnip_bad, red, catnip_red, rio, red3"),
    ({"buffer": {"packets": 0}}, "buffer: must hold at least one packet"),
    ({"rate_bps": "fast"}, "invalid engine config"),
])
def test_bad_config_is_one_clear_line(tmp_path, change, message):
    need_engine()
    res = _engine("replay", "--config", str(_config(tmp_path, **change)), "--trace", "/dev/null",
                  "--out", str(tmp_path / "f.csv"))
    assert res.returncode == 2
    assert message in res.stderr and res.stderr.count("\n") == 1, res.stderr


def test_replay_catnip_good_spares_high_priority(tmp_path):
    need_engine()
    # Overload a 1.5 Mbit/s, 10-packet queue at 12 Mbit/s; one packet in ten is AF11 (10), the
    # rest AF12 (12), so the high-priority load alone (1.2 Mbit/s) fits the link.
    trace = tmp_path / "t.csv"
    trace.write_text("time_us,size,dscp,flow\n" + "".join(f"{i * 1000},1500,{10 if i % 10 == 0 else 12},1\n"
                                                         for i in range(300)))
    fates = {}
    for kind in ("droptail", "catnip_good", "catnip_bad"):
        res = _engine("replay", "--config", str(_config(tmp_path, policy={"kind": kind})), "--trace", str(trace),
                      "--out", str(tmp_path / f"{kind}.csv"))
        assert res.returncode == 0, res.stderr
        rows = list(csv.DictReader(open(tmp_path / f"{kind}.csv")))
        lost = lambda dscp: sum(r["fate"] != "sent" for r in rows if r["dscp"] == dscp)  # noqa: E731
        fates[kind] = (lost("10"), lost("12"), sum(r["fate"] == "sent" for r in rows))
        if kind == "catnip_good":
            evicted = [r for r in rows if r["fate"] == "evicted"]
            assert evicted and all(r["dscp"] == "12" and r["by"] for r in evicted)
    high_dt, low_dt, sent_dt = fates["droptail"]
    high_good, low_good, sent_good = fates["catnip_good"]
    high_bad, low_bad, _ = fates["catnip_bad"]
    assert high_dt > 0 and high_good == 0 and low_good > low_dt
    assert sent_good == sent_dt  # the link's work is the same; only who loses changes
    assert high_bad > high_dt and low_bad < low_dt
