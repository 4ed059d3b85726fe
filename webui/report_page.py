"""The dashboard's reproduction report (/report; issue 46, item 6): every registered paper's claims,
ours beside theirs, the verdict and the cause, the rows docs/report.md holds, built by the same
function (papers/claims.py `report`) from the same claims data and the same archive/ (imported into
a database in memory, as `catnip docs build` does; never the dashboard's own database). The report
is kept per state of the archive's manifest, so a page view imports the archived runs once.
"""

from __future__ import annotations

import threading
from pathlib import Path

from flask import Flask, current_app, render_template

from catnip.papers import claims
from catnip.papers.registry import PAPERS
from catnip.results import docs_archive
from catnip.testbed import paths

_LOCK = threading.Lock()
_CACHE: dict[tuple, list[claims.PaperReport]] = {}


def _key(root: Path) -> tuple:
    manifest = docs_archive.manifest_path(root / "archive")
    st = manifest.stat() if manifest.exists() else None
    return (str(root), st and st.st_mtime_ns, st and st.st_size, tuple(PAPERS))


def build(root: Path) -> list[claims.PaperReport]:
    """The report of the papers registered, from `root`'s archive/ and docs (cached per manifest)."""
    key = _key(root)
    with _LOCK:
        if key not in _CACHE:
            with docs_archive.RunsDB(root / "archive") as db:
                _CACHE.clear()
                _CACHE[key] = claims.report(db, root, PAPERS)
        return _CACHE[key]


def register(app: Flask) -> None:
    app.config.setdefault("CATNIP_REPO", paths.REPO)  # whose archive/ and docs the report reads

    @app.get("/report")
    def report():
        root = Path(current_app.config["CATNIP_REPO"])
        try:
            reports, error = build(root), None
        except (claims.ClaimsError, docs_archive.DocsArchiveError) as exc:
            reports, error = [], str(exc)
        return render_template("report.html", reports=reports, error=error, verdicts=claims.VERDICTS,
                               not_archived=claims.NOT_ARCHIVED), (500 if error else 200)
