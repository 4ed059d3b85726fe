"""The paper figures the CLI writes to files, on the dashboard (issue 48, finding 4), each drawn by
the function the CLI calls:

* newCWV's Fig. 10 (one burst's segments against time; Z. Hossain, G. Fairhurst, "Enhancing HTTP
  Web Protocol Performance with Updated Transport Layer Techniques", IJCNC 15(4), 2023, section
  4.5): `catnip burst-seq RUN` -> results/burst_capture.figure_spec, for a run that captured its
  bottleneck (run.capture: true) and recorded burst samples;
* the hysteresis paper's Figs. 3, 4 and 6 (Y. Li, C. Williamson, "A Hysteresis Model for Web/TCP
  Transfer Latency", IEEE MASCOTS 2004): `catnip model validate RUN --out DIR` ->
  models/validation_figures (predictions, figure_specs), for a transfer measurement;
* CATNIP's Fig. 2 (C. Williamson, Q. Wu, "A Case for Context-Aware TCP/IP", ACM SIGMETRICS PER
  29(4), 2002, section III-B, Fig. 2): `catnip fig2` is an experiment of its own that stores no
  run; it keeps the series it drew beside its figure (docs/figures/fig2-senders.json), and the
  page draws them with controller/fig2.py `figure`, the function that drew the file, beside each
  sender's bursts, ours and the paper's.

A run without the data a figure needs gets the page with a note saying what is missing.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from flask import Flask, abort, current_app, render_template, request, send_file, url_for

from catnip.models import validation
from catnip.results import burst_capture
from catnip.results.store import Store
from catnip.spec import units
from catnip.testbed import paths

FIG2_FILE = Path("docs/figures/fig2-senders.svg")  # `catnip fig2 --out docs/figures/fig2-senders.svg` (docs/spm.md)
FIG2_DATA = Path("docs/figures/fig2-senders.json")  # what that run drew FIG2_FILE from (fig2.data_path)
MAX_MODEL_SAMPLES = 20_000  # the CLI takes up to 1,000,000; a page is asked for by a browser
NEWCWV = "Z. Hossain, G. Fairhurst, IJCNC 15(4), 2023"
HYSTERESIS = 'Y. Li, C. Williamson, "A Hysteresis Model for Web/TCP Transfer Latency", IEEE MASCOTS 2004'


class _Specs:
    """The models' figures of a run, by what they depend on (the run's trials and the query):
    sampling the hysteresis model for every cell takes seconds, so a page reloaded is not redone."""

    def __init__(self, size: int = 8):
        self.size, self.lock, self.items = size, threading.Lock(), OrderedDict()

    def get(self, key: Any, build: Callable[[], Any]) -> Any:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = build()
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return value


def _is_transfers(run) -> bool:
    try:
        return json.loads(run["scenario"] or "{}").get("kind") == "transfers"
    except (ValueError, AttributeError):
        return False


def burst_runs(store: Store) -> set[str]:
    """Runs with a captured point and burst samples: what Fig. 10 is drawn from."""
    rows = store.db.execute("SELECT DISTINCT p.run_id FROM points p WHERE p.capture IS NOT NULL AND p.capture != ''"
                            " AND EXISTS (SELECT 1 FROM samples s WHERE s.run_id = p.run_id AND s.point = p.point"
                            " AND s.metric = 'burst_time')").fetchall()
    return {r[0] for r in rows}


def run_links(store: Store, run) -> list[dict[str, Any]]:
    """The paper figures of a run's page: each with its page, or why the run has none to draw."""
    run_id = run["id"]
    if _is_transfers(run):
        return [{"title": "Hysteresis model, Figs. 3, 4 and 6 (the models against this measurement)",
                 "url": url_for("model_figures", run_id=run_id), "why": None}]
    out = []
    if run_id in burst_runs(store):
        out.append({"title": "newCWV Fig. 10: one burst's segments against time", "why": None,
                    "url": url_for("burst_seq_figure", run_id=run_id)})
    else:
        out.append({"title": "newCWV Fig. 10", "url": None,
                    "why": "needs a point that captured its bottleneck (run.capture: true) and recorded burst samples,"
                           " as newcwv-fig10-pacing-seq does; this run has none"})
    out.append({"title": "Hysteresis model, Figs. 3, 4 and 6", "url": None,
                "why": "drawn from a transfer measurement (catnip model measure); this run is not one"})
    return out


