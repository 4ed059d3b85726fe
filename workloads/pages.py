"""The pages the web workload serves: CATNIP's ten pages of Fig. 4 (section IV-B) and
Nouredine and Tobagi's fixed probe page (section 2.2.1). The random page pool of their section
2.2.1 is workloads/pagepool.py.

Page numbers are unique across the page sets, so a record's `page` alone says which page it
was: CATNIP's pages are 1-10, the probe page is 0, the random pool's pages are 1001 on.

CATNIP's pages. Paper's numbers (Table II): each page's connection count (HTTP/1.0: one connection per object,
so 1 HTML file + N embedded images) and total bytes; page 1 exactly (2,589-byte HTML, images of
548 and 1,808 bytes, section IV-B). Generated here: how the other pages' bytes split between
their HTML and images, which Fig. 4 shows only schematically. The split is deterministic (a fixed
internal seed, independent of any scenario seed) so every run everywhere serves the same files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

# (page, connections, total bytes) from Table II of the CATNIP paper.
TABLE_II = (
    (1, 3, 4_945), (2, 2, 56_434), (3, 2, 7_860), (4, 2, 12_315), (5, 17, 87_451),
    (6, 2, 27_991), (7, 5, 2_078), (8, 3, 9_886), (9, 6, 9_620), (10, 3, 2_776),
)
PAGE1_HTML, PAGE1_IMAGES = 2_589, (548, 1_808)  # section IV-B, given exactly

_SPLIT_SEED = 2002          # fixed: the documents must never depend on a run's seed
MIN_IMAGE = 64              # a believable smallest image file
HTML_SKELETON = 120         # <html>, <head>, <body> and friends
IMG_TAG = 48                # room for one <img src="/pN/iK.gif"> tag


# Nouredine and Tobagi section 2.2.1: the probes "download fixed size pages (a 1 KB HTML index file
# with eight in-lined images of size 10 KB each)". 1 KB = 1024 bytes, as everywhere in this
# repository (spec/units.py; the FTP probes' 200 KB are 204,800 bytes).
PROBE_PAGE = 0
PROBE_FOLDER = "/probe"
PROBE_HTML, PROBE_IMAGES = 1024, (10 * 1024,) * 8


@dataclass(frozen=True)
class Page:
    number: int
    html_bytes: int
    images: tuple[int, ...]
    folder: str = ""  # URL folder of the page's files ("": CATNIP's own paths, at the top)

    @property
    def objects(self) -> list[str]:
        """URL paths, HTML first."""
        return [html_path(self.number, self.folder)] + [image_path(self.number, k, self.folder)
                                                         for k in range(1, len(self.images) + 1)]

    @property
    def total_bytes(self) -> int:
        return self.html_bytes + sum(self.images)


def html_path(page: int, folder: str = "") -> str:
    return f"{folder}/page{page}.html"


def image_path(page: int, k: int, folder: str = "") -> str:
    return f"{folder}/p{page}/i{k}.gif"


def _split(rng: random.Random, total: int, n_images: int) -> tuple[int, tuple[int, ...]]:
    """HTML share 10-60% (at least room for its tags); images heavy-tailed (lognormal weights)."""
    html_min = HTML_SKELETON + IMG_TAG * n_images
    html = max(html_min, int(total * rng.uniform(0.10, 0.60)))
    rest = total - html
    if rest < MIN_IMAGE * n_images:
        raise ValueError(f"{total} bytes cannot hold an HTML file and {n_images} images")
    weights = [rng.lognormvariate(0.0, 1.2) for _ in range(n_images)]
    spare = rest - MIN_IMAGE * n_images
    images = [MIN_IMAGE + int(spare * w / sum(weights)) for w in weights]
    images[-1] += rest - sum(images)  # rounding: the page total stays exact
    return html, tuple(images)


@lru_cache(maxsize=1)
def catnip_pages() -> tuple[Page, ...]:
    """The ten pages of Fig. 4, totals and object counts exactly as Table II."""
    rng = random.Random(_SPLIT_SEED)
    pages = []
    for number, conns, total in TABLE_II:
        if number == 1:
            pages.append(Page(1, PAGE1_HTML, PAGE1_IMAGES))
            continue
        html, images = _split(rng, total, conns - 1)
        pages.append(Page(number, html, images))
    return tuple(pages)


@lru_cache(maxsize=1)
def probe_pages() -> tuple[Page, ...]:
    """Nouredine and Tobagi's probe page (section 2.2.1): 1 KB of HTML and eight 10 KB images."""
    return (Page(PROBE_PAGE, PROBE_HTML, PROBE_IMAGES, PROBE_FOLDER),)


def page(number: int) -> Page:
    for p in catnip_pages():
        if p.number == number:
            return p
    raise KeyError(f"no page {number}: pages are numbered 1 to 10")
