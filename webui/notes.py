"""A run's free-text note on the dashboard (issue 48, finding 8): shown and edited on the run page,
its first line on the runs page. The one thing the dashboard writes into the results database.

The note is checked by results/run_notes.py, as `catnip note` and `catnip.api.Run.set_note` check
it, and written by `POST /runs/ID/note` (a form of the run page: CSRF token and same-origin check
as every POST of the dashboard, webui/hosts.py; fields `note`, or `clear`; at most
run_notes.MAX_CHARS characters). A note that is not taken gives a page with the reason next to
the form, the text as typed kept in it, status 400. The note is shown as text (escaped; never run).

The page of a run that has ended is built once and kept (webui/app.py, `_PageCache`); its note
section is not part of it: the page holds MARKER where the section goes, and `splice` puts the
section in on every request, with the form's token for that visitor, so a kept page carries no
token and changing a note does not build the page again.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable

from flask import Flask, abort, jsonify, redirect, render_template, request, url_for

from catnip.results import run_notes
from catnip.results.store import Store

# Where the run page (webui/templates/run.html) takes its note section. An HTML comment: whatever
# else the page shows is escaped, so this text appears in it only where the template put it.
MARKER = "<!-- catnip:run-note -->"
FIELDS = {"csrf_token", "note", "clear"}


def section(run_id: str, note: str | None, draft: str | None = None, error: str | None = None) -> str:
    """The run page's note section: the note, and the form to change or clear it."""
    return render_template("_run_note.html", run_id=run_id, note=note, draft=note if draft is None else draft,
                           error=error, max_chars=run_notes.MAX_CHARS)


def splice(page: str, run_id: str, run: sqlite3.Row | None) -> str:
    """The run page with its note section in place (none for a run not yet in the database)."""
    shown = "" if run is None else section(run_id, run_notes.note_of(run))
    return page.replace(MARKER, shown, 1)


def _form_problem(form: Any) -> str | None:
    unknown = sorted(k for k in form.keys() if k not in FIELDS)
    if unknown:
        return f"unknown field {unknown[0][:40]!r}: the note form sends note, or clear"
    for key in ("note", "clear"):
        if len(form.getlist(key)) > 1:
            return f"{key} is given {len(form.getlist(key))} times"
    if "clear" in form and form["clear"] != "1":
        return f"clear={form['clear'][:20]!r}: the Clear button sends clear=1"
    if "clear" not in form and "note" not in form:
        return "the form sent no note (field note), nor clear"
    return None


def register(app: Flask, store: Callable[[], Store], check_run_id: Callable[[str], str]) -> None:
    """The note's route and the runs page's `note_line` filter."""
    app.add_template_filter(run_notes.first_line, "note_line")

    @app.post("/runs/<run_id>/note")
    def set_run_note(run_id: str):
        check_run_id(run_id)
        db = store()
        run = db.run(run_id)
        if run is None:
            abort(404, description=f"no run {run_id!r} in {db.path}; the runs page lists every run")
        wants_json = request.accept_mimetypes.best == "application/json"
        why = _form_problem(request.form)
        if why is not None:
            abort(400, description=why)
        try:
            if "clear" in request.form:
                run_notes.clear_note(db, run_id)
                note = None
            else:
                note = run_notes.set_note(db, run_id, request.form["note"])
        except run_notes.NoteError as exc:
            message = str(exc) + (": Clear removes a run's note" if isinstance(exc, run_notes.EmptyNote) else "")
            if wants_json:
                return jsonify(error=message), 400
            return render_template("run_note.html", run_id=run_id, run=run,
                                   note_section=section(run_id, run_notes.note_of(run), request.form["note"],
                                                        message)), 400
        except sqlite3.Error as exc:  # read-only, full, locked (results/store.py says which in one line)
            abort(503, description=f"the note of run {run_id} was not saved: {exc}")
        if wants_json:
            return jsonify(run_id=run_id, note=note)
        return redirect(url_for("run_view", run_id=run_id, _anchor="run-note"), code=303)
