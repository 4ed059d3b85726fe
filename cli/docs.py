"""`catnip docs`: the archive of the runs behind the docs, and the docs' tables generated from it
(results/docs_archive.py, results/doc_regions.py; docs/archive.md). Registered on the `catnip`
group by cli/main.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import click

from catnip.controller.validate import Refused
from catnip.testbed import paths

ROOT_HELP = "the repository whose archive/ and docs are used (default this checkout)"


def _root(root: str | None) -> Path:
    return Path(root) if root else paths.REPO


def _files(root: Path, files: tuple[str, ...]) -> list[Path] | None:
    for f in files:
        if not Path(f).is_file():
            raise click.BadParameter(f"{f} is not a file", param_hint="FILES")
    return [Path(f) for f in files] or None


@click.group(name="docs", short_help="The runs behind the docs (archive/); their tables built, checked.")
def docs_group() -> None:
    """The runs behind the docs' tables, kept in archive/ (`catnip docs archive`), and the docs'
    generated regions rebuilt from them (`build`) or compared with them (`check`): docs/archive.md."""


@docs_group.command(name="archive", short_help="Add a run (status done) from a database to archive/.")
@click.argument("run_id")
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
@click.option("--root", type=click.Path(file_okay=False), default=None, help=ROOT_HELP)
def archive_cmd(run_id: str, db: str | None, root: str | None) -> None:
    """Export RUN_ID (an id or an unambiguous prefix) into archive/runs/ and list it in
    archive/MANIFEST.json: scenario, seed, git commit, engine hash, each point's real-time verdict,
    dates, size and SHA-256. A run that is not `done` is refused."""
    from catnip.results import docs_archive
    from catnip.results.store import Store, StoreVersionError
    from catnip.testbed.metadata import git_revision
    database = Path(db) if db else paths.database()
    if not database.is_file():  # opening would create an empty database
        raise Refused(f"no database {database} (give --db)")
    try:
        store = Store(database)
    except (sqlite3.Error, StoreVersionError) as exc:
        raise click.ClickException(str(exc)) from None
    archive_dir = _root(root) / "archive"
    with store:
        try:
            found = store.find_run(run_id)
            folder = paths.runs_dir(store.path) / found["id"] if found else None
            entry = docs_archive.add_run(store, run_id, archive_dir, folder, git_revision())
        except docs_archive.DocsArchiveError as exc:
            raise Refused(str(exc)) from None
    kept = sum(1 for p in entry["points"] if p["realtime_ok"] is True)
    dirty = str(entry["git_rev"]).endswith("-dirty")
    click.echo(f"archived run {entry['run_id']} ({entry['scenario']}, seed {entry['seed']}): {len(entry['points'])}"
               f" point(s), {kept} kept real time -> {archive_dir / entry['file']} ({entry['bytes']:,} bytes)"
               + ("; its git commit is -dirty: the checkout had uncommitted changes when it ran" if dirty else ""))


def _report(outcome, ok: str) -> None:
    for line in outcome.problems + outcome.differences:
        click.echo(line, err=True)
    if outcome.problems or outcome.differences:
        raise SystemExit(1)
    click.echo(ok)


@docs_group.command(name="build", short_help="Rewrite every generated region of the docs from archive/.")
@click.argument("files", nargs=-1, metavar="[FILES]...")
@click.option("--root", type=click.Path(file_okay=False, exists=True), default=None, help=ROOT_HELP)
def build_cmd(files: tuple[str, ...], root: str | None) -> None:
    """Rewrite the generated regions of FILES (default README.md and docs/**/*.md) from the
    archive, through the layouts `catnip report` uses. Exit 1 naming what could not be built."""
    from catnip.results import doc_regions
    import catnip.papers  # noqa: F401 (registers the papers' layouts: papers/__init__.py)
    base = _root(root)
    outcome = doc_regions.build(base, _files(base, files))
    for doc in outcome.changed:
        click.echo(f"rewrote {doc}")
    outcome.differences = []  # mended
    _report(outcome, f"{outcome.regions} region(s) in {outcome.docs} doc(s) built from {base / 'archive'}")


@docs_group.command(name="check", short_help="Exit 1 where a generated region differs from archive/.")
@click.argument("files", nargs=-1, metavar="[FILES]...")
@click.option("--root", type=click.Path(file_okay=False, exists=True), default=None, help=ROOT_HELP)
def check_cmd(files: tuple[str, ...], root: str | None) -> None:
    """Compare every generated region of FILES (default README.md and docs/**/*.md) with what the
    archive gives; exit 1 naming the doc, the region and its first differing line, a region that
    cites a run not archived, or an archived file not the one its manifest lists."""
    from catnip.results import doc_regions
    import catnip.papers  # noqa: F401 (registers the papers' layouts: papers/__init__.py)
    base = _root(root)
    outcome = doc_regions.check(base, _files(base, files))
    _report(outcome, f"{outcome.regions} region(s) in {outcome.docs} doc(s) match {base / 'archive'}")