def _burst_query(args) -> tuple[int | None, float | None, int, dict[str, str]]:
    """size, idle, nth as `catnip burst-seq` takes them (`any` for every size or idle); ValueError."""
    size_text, idle_text = args.get("size", "80KB").strip(), args.get("idle", "any").strip()
    nth_text = args.get("nth", "2").strip()
    size = None if size_text == "any" else units.parse_size(size_text)
    idle = None if idle_text == "any" else units.parse_duration(idle_text)
    if not re.fullmatch(r"\d{1,4}", nth_text):
        raise ValueError(f"nth is which burst of the cell, a whole number from 0 (e.g. 2), not {nth_text[:20]!r}")
    return size, idle, int(nth_text), {"size": size_text, "idle": idle_text, "nth": nth_text}


def _model_query(args) -> tuple[float, int, bool, dict[str, str]]:
    """delack, samples, include_late as `catnip model validate` takes them; ValueError."""
    delack_text, samples_text = args.get("delack", "100ms").strip(), args.get("samples", "2000").strip()
    delack = units.parse_duration(delack_text)
    if not re.fullmatch(r"\d{1,7}", samples_text) or not 100 <= int(samples_text) <= MAX_MODEL_SAMPLES:
        raise ValueError(f"samples is a whole number from 100 to {MAX_MODEL_SAMPLES:,}, not {samples_text[:20]!r}")
    late = args.get("include_late", "")
    if late not in ("", "1"):
        raise ValueError(f"include_late is '1' or left out, not {late[:20]!r}")
    return delack, int(samples_text), late == "1", {"delack": delack_text, "samples": samples_text,
                                                     "include_late": late}


def model_specs(store: Store, run_id: str, delack: float, samples: int, include_late: bool
                ) -> tuple[list[tuple[str, dict]], str | None]:
    """Figs. 3, 4, 6 of a transfer measurement as `catnip model validate --out` draws them, or
    why there are none (no completed transfer, every point left out as not real time)."""
    from catnip.models.validation_figures import figure_specs, predictions
    run = store.run(run_id)
    points = store.points(run_id)
    late = set() if include_late else {p["point"] for p in points if not p["realtime_ok"]}
    cells = validation.cells(store.transfer_trials(run_id), late)
    if not cells:
        return [], ("no completed transfers" + (f" ({len(late)} points left out as not real time: ask with"
                                                 " include_late=1)" if late else ""))
    preds = predictions(cells, json.loads(run["scenario"])["path"], delack, samples)
    specs = figure_specs(cells, preds)
    return specs, None if specs else "no loss point has two transfer sizes or more in a figure's range"


def fig2_view(path: Path) -> tuple[list[tuple[str, dict]], list[dict[str, str]], str | None, float | None]:
    """CATNIP Fig. 2 from the series `catnip fig2` kept (controller/fig2.py write_data): the
    figure as that command drew it, and per sender its bursts (a burst ends at a silence of more
    than half the RTT, as the command prints them) beside the paper's; or why there is none."""
    from catnip.controller import fig2
    if not path.is_file():
        return [], [], f"{FIG2_DATA} is not in this checkout; `catnip fig2 --out {FIG2_FILE}` writes it", None
    try:
        results, rtt = fig2.read_data(path)
    except ValueError as exc:
        return [], [], str(exc), None
    rows = []
    for name, title in fig2.SENDERS:
        found = fig2.bursts([t for t, _ in results[name]], gap=rtt / 1000 / 2)
        rows.append({"sender": title, "segments": str(sum(n for n, _ in found)),
                     "ours": ", ".join(f"{n} ({1000 * span:.1f} ms)" if n > 1 else "1" for n, span in found),
                     "paper": fig2.PAPER_BURSTS[name]})
    return [("fig2", fig2.figure(results, rtt))], rows, None, rtt


