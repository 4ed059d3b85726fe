"""A flame graph (SVG) from a `perf record -g` file, with nothing to install (benchmark aid).

    .venv/bin/python benchmarks/flamegraph.py PERF.data OUT.svg [--title TEXT] [--min-share 0.002]

Reads `perf script` (callers outermost first after reversal), folds identical stacks and draws
each frame as a box as wide as its share of the samples; frames narrower than --min-share of the
whole are left out. Kernel frames are orange, the engine's own code blue, libraries grey.
Hovering a box shows its name and share (an SVG <title>).
"""

from __future__ import annotations

import argparse
import html
import subprocess
import sys
from collections import defaultdict

WIDTH, ROW = 1200, 16


def folded(perf_data: str) -> dict[tuple[str, ...], int]:
    """Stacks (outermost first) and their sample counts."""
    out = subprocess.run(["perf", "script", "-i", perf_data, "-F", "ip,sym,dso"], capture_output=True, text=True,
                         check=True).stdout
    stacks: dict[tuple[str, ...], int] = defaultdict(int)
    frames: list[str] = []
    for line in out.splitlines() + [""]:
        line = line.strip()
        if not line:
            if frames:
                stacks[tuple(reversed(frames))] += 1
            frames = []
            continue
        parts = line.split(None, 1)
        if len(parts) < 2:
            continue
        sym, _, dso = parts[1].rpartition(" (")
        sym = sym.split("+0x")[0] or "[unknown]"
        kind = "k" if "kernel" in dso else ("e" if "catnip" in dso or "nfq_floor" in dso
                                                                   else "l")
        frames.append(f"{kind}:{sym}")
    return stacks


def tree(stacks: dict[tuple[str, ...], int]) -> dict:
    root: dict = {"n": 0, "kids": {}}
    for stack, count in stacks.items():
        node = root
        node["n"] += count
        for frame in stack:
            node = node["kids"].setdefault(frame, {"n": 0, "kids": {}})
            node["n"] += count
    return root


COLOURS = {"k": "#f0a04b", "e": "#5b8def", "l": "#b8b8b8"}


def draw(root: dict, title: str, min_share: float) -> str:
    total = root["n"] or 1
    boxes: list[str] = []
    depth_max = 0

    def walk(node: dict, x: float, depth: int) -> None:
        nonlocal depth_max
        for frame, kid in sorted(node["kids"].items(), key=lambda kv: -kv[1]["n"]):
            share = kid["n"] / total
            if share >= min_share:
                depth_max = max(depth_max, depth)
                w = share * WIDTH
                kind, name = frame.split(":", 1)
                label = html.escape(name)
                text = label if w > 7 * len(name) else label[: max(0, int(w / 7) - 2)] + (".." if w > 21 else "")
                boxes.append(f'<g><title>{label} ({100 * share:.2f}%)</title><rect x="{x:.1f}" y="{{y{depth}}}" '
                             f'width="{max(w - 0.5, 0.5):.1f}" height="{ROW - 1}" fill="{COLOURS[kind]}"/>'
                             f'<text x="{x + 2:.1f}" y="{{t{depth}}}">{text}</text></g>')
                walk(kid, x, depth + 1)
            x += share * WIDTH

    walk(root, 0.0, 0)
    height = (depth_max + 3) * ROW
    svg = "\n".join(boxes)
    for d in range(depth_max + 1):
        y = height - (d + 2) * ROW
        svg = svg.replace(f"{{y{d}}}", str(y)).replace(f"{{t{d}}}", str(y + ROW - 4))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="monospace"'
            f' font-size="11">\n<text x="4" y="14" font-size="13">{html.escape(title)} ({total} samples; orange'
            f' kernel, blue engine, grey libraries)</text>\n{svg}\n</svg>\n')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("perf_data")
    ap.add_argument("out")
    ap.add_argument("--title", default="catnip-engine")
    ap.add_argument("--min-share", type=float, default=0.002)
    args = ap.parse_args()
    stacks = folded(args.perf_data)
    if not stacks:
        sys.exit(f"flamegraph: no samples with call chains in {args.perf_data}")
    with open(args.out, "w") as fh:
        fh.write(draw(tree(stacks), args.title, args.min_share))


if __name__ == "__main__":
    main()
