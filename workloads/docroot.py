"""The document root every Apache instance serves: the pages' HTML and images, exact sizes.

Each HTML file holds real <img> tags for its images (the client parses them, as a browser
would) and is padded with a comment to its exact size; each image is a GIF header followed by
deterministic filler. Writing is idempotent: files already of the right content are kept.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from workloads.pages import Page, image_path

GIF_HEADER = b"GIF89a"


def html_document(page: Page) -> bytes:
    tags = "".join(f'<img src="{image_path(page.number, k)}" alt="">\n' for k in range(1, len(page.images) + 1))
    head = f"<!DOCTYPE html>\n<html><head><title>Page {page.number}</title></head><body>\n{tags}"
    tail = "</body></html>\n"
    pad = page.html_bytes - len(head) - len(tail) - len("<!--  -->")
    if pad < 0:
        raise ValueError(f"page {page.number}: {page.html_bytes} bytes cannot hold its {len(page.images)} img tags")
    body = head + "<!-- " + "x" * pad + " -->" + tail
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
            docs[image_path(page.number, k)] = image_bytes(page.number, k, size)
    return docs


def write_docroot(pages, root: str | Path) -> Path:
    root = Path(root)
    for url, content in documents(pages).items():
        path = root / url.lstrip("/")
        if path.exists() and path.read_bytes() == content:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(content)
        tmp.replace(path)
    # Apache's worker processes run as www-data: the tree must be readable by others.
    for p in [root, *root.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return root