def register(app: Flask, store_of: Callable[[], Store], check_run_id: Callable[[str], str],
             capture_in_folder: Callable[[Any, str, Path], Path | None]) -> None:
    """The figures' routes; the app's store, run-id check and capture-path rule are passed in."""
    app.extensions["catnip_model_figures"] = _Specs()

    def known(run_id: str):
        check_run_id(run_id)
        run = store_of().run(run_id)
        if run is None:
            abort(404, description=f"no run {run_id!r}; the runs page lists every run")
        return run

    @app.get("/runs/<run_id>/figures/burst-seq")
    def burst_seq_figure(run_id: str):
        run = known(run_id)
        try:
            size, idle, nth, asked = _burst_query(request.args)
        except ValueError as exc:
            abort(400, description=str(exc))
        folder = (paths.runs_dir(current_app.config["CATNIP_DB"]) / run_id).resolve()

        def capture_of(row) -> Path | None:
            # As the capture download: only a file inside the run's own folder is read.
            inside = capture_in_folder(run, row["capture"], folder)
            path = inside.resolve() if inside is not None else None
            return path if path is not None and path.is_relative_to(folder) else None

        specs, note, lines = [], None, []
        try:
            spec, chosen = burst_capture.figure_spec(store_of(), run_id, size, idle, nth, capture_of)
            specs = [("fig10", spec)]
            lines = [f"point {p} ({label}): burst {b.index} ({b.size} B after {b.idle:g} s): {len(b.segments)} segments"
                     f" over {1000 * (b.spread or 0):.1f} ms, {b.retransmitted} retransmitted" for p, label, b in chosen]
        except burst_capture.CaptureError as exc:
            note = str(exc)
        return render_template("paper_figure.html", run=run, title="newCWV Fig. 10: one burst's segments against time",
                               citation=f"{NEWCWV}, section 4.5, Fig. 10", specs=specs, note=note, lines=lines,
                               cli=f"catnip burst-seq {run_id} --size {asked['size']} --idle {asked['idle']}"
                                   f" --nth {asked['nth']}", asked=asked, kind="burst")

    _register_models(app, store_of, known)
    _register_index(app, store_of)


def _register_models(app: Flask, store_of: Callable[[], Store], known: Callable[[str], Any]) -> None:
    @app.get("/runs/<run_id>/figures/models")
    def model_figures(run_id: str):
        run = known(run_id)
        try:
            delack, samples, include_late, asked = _model_query(request.args)
        except ValueError as exc:
            abort(400, description=str(exc))
        specs, note = [], None
        if not _is_transfers(run):
            note = f"run {run_id} is not a transfer measurement (catnip model measure): the models have nothing to meet"
        else:
            store = store_of()
            count = store.db.execute("SELECT count(*), max(rowid) FROM transfer_trials WHERE run_id=?",
                                     (run_id,)).fetchone()
            key = (str(store.path), run_id, tuple(count), delack, samples, include_late)
            specs, note = app.extensions["catnip_model_figures"].get(
                key, lambda: model_specs(store, run_id, delack, samples, include_late))
        cli = (f"catnip model validate {run_id} --out DIR --delack {asked['delack']} --samples {samples}"
               + (" --include-late" if include_late else ""))
        return render_template("paper_figure.html", run=run, title="Hysteresis model: Figs. 3, 4 and 6",
                               citation=f"{HYSTERESIS}, sections 4 and 5", specs=specs, note=note, lines=[],
                               cli=cli, asked=asked, kind="models")


def _register_index(app: Flask, store_of: Callable[[], Store]) -> None:
    @app.get("/figures/fig2")
    def fig2_figure():
        specs, rows, note, rtt = fig2_view(paths.REPO / FIG2_DATA)
        found = (paths.REPO / FIG2_FILE).is_file()
        return render_template("fig2.html", found=found, file=str(FIG2_FILE), data=str(FIG2_DATA), specs=specs,
                               rows=rows, note=note, rtt=rtt)

    @app.get("/figures/fig2.svg")
    def fig2_file():
        path = paths.REPO / FIG2_FILE
        if not path.is_file():
            abort(404, description=f"{FIG2_FILE} is not there: `catnip fig2 --out {FIG2_FILE}` writes it")
        return send_file(path, mimetype="image/svg+xml", max_age=300)

    @app.get("/figures")
    def figures_index():
        store = store_of()
        runs = store.runs()
        bursts = burst_runs(store)
        return render_template("figures.html", transfers=[r for r in runs if _is_transfers(r)],
                               bursts=[r for r in runs if r["id"] in bursts])
