"""Sequence-number plots as standalone SVG (no plotting library needed to view them in docs/):
segment start (in segments) against time, one panel per sender, in the manner of CATNIP Fig. 2."""

from __future__ import annotations

from html import escape


def svg_panels(panels: list[tuple[str, list[tuple[float, int]]]], width: int = 960, height: int = 300) -> str:
    """panels: (title, [(time_s, segment_index), ...]); a shared time axis across panels."""
    n = len(panels)
    pw, ph, ml, mb, mt = width / n, height, 46, 40, 28
    t_max = max((t for _, pts in panels for t, _ in pts), default=1.0) or 1.0
    s_max = max((s for _, pts in panels for _, s in pts), default=1) + 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>']
    for i, (title, pts) in enumerate(panels):
        x0, w, h = i * pw + ml, pw - ml - 10, ph - mb - mt
        sx = lambda t: x0 + w * t / t_max  # noqa: E731
        sy = lambda s: mt + h - h * s / s_max  # noqa: E731
        out.append(f'<text x="{x0 + w / 2:.1f}" y="16" text-anchor="middle" font-weight="bold">{escape(title)}</text>')
        out.append(f'<line x1="{x0}" y1="{mt + h}" x2="{x0 + w}" y2="{mt + h}" stroke="black"/>')
        out.append(f'<line x1="{x0}" y1="{mt}" x2="{x0}" y2="{mt + h}" stroke="black"/>')
        for k in range(0, 5):
            t = t_max * k / 4
            out.append(f'<text x="{sx(t):.1f}" y="{mt + h + 14}" text-anchor="middle">{t * 1000:.0f}</text>')
        for s in range(0, s_max + 1, max(1, s_max // 7)):
            out.append(f'<text x="{x0 - 6}" y="{sy(s) + 4:.1f}" text-anchor="end">{s}</text>')
        out.append(f'<text x="{x0 + w / 2:.1f}" y="{height - 6}" text-anchor="middle">time (ms)</text>')
        for t, s in pts:
            out.append(f'<rect x="{sx(t) - 2:.1f}" y="{sy(s + 1):.1f}" width="4" height="{h / s_max:.1f}" '
                       'fill="#17324d"/>')
    out.append(f'<text x="12" y="{mt + (ph - mb - mt) / 2}" transform="rotate(-90 12 {mt + (ph - mb - mt) / 2})" '
               'text-anchor="middle">segment</text>')
    out.append("</svg>")
    return "\n".join(out)
