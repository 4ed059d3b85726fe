"""The archive of the runs behind the docs, kept with the project (issue 46): `archive/` at the
repository's top holds one `catnip export` file per run (runs/RUN_ID.catnip.json.gz, the format of
results/archive.py, unchanged, so `catnip import` reads it too) and MANIFEST.json, which says for
each run its scenario, seed, git commit, engine hash, every point's real-time verdict, its dates
and the file's size and SHA-256.

`add_run` archives a run from a database (only a run that is `done`); `load` reads and checks the
manifest; `problems` compares it with the files; `RunsDB` imports archived runs into a database in
memory, so the docs' tables are built by the same layouts `catnip report` uses (results/layouts.py),
from the archive alone and never from data/catnip.db. docs/archive.md describes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from catnip.results import archive as export
from catnip.results import run_ids
from catnip.results.store import Store
from catnip.spec.scenario import point_label

FORMAT = "catnip-docs-archive"
FORMAT_VERSION = 1
MANIFEST = "MANIFEST.json"
RUNS = "runs"
# What every manifest entry holds (checked on load, so a hand edit that drops one is named).
ENTRY_KEYS = ("run_id", "file", "bytes", "sha256", "scenario", "name", "seed", "git_rev", "engine_sha256",
              "status", "started", "finished", "archived", "points")


class DocsArchiveError(ValueError):
    """An archive that cannot be read or added to; the message is one line saying why."""


def iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def manifest_path(archive_dir: Path) -> Path:
    return Path(archive_dir) / MANIFEST


def load(archive_dir: Path) -> dict[str, dict[str, Any]]:
    """The manifest's entries by run id ({} when the archive has no manifest yet)."""
    path = manifest_path(archive_dir)
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DocsArchiveError(f"{path}: not a readable JSON manifest ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DocsArchiveError(f"{path}: format is {doc.get('format') if isinstance(doc, dict) else doc!r},"
                               f" not {FORMAT}")
    if doc.get("format_version") != FORMAT_VERSION:
        raise DocsArchiveError(f"{path}: format_version {doc.get('format_version')!r}; this code reads"
                               f" {FORMAT_VERSION}")
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise DocsArchiveError(f"{path}: runs is not a list")
    out: dict[str, dict[str, Any]] = {}
    for i, e in enumerate(runs):
        missing = [k for k in ENTRY_KEYS if not isinstance(e, dict) or k not in e]
        if missing:
            raise DocsArchiveError(f"{path}: runs[{i}] lacks {', '.join(missing)}")
        why = run_ids.problem(e["run_id"])
        if why is not None:
            raise DocsArchiveError(f"{path}: runs[{i}].run_id {why}")
        if e["file"] != f"{RUNS}/{export.default_name(e['run_id'])}":
            raise DocsArchiveError(f"{path}: runs[{i}].file is {e['file']!r}, not"
                                   f" {RUNS}/{export.default_name(e['run_id'])}")
        if e["run_id"] in out:
            raise DocsArchiveError(f"{path}: run {e['run_id']} is listed twice")
        out[e["run_id"]] = e
    return out


