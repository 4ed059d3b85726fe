"""Records a dead run's clients wrote, read into the database: the pages and samples a runner
killed by SIGKILL (or a crash, a reboot) measured but never collected.

A point's clients write every unit of work as one JSON line the moment it ends, into the point's
folder (`runs/RUN/pointN/`); the runner reads those files only when the point ends. When the
runner dies first, the point is marked `interrupted` (close_abandoned_runs, below)
and its files are read here by the applications' own `collect`, given back what their start had
set up in memory (the client-server pairs, each client's output file and start instant, read from
the config the runner wrote for it). Rows go in as a live point's would; the point and the run
are then `recovered`, with a note saying what was read, and never `done`.

Read once: only points still `interrupted`, and only while no process writes into the point's
folder any more (otherwise later lines would be lost): a run whose processes are still alive
(no watchdog, no `catnip clean` yet) is left for later. An application whose rows the runner had
stored already (a kill during collection) is skipped rather than stored twice. Recovered: web
(objects, pages, page_time samples) and the client-server applications' unit samples (telnet,
ftp, burst's bursts); an application the recovery cannot read (bulk) is named in the note.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from catnip.results.store import Store
from catnip.testbed import paths, processes

WRITERS_WAIT_S = 3.0  # a runner just killed: its watchdog ends the clients within milliseconds


class _Ended:
    """Stands for a client process that is gone (collect asks its exit status for messages)."""

    def poll(self) -> int | None:
        return None


def _writers(folder: Path) -> list[int]:
    """Processes whose command line names something in `folder` (clients, Apache, engines)."""
    me, needle, found = os.getpid(), str(folder.resolve()) + "/", []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if needle in argv.replace("\0", " "):
            found.append(int(entry.name))
    return found


def _hosts(sc: Any) -> list:
    """The point's hosts as its network named them (testbed/network.py), without building it:
    name, group and delay-class tag are what collect reads."""
    from catnip.workloads.apps.base import Host
    hosts = []
    for group in sc.graph().groups:
        for i, short in enumerate(group.host_names()):
            cls = group.delay_class(i)
            hosts.append(Host(name=paths.PREFIX + short, ip="", group=group.name, index=i,
                              tag=cls.tag if cls else ""))
    return hosts


def _config(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _rebuilt(app: Any) -> bool:
    """Give an application back the state its start set up; False when it has none to read."""
    from catnip.workloads.apps.base import Proc
    from catnip.workloads.apps.common import ClientServerApp
    from catnip.workloads.apps.web import Web
    workdir = app.ctx.workdir
    if isinstance(app, Web):
        for client, server in app.pairs():
            cfg = _config(workdir / f"client-{client.name}.json")
            if cfg is None or not isinstance(cfg.get("start_at"), (int, float)):
                continue  # never released: it measured nothing
            app.outputs[client.name] = (client, server, workdir / f"client-{client.name}.jsonl")
            app.due[client.name] = cfg["start_at"]
        return bool(app.outputs)
    if isinstance(app, ClientServerApp):
        for client, server in app.pairs():
            name = f"{app.kind}-{client.name}"
            cfg = _config(workdir / f"{name}.json")
            if cfg is None or not isinstance(cfg.get("start_at"), (int, float)):
                continue
            app.ctx.start_at = cfg["start_at"]
            app.outputs.append((client, server, workdir / f"{name}.jsonl",
                                Proc(client, "client", _Ended(), workdir / f"{name}.log")))  # type: ignore[arg-type]
        return bool(app.outputs)
    return False


def _collect(app: Any) -> Any:
    from catnip.workloads.apps.common import ClientServerApp
    if isinstance(app, ClientServerApp):
        # The units every client wrote; an override may want its servers (burst's statistics).
        return ClientServerApp.collect(app)
    return app.collect()


def _already(store: Store, run_id: str, point: int, instance: str, web: bool) -> bool:
    db = store.db
    if db.execute("SELECT 1 FROM samples WHERE run_id=? AND point=? AND app=? LIMIT 1",
                  (run_id, point, instance)).fetchone():
        return True
    return web and db.execute("SELECT 1 FROM pages WHERE run_id=? AND point=? LIMIT 1",
                              (run_id, point)).fetchone() is not None


def recover_point(store: Store, run: Any, point: Any, folder: Path) -> tuple[dict[str, int], list[str]]:
    """Read one interrupted point's client files into the store: (counts stored by kind, notes on
    what could not be read)."""
    from catnip.spec.scenario import stored_point
    from catnip.workloads.apps.base import AppContext, lookup
    from catnip.workloads.apps.common import ClientServerApp
    from catnip.workloads.apps.web import Web
    sc = stored_point(json.loads(run["scenario"]), json.loads(run["sweep"] or "{}"), json.loads(point["assignment"]))
    hosts = _hosts(sc)
    graph = sc.graph()
    counts = {"pages": 0, "objects": 0, "samples": 0}
    notes = []
    for spec in sc.applications:
        cls = lookup(spec.kind)
        workdir = folder / spec.instance if len(sc.applications) > 1 else folder
        if not workdir.is_dir():
            continue

        def of(name: str) -> list:
            groups = {g.name for g in graph.groups_named(name)}
            return [h for h in hosts if h.group in groups]
        ctx = AppContext(workdir=workdir, seed=point["seed"] or 0, time_limit=sc.run.time_limit,
                         python=paths.python(), repo=paths.REPO, start_at=0.0)
        try:
            app = cls(spec, ctx, of(spec.clients), of(spec.servers) if spec.servers else [])
            if not isinstance(app, (Web, ClientServerApp)):
                notes.append(f"{spec.instance}: {spec.kind} records are not recovered")
                continue
            if not _rebuilt(app):
                continue  # no client was started
            if _already(store, run["id"], point["point"], spec.instance, isinstance(app, Web)):
                continue  # the runner had stored them before it died
            result = _collect(app)
        except Exception as exc:  # noqa: BLE001 - the other applications' records are still read
            notes.append(f"{spec.instance}: its files could not be read ({type(exc).__name__}: {exc})")
            continue
        objects, pages = result.records.get("objects", []), result.records.get("pages", [])
        if objects or pages:
            store.add_transfers(run["id"], point["point"], objects, pages)
        counts["objects"] += len(objects)
        counts["pages"] += len(pages)
        counts["samples"] += store.add_samples(run["id"], point["point"], result.samples)
    return counts, notes


def recover_run(store: Store, run_id: str, wait: float = 0.0) -> str | None:
    """Recover every interrupted point of a run whose processes are all gone (waiting up to `wait`
    seconds for them to go); returns the note recorded, None when there was nothing to read yet."""
    run = store.run(run_id)
    if run is None or run["status"] not in ("interrupted", "recovered"):
        return None
    points = [p for p in store.points(run_id) if p["status"] == "interrupted"]
    if not points:
        return None
    folder = paths.runs_dir(store.path) / run_id
    deadline = time.monotonic() + wait
    while _writers(folder):
        if time.monotonic() >= deadline:
            return None  # still written to: `catnip clean` (or the next look after the watchdog) reads it
        time.sleep(0.05)
    said, failed = [], []
    for point in points:
        where = folder / f"point{point['point']}"
        if not where.is_dir():  # its runner died before the point made its folder
            continue
        try:
            counts, notes = recover_point(store, run, point, where)
        except Exception as exc:  # noqa: BLE001 - its scenario no longer loads: said, and left as it was
            failed.append(f"point {point['point']}: not recovered ({type(exc).__name__}: {str(exc)[:200]})")
            continue
        if not any(counts.values()):
            continue
        what = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        note = f"recovered from its clients' files after its runner died: {what}" + \
            (f"; {'; '.join(notes)}" if notes else "")
        store.update_point(run_id, point["point"], status="recovered",
                           error=f"{point['error']}; {note}" if point["error"] else note)
        said.append(f"point {point['point']}: {what}")
    if not said:
        return None
    note = "records recovered from the run's folder: " + "; ".join(said + failed)
    store.mark_recovered(run_id, note)
    return note


def recover_interrupted(store: Store) -> list[str]:
    """Every interrupted run with points not yet recovered (`catnip clean`, once nothing runs)."""
    out = []
    rows = store.db.execute("SELECT DISTINCT r.id FROM runs r JOIN points p ON p.run_id = r.id"
                            " WHERE r.status IN ('interrupted', 'recovered') AND p.status = 'interrupted'").fetchall()
    for (run_id,) in rows:
        note = recover_run(store, run_id)
        if note:
            out.append(f"run {run_id}: {note}")
    return out


def after_clean(db: str | Path | None = None) -> list[str]:
    """`catnip clean`'s last step, once nothing of a dead run runs any more: its runs marked
    interrupted and their clients' records read (a line per run). Nothing without a database;
    one line, nothing raised, when it cannot be written (the cleaning itself is done)."""
    import sqlite3
    path = Path(db or paths.database())
    if not path.exists():
        return []
    try:
        with Store(path) as store:
            if store.readonly:
                return [f"records of killed runs not recovered: {path} is read-only here"]
            close_abandoned_runs(store, recover=False)
            return recover_interrupted(store)
    except sqlite3.Error as exc:
        return [f"records of killed runs not recovered: {exc}"]


def close_abandoned_runs(store: Store, recover: bool = True) -> list[str]:
    """Runs recorded as running whose runner has gone (SIGKILL, a crash, a reboot) are marked
    interrupted, with their running points, so lists and the dashboard stop waiting for them;
    returns their ids. What their clients had written to the runs' folders is then read into the
    database, marked recovered (recover_run). Runs recorded before runners were named cannot be
    told and stay as they are."""
    closed = []
    for run in store.running_runs():
        if run["runner"] and not processes.alive(run["runner"]):
            pid = run["runner"].split("/")[1]
            store.interrupt_run(run["id"], f"its runner (pid {pid}) ended without finishing it (killed, or the"
                                           " machine restarted); its watchdog or `catnip clean` removes what"
                                           " it left")
            closed.append(run["id"])
    for run_id in closed if recover and not store.readonly else []:
        recover_run(store, run_id, wait=WRITERS_WAIT_S)
    return closed
