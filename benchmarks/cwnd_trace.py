"""The kernel's cwnd of one TCP port's connections at every segment they receive and send
(benchmarks/cwnd_trace.bpf.c): what explains the newCWV baseline's bursts after 0.25 s idles
(docs/reproduction-newcwv.md, "The baseline at 0.25 s idle").

    python -m benchmarks.cwnd_trace record --port 18070 --out DIR -- catnip run ... (a burst port of 18070)
    python -m benchmarks.cwnd_trace bursts DIR [--db DB --run RUN [--cells]] [--json]
    python -m benchmarks.cwnd_trace figure DIR --db DB --run RUN --cell 40960B/0.25s --out FILE.svg

`record` loads the tracer (compiled here against this kernel's BTF, bpf/build/vmlinux.h), runs the
command, and writes DIR/events.jsonl: every event of connections whose local port is PORT, in any
network namespace (use a port nothing else on the machine uses). The tracer is attached only while
the command runs and leaves nothing behind (no pins: programs and maps go with this process).
`bursts` reads it back per connection and per burst (a burst starts when a request arrives): the
idle and the RTO the sender saw, cwnd when the request came and when the burst's first segment
left, which of the kernel's two shrinks gave that value (restart after idle, or the decay of an
application-limited window), the first flight, the segments, and any later drop of cwnd; with the
run's database each burst gets its cell, and `--cells` sums them up per sender and cell. `figure`
draws cwnd against time for both senders over one cell.

Root only (BPF tracing programs).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
SOURCE = Path(__file__).with_suffix(".bpf.c")
HZ_DEFAULT = 250
KINDS = {1: "rcv", 2: "xmit"}
# struct ev of cwnd_trace.bpf.c, in order
FIELDS = ("t_ns", "netns", "kind", "sport", "dport", "len", "cwnd", "ssthresh", "packets_out", "max_packets_out",
          "snd_una", "snd_nxt", "rcv_nxt", "srtt_us", "rto_j", "lsnd_age_j", "stamp_age_j", "cwnd_used", "ca_state",
          "cwnd_limited", "cc")
EV = struct.Struct("=QQIHH" + "I" * 15 + "16s")
EVENTS_MAX = 65536


class TraceError(RuntimeError):
    pass


def hz() -> int:
    """The kernel's jiffies per second (CONFIG_HZ), which the RTO and the idle are counted in."""
    try:
        import gzip
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                if line.startswith("CONFIG_HZ="):
                    return int(line.split("=")[1])
    except OSError:
        pass
    return HZ_DEFAULT


