"""The plug-in points: an application added in a few lines runs end to end on an emulated
network, next to a built-in one, and its samples land in the store."""

from __future__ import annotations

import re
from typing import Literal

import pytest

from catnip.results.store import Store
from catnip.spec import scenario as s
from catnip.testbed import capabilities, paths
from tests.conftest import need_engine, need_root
from catnip.spec.apps import AppSpec
from catnip.workloads.apps.base import AppResult, Application, register, unregister



class PingSpec(AppSpec):
    kind: Literal["toy_ping"] = "toy_ping"
    count: int = 5


class Ping(Application):
    """A toy application: each client pings its server; one `rtt` sample per reply."""
    kind, Spec = "toy_ping", PingSpec

    def start_clients(self):
        for c, srv in self.pairs():
            self.spawn(c, "client", ["ping", "-n", "-c", self.spec.count, "-i", "0.2", srv.ip], f"ping-{c.name}")

    def collect(self):
        samples = []
        for p in self.procs:
            for ms in re.findall(r"time=([0-9.]+) ms", p.log.read_text()):
                samples.append({"app": self.spec.instance, "metric": "rtt", "host": p.host.name, "value": float(ms) / 1000,
                                "unit": "s", "tag": p.host.tag})
        want = self.spec.count * len(self.clients)
        return AppResult(samples, [] if len(samples) == want else [f"{len(samples)} of {want} replies"])


@pytest.fixture
def toy_app():
    register(Ping)
    yield
    unregister("toy_ping")


def test_unregistered_application_is_refused():
    raw = {"name": "t", "topology": {"clients": 1, "servers": 1, "client_link": "x"},
           "applications": [{"kind": "toy_ping", "clients": "clients", "servers": "servers"}]}
    with pytest.raises(s.ScenarioError, match="application kind 'toy_ping' not allowed"):
        s.validate(raw)


def test_toy_application_runs_beside_bulk_and_records_samples(toy_app, isolated_data, no_leftovers):
    need_root()
    need_engine()
    from catnip.controller import runner
    link = {"rate": "10Mbit", "delay": "5ms", "buffer": "20p"}
    sweep = s.Sweep(name="toy", source="test", raw={}, sweep={}, points=[({}, s.validate({
        "name": "toy",
        "topology": {"clients": 2, "servers": 1, "client_link": link, "server_link": link,
                     "bottleneck": {**link, "delay": "10ms"}},
        "applications": [{"kind": "toy_ping", "clients": "clients", "servers": "servers", "count": 4},
                         {"kind": "bulk", "clients": "clients", "servers": "servers", "duration": "3s"}],
        "run": {"time_limit": "2min"}}))])
    with Store(paths.database()) as store:
        run_id = runner.run(sweep, capabilities.probe(), store)
        point = store.points(run_id)[0]
        assert point["status"] == "done", point["error"]
        rtts = [r["value"] for r in store.samples(run_id, 0, app="toy_ping", metric="rtt")]
        assert len(rtts) == 8
        # 2 x (5 + 10 + 5) ms of propagation at least; the bulk flows may queue replies behind them
        assert min(rtts) >= 0.040 and min(rtts) < 0.5, rtts
        assert store.samples(run_id, 0, app="bulk", metric="goodput")


def test_toy_policy_is_one_registered_class():
    """A queue policy's Python half: one class, registered; the scenario accepts it, checks its
    parameters and hands the engine its block (its Rust half: engine/tests/toy_policy.rs)."""
    from pydantic import Field

    from catnip.spec.graph import resolve
    from catnip.spec.policy import _Policy, register as register_policy, unregister as unregister_policy

    class EveryNth(_Policy):
        kind: Literal["toy_every_nth"] = "toy_every_nth"
        n: int = Field(ge=2)

        def engine_config(self, buffer):
            return {"kind": self.kind, "n": self.n}

    link = {"rate": "10Mbit", "delay": "1ms", "buffer": "10p"}
    raw = {"name": "t", "topology": {"clients": 1, "servers": 1, "client_link": link, "server_link": link,
                                     "bottleneck": link},
           "router": {"policy": {"kind": "toy_every_nth", "n": 3}}}
    with pytest.raises(s.ScenarioError, match="kind 'toy_every_nth' not allowed"):
        s.validate(raw)
    register_policy(EveryNth)
    try:
        sc = s.validate(raw)
        bottleneck = sc.graph().links[0]
        assert resolve(bottleneck, bottleneck.reverse, sc.router.policy).policy.engine_config({"packets": 10}) == {
            "kind": "toy_every_nth", "n": 3}
        with pytest.raises(s.ScenarioError, match=r"router.policy.n: 1: Input should be greater than or equal to 2"):
            s.validate({**raw, "router": {"policy": {"kind": "toy_every_nth", "n": 1}}})
    finally:
        unregister_policy("toy_every_nth")
