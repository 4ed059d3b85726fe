"""The document root every Apache instance serves: the pages' HTML and images, exact sizes.

`page{n}.html` is real HTML with one `<img src="...">` tag per image (the client parses them, as
a browser would), padded with an HTML comment to exactly `html_bytes`. Each image is a valid
1x1 GIF padded with a GIF comment extension to its exact size; the padding is deterministic
pseudo-random bytes (incompressible, like real image data). Writing is idempotent: files that
already hold the right bytes are left alone, others are replaced atomically.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable

from workloads.pages import Page, html_path, image_path

MIN_GIF = 38  # smallest GIF this module writes: 1x1, 2-colour table, empty comment extension

_PAD_TEXT = "padding to the exact size of this page in CATNIP Table II "


def html_document(page: Page) -> bytes:
    """The page's HTML, exactly `page.html_bytes` bytes."""
    tags = "".join(f'<img src="{image_path(page.number, k)}" alt="image {k}">\n'
                   for k in range(1, len(page.images) + 1))
    head = (f"<!DOCTYPE html>\n<html><head><title>CATNIP Fig. 4, page {page.number}</title></head>\n"
            f"<body>\n{tags}")
    tail = "</body></html>\n"
    room = page.html_bytes - len(head) - len(tail)
    if room < 0:
        raise ValueError(f"page {page.number}: {page.html_bytes} bytes of HTML cannot hold its "
                         f"{len(page.images)} <img> tags (needs {len(head) + len(tail)})")
    if room >= len("<!--  -->\n"):
        fill = room - len("<!--  -->\n")
        pad = "<!-- " + (_PAD_TEXT * (fill // len(_PAD_TEXT) + 1))[:fill] + " -->\n"
    else:
        pad = " " * room  # too little room for a comment: blanks are still valid HTML
    data = (head + pad + tail).encode("ascii")
    assert len(data) == page.html_bytes
    return data


def _filler(label: str, n: int) -> bytes:
    return hashlib.shake_256(label.encode()).digest(n) if n else b""


def gif_bytes(size: int, label: str) -> bytes:
    """A valid 1x1 GIF89a of exactly `size` bytes; `label` seeds the padding bytes."""
    if size < MIN_GIF:
        raise ValueError(f"a GIF needs at least {MIN_GIF} bytes, asked for {size}")
    head = b"GIF89a\x01\x00\x01\x00\x80\x00\x00" + bytes(6)  # 1x1 screen, 2-colour table
    descriptor = b"\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00"    # one 1x1 image at (0, 0)
    pixels = b"\x02\x02\x44\x01\x00"  # LZW, minimum code size 2: clear, index 0, end
    trailer = b"\x3b"
    # Padding: a comment extension, 0x21 0xFE, sub-blocks (a length byte + 1..255 bytes), 0x00.
    # Sub-blocks fill any 0 or >= 2 bytes; for the one gap (1 byte) the LZW bytes go in two
    # sub-blocks instead of one, which is one byte longer.
    fill = size - len(head) - len(descriptor) - len(pixels) - len(trailer) - 3
    if fill == 1:
        pixels, fill = b"\x02\x01\x44\x01\x01\x00", 0
    blocks, left = [], fill
    while left:
        n = min(left, 256)
        if left - n == 1:  # never leave a single byte, it cannot form a sub-block
            n -= 1
        blocks.append(n - 1)
        left -= n
    data = _filler(label, sum(blocks))
    comment, at = bytearray(b"\x21\xfe"), 0
    for n in blocks:
        comment += bytes([n]) + data[at:at + n]
        at += n
    comment += b"\x00"
    out = head + bytes(comment) + descriptor + pixels + trailer
    assert len(out) == size
    return out


def image_bytes(page: int, k: int, size: int) -> bytes:
    return gif_bytes(size, f"catnip page {page} image {k}")


def documents(pages: Iterable[Page]) -> dict[str, bytes]:
    """URL path -> content, for every object of every page."""
    docs: dict[str, bytes] = {}
    for page in pages:
        docs[html_path(page.number)] = html_document(page)
        for k, size in enumerate(page.images, start=1):
            docs[image_path(page.number, k)] = image_bytes(page.number, k, size)
    return docs


def write_docroot(pages: Iterable[Page], path: str | Path) -> Path:
    """Write every page's files under `path` (created if needed); returns the path."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    # Apache's workers run as www-data: everything must be readable by others.
    root.chmod(0o755)
    for url, content in documents(pages).items():
        target = root / url.lstrip("/")
        if target.parent != root:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.parent.chmod(0o755)
        try:
            same = target.stat().st_size == len(content) and target.read_bytes() == content
        except FileNotFoundError:
            same = False
        if not same:
            tmp = target.with_name(target.name + f".tmp{os.getpid()}")
            tmp.write_bytes(content)
            tmp.replace(target)  # atomic: a server never sees a half-written file
        target.chmod(0o644)
    return root
