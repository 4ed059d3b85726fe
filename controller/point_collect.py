"""What a point leaves in the store after its workload: every application's samples and records,
the engines' counters, the hosts' TCP counters, the measured windows' link counters, and the
fidelity record with its real-time verdict (controller/fidelity.py). Each step runs once, also
after a failure or a cancel (then with what was measured until then).
"""

from __future__ import annotations

from typing import Any

from catnip.controller import fidelity as fidelity_mod
from catnip.results.store import Store
from catnip.testbed import engine as engine_mod
from catnip.testbed import hostconfig, metadata
from catnip.testbed.links import KernelBackend
from catnip.workloads.apps.base import AppError


class Collector:
    """The records of one point, each written once."""

    def __init__(self, store: Store, run_id: str, index: int):
        self.store, self.run_id, self.index = store, run_id, index
        self.recorded = False
        self.counted = False
        self.ready_after_start: dict[str, dict[str, float]] = {}  # application -> client -> s (AppResult)
        self.first_unit_after_due: dict[str, dict[str, float]] = {}  # the same, for the first unit's start
        self.stopped_by_us: set[int] = set()  # processes we ended (time limit, cancel): not failures

    def add_samples(self, rows: list[dict]) -> None:
        self.store.add_samples(self.run_id, self.index, rows)

    def environment(self, net, engines: list, tcp_hosts: dict) -> None:
        """The hosts' and a router's sysctls, the offloads, and the environment before the workload."""
        first = {}  # one host per group, named by its role where it has one (CATNIP: client, server)
        roles = {g.name: g.role or g.name for g in net.graph.groups}
        for h in net.hosts.values():
            first.setdefault(roles[h.group], h)
        some_router = next(iter(net.routers.values()))
        self.store.update_point(
            self.run_id, self.index,
            sysctls={**{g: hostconfig.read_sysctls(h.node) for g, h in first.items()},
                     "router": hostconfig.read_sysctls(some_router)},
            offloads={g: hostconfig.offloads(h.node, f"{h.name}-eth0") for g, h in first.items()},
            environment={**metadata.point_environment(net, engines, "before"), "tcp_hosts": tcp_hosts})

    def apps(self, apps: list, partial: bool) -> None:
        """Every application's samples and records into the store, once; missing data fails the point."""
        if self.recorded:
            return
        self.recorded = True
        missing = []
        for app in apps:
            if partial:
                # Clients still running now are stopped by us, not failed: note them first.
                self.stopped_by_us.update(id(p) for p in app.procs if p.popen.poll() is None)
                app.stop()  # outputs complete before they are read
            try:
                app.sync_files()  # what programs on other machines wrote, complete here
                result = app.collect()
            except Exception as exc:  # noqa: BLE001 - the other applications' data is still kept
                missing.append(f"{app.spec.instance}: its results could not be read ({exc})")
                continue
            if "objects" in result.records or "pages" in result.records:
                self.store.add_transfers(self.run_id, self.index, result.records.get("objects", []),
                                         result.records.get("pages", []))
            self.store.add_samples(self.run_id, self.index, result.samples)
            self.ready_after_start[app.spec.instance] = result.ready_after_start
            self.first_unit_after_due[app.spec.instance] = result.first_unit_after_due
            missing += result.missing
        if missing and not partial:
            raise AppError("data missing: " + "; ".join(missing[:10]) + (f" (and {len(missing) - 10} more)"
                                                                         if len(missing) > 10 else ""))

    def failed_clients(self, apps: list) -> list[str]:
        """The clients that exited with an error (not those we stopped)."""
        return [p.host.name for app in apps for p in app.procs
                if p.role == "client" and p.popen.returncode not in (0, None) and id(p) not in self.stopped_by_us]

    def client_start(self) -> dict:
        return fidelity_mod.client_start(self.ready_after_start, self.first_unit_after_due)

    # --- counters, once the workload is over -------------------------------------------------------
    def host_counters(self, net) -> list[str]:
        """Every host's TCP counters (nstat); returns the nodes lost (a shell that died cannot be asked)."""
        lost = [h.name for h in net.hosts.values() if not hostconfig.shell_alive(h.node)]
        for h in net.hosts.values():
            if h.name not in lost:
                self.store.add_tcp_counters(self.run_id, self.index, h.name, hostconfig.nstat(h.node))
        return lost

    def link_counters(self, net, backend, engines: list, apps: list) -> dict[str, Any]:
        """Stop the engines and keep their counters (and a kernel backend's qdiscs'), with the
        measured windows' link counters; returns what the fidelity record needs of them."""
        roles = {d.name: d.role for d in net.directions}
        if isinstance(backend, KernelBackend):  # router links in tc: their qdiscs' counters
            for router, final in backend.counters().items():
                self.store.add_link_stats(self.run_id, self.index, router, final, roles, {}, {})
        kernel = {e.router.name: {r["link"]: r for r in e.kernel_queue_counters()} for e in engines}
        engine_cpu = {e.router.name: e.cpu_seconds() for e in engines}
        for e in engines:
            e.stop()
        self.window_links(net, engines, apps)
        finals = {}
        for e in engines:
            final = e.latest_stats() or {}
            finals[e.router.name] = final
            configs = {link["name"]: link for link in e.config()["links"]}
            self.store.add_link_stats(self.run_id, self.index, e.router.name, final, roles, configs,
                                      kernel[e.router.name])
        return {"engine_cpu_s": engine_cpu, **fidelity_mod.engine_fidelity(finals, kernel)}

    def window_links(self, net, engines: list, apps: list) -> None:
        """For each application with a measured window: every bottleneck data direction's packets
        arrived and dropped per class over that window, from its engine's stats lines (interpolated
        at the window's ends), as samples of the application: metric `window_link`, host the
        router, flow `arrived.<class>` or `dropped.<class>`, tag the direction. An end outside the
        stats lines is an error sample, never a guess."""
        rows, lines_of = [], {}  # each engine's stats file read once, whatever the applications
        for app in apps:
            window = app.measured_window()
            if window is None:
                continue
            for d in net.directions_with_role("bottleneck-data"):
                e = next((e for e in engines if e.router is d.router), None)
                if e is None or e.clock_start is None:
                    continue  # a kernel-backed link: its qdisc counters are read once, at the end
                if id(e) not in lines_of:
                    lines_of[id(e)] = engine_mod.stats_lines(e.stats_path)
                rows += _window_rows(app.spec.instance, d, lines_of[id(e)], [w - e.clock_start for w in window],
                                     window[0])
        if rows:
            self.store.add_samples(self.run_id, self.index, rows)

    def verdict(self, fidelity: dict, max_late_fraction: float, environment_after: dict) -> None:
        """Store the fidelity record and the real-time verdict; a point whose traffic bypassed its
        emulated links fails (its record kept, for the reason)."""
        why = fidelity_mod.bypassed(fidelity)
        ok = fidelity_mod.realtime_ok(fidelity, max_late_fraction) and why is None
        self.store.update_point(self.run_id, self.index, fidelity=fidelity, realtime_ok=int(ok),
                                environment_after=environment_after)
        if why:
            raise RuntimeError(why)


def _window_rows(app: str, d, lines: list[dict], ends_t: list[float], t0: float) -> list[dict]:
    ends = [engine_mod.link_counters_at(lines, d.name, t) for t in ends_t]
    row = {"app": app, "metric": "window_link", "host": d.router.name, "peer": None, "tag": d.name, "t": t0,
           "unit": "pkt"}
    if None in ends:
        return [{**row, "flow": "arrived.all", "value": None,
                 "error": f"the engine's stats lines of {d.name} do not cover the measured window"}]
    rows = []
    for what in ("arrived", "dropped"):
        for cls in sorted(set(ends[0][what]) | set(ends[1][what])):
            rows.append({**row, "flow": f"{what}.{cls}", "error": None,
                         "value": ends[1][what].get(cls, 0.0) - ends[0][what].get(cls, 0.0)})
    return rows
