"""Line charts as standalone SVG (viewable in docs/ without a plotting library): measured points with
confidence bars and model curves against a shared x axis, in the manner of the hysteresis paper's
Figs. 3, 4 and 6."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

COLORS = ("#17324d", "#c0392b", "#27ae60", "#8e44ad", "#d68910", "#2e86c1")


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]                       # (x, y)
    errors: list[float] = field(default_factory=list)       # half-width of the bar at each point
    markers: bool = False                                   # measured: markers and bars; model: a line
    dashed: bool = False


def _ticks(hi: float, n: int = 5) -> list[float]:
    if hi <= 0:
        return [0.0]
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(hi / step) + 2) if i * step <= hi * 1.0001]


def svg_chart(title: str, xlabel: str, ylabel: str, series: list[Series], width: int = 560,
              height: int = 360) -> str:
    ml, mr, mt, mb = 60, 170, 30, 44
    w, h = width - ml - mr, height - mt - mb
    xs = [x for s in series for x, _ in s.points] or [1.0]
    ys = [y + (s.errors[i] if i < len(s.errors) else 0) for s in series for i, (_, y) in enumerate(s.points)] or [1.0]
    x_hi, y_hi = max(xs) * 1.05 or 1.0, max(ys) * 1.1 or 1.0
    sx = lambda x: ml + w * x / x_hi  # noqa: E731
    sy = lambda y: mt + h - h * y / y_hi  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           'font-size="11">', '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{ml + w / 2}" y="18" text-anchor="middle" font-weight="bold">{escape(title)}</text>',
           f'<line x1="{ml}" y1="{mt + h}" x2="{ml + w}" y2="{mt + h}" stroke="black"/>',
           f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{mt + h}" stroke="black"/>']
    for t in _ticks(x_hi / 1.05):
        out.append(f'<text x="{sx(t):.1f}" y="{mt + h + 14}" text-anchor="middle">{t:g}</text>')
    for t in _ticks(y_hi / 1.1):
        out.append(f'<line x1="{ml}" y1="{sy(t):.1f}" x2="{ml + w}" y2="{sy(t):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{ml - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    out.append(f'<text x="{ml + w / 2}" y="{height - 8}" text-anchor="middle">{escape(xlabel)}</text>')
    out.append(f'<text x="14" y="{mt + h / 2}" transform="rotate(-90 14 {mt + h / 2})" '
               f'text-anchor="middle">{escape(ylabel)}</text>')
    for k, s in enumerate(series):
        color = COLORS[k % len(COLORS)]
        pts = sorted(zip(s.points, s.errors or [0.0] * len(s.points)))
        dash = ' stroke-dasharray="5,3"' if s.dashed else ""
        if not s.markers and len(pts) > 1:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for (x, y), _ in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.6"{dash}/>')
        for (x, y), e in pts:
            if s.markers:
                if e:
                    out.append(f'<line x1="{sx(x):.1f}" y1="{sy(y - e):.1f}" x2="{sx(x):.1f}" y2="{sy(y + e):.1f}" '
                               f'stroke="{color}"/>')
                out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>')
        ly = mt + 8 + 16 * k
        lx = ml + w + 12
        if s.markers:
            out.append(f'<circle cx="{lx + 9}" cy="{ly}" r="3" fill="{color}"/>')
        else:
            out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="{color}" stroke-width="1.6"{dash}/>')
        out.append(f'<text x="{lx + 24}" y="{ly + 4}">{escape(s.name)}</text>')
    out.append("</svg>")
    return "\n".join(out)
