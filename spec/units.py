"""Parsing of the quantities scenarios are written in: rates, durations, buffer sizes.

Binary prefixes for bytes (1 KB = 1024 bytes, as router buffers were quoted in the CATNIP paper,
section V-G) and decimal prefixes for bit rates (1 Mbit/s = 10^6 bit/s, as link rates are).
"""

from __future__ import annotations

import math
import re
from typing import Any

from catnip.spec.bounded import short

_NUMBER = r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*"

_RATE_UNITS = {
    "bit": 1, "bps": 1, "b/s": 1,
    "kbit": 1e3, "kbps": 1e3, "kb/s": 1e3,
    "mbit": 1e6, "mbps": 1e6, "mb/s": 1e6,
    "gbit": 1e9, "gbps": 1e9, "gb/s": 1e9,
}
# Byte rates, told apart by the capital B ('MB/s' is megabytes; 'Mb/s' and 'mbit' are megabits).
_BYTE_RATE_UNITS = {"B/s": 8, "Bps": 8, "kB/s": 8e3, "KB/s": 8e3, "kBps": 8e3, "KBps": 8e3, "MB/s": 8e6, "MBps": 8e6,
                    "GB/s": 8e9, "GBps": 8e9}
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0}
_BYTE_UNITS = {"b": 1, "byte": 1, "bytes": 1, "kb": 1024, "kib": 1024, "mb": 1024**2, "mib": 1024**2}
_PACKET_UNITS = {"p", "pkt", "pkts", "packet", "packets"}

# Upper bounds of what a scenario may write, far above any use and far below where a number stops
# fitting the engine (u64 microseconds, bytes, packets; engine/src/config.rs, `catnip-engine
# limits`): a value beyond them is a typo or an attack, and is refused where it is read.
MAX_RATE = 10**12                  # bit/s: 1000 Gbit/s (links are held to 100 Gbit/s in spec/graph.py)
MAX_DURATION = 10**9               # seconds (about 31 years; time limits and intervals are tighter)
MAX_SIZE_BYTES = 2**40             # 1 TiB: a buffer, bucket, pool or application size
MAX_BUFFER_PACKETS = 10**9         # a buffer's packets
MIN_BUCKET_BYTES = 64              # the engine's smallest token bucket: one packet of 64 bytes (engine/src/edge/bucket.rs)

RATE_HELP = "a number with a unit: bit, kbit, Mbit, Gbit (or bps, kbps, Mbps, Gbps), e.g. '1.5Mbit'"
TIME_HELP = "a number with a unit: us, ms, s or min, e.g. '5ms'"
BUFFER_HELP = "a packet count like '10p' or '50 packets', or a size like '64KB' (1 KB = 1024 bytes)"


def _split(text: str) -> tuple[float, str] | None:
    m = re.fullmatch(_NUMBER + r"([A-Za-z/]*)\s*", text)
    if not m:
        return None
    number = float(m.group(1))
    if not math.isfinite(number):  # '1e999' reads as infinity, which no int() takes
        raise ValueError(f"{text!r}: {m.group(1)[:40]} is not a finite number")
    return number, m.group(2).lower()


INPUT = "catnip_input"


def from_input(info: Any) -> bool:
    """Whether a pydantic validator is reading what a user wrote (spec.scenario.validate passes
    the context INPUT), not a value the code builds from one already parsed (a bare number then)."""
    return bool(getattr(info, "context", None) and info.context.get(INPUT))


def parse_rate(value: object, bare: bool = True) -> int:
    """Bit rate in bit/s. A bare number is bit/s where `bare` allows it (values the code built);
    a user writes the unit: `rate: 1500` is refused as `buffer: 10` is."""
    if isinstance(value, bool):
        raise ValueError(f"{short(value)} is not a rate; use {RATE_HELP}")
    scale = 0.0
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"{short(value)} is not a finite rate")
        if not bare:
            raise ValueError(f"{short(value)} is a bare number; write the rate with its unit, e.g. '{value:g}bit'"
                             f" or '{value:g}kbit' (bit, kbit, Mbit, Gbit; B/s, KB/s, MB/s for bytes per second)")
        number, unit = float(value), "bit"
    else:
        m = re.fullmatch(_NUMBER + r"([A-Za-z/]*)\s*", str(value))
        raw_unit = m.group(2) if m else ""
        if m and raw_unit in _BYTE_RATE_UNITS:  # a capital B is bytes: 1 MB/s = 8 Mbit/s
            number, unit, scale = float(m.group(1)), raw_unit, _BYTE_RATE_UNITS[raw_unit]
        elif m and not math.isfinite(float(m.group(1))):
            raise ValueError(f"{short(value)} is not a finite rate")
        else:
            parts = _split(str(value))
            if parts is None or parts[1] not in _RATE_UNITS:
                raise ValueError(f"{short(value)} is not a rate; use {RATE_HELP}")
            number, unit = parts
    bps = number * (scale if scale else _RATE_UNITS[unit])
    if not math.isfinite(bps):
        raise ValueError(f"{short(value)} is not a finite rate")
    if bps <= 0:
        raise ValueError(f"{short(value)}: a rate must be above zero")
    if round(bps) < 1:
        # 0 bit/s would mean an unshaped link to the engine: never let a rate round to it.
        raise ValueError(f"{short(value)} rounds to 0 bit/s; the smallest rate is 1bit")
    if bps > MAX_RATE:
        raise ValueError(f"{short(value)}: above {format_rate(MAX_RATE)}, more than this testbed can emulate")
    return int(round(bps))


