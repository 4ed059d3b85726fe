"""A run's free-text note (issue 48, finding 8): what a researcher wants to remember about a run
("re-run after the window-probe fix; machine busy"), kept in `runs.note` (schema version 10,
results/store.py) and set, changed and cleared from `catnip note`, `catnip.api.Run.set_note` and
the dashboard's run page, which all go through `set_note` and `clear_note` here, so every one of
them takes and refuses the same notes in the same words.

A note is text: line ends made `\\n` (a browser's form sends `\\r\\n`), leading and trailing
blanks taken off, then at most MAX_CHARS characters (Unicode code points), none of them a control
character but the tab and the line end (a terminal escape in a note would redraw `catnip list`).
An empty note is refused: clearing is its own action. The text is stored as it is and shown as
text (the dashboard escapes it; nothing runs it). It travels with the run: `catnip export` and
`catnip import` carry every column of `runs` (results/archive.py), and results/import_schema.py
checks an imported note with `problem` below.
"""

from __future__ import annotations

import unicodedata
from typing import Any

MAX_CHARS = 2000   # a paragraph or a few: what a lab notebook line about a run holds, well inside a form post
SHOWN_CHARS = 80   # the run list shows a note's first line up to this many characters
ALLOWED_CONTROLS = {"\t", "\n"}


class NoteError(ValueError):
    """A note that is not taken, or a run that has none to take; the message is one line."""


class NotText(NoteError, TypeError):
    """The note given is not a string."""


class EmptyNote(NoteError):
    """The note is empty once blanks are taken off: clearing a note is its own action."""


class NoteTooLong(NoteError):
    """More than MAX_CHARS characters."""


class UnknownRun(NoteError):
    """No run of that id in the database."""


def normalise(text: str) -> str:
    """Line ends as `\\n`, leading and trailing blanks off."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def problem(text: Any) -> str | None:
    """Why `text` is not a note as stored (already normalised), or None when it is one."""
    if not isinstance(text, str):
        return f"a note is text, not {type(text).__name__}"
    if not text:
        return "the note is empty"
    if len(text) > MAX_CHARS:
        return f"the note is {len(text)} characters long; at most {MAX_CHARS}"
    for i, ch in enumerate(text):
        if ch in ALLOWED_CONTROLS:
            continue
        kind = unicodedata.category(ch)
        if kind == "Cc":
            return f"the note holds the control character U+{ord(ch):04X} at character {i + 1}; only tabs and line ends are kept"
        if kind == "Cs":
            return f"the note holds a lone surrogate (U+{ord(ch):04X}) at character {i + 1}, which is not UTF-8 text"
    if text != normalise(text):
        return "the note starts or ends with blanks, or has a carriage return"
    return None


def check(text: Any) -> str:
    """The note as it will be stored, or NoteError (NotText, EmptyNote) saying why not."""
    if not isinstance(text, str):
        raise NotText(f"a note is text, not {type(text).__name__}")
    note = normalise(text)
    why = problem(note)
    if why is not None:
        raise EmptyNote(why) if not note else NoteTooLong(why) if len(note) > MAX_CHARS else NoteError(why)
    return note


def set_note(store, run_id: str, text: Any) -> str:
    """Stores `text` (checked) as run `run_id`'s note, replacing any; returns the note as stored.
    NoteError when the note is not taken, UnknownRun when `store` has no such run."""
    note = check(text)
    if not store.set_note(run_id, note):
        raise UnknownRun(f"no run {run_id[:120]!r} in {store.path}")
    return note


def clear_note(store, run_id: str) -> bool:
    """Removes run `run_id`'s note; returns whether it had one. UnknownRun when there is no such run."""
    run = store.run(run_id)
    if run is None:
        raise UnknownRun(f"no run {run_id[:120]!r} in {store.path}")
    had = note_of(run) is not None
    store.set_note(run_id, None)
    return had


def note_of(run: Any) -> str | None:
    """The note of a `runs` row (None for none, or a row of a database read before version 10)."""
    keys = run.keys() if hasattr(run, "keys") else ()
    return run["note"] if "note" in keys and run["note"] else None


def first_line(note: str | None, limit: int = SHOWN_CHARS) -> str:
    """What a list shows of a note: its first line, cut at `limit` characters with an ellipsis
    (also when more lines follow); "" for no note."""
    if not note:
        return ""
    line, _, rest = note.partition("\n")
    if len(line) > limit:
        return line[:limit - 1].rstrip() + "\u2026"
    return line + (" \u2026" if rest.strip() else "")
