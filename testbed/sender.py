"""The project's congestion controls as BPF struct_ops (spec/senders.py): register them for a run,
unregister after (also after a failure; `catnip clean` removes leftovers); their per-host
parameters; newCWV's trace.

Two objects: bpf/catnip_cc.bpf.o (CATNIP's sender heuristics and Reno variants) and
bpf/newcwv.bpf.o (RFC 7661 newCWV on Reno, docs/newcwv-sender.md). Congestion controls are global
to the kernel (every namespace sees them), so a run registers all of them, uses the ones its
scenario names, and unregisters them at the end.

Per-host parameters live in a kernel-wide hash map pinned by name (/sys/fs/bpf/catnip_sndparams,
layout in bpf/sender_params.h), keyed by the cookie of the sending host's network namespace
(testbed/netns.py), so points side by side, which reuse addresses, keep their own: internal pacing
(catnip_reno and catnip_newcwv), and newCWV's non-validated period, filter bins and trace. A host
without an entry gets the defaults; a connection reads its host's entry when it starts (.init).

newCWV's trace is a ring in an mmap-able array map (/sys/fs/bpf/catnip_cwvtrace), written only for
hosts whose parameters say trace=True, each entry naming its namespace; read_trace() reads it
without consuming it, from the head a point saw when it started (trace_head()) or from the last
clear_trace(), which forgets what is there for every reader.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import socket
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

from catnip.spec.senders import CATNIP, NAMES, NEWCWV, PACING_LAST_WINDOW
from catnip.testbed import paths

BPF_DIR = paths.REPO / "bpf"
OBJECT = BPF_DIR / "build" / "catnip_cc.bpf.o"
NEWCWV_OBJECT = BPF_DIR / "build" / "newcwv.bpf.o"
# Each object and the congestion controls it registers.
OBJECTS = {OBJECT: CATNIP, NEWCWV_OBJECT: (NEWCWV,)}
SHARED_MAP_PIN = Path("/sys/fs/bpf/catnip_docs")  # the document map, shared with the SPM object
PARAMS_PIN = Path("/sys/fs/bpf/catnip_sndparams")
TRACE_PIN = Path("/sys/fs/bpf/catnip_cwvtrace")
PINS = (SHARED_MAP_PIN, PARAMS_PIN, TRACE_PIN)
# Which of them pace the last window: they need TCP's pacing ratios at 100% in the sender's namespace.
PACING = PACING_LAST_WINDOW

# bpf/sender_params.h
MAX_BINS = 16
PARAMS_MAX_HOSTS = 4096
TRACE_SLOTS = 16384
_UNDEF = 0xFFFFFFFF
_PARAMS = struct.Struct("=IIIII")  # struct sender_params: pace, nvp_ms, bins, trace, nofilter
_TRACE_HEADER = struct.Struct("=QQ")  # struct cwv_trace: head, base (then 48 bytes of padding)
_TRACE_HEADER_SIZE = 64
_TRACE_ENTRY = struct.Struct("=QQQIIHHBBBB12I")  # struct cwv_trace_entry, 88 bytes
_TRACE_VALUE_SIZE = _TRACE_HEADER_SIZE + TRACE_SLOTS * _TRACE_ENTRY.size
# (key size, value size) of each pinned map: a pin of another layout is an older version's
_PARAMS_LAYOUT = (8, _PARAMS.size)        # key: the network namespace cookie
_TRACE_LAYOUT = (4, _TRACE_VALUE_SIZE)    # key: 0, the one array value
EVENTS = {1: "init", 2: "sample", 3: "closedown", 4: "recovery", 5: "recovery_end", 6: "tx_start", 7: "rto"}


class SenderError(RuntimeError):
    pass


# --- registration ---------------------------------------------------------------------------

def _struct_ops() -> list[tuple[int, str]]:
    """(id, name) of every struct_ops map of ours the kernel holds: the registered ones, and those
    unregistered but still used by sockets (several can share a name)."""
    try:
        out = subprocess.run(["bpftool", "struct_ops", "show"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in NAMES and parts[0].rstrip(":").isdigit():
            found.append((int(parts[0].rstrip(":")), parts[1]))
    return found


def _available() -> set[str] | None:
    try:
        return set(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split())
    except OSError:
        return None


def registered() -> list[str]:
    """Ours that sockets can still select."""
    available = _available()
    names = dict.fromkeys(n for _, n in _struct_ops())
    return [n for n in names if available is None or n in available]


def being_freed() -> list[str]:
    """Ours already unregistered whose struct_ops map the kernel keeps until the last socket using
    it closes (orphaned sockets of a cancelled run can take minutes); unregister answers EINPROGRESS."""
    available = _available()
    if available is None:
        return []
    maps = [n for _, n in _struct_ops()]
    return [n for n in dict.fromkeys(maps) if maps.count(n) > (1 if n in available else 0)]


def _stale() -> bool:
    if not all(o.exists() for o in OBJECTS):
        return True
    built = min(o.stat().st_mtime for o in OBJECTS)
    return any(src.stat().st_mtime > built for src in [*BPF_DIR.glob("*.c"), *BPF_DIR.glob("*.h")])


def build() -> None:
    """Build the objects when one is missing or older than the sources; a machine without a
    compiler can still use objects built before."""
    if not _stale():
        return
    res = subprocess.run(["make", "-s", "-C", str(BPF_DIR)], capture_output=True, text=True)
    missing = [o.name for o in OBJECTS if not o.exists()]
    if missing:
        raise SenderError(f"building {', '.join(missing)} failed: {(res.stderr or res.stdout).strip()}")


def register() -> None:
    """Register every project congestion control (both objects); all or none."""
    from catnip.testbed.kernel_fs import ensure_bpffs
    ensure_bpffs()  # the objects pin their shared maps there; a fresh machine may not have it mounted
    build()
    unregister()  # a killed run may have left them; names must be unique
    # Maps pinned by a killed run of an older layout: libbpf would refuse to reuse them. None of
    # ours is registered now, so nothing uses them.
    for pin, layout in ((PARAMS_PIN, _PARAMS_LAYOUT), (TRACE_PIN, _TRACE_LAYOUT)):
        if _pinned_sizes(pin) not in (None, layout):
            pin.unlink(missing_ok=True)
    errors = []
    for obj in OBJECTS:
        res = subprocess.run(["bpftool", "struct_ops", "register", str(obj)], capture_output=True, text=True,
                             timeout=30)
        if res.returncode != 0:
            errors.append(f"{obj.name}: {(res.stderr or res.stdout).strip()}")
    missing = set(NAMES) - set(registered())
    if errors or missing:
        unregister()
        raise SenderError(f"registering the project congestion controls failed ({', '.join(sorted(missing))}): "
                          + "; ".join(errors))


def unregister() -> list[str]:
    """Unregister every one still there; returns the names removed. By map id: a name can also
    belong to maps unregistered before and kept for their sockets (those answer EINPROGRESS)."""
    gone = []
    for map_id, name in _struct_ops():
        if subprocess.run(["bpftool", "struct_ops", "unregister", "id", str(map_id)], capture_output=True,
                          timeout=10).returncode == 0:
            gone.append(name)
    return gone


def release_shared_map() -> None:
    """Unpin the maps shared by name (documents, per-host parameters, newCWV's trace) once neither
    the marker nor the controls use them."""
    for pin in PINS:
        pin.unlink(missing_ok=True)


# --- the bpf(2) calls the parameters and the trace need -----------------------------------

_NR_BPF = {"x86_64": 321, "aarch64": 280, "riscv64": 280, "ppc64le": 361, "s390x": 351}.get(platform.machine())
_BPF_MAP_CREATE, _BPF_MAP_UPDATE_ELEM, _BPF_MAP_DELETE_ELEM, _BPF_OBJ_PIN, _BPF_OBJ_GET = 0, 2, 3, 6, 7
_BPF_OBJ_GET_INFO_BY_FD = 15
_BPF_MAP_TYPE_HASH = 1
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _bpf(cmd: int, attr: bytes) -> int:
    if _NR_BPF is None:
        raise SenderError(f"no bpf(2) syscall number known for {platform.machine()}")
    buf = ctypes.create_string_buffer(attr, 128)
    ret = _libc.syscall(ctypes.c_long(_NR_BPF), ctypes.c_int(cmd), buf, ctypes.c_uint(len(buf)))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def _obj_get(pin: Path) -> int:
    path = ctypes.create_string_buffer(str(pin).encode())
    return _bpf(_BPF_OBJ_GET, struct.pack("=QII", ctypes.addressof(path), 0, 0))


def _map_sizes(fd: int) -> tuple[int, int]:
    """(key size, value size) of a map (struct bpf_map_info: type, id, key_size, value_size, ...)."""
    info = ctypes.create_string_buffer(64)
    _bpf(_BPF_OBJ_GET_INFO_BY_FD, struct.pack("=IIQ", fd, len(info), ctypes.addressof(info)))
    return struct.unpack_from("=II", info.raw, 8)


def _pinned_sizes(pin: Path) -> tuple[int, int] | None:
    try:
        fd = _obj_get(pin)
    except FileNotFoundError:
        return None
    try:
        return _map_sizes(fd)
    finally:
        os.close(fd)


def _checked(fd: int, pin: Path, layout: tuple[int, int]) -> int:
    """fd, if its map has this layout; else a clear error (a map pinned by an older version)."""
    sizes = _map_sizes(fd)
    if sizes != layout:
        os.close(fd)
        raise SenderError(f"{pin} has {sizes[0]}-byte keys and {sizes[1]}-byte values, not {layout[0]} and"
                          f" {layout[1]}:"
                          " pinned by an older version of the testbed; `catnip clean` removes it when no run is going")
    return fd


def _params_fd() -> int:
    """The parameter map, created and pinned here when no object has loaded it yet (the objects
    then reuse it: libbpf reuses a pinned map of the same type and sizes)."""
    try:
        return _checked(_obj_get(PARAMS_PIN), PARAMS_PIN, _PARAMS_LAYOUT)
    except FileNotFoundError:
        pass
    name = b"catnip_sndparam"  # the kernel keeps 15 characters of a map's name
    attr = struct.pack("=7I16s", _BPF_MAP_TYPE_HASH, *_PARAMS_LAYOUT, PARAMS_MAX_HOSTS, 0, 0, 0, name)
    fd = _bpf(_BPF_MAP_CREATE, attr)
    path = ctypes.create_string_buffer(str(PARAMS_PIN).encode())
    try:
        _bpf(_BPF_OBJ_PIN, struct.pack("=QII", ctypes.addressof(path), fd, 0))
    except FileExistsError:  # pinned meanwhile by a register()
        os.close(fd)
        return _checked(_obj_get(PARAMS_PIN), PARAMS_PIN, _PARAMS_LAYOUT)
    return fd


# --- per-host parameters -------------------------------------------------------------------

@dataclass(frozen=True)
class HostParams:
    """What a sending host's connections of catnip_reno / catnip_newcwv read when they start.

    pace: TCP's internal pacing (sk_pacing_status = SK_PACING_NEEDED) at the namespace's
    tcp_pacing_ss/ca_ratio; nvp_s: newCWV's non-validated period (RFC 7661 section 5: 300 s);
    bins: newCWV's pipeACK max-filter bins over max(3 SRTT, 1 s); trace: newCWV writes its trace;
    filter: "max" (RFC 7661 section 4.2) or "none" (pipeACK is the latest round's sample: the
    paper's Fig. 5a, what its filter is compared with)."""

    pace: bool = False
    nvp_s: float = 300.0
    bins: int = 4
    trace: bool = False
    filter: str = "max"

    def __post_init__(self):
        if not 0.001 <= self.nvp_s <= 0xFFFFFFFF / 1000:
            raise ValueError(f"nvp_s must be between 1 ms and {0xFFFFFFFF // 1000} s, not {self.nvp_s}")
        if not 1 <= int(self.bins) <= MAX_BINS or int(self.bins) != self.bins:
            raise ValueError(f"bins must be an integer from 1 to {MAX_BINS}, not {self.bins}")
        if self.filter not in ("max", "none"):
            raise ValueError(f"filter must be 'max' or 'none', not {self.filter!r}")

    def packed(self) -> bytes:
        return _PARAMS.pack(int(bool(self.pace)), round(self.nvp_s * 1000), int(self.bins), int(bool(self.trace)),
                            int(self.filter == "none"))


def _key(netns: int) -> ctypes.Array:
    if not 0 < netns < 2**64:
        raise ValueError(f"a network namespace cookie is a positive 64-bit integer, not {netns}")
    return ctypes.create_string_buffer(struct.pack("=Q", netns), 8)


def set_host_params(netns: int, params: HostParams) -> None:
    """Set the parameters of the host whose network namespace has this cookie (testbed/netns.py),
    for its connections started after this."""
    key, value = _key(netns), ctypes.create_string_buffer(params.packed(), _PARAMS.size)
    fd = _params_fd()
    try:
        _bpf(_BPF_MAP_UPDATE_ELEM, struct.pack("=IIQQQ", fd, 0, ctypes.addressof(key), ctypes.addressof(value), 0))
    except OSError as exc:
        raise SenderError(f"setting the sender parameters of network namespace {netns}: {exc}") from None
    finally:
        os.close(fd)


def clear_host_params(netns: int) -> None:
    """Back to the defaults for this host; nothing to do when it has no entry or there is no map."""
    try:
        fd = _obj_get(PARAMS_PIN)
    except FileNotFoundError:
        return
    key = _key(netns)
    try:
        _bpf(_BPF_MAP_DELETE_ELEM, struct.pack("=IIQ", fd, 0, ctypes.addressof(key)))
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


# --- newCWV's trace -------------------------------------------------------------------------

def _trace_map(writable: bool) -> mmap.mmap | None:
    try:
        fd = _obj_get(TRACE_PIN)  # a read-only map fd cannot be mapped at all (EINVAL)
    except FileNotFoundError:
        return None
    fd = _checked(fd, TRACE_PIN, _TRACE_LAYOUT)
    try:
        length = _TRACE_HEADER_SIZE if writable else _TRACE_VALUE_SIZE
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        return mmap.mmap(fd, length, flags=mmap.MAP_SHARED, prot=prot)
    finally:
        os.close(fd)


def _undef(v: int) -> int | None:
    return None if v == _UNDEF else v


def trace_head() -> int:
    """How many entries the trace has had written so far (0 without a trace map): a point reads
    from here (read_trace(since=...)), so it never clears what a point beside it has written."""
    m = _trace_map(writable=False)
    if m is None:
        return 0
    with m:
        return _TRACE_HEADER.unpack_from(m, 0)[0]


def trace_lost(since: int) -> int:
    """How many entries written from entry `since` on the ring no longer holds (overwritten by a
    newer lap, or forgotten by clear_trace): what read_trace(since=...) could not return."""
    m = _trace_map(writable=False)
    if m is None:
        return 0
    with m:
        head, base = _TRACE_HEADER.unpack_from(m, 0)
    return max(0, max(base, head - TRACE_SLOTS) - since)


def read_trace(netns: set[int] | None = None, since: int = 0) -> list[dict]:
    """The trace entries written since the last clear_trace and from entry `since` on (at most
    TRACE_SLOTS, the newest), in the order they were written, of the senders in the network
    namespaces with these cookies (all when None).

    Each: t (s, CLOCK_MONOTONIC, as time.monotonic()), netns, ip/sport (the sender's end), peer/dport,
    event (init, sample, closedown, recovery, recovery_end, tx_start, rto), cwnd, ssthresh and
    inflight (segments), pipeack and sample (bytes, None when undefined / not a sample), validated;
    and t_ns, prior_cwnd (cwnd before the event changed it), iw, mss, psp_ms, srtt_us, lfs and r
    (the recovery's LossFlightSize and segments retransmitted since it began), loss_nvp."""
    m = _trace_map(writable=False)
    if m is None:
        return []
    out = []
    with m:
        head, base = _TRACE_HEADER.unpack_from(m, 0)
        for idx in range(max(base, since, head - TRACE_SLOTS, 0), head):
            off = _TRACE_HEADER_SIZE + (idx % TRACE_SLOTS) * _TRACE_ENTRY.size
            (seq, t_ns, ns, saddr, daddr, sport, dport, event, validated, loss_nvp, _pad, cwnd, ssthresh, pipeack,
             sample, inflight, lfs, retrans, mss, psp_ms, srtt_us, prior_cwnd, iw) = _TRACE_ENTRY.unpack_from(m, off)
            if seq != idx + 1:  # being written, or overwritten by a newer lap of the ring
                continue
            if netns is not None and ns not in netns:
                continue
            out.append({"t": t_ns / 1e9, "netns": ns, "ip": socket.inet_ntoa(struct.pack("=I", saddr)), "sport": sport, "dport": dport,
                        "event": EVENTS.get(event, str(event)), "cwnd": cwnd, "ssthresh": ssthresh,
                        "pipeack": _undef(pipeack), "sample": _undef(sample), "validated": bool(validated),
                        "inflight": inflight, "t_ns": t_ns, "peer": socket.inet_ntoa(struct.pack("=I", daddr)),
                        "prior_cwnd": prior_cwnd, "iw": iw, "mss": mss, "psp_ms": psp_ms, "srtt_us": srtt_us,
                        "lfs": lfs, "r": retrans, "loss_nvp": bool(loss_nvp)})
    return out


def clear_trace() -> None:
    """Forget the entries written so far (the ring's writers never wait for a reader)."""
    m = _trace_map(writable=True)
    if m is None:
        return
    with m:
        head, _ = _TRACE_HEADER.unpack_from(m, 0)
        struct.pack_into("=Q", m, 8, head)