def build(out_dir: Path) -> Path:
    """Compile the tracer against this kernel (bpf/build/vmlinux.h, made by `make -C bpf`)."""
    vmlinux = REPO / "bpf" / "build" / "vmlinux.h"
    if not vmlinux.exists():
        raise TraceError(f"{vmlinux} is missing: run `make -C bpf` first")
    obj = out_dir / "cwnd_trace.bpf.o"
    arch = os.uname().machine.replace("x86_64", "x86").replace("aarch64", "arm64")
    res = subprocess.run(["clang", "-O2", "-g", "-target", "bpf", f"-D__TARGET_ARCH_{arch}", "-Wall", "-Werror",
                          f"-I{vmlinux.parent}", f"-I{REPO / 'bpf'}", "-c", str(SOURCE), "-o", str(obj)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise TraceError(f"compiling {SOURCE.name}: {res.stderr.strip()}")
    return obj


class Tracer:
    """The tracer loaded and attached (libbpf through ctypes) for local port `port`; `close()` detaches
    and frees everything."""

    def __init__(self, port: int, work: Path | None = None):
        if not 0 < port < 65536:
            raise TraceError(f"port {port}: must be 1-65535")
        if os.geteuid() != 0:
            raise TraceError("tracing needs root (BPF tracing programs)")
        self._tmp = Path(tempfile.mkdtemp(prefix="cwnd-trace-")) if work is None else None
        obj = build(work or self._tmp)
        self.lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
        lib = self.lib
        lib.bpf_object__open_file.restype = ctypes.c_void_p
        lib.bpf_object__open_file.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        lib.bpf_object__load.argtypes = [ctypes.c_void_p]
        lib.bpf_object__next_program.restype = ctypes.c_void_p
        lib.bpf_object__next_program.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.bpf_program__attach.restype = ctypes.c_void_p
        lib.bpf_program__attach.argtypes = [ctypes.c_void_p]
        lib.bpf_program__name.restype = ctypes.c_char_p
        lib.bpf_program__name.argtypes = [ctypes.c_void_p]
        lib.bpf_link__destroy.argtypes = [ctypes.c_void_p]
        lib.bpf_object__close.argtypes = [ctypes.c_void_p]
        lib.bpf_object__find_map_fd_by_name.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.bpf_map_update_elem.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]
        lib.bpf_map_lookup_elem.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        lib.libbpf_get_error.restype = ctypes.c_long
        lib.libbpf_get_error.argtypes = [ctypes.c_void_p]
        self.links: list[int] = []
        self.obj = lib.bpf_object__open_file(str(obj).encode(), None)
        if not self.obj or lib.libbpf_get_error(self.obj):
            self.obj = None
            raise TraceError(f"opening {obj}: {os.strerror(ctypes.get_errno())}")
        try:
            if lib.bpf_object__load(self.obj) != 0:
                raise TraceError(f"loading {obj.name}: {os.strerror(ctypes.get_errno())} (the verifier's log is"
                                 " on stderr)")
            self.fds = {name: lib.bpf_object__find_map_fd_by_name(self.obj, name.encode())
                        for name in ("cfg", "cnt", "events")}
            prog = lib.bpf_object__next_program(self.obj, None)
            while prog:
                link = lib.bpf_program__attach(prog)
                if not link or lib.libbpf_get_error(link):
                    raise TraceError(f"attaching {lib.bpf_program__name(prog).decode()}:"
                                     f" {os.strerror(ctypes.get_errno())}")
                self.links.append(link)
                prog = lib.bpf_object__next_program(self.obj, prog)
            self._set(self.fds["cfg"], 0, struct.pack("=I", port))
        except BaseException:
            self.close()
            raise

    def _set(self, fd: int, key: int, value: bytes) -> None:
        k, v = ctypes.c_uint32(key), ctypes.create_string_buffer(value, len(value))
        if self.lib.bpf_map_update_elem(fd, ctypes.byref(k), v, 0) != 0:
            raise TraceError(f"writing the tracer's map: {os.strerror(ctypes.get_errno())}")

    def _get(self, fd: int, key: int, size: int) -> bytes:
        k, v = ctypes.c_uint32(key), ctypes.create_string_buffer(size)
        if self.lib.bpf_map_lookup_elem(fd, ctypes.byref(k), v) != 0:
            raise TraceError(f"reading the tracer's map: {os.strerror(ctypes.get_errno())}")
        return v.raw

    def count(self) -> int:
        """Events written so far (those past EVENTS_MAX counted, not kept)."""
        return struct.unpack("=Q", self._get(self.fds["cnt"], 0, 8))[0]

    def events(self) -> list[dict]:
        n = min(self.count(), EVENTS_MAX)
        out = []
        for i in range(n):
            rec = dict(zip(FIELDS, EV.unpack(self._get(self.fds["events"], i, EV.size))))
            if not rec["kind"]:
                continue  # reserved by the counter, not written yet
            rec["cc"] = rec["cc"].split(b"\0", 1)[0].decode()
            rec["kind"] = KINDS.get(rec["kind"], str(rec["kind"]))
            out.append(rec)
        return out

    def close(self) -> None:
        for link in self.links:
            self.lib.bpf_link__destroy(link)
        self.links = []
        if self.obj:
            self.lib.bpf_object__close(self.obj)
            self.obj = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Tracer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- per burst -------------------------------------------------------------------------------------

DATA_MIN_LEN = 80  # an XMIT longer than this carries data (a pure ACK is 66 bytes with timestamps)


@dataclass
class Burst:
    """One response on a connection, from its request's arrival to the next request's."""
    n: int                  # the request's number on the connection, from 0 (the warm-up, if any, is 0)
    t: float                # the request's arrival, seconds (CLOCK_MONOTONIC)
    idle_s: float           # the sender's idle when the request came: since its last data segment
    rto_s: float            # its RTO then
    stamp_age_s: float      # since cwnd was last fully used (snd_cwnd_stamp)
    cwnd_before: int        # cwnd when the request came (after the previous burst's ACKs)
    cwnd_used: int          # snd_cwnd_used then
    cwnd_start: int | None = None  # cwnd when the burst's first segment left
    start_change: str = ""  # what set cwnd_start: "", "restart" or "decay" (see shrink_at_start)
    first_flight: int = 0   # segments sent before the first ACK of the burst came back
    segments: int = 0       # data segments sent (retransmissions included)
    decays: list[dict] = field(default_factory=list)  # later drops of cwnd in Open state: {t_s, before, after, used}
    losses: int = 0         # events in a loss state (ca_state other than Open/Disorder)
    cell: str | None = None  # the burst's cell tag, when joined to the run's samples


def restart_value(cwnd: int, idle_j: int, rto_j: int, iw: int) -> int:
    """tcp_cwnd_restart (net/ipv4/tcp_output.c): halve cwnd once per RTO the idle exceeds, never
    below min(IW, cwnd)."""
    floor = min(iw, cwnd)
    delta = idle_j
    while True:
        delta -= rto_j
        if delta <= 0 or cwnd <= floor:
            break
        cwnd >>= 1
    return max(cwnd, floor)


def decay_value(cwnd: int, used: int, iw: int) -> int:
    """tcp_cwnd_application_limited: cwnd = (cwnd + max(snd_cwnd_used, IW)) / 2 when that is lower."""
    used = max(used, iw)
    return (cwnd + used) >> 1 if used < cwnd else cwnd


def shrink_at_start(b: Burst, idle_j: int, rto_j: int, stamp_j: int, iw: int) -> str:
    """Which of the kernel's two shrinks explains cwnd_start < cwnd_before: the restart after idle
    (the idle exceeded the RTO, tcp_slow_start_after_idle_check) or the application-limited decay
    (cwnd unused for an RTO, tcp_cwnd_validate); "?" when the value matches neither."""
    if b.cwnd_start is None or b.cwnd_start >= b.cwnd_before:
        return ""
    if idle_j > rto_j and b.cwnd_start == restart_value(b.cwnd_before, idle_j, rto_j, iw):
        return "restart"
    if stamp_j >= rto_j and b.cwnd_start == decay_value(b.cwnd_before, b.cwnd_used, iw):
        return "decay"
    return "?"


def bursts(events: list[dict], hz_: int | None = None, iw: int = 3) -> dict[tuple, list[Burst]]:
    """Per connection, (netns, client port, congestion control) -> its bursts in order. A request
    is a received segment with payload; RCV events carry the state before the kernel processed
    the segment, so a request's event has cwnd as the idle left it."""
    hz_ = hz_ or hz()
    conns: dict[tuple, list[dict]] = {}
    for e in sorted(events, key=lambda e: e["t_ns"]):
        conns.setdefault((e["netns"], e["dport"]), []).append(e)
    out: dict[tuple, list[Burst]] = {}
    for (netns, dport), evs in conns.items():
        found: list[Burst] = []
        raw: list[tuple[int, int, int]] = []  # (idle_j, rto_j, stamp_j) of each request
        acked = False  # an ACK of the current burst has come back
        prev: dict | None = None
        for e in evs:
            if e["kind"] == "rcv" and e["len"] > 0:
                found.append(Burst(n=len(found), t=e["t_ns"] / 1e9, idle_s=e["lsnd_age_j"] / hz_,
                                   rto_s=e["rto_j"] / hz_, stamp_age_s=e["stamp_age_j"] / hz_,
                                   cwnd_before=e["cwnd"], cwnd_used=e["cwnd_used"]))
                raw.append((e["lsnd_age_j"], e["rto_j"], e["stamp_age_j"]))
                acked, prev = False, e
                continue
            if not found:
                continue
            b = found[-1]
            if e["ca_state"] > 1:
                b.losses += 1
            if e["kind"] == "xmit" and e["len"] > DATA_MIN_LEN:
                b.segments += 1
                if b.cwnd_start is None:
                    b.cwnd_start = e["cwnd"]
                elif e["cwnd"] < prev["cwnd"] and e["ca_state"] <= 1:
                    b.decays.append({"t_s": round(e["t_ns"] / 1e9 - b.t, 4), "before": prev["cwnd"], "after": e["cwnd"],
                                     "used": prev["cwnd_used"]})
                if not acked:
                    b.first_flight += 1
            elif e["kind"] == "rcv":
                if b.cwnd_start is not None:
                    acked = True
                if e["cwnd"] < prev["cwnd"] and e["ca_state"] <= 1 and b.cwnd_start is not None:
                    b.decays.append({"t_s": round(e["t_ns"] / 1e9 - b.t, 4), "before": prev["cwnd"], "after": e["cwnd"],
                                     "used": prev["cwnd_used"]})
            prev = e
        for b, (idle_j, rto_j, stamp_j) in zip(found, raw):
            b.start_change = shrink_at_start(b, idle_j, rto_j, stamp_j, iw)
        ccs = "/".join(sorted({e["cc"] for e in evs}))
        out[(netns, dport, ccs)] = found
    return out


def label_cells(per: dict[tuple, list[Burst]], db: Path, run_id: str) -> None:
    """Each burst's cell from the run's samples: a point's connection is the one whose congestion
    control its assignment names; request 0 is the warm-up when the run had one, then the
    burst_time samples in time order."""
    from catnip.results.store import Store
    with Store(db) as store:
        for p in store.points(run_id):
            servers = json.loads(p["assignment"]).get("tcp.groups.servers", {})
            cc = servers.get("congestion_control") if isinstance(servers, dict) else None
            tags = [r["tag"] for r in sorted(store.samples(run_id, p["point"], metric="burst_time"), key=lambda r: r["t"])]
            warm = bool(store.samples(run_id, p["point"], metric="warmup_time"))
            for (_, _, ccs), bs in per.items():
                if ccs == cc:
                    for b in bs:
                        k = b.n - (1 if warm else 0)
                        b.cell = "warm-up" if k < 0 else (tags[k] if k < len(tags) else None)


def cell_summary(per: dict[tuple, list[Burst]]) -> list[dict]:
    """Per (congestion control, cell): the ranges of each burst's readings, first burst of a cell
    left out (it follows another cell's burst)."""
    rows = []
    for (_, _, cc), bs in per.items():
        cells: dict[str, list[Burst]] = {}
        for b in bs:
            if b.cell and b.cell != "warm-up":
                cells.setdefault(b.cell, []).append(b)
        for cell, group in cells.items():
            steady = group[1:] or group

            def rng(vals):
                vals = [v for v in vals if v is not None]
                return [min(vals), max(vals)] if vals else None
            rows.append({"cc": cc, "cell": cell, "bursts": len(group),
                         "idle_s": rng([round(b.idle_s, 3) for b in steady]),
                         "rto_s": rng([round(b.rto_s, 3) for b in steady]),
                         "cwnd_before": rng([b.cwnd_before for b in steady]),
                         "cwnd_start": rng([b.cwnd_start for b in steady]),
                         "first_flight": rng([b.first_flight for b in steady]),
                         "segments": rng([b.segments for b in steady]),
                         "start_change": sorted({b.start_change or "none" for b in steady}),
                         "decays": sum(len(b.decays) for b in steady),
                         "losses": sum(b.losses for b in steady)})
    return rows


@click.group()
def main() -> None:
    """Trace the kernel's cwnd of one port's connections."""


@main.command(context_settings={"ignore_unknown_options": True})
@click.option("--port", type=click.IntRange(1, 65535), required=True, help="local port of the traced connections")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def record(port: int, out_dir: Path, command: tuple[str, ...]) -> None:
    """Trace while COMMAND runs; write OUT/events.jsonl."""
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        tracer = Tracer(port)
    except TraceError as exc:
        raise click.ClickException(str(exc)) from None
    with tracer:
        proc = subprocess.Popen(list(command))
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            rc = proc.wait()
        evs = tracer.events()
        total = tracer.count()
    with open(out_dir / "events.jsonl", "w") as f:
        for e in evs:
            f.write(json.dumps(e) + "\n")
    (out_dir / "meta.json").write_text(json.dumps({"port": port, "command": list(command), "rc": rc, "hz": hz(),
                                                   "events": len(evs), "events_counted": total}, indent=1))
    click.echo(f"{len(evs)} events ({total} counted) -> {out_dir / 'events.jsonl'}; command exit {rc}")
    if total > EVENTS_MAX:
        click.echo(f"warning: {total - EVENTS_MAX} events past the first {EVENTS_MAX} were not kept", err=True)
    sys.exit(rc)


@main.command(name="bursts")
@click.argument("trace_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--iw", type=int, default=3, show_default=True, help="the senders' initial window (restart floor)")
@click.option("--db", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="the run's database, to name each burst's cell")
@click.option("--run", "run_id", default=None, help="the run traced (with --db)")
@click.option("--cells", is_flag=True, help="one line per sender and cell (needs --db and --run)")
@click.option("--json", "as_json", is_flag=True)
def bursts_cmd(trace_dir: Path, iw: int, db: Path | None, run_id: str | None, cells: bool, as_json: bool) -> None:
    """Per connection and burst: the idle and RTO the sender saw, cwnd before the idle and at the
    burst's first segment, which shrink set it, the first flight and the segments."""
    meta = json.loads((trace_dir / "meta.json").read_text()) if (trace_dir / "meta.json").exists() else {}
    evs = [json.loads(line) for line in (trace_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    per = bursts(evs, meta.get("hz"), iw)
    if (db is None) != (run_id is None):
        raise click.UsageError("--db and --run go together")
    if db is not None:
        label_cells(per, db, run_id)
    if cells:
        if db is None:
            raise click.UsageError("--cells needs --db and --run")
        rows = cell_summary(per)
        if as_json:
            click.echo(json.dumps(rows, indent=1))
            return
        fmt = lambda r: "-" if r is None else (f"{r[0]:g}" if r[0] == r[1] else f"{r[0]:g}-{r[1]:g}")  # noqa: E731
        click.echo(f"{'sender':<14} {'cell':<14} {'n':>2} {'idle s':>11} {'RTO s':>11} {'cwnd before':>11}"
                   f" {'start':>7} {'shrink':<14} {'1st flight':>10} {'segs':>5} {'decays':>6} {'loss':>4}")
        for r in rows:
            click.echo(f"{r['cc']:<14} {r['cell']:<14} {r['bursts']:>2} {fmt(r['idle_s']):>11} {fmt(r['rto_s']):>11}"
                       f" {fmt(r['cwnd_before']):>11} {fmt(r['cwnd_start']):>7} {','.join(r['start_change']):<14}"
                       f" {fmt(r['first_flight']):>10} {fmt(r['segments']):>5} {r['decays']:>6} {r['losses']:>4}")
        return
    if as_json:
        click.echo(json.dumps({f"{k[0]}:{k[1]}:{k[2]}": [asdict(b) for b in v] for k, v in per.items()}, indent=1))
        return
    for (netns, dport, cc), bs in per.items():
        click.echo(f"== netns {netns} client port {dport} ({cc}): {len(bs)} requests")
        click.echo(f"{'n':>3} {'cell':<14} {'idle s':>7} {'RTO s':>6} {'before':>6} {'start':>5} {'shrink':<8}"
                   f" {'flight1':>7} {'segs':>4}  decays")
        for b in bs:
            d = ", ".join(f"{x['before']}->{x['after']}" for x in b.decays) or "-"
            click.echo(f"{b.n:>3} {b.cell or '-':<14} {b.idle_s:>7.3f} {b.rto_s:>6.3f} {b.cwnd_before:>6}"
                       f" {b.cwnd_start if b.cwnd_start is not None else '-':>5} {b.start_change or '-':<8}"
                       f" {b.first_flight:>7} {b.segments:>4}  {d}")


@main.command(name="figure")
@click.argument("trace_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--db", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--run", "run_id", required=True)
@click.option("--cell", "cells", multiple=True, required=True, help="a cell tag, e.g. 40960B/0.25s (repeatable)")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help=".svg, .pdf or .png")
def figure_cmd(trace_dir: Path, db: Path, run_id: str, cells: tuple[str, ...], out: Path) -> None:
    """cwnd of each sender against time over the given cells, run one after another (results/figures.py
    draws it)."""
    from catnip.results.figures import Series, latency_chart, save
    meta = json.loads((trace_dir / "meta.json").read_text()) if (trace_dir / "meta.json").exists() else {}
    evs = [json.loads(line) for line in (trace_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    per = bursts(evs, meta.get("hz"))
    label_cells(per, db, run_id)
    series = []
    for (netns, dport, cc), bs in per.items():
        chosen = [b for b in bs if b.cell in cells]
        if not chosen:
            continue
        later = [b.t for b in bs if b.t > chosen[-1].t]
        t0, t1 = chosen[0].t, (later[0] if later else float("inf"))
        pts, prev_t = [], None
        for e in evs:
            t = e["t_ns"] / 1e9
            if (e["netns"], e["dport"]) != (netns, dport) or not t0 <= t < t1:
                continue
            # A received segment's event has cwnd before the kernel processed it: the value since the
            # previous event. A sent segment's has the value it left with.
            x = prev_t if e["kind"] == "rcv" and prev_t is not None else t
            pts.append((round(x - t0, 4), e["cwnd"]))
            prev_t = t
        series.append(Series(f"{cc} cwnd", pts))
    if not series:
        raise click.ClickException(f"no burst of cells {', '.join(cells)} in the trace")
    fig = latency_chart(f"cwnd per segment, {', '.join(cells)}", series, xtitle="s since the cell's first request",
                        ytitle="cwnd (segments)")
    for trace in fig["data"]:
        trace["line"]["shape"] = "hv"  # cwnd holds its value until the next segment
    click.echo(save(fig, out))


if __name__ == "__main__":
    main()