def parse_duration(value: object, bare: bool = True) -> float:
    """Duration in seconds. A bare number is seconds where `bare` allows it; a link's delay is
    written with its unit (`delay: 5` is refused: 5 s or 5 ms?)."""
    if isinstance(value, bool):
        raise ValueError(f"{short(value)} is not a duration; use {TIME_HELP}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"{short(value)} is not a finite duration")
        if not bare:
            raise ValueError(f"{short(value)} is a bare number; write the delay with its unit, e.g. '{value:g}s' or"
                             f" '{value:g}ms'")
        seconds = float(value)
    else:
        parts = _split(str(value))
        if parts is None or parts[1] not in _TIME_UNITS:
            raise ValueError(f"{short(value)} is not a duration; use {TIME_HELP}")
        seconds = parts[0] * _TIME_UNITS[parts[1]]
    if not math.isfinite(seconds):
        raise ValueError(f"{short(value)} is not a finite duration")
    if seconds < 0:
        raise ValueError(f"{short(value)}: a duration cannot be negative")
    if seconds > MAX_DURATION:
        raise ValueError(f"{short(value)}: at most {MAX_DURATION:g} s")
    return seconds


def parse_micros(value: object, bare: bool = True, what: str = "an interval", most: float = 3600.0) -> float:
    """A duration the engine takes in whole microseconds (a marker's interval, a flow's idle
    time): at least 1us once rounded (0 is refused by the engine), at most `most` seconds."""
    seconds = parse_duration(value, bare=bare)
    if round(seconds * 1e6) < 1:
        raise ValueError(f"{short(value)}: {what} must be above 0, at least 1us (the engine counts whole microseconds)")
    if seconds > most:
        raise ValueError(f"{short(value)}: {what} is at most {most:g} s")
    return seconds


def parse_buffer(value: object) -> dict[str, int]:
    """Buffer limit as {"packets": N} or {"bytes": N}."""
    if isinstance(value, dict) and len(value) == 1:
        (kind, amount), = value.items()
        if kind in ("packets", "bytes") and isinstance(amount, int) and not isinstance(amount, bool) and amount > 0:
            return _buffer_within({kind: amount}, value)
        raise ValueError(f"{short(value)} is not a buffer; use {BUFFER_HELP}")
    if isinstance(value, (int, float, bool)):
        raise ValueError(f"{short(value)} is ambiguous; use {BUFFER_HELP}")
    parts = _split(str(value))
    if parts is None:
        raise ValueError(f"{short(value)} is not a buffer; use {BUFFER_HELP}")
    number, unit = parts
    if unit in _PACKET_UNITS:
        if number != int(number) or number < 1:
            raise ValueError(f"{short(value)}: a packet count must be a whole number of at least 1")
        return _buffer_within({"packets": int(number)}, value)
    if unit in _BYTE_UNITS:
        size = int(round(number * _BYTE_UNITS[unit]))
        if size < 1:
            raise ValueError(f"{short(value)}: a buffer must hold at least one byte")
        return _buffer_within({"bytes": size}, value)
    raise ValueError(f"{short(value)} is not a buffer; use {BUFFER_HELP}")


def _buffer_within(buffer: dict[str, int], value: object) -> dict[str, int]:
    most = MAX_BUFFER_PACKETS if "packets" in buffer else MAX_SIZE_BYTES
    (unit, amount), = buffer.items()
    if amount > most:
        raise ValueError(f"{short(value)}: a buffer holds at most {most} {unit}")
    return buffer


def format_rate(bps: int) -> str:
    for unit, scale in (("Gbit", 1e9), ("Mbit", 1e6), ("kbit", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps}bit"


def parse_size(value: object) -> int:
    """A size in bytes, written with its unit ('6000B', '64KB'); bare numbers are ambiguous."""
    if isinstance(value, (int, float, bool)):
        raise ValueError(f"{short(value)} is ambiguous; write a size with its unit, e.g. '6000B' or '64KB'")
    parts = _split(str(value))
    if parts is None or parts[1] not in _BYTE_UNITS:
        raise ValueError(f"{short(value)} is not a size; write e.g. '6000B' or '64KB' (1 KB = 1024 bytes)")
    size = int(round(parts[0] * _BYTE_UNITS[parts[1]]))
    if size < 1:
        raise ValueError(f"{short(value)}: a size must be at least one byte")
    if size > MAX_SIZE_BYTES:
        raise ValueError(f"{short(value)}: a size is at most {MAX_SIZE_BYTES} bytes (1024GB)")
    return size


def parse_bucket(value: object, bare: bool = True) -> int:
    """A token bucket's depth in bytes ('6000B'); a bare number of bytes only where `bare` allows
    it (values the code built). From one packet of MIN_BUCKET_BYTES to MAX_SIZE_BYTES."""
    size = value if type(value) is int and bare else parse_size(value)
    if size < MIN_BUCKET_BYTES:
        raise ValueError(f"{short(value)}: a bucket must hold one packet of {MIN_BUCKET_BYTES} bytes at least")
    if size > MAX_SIZE_BYTES:
        raise ValueError(f"{short(value)}: a bucket holds at most {MAX_SIZE_BYTES} bytes (1024GB)")
    return size
