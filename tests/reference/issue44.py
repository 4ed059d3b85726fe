"""The figures of issue 44 on its synthetic trace, for an engine binary and for the reference.

    .venv/bin/python -m tests.reference.issue44 [--engine PATH] [--seed N]

The trace (tcp_traces.issue_trace): 4 bulk flows, one of them with two fast retransmits and a
timeout backed off 1 s then 2 s followed by go-back-N, 16 short flows of 1-4 segments, 2 long-lived
tiny flows at irregular gaps; RTT 60 ms; T = 400 ms, M = 300,000 B (the issue's settings).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from tests.reference import tcp_traces, tcpf_ref


def engine_marks(binary: str, trace, interval_us=400_000, pool=300_000, flow_idle_us=120_000_000) -> list:
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        cfg = {"seed": 1, "links": [{"name": "m", "queue_num": 0, "rate_bps": 0, "delay_us": 0, "buffer": None,
                                     "policy": {"kind": "droptail"},
                                     "edge": [{"kind": "tcpf", "interval_us": interval_us, "pool_bytes": pool,
                                               "in_dscp": 10, "out_dscp": 12, "tiny_window": 4, "mss_bytes": 1460,
                                               "protect_retransmissions": True, "retransmissions_use_tokens": True,
                                               "w_gain": 0.125, "e_gain": 0.5, "flow_idle_us": flow_idle_us}]}]}
        (d / "cfg.json").write_text(json.dumps(cfg))
        tcp_traces.write_trace(d / "t.csv", trace)
        subprocess.run([binary, "replay", "--config", str(d / "cfg.json"), "--trace", str(d / "t.csv"),
                        "--out", str(d / "f.csv")], check=True, capture_output=True, text=True)
        rows = (d / "f.csv").read_text().splitlines()[1:]
        return [(int(r.split(",")[0]), "IN" if r.split(",")[-1] == "10" else "OUT") for r in rows]


def figures(it: tcp_traces.IssueTrace, marks: list, interval_us: int = 400_000) -> dict:
    pk = it.packets
    seg = Counter()
    tiny_bad_intervals = set()
    snd, resends = None, []
    for i, r in marks:
        p = pk[i]
        kind = it.kinds.get(p.key)
        if p.payload:
            seg[(kind, r)] += 1
            if kind == "tiny" and r == "OUT":
                tiny_bad_intervals.add((p.key, (p.time_us - pk[0].time_us) // interval_us))
        if p.key == it.timeout_flow and p.seq_len:
            if snd is not None and tcpf_ref.seq_before(p.seq, snd):
                resends.append((p.time_us, r))
            end = (p.seq + p.seq_len) % (1 << 32)
            snd = end if snd is None or tcpf_ref.seq_before(snd, end) else snd
    # The timeout's resends: the one after 1 s of silence is followed by the next after 2 s more
    # (the backed-off timer), then go-back-N; the resends before are fast retransmits.
    times = [t for t, _ in resends]
    start = next((k for k in range(len(times) - 1) if times[k + 1] - times[k] >= 1_900_000), None)
    timeout = resends[start:] if start is not None else []
    return {
        "fast_retransmits": [r for _, r in (resends[:start] if start is not None else resends)],
        "after_1s_timeout": timeout[0][1] if timeout else None,
        "after_2s_backoff": timeout[1][1] if len(timeout) > 1 else None,
        "go_back_n": [r for _, r in timeout[2:]],
        "short_segments_in": (seg[("short", "IN")], seg[("short", "IN")] + seg[("short", "OUT")]),
        "tiny_segments_in": (seg[("tiny", "IN")], seg[("tiny", "IN")] + seg[("tiny", "OUT")]),
        "tiny_intervals_with_an_out": len(tiny_bad_intervals),
        "intervals": (pk[-1].time_us - pk[0].time_us) // interval_us + 1,
        "bulk_in": (seg[("bulk", "IN")] + seg[("loss", "IN")],
                    sum(seg[(k, r)] for k in ("bulk", "loss") for r in ("IN", "OUT"))),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", help="a catnip-engine binary (default: the reference only)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    it = tcp_traces.issue_trace(seed=args.seed)
    print("reference:", json.dumps(figures(it, tcpf_ref.mark(it.packets, interval_us=400_000, pool=300_000))))
    if args.engine:
        print("engine:   ", json.dumps(figures(it, engine_marks(args.engine, it.packets))))


if __name__ == "__main__":
    main()
