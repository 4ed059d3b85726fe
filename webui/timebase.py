"""One time origin for a point's series: seconds since the point's start (`points.started`).

The database keeps times on four clocks (docs/database.md, "Clocks"): wall (`progress.t`,
`points.started`), monotonic (`samples.t`, `pages.start`), the engine's own (`queue_samples.t`,
seconds since the router's engine started its clock) and point-relative (`progress.elapsed`).
The point's clock anchor (`points.environment.clock`: one reading of wall and monotonic, and each
engine's `engine_clock_start` on the monotonic clock, recorded from 2026-11-24) puts all of them
on the wall clock; less the point's start, they are on one axis. A point without an anchor (an
older run, or before its environment is recorded) cannot put engine or monotonic times there:
`anchored` says so, and those times are then left where they were (`exact` is False).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


@dataclass
class PointClock:
    started: float | None                 # points.started, wall
    wall_at: float | None = None          # the anchor's wall reading
    mono_at: float | None = None          # ... and its monotonic reading at the same moment
    engines: dict[str, float] = field(default_factory=dict)  # router -> engine_clock_start (monotonic)
    recorded: bool = False                # the point's environment is recorded (anchor or not)

    @property
    def anchored(self) -> bool:
        return None not in (self.started, self.wall_at, self.mono_at)

    def wall(self, t: float) -> float:
        """A wall-clock time (progress.t) in seconds since the point's start."""
        return t - self.started if self.started is not None else t

    def monotonic(self, t: float) -> float:
        """A monotonic time (samples.t) in seconds since the point's start; as given without an anchor."""
        if not self.anchored:
            return t
        return t - self.mono_at + self.wall_at - self.started

    def engine(self, router: str, t: float) -> float:
        """An engine time (queue_samples.t) in seconds since the point's start; as given where the
        point has no anchor for that router's engine."""
        start = self.engines.get(router)
        return self.monotonic(start + t) if self.anchored and start is not None else t

    def engine_exact(self, router: str) -> bool:
        return self.anchored and router in self.engines


def clock_of(point: Any) -> PointClock:
    """A point's clock from its `points` row (its `started` and `environment`)."""
    started = _num(point["started"])
    try:
        env = json.loads(point["environment"] or "null")
    except (ValueError, TypeError, KeyError, IndexError):
        env = None
    clock = env.get("clock") if isinstance(env, dict) else None
    if not isinstance(clock, dict):
        return PointClock(started, recorded=env is not None)
    engines = clock.get("engine_clock_start")
    engines = {str(k): v for k, v in engines.items() if _num(v) is not None} if isinstance(engines, dict) else {}
    return PointClock(started, _num(clock.get("wall")), _num(clock.get("monotonic")), engines, True)
