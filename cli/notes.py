"""`catnip note RUN [TEXT]`: a run's free-text note, shown, set, changed or cleared (issue 48,
finding 8). The note is the API's (catnip/api.py `Run.note`, `Run.set_note`, `Run.clear_note`),
checked by results/run_notes.py as the dashboard's run page checks it. Registered on the `catnip`
group by cli/main.py."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import click

from catnip import api
from catnip.controller.validate import Refused
from catnip.results import run_notes
from catnip.results.store import StoreVersionError
from catnip.testbed import paths

# What `-` reads from standard input at most: the longest note in UTF-8 (4 bytes a character),
# its line ends as \r\n, and one byte more to tell a longer text.
STDIN_BYTES = run_notes.MAX_CHARS * 4 * 2 + 1


def _read_stdin() -> str:
    data = sys.stdin.buffer.read(STDIN_BYTES) if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    if len(data) >= STDIN_BYTES:
        raise Refused(f"standard input holds more than {STDIN_BYTES - 1} bytes; a note is at most"
                      f" {run_notes.MAX_CHARS} characters")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"standard input is not UTF-8 text (byte {exc.start})") from None


HELP = f"""Show RUN's note (RUN an id or an unambiguous prefix); with TEXT, set it, replacing any
(`-` reads it from standard input); with --clear, remove it. A note is free text of at most
{run_notes.MAX_CHARS} characters (tabs and line ends kept, no other control character), kept with
the run: `catnip list`, the dashboard, `catnip export` and `catnip import` carry it."""


@click.command(name="note", short_help="Show, set or clear a run's free-text note.", help=HELP)
@click.argument("run")
@click.argument("text", required=False)
@click.option("--clear", is_flag=True, help="remove the run's note")
@click.option("--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file (default {paths.database()})")
def note_cmd(run: str, text: str | None, clear: bool, db: str | None) -> None:
    if clear and text is not None:
        raise Refused("TEXT and --clear: give one (TEXT sets the note, --clear removes it)")
    database = Path(db or paths.database())
    if not database.exists():  # opening would create an empty database
        raise Refused(f"no database {database} (give --db)")
    from catnip.cli.archive import _open, run_id_in
    with _open(db) as store:
        run_id = run_id_in(store, run)
    target = api.Run(run_id, database)
    try:
        if clear:
            had = target.clear_note()
            click.echo(f"run {run_id}: note removed" if had else f"run {run_id} had no note")
            return
        if text is None:
            note = target.note
            click.echo(note if note is not None else f"run {run_id} has no note (`catnip note {run_id} TEXT` sets one)")
            return
        note = target.set_note(_read_stdin() if text == "-" else text)
    except run_notes.EmptyNote:
        raise Refused("the note is empty: give its text, or --clear to remove the run's note") from None
    except run_notes.NoteError as exc:
        raise Refused(f"run {run_id}: {exc}") from None
    except (sqlite3.Error, StoreVersionError) as exc:  # read-only, full, locked: one line (results/store.py)
        raise click.ClickException(str(exc)) from None
    lines = note.count("\n") + 1
    click.echo(f"run {run_id}: note set ({len(note)} characters" + (f", {lines} lines)" if lines > 1 else ")"))