def _write_manifest(archive_dir: Path, entries: dict[str, dict[str, Any]]) -> None:
    """The manifest, whole or not at all; runs by id, keys sorted, so a diff shows what changed."""
    runs = [entries[k] for k in sorted(entries)]
    doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "runs": runs,
           "total_bytes": sum(e["bytes"] for e in runs)}
    path = manifest_path(archive_dir)
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=archive_dir)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def sha256_of(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _points(store: Store, run_id: str) -> list[dict[str, Any]]:
    out = []
    for p in store.points(run_id):
        fid = json.loads(p["fidelity"]) if p["fidelity"] else {}
        out.append({"point": p["point"], "rep": p["rep"], "label": point_label(json.loads(p["assignment"]),
                                                                                "single point"),
                    "status": p["status"],
                    "realtime_ok": None if p["realtime_ok"] is None else bool(p["realtime_ok"]),
                    "late_events": fid.get("late_events"), "engine_events": fid.get("engine_events")})
    return out


def entry_for(store: Store, run, file: str, size: int, sha256: str) -> dict[str, Any]:
    """A manifest entry for the run row `run` of `store`, archived in `file`."""
    versions = json.loads(run["versions"]) if run["versions"] else {}
    return {"run_id": run["id"], "file": file, "bytes": size, "sha256": sha256, "scenario": run["source"],
            "name": run["name"], "seed": run["seed"], "git_rev": run["git_rev"],
            "engine_sha256": versions.get("engine_sha256"), "status": run["status"],
            "started": iso(run["started"]), "finished": iso(run["finished"]), "archived": iso(time.time()),
            "points": _points(store, run["id"])}


def _export(store: Store, run_id: str, folder: Path | None, code_rev: str | None) -> dict[str, Any]:
    try:
        return export.export_run(store, run_id, folder, code_rev)
    except export.ArchiveError as exc:
        raise DocsArchiveError(str(exc)) from None


def add_run(store: Store, run_id: str, archive_dir: Path, folder: Path | None, code_rev: str | None
            ) -> dict[str, Any]:
    """Archives run `run_id` (an id or an unambiguous prefix) of `store`: its export file in
    archive_dir/runs and its entry in the manifest. Refuses a run that is not `done` and one that
    is archived already. Returns the entry."""
    run = store.find_run(run_id)
    if run is None:
        raise DocsArchiveError(f"no run {run_id[:120]!r} in {store.path} (`catnip list` shows the runs; a prefix"
                               " must name one run)")
    rid = run["id"]
    if run["status"] != "done":
        why = f" ({run['error'][:160]})" if run["error"] else ""
        raise DocsArchiveError(f"run {rid} is {run['status']}, not done{why}: only a run that ended as planned is"
                               " archived behind the docs; re-run it")
    archive_dir = Path(archive_dir)
    entries = load(archive_dir)
    if rid in entries:
        raise DocsArchiveError(f"run {rid} is archived already ({archive_dir / entries[rid]['file']})")
    rel = f"{RUNS}/{export.default_name(rid)}"
    target = archive_dir / rel
    if target.exists():
        raise DocsArchiveError(f"{target} exists but {manifest_path(archive_dir)} does not list it: remove it, then"
                               " archive the run again")
    target.parent.mkdir(parents=True, exist_ok=True)
    document = _export(store, rid, folder, code_rev)
    try:
        size = export.write(document, target)  # never replaces a file (one made meanwhile is refused)
    except export.ArchiveError as exc:
        raise DocsArchiveError(str(exc)) from None
    try:
        export.read(target)  # what is kept must import: read back through the import's own checks
        entry = entry_for(store, run, rel, size, sha256_of(target))
        entries[rid] = entry
        _write_manifest(archive_dir, entries)
    except export.ArchiveError as exc:
        target.unlink(missing_ok=True)
        raise DocsArchiveError(str(exc)) from None
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return entry


def problems(archive_dir: Path) -> list[str]:
    """What is wrong between the manifest and the files: a listed file missing, or whose size or
    SHA-256 is not the manifest's (an archived number changed), or a file the manifest does not list."""
    archive_dir = Path(archive_dir)
    try:
        entries = load(archive_dir)
    except DocsArchiveError as exc:
        return [str(exc)]
    out = []
    for rid, e in entries.items():
        path = archive_dir / e["file"]
        if not path.is_file():
            out.append(f"{manifest_path(archive_dir)}: run {rid}'s file {path} is missing")
        elif path.stat().st_size != e["bytes"] or sha256_of(path) != e["sha256"]:
            out.append(f"{path}: not the file the manifest lists (size or SHA-256 differ): an archived run was"
                       " changed after `catnip docs archive`")
    listed = {e["file"] for e in entries.values()}
    runs = archive_dir / RUNS
    if runs.is_dir():
        for path in sorted(runs.iterdir()):
            if f"{RUNS}/{path.name}" not in listed:
                out.append(f"{path}: not in {manifest_path(archive_dir)} (`catnip docs archive` adds a run)")
    return out


class RunsDB:
    """A database in memory holding the archived runs asked for, each imported once from its file
    (checked against the manifest's SHA-256 first). Use as a context manager."""

    def __init__(self, archive_dir: Path):
        self.dir = Path(archive_dir)
        self.entries = load(self.dir)
        self.store = Store(":memory:")
        self._have: set[str] = set()
        self._bad: dict[str, str] = {}  # why a run could not be read, said again to each region citing it

    def __enter__(self) -> RunsDB:
        return self

    def __exit__(self, *exc) -> None:
        self.store.db.close()

    def need(self, run_id: str) -> None:
        """Imports `run_id` (an exact archived id) unless it is there; DocsArchiveError if it is
        not archived or its file is not the one the manifest lists."""
        if run_id in self._bad:
            raise DocsArchiveError(self._bad[run_id])
        if run_id in self._have:
            return
        try:
            self._import(run_id)
        except DocsArchiveError as exc:
            self._bad[run_id] = str(exc)
            raise

    def _import(self, run_id: str) -> None:
        e = self.entries.get(run_id)
        if e is None:
            raise DocsArchiveError(f"run {run_id} is not in {manifest_path(self.dir)}")
        path = self.dir / e["file"]
        try:
            document, sha256 = export.read(path)
        except export.ArchiveError as exc:
            raise DocsArchiveError(str(exc)) from None
        if sha256 != e["sha256"]:
            raise DocsArchiveError(f"{path}: SHA-256 {sha256[:12]}... is not the manifest's {e['sha256'][:12]}...:"
                                   " an archived run was changed after `catnip docs archive`")
        if document["run_id"] != run_id:
            raise DocsArchiveError(f"{path} holds run {document['run_id']}, not {run_id}")
        try:
            export.import_run(self.store, document, source=str(path), sha256=sha256)
        except export.ArchiveError as exc:
            raise DocsArchiveError(str(exc)) from None
        self._have.add(run_id)
        # The manifest says what the file holds: a hand edit of one (a verdict, a seed) is named.
        found = entry_for(self.store, self.store.run(run_id), e["file"], e["bytes"], e["sha256"])
        for key in ENTRY_KEYS:
            if key != "archived" and found[key] != e[key]:
                raise DocsArchiveError(f"{manifest_path(self.dir)}: run {run_id}'s {key} is {str(e[key])[:80]!r}"
                                       f" but its file says {str(found[key])[:80]!r}")
