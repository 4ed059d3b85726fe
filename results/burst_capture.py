"""The segments of one burst against time, from a point's bottleneck capture: the newCWV paper's
Fig. 10 (Hossain and Fairhurst, section 4.5), where an unpaced burst is "an abrupt injection of
data" (a vertical line) and a paced one is spread "over a period of the order of an RTT".

The burst server sends exactly the bytes asked for, in order, on one connection, so the k-th
response of a connection occupies the sequence range [O_k, O_k + size_k), O_k being the sum of
the sizes before it (the warm-up burst first when there is one). The sizes and their order come
from the point's `warmup_time` and `burst_time` samples (tag "SIZEB/IDLEs"); the capture
(`run.capture`: headers of every packet of the bottleneck's data direction) gives each data
segment's time and sequence number. Only first transmissions are kept (a segment whose sequence
lies below the highest already seen is a retransmission).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import dpkt

from catnip.results.point_record import record_of
from catnip.results.store import Store
from catnip.spec.record import PointRecord, RecordError

MOD = 2**32
CaptureOf = Callable[[Any], "Path | None"]  # a point's row -> the capture file to read, None: not to be read


@dataclass
class Burst:
    """One response: its cell, and (seconds after its first segment, segment index) of each
    first transmission, in capture order."""
    index: int            # position among the connection's measured bursts, from 0
    size: int
    idle: float
    segments: list[tuple[float, int]] = field(default_factory=list)
    retransmitted: int = 0

    @property
    def spread(self) -> float | None:
        """Seconds from the first segment to the last: ~0 for an unpaced burst of one window."""
        return self.segments[-1][0] - self.segments[0][0] if self.segments else None


class CaptureError(ValueError):
    pass


def _cell(tag: str) -> tuple[int, float]:
    size, idle = tag.rsplit("/", 2)[-2:]
    return int(size.removesuffix("B")), float(idle.removesuffix("s"))


def plan_of(store: Store, run_id: str, point: int) -> tuple[int, list[tuple[int, float]], int]:
    """(warm-up bytes, [(size, idle) of each measured burst in order], server port) of the point's
    first burst connection, from its samples."""
    rows = store.samples(run_id, point, metric="burst_time")
    if not rows:
        raise CaptureError(f"run {run_id} point {point} has no burst samples")
    first_flow = min(rows, key=lambda r: r["t"])["flow"]
    bursts = sorted((r for r in rows if r["flow"] == first_flow), key=lambda r: r["t"])
    if any(r["error"] for r in bursts):
        # A failed burst closed the connection: offsets after it are not known.
        bursts = bursts[:next(i for i, r in enumerate(bursts) if r["error"])]
    apps = _record(store, run_id, point).apps("burst")
    app = apps[0].params if apps else {}
    warmed = any(r["flow"] == first_flow for r in store.samples(run_id, point, metric="warmup_time"))
    warmup = int(app.get("warmup") or 0) if warmed else 0
    return warmup, [_cell(r["tag"]) for r in bursts], int(app.get("port") or 8070)


def _record(store: Store, run_id: str, point: int) -> PointRecord:
    """What the point ran (spec/record.py)."""
    row = store.point(run_id, point)
    if row is None:
        raise CaptureError(f"run {run_id} has no point {point}")
    try:
        return record_of(store.run(run_id), row)
    except RecordError as exc:
        raise CaptureError(str(exc)) from None


def bursts_from_capture(pcap: Path, port: int, warmup: int, plan: list[tuple[int, float]],
                        mss: int = 1460) -> list[Burst]:
    """Split the data segments the server (source port `port`) sent on its first connection into
    the planned bursts."""
    offsets, at = [], warmup
    for size, _ in plan:
        offsets.append(at)
        at += size
    out = [Burst(i, size, idle) for i, (size, idle) in enumerate(plan)]
    isn = conn = None
    highest = 0
    first_t: dict[int, float] = {}
    try:
        fh = open(pcap, "rb")
    except OSError as exc:
        raise CaptureError(f"capture {pcap}: {exc.strerror}") from None
    with fh:
        for ts, buf in dpkt.pcap.Reader(fh):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if tcp.sport != port:
                continue
            key = (ip.src, ip.dst, tcp.dport)
            if tcp.flags & dpkt.tcp.TH_SYN:
                if conn is None:
                    conn, isn = key, tcp.seq
                continue
            if key != conn or isn is None:
                continue
            length = ip.len - ip.hl * 4 - tcp.off * 4  # the capture keeps only the headers
            if length <= 0:
                continue
            rel = (tcp.seq - isn - 1) % MOD
            k = _burst_of(offsets, plan, rel)
            if k is None:
                continue
            if rel < highest:
                out[k].retransmitted += 1
                continue
            highest = rel + length
            t0 = first_t.setdefault(k, ts)
            out[k].segments.append((ts - t0, (rel - offsets[k]) // mss))
    if conn is None:
        raise CaptureError(f"capture {pcap}: no connection from port {port} (its handshake is not in the capture)")
    return out


def _burst_of(offsets: list[int], plan: list[tuple[int, float]], rel: int) -> int | None:
    for k in range(len(offsets) - 1, -1, -1):
        if rel >= offsets[k]:
            return k if rel < offsets[k] + plan[k][0] else None
    return None


def point_bursts(store: Store, run_id: str, point: int, capture_of: CaptureOf | None = None) -> list[Burst]:
    """The bursts of a point whose run captured its bottleneck (run.capture: true). `capture_of`
    says which file to read for the point's row (the dashboard reads only inside the run's
    folder); by default the recorded path."""
    row = store.point(run_id, point)
    if row is None:
        raise CaptureError(f"run {run_id} has no point {point}")
    if not row["capture"]:
        raise CaptureError(f"run {run_id} point {point} has no capture (set run.capture: true)")
    pcap = Path(row["capture"]) if capture_of is None else capture_of(row)
    if pcap is None:
        raise CaptureError(f"the capture of run {run_id} point {point} is recorded outside the run's folder: not read")
    warmup, plan, port = plan_of(store, run_id, point)
    mss = int(_record(store, run_id, point).topology.get("mss") or 1460)
    return bursts_from_capture(pcap, port, warmup, plan, mss=mss)


def pick(bursts: list[Burst], size: int | None, idle: float | None, nth: int) -> Burst | None:
    """The nth (from 0) burst of the cell (size, idle); None matches any."""
    found = [b for b in bursts if (size is None or b.size == size) and (idle is None or b.idle == idle)]
    return found[nth] if nth < len(found) else None


def sender_label(store: Store, run_id: str, point: int) -> str:
    """The burst servers' sender as their namespaces ran it: congestion control, and pacing if any."""
    record = _record(store, run_id, point)
    apps = record.apps("burst")
    server = record.host(apps[0].servers[0]) if apps and apps[0].servers else None
    if server is None:
        return "?"
    cc, pacing, ratio = server.tcp["congestion_control"], server.tcp["pacing"], server.tcp["pacing_ratio"]
    return cc if pacing == "off" else f"{cc}, paced ({pacing}, {'the kernel default' if ratio is None else f'{ratio}%'})"


