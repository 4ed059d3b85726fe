"""`catnip export RUN` and `catnip import FILE`: one run as one file (results/archive.py), to take a
run's records elsewhere and read them there as `catnip report` and the dashboard read the original;
`catnip export RUN --tidy DIR`: the run as tidy tables for analysis (results/tidy.py, docs/analysis.md).
Registered on the `catnip` group by cli/main.py."""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path

import click

from catnip.controller.validate import Refused
from catnip.testbed import paths


def _open(db: str | None):
    from catnip.results.store import Store, StoreVersionError
    try:
        return Store(db or paths.database())
    except (sqlite3.Error, StoreVersionError) as exc:  # read-only, full, newer, not a database: one line
        raise click.ClickException(str(exc)) from None


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


@click.command(name="export", short_help="One run as one file for a colleague, or as tidy tables (--tidy).")
@click.argument("run")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="the file to write (default RUN_ID.catnip.json.gz here); an existing file is not replaced")
@click.option("--tidy", type=click.Path(file_okay=False), default=None,
              help="instead: a new folder of CSV (and Parquet) tables, one per metric, a row per sample")
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
def export_cmd(run: str, out: str | None, tidy: str | None, db: str | None) -> None:
    """Write RUN (an id or an unambiguous prefix) as one gzip'd JSON file: every row the database
    holds for it, the schema, and a list of the run's folder (docs/database.md). With --tidy DIR,
    write it as tidy tables instead: one CSV (and Parquet) per metric, one row per sample, with the
    run's metadata in every row (docs/analysis.md)."""
    from catnip.results import archive
    from catnip.testbed.metadata import git_revision
    if out is not None and tidy is not None:
        raise Refused("--out and --tidy: give one (--out writes the archive file, --tidy a folder of tables)")
    if not Path(db or paths.database()).exists():  # opening would create an empty database
        raise Refused(f"no database {db or paths.database()} (give --db)")
    with _open(db) as store:
        run_id = run_id_in(store, run)
        if tidy is not None:
            _tidy(store, run_id, Path(tidy))
            return
        try:
            document = archive.export_run(store, run_id, paths.runs_dir(store.path) / run_id, git_revision())
        except archive.ArchiveError as exc:
            raise Refused(str(exc)) from None
    target = Path(out or archive.default_name(run_id))
    try:
        size = archive.write(document, target)
    except archive.ArchiveError as exc:
        raise Refused(str(exc)) from None
    rows = sum(document["summary"]["rows"].values())
    folder = document["run_folder"]
    click.echo(f"run {run_id}: {document['summary']['rows']['points']} point(s), {rows} rows -> {target}"
               f" ({_size(size)})"
               + (f"; its folder ({len(folder['files'])} files) is listed, not included" if folder else ""))


def _tidy(store, run_id: str, folder: Path) -> None:
    from catnip.results import tidy as tidy_mod
    try:
        files = tidy_mod.write(store, run_id, folder)
    except tidy_mod.TidyError as exc:
        raise Refused(str(exc)) from None
    kinds = sorted({f.suffix.lstrip(".") for f in files})
    click.echo(f"run {run_id}: {len({f.stem for f in files})} table(s) as {' and '.join(kinds)} -> {folder}"
               + ("" if "parquet" in kinds else " (no Parquet: pyarrow is not installed)"))


@click.command(name="import", short_help="Read a run written by `catnip export` into the database.")
@click.argument("file")  # checked by archive.read: a regular file, refused in one line otherwise
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
@click.option("--as", "new_id", metavar="NEW_ID", default=None, help="record the run under this id instead of its own")
def import_cmd(file: str, db: str | None, new_id: str | None) -> None:
    """Read FILE (written by `catnip export`) into the database, in one transaction: `catnip report`
    and the dashboard then show the run as they showed the original."""
    from catnip.results import archive
    try:
        if new_id is not None:
            archive.check_new_id(new_id)
        document, sha256 = archive.read(Path(file))  # before the database is opened (or created)
    except archive.ArchiveError as exc:
        raise Refused(str(exc)) from None
    with _open(db) as store:
        try:
            done = archive.import_run(store, document, new_id, source=file, sha256=sha256)
        except archive.ImportFailed as exc:  # the database's failure, not the file's
            raise click.ClickException(str(exc)) from None
        except archive.ArchiveError as exc:
            raise Refused(str(exc)) from None
    was = document["run_id"]
    click.echo(f"imported run {was}" + (f" as {done.run_id}" if done.run_id != was else "")
               + f" into {store.path} ({done.rows} rows); `catnip report {done.run_id}"
               + (f" --db {shlex.quote(db)}" if db is not None else "") + "` shows it")


def run_id_in(store, run: str) -> str:
    """The id of the one run RUN (an id or an unambiguous prefix) names in STORE, or Refused."""
    found = store.find_run(run)
    if found is None:
        raise Refused(f"no run {run[:120]!r} in {store.path} (`catnip list` shows the runs; a prefix must name"
                      " one run)")
    return found["id"]
