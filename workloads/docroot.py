"""The document root every Apache instance serves: the pages' HTML and images, exact sizes.

Each HTML file holds real <img> tags for its images (the client parses them, as a browser
would) and is padded with a comment to its exact size; each image is a GIF header followed by
deterministic filler. Writing is idempotent (files already of the right content are kept) and
safe when points running side by side write the same page set into one document root.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from catnip.workloads.pages import Page, image_path

GIF_HEADER = b"GIF89a"
_TAIL = "</body></html>\n"
_PAD_OPEN, _PAD_CLOSE = "<!-- ", " -->"


def _head(number: int, n_images: int, folder: str) -> str:
    tags = "".join(f'<img src="{image_path(number, k, folder)}" alt="">\n' for k in range(1, n_images + 1))
    return f"<!DOCTYPE html>\n<html><head><title>Page {number}</title></head><body>\n{tags}"


def html_floor(number: int, n_images: int, folder: str = "") -> int:
    """The smallest HTML file of a page: its markup and img tags with an empty padding comment."""
    return len(_head(number, n_images, folder)) + len(_PAD_OPEN) + len(_PAD_CLOSE) + len(_TAIL)


def html_document(page: Page) -> bytes:
    head = _head(page.number, len(page.images), page.folder)
    pad = page.html_bytes - html_floor(page.number, len(page.images), page.folder)
    if pad < 0:
        raise ValueError(f"page {page.number}: {page.html_bytes} bytes cannot hold its {len(page.images)} img tags")
    body = head + _PAD_OPEN + "x" * pad + _PAD_CLOSE + _TAIL
    data = body.encode()
    assert len(data) == page.html_bytes
    return data


def image_bytes(page: int, k: int, size: int) -> bytes:
    seed = hashlib.sha256(f"catnip page {page} image {k}".encode()).digest()
    filler = (seed * (size // len(seed) + 1))[: max(0, size - len(GIF_HEADER))]
    return (GIF_HEADER + filler)[:size]


def documents(pages: tuple[Page, ...] | list[Page]) -> dict[str, bytes]:
    """URL path -> content, for every object of every page."""
    docs = {}
    for page in pages:
        docs[page.objects[0]] = html_document(page)
        for k, size in enumerate(page.images, start=1):
            docs[image_path(page.number, k, page.folder)] = image_bytes(page.number, k, size)
    return docs


def write_docroot(pages, root: str | Path) -> Path:
    """Write the pages' files under root (other files there are left alone)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    folders = {root}
    for url, content in documents(pages).items():
        path = root / url.lstrip("/")
        folders.update(p for p in path.parents if p.is_relative_to(root))
        if path.exists() and path.read_bytes() == content:
            path.chmod(0o644)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        # A temporary name of its own: a point writing the same file at the same time never
        # renames this one half written.
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    # Apache's worker processes run as www-data: the tree must be readable by others.
    for folder in folders:
        folder.chmod(0o755)
    return root