def figure_spec(store: Store, run_id: str, size: int | None, idle: float | None, nth: int,
                capture_of: CaptureOf | None = None) -> tuple[dict, list[tuple[int, str, Burst]]]:
    """Fig. 10 as a figure spec (results/figures.py): the chosen burst of every captured point of
    the run, one panel each, in the point's colour. Returns the spec and (point, sender, burst) of
    each panel. `catnip burst-seq` writes it to a file, the dashboard draws it (with `capture_of`:
    point_bursts)."""
    from catnip.results.figures import sequence_panels
    chosen = []
    for row in store.points(run_id):
        if not row["capture"]:
            continue
        found = (point_bursts(store, run_id, row["point"]) if capture_of is None
                 else point_bursts(store, run_id, row["point"], capture_of))
        burst = pick(found, size, idle, nth)
        if burst is None:
            raise CaptureError(f"run {run_id} point {row['point']} has no burst number {nth} of that cell")
        chosen.append((row["point"], sender_label(store, run_id, row["point"]), burst))
    if not chosen:
        raise CaptureError(f"run {run_id} has no captured point (set run.capture: true)")
    panels = [(f"{point}: {label}: {b.size // 1024} KB after {b.idle:g} s, spread {1000 * (b.spread or 0):.0f} ms",
               point, b.segments) for point, label, b in chosen]
    return sequence_panels(panels, panel_width=440), chosen


def figure(store: Store, run_id: str, size: int | None, idle: float | None, nth: int
           ) -> tuple[str, list[tuple[int, str, Burst]]]:
    """Fig. 10 as the text of an SVG file (figure_spec drawn by results/figures.py), and (point,
    sender, burst) of each panel."""
    from catnip.results.figures import ExportError, render
    spec, chosen = figure_spec(store, run_id, size, idle, nth)
    try:
        return render(spec, "svg").decode(), chosen
    except ExportError as exc:  # `catnip burst-seq` reports CaptureError in one line
        raise CaptureError(str(exc)) from None
