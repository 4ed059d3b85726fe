"""Apache's worker threads sized to the clients a server serves (workloads/apache.py): every
connection that can be open at once has a thread from the start, and no more than one child of
room, since each thread counts against the machine's kernel.pid_max (a tree of 160 destinations
at a fixed 256 threads each could not start: fork failed with EAGAIN). Root-free: the generated
configuration only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from catnip.workloads import apache


def _directives(max_workers: int) -> dict[str, int]:
    srv = apache.ApacheServer(workdir=Path("/nonexistent"), docroot=Path("/nonexistent"), listen_ip="10.0.0.1",
                              max_workers=max_workers)
    text = srv.config_text()
    return {k: int(v) for k, v in re.findall(r"^(StartServers|ServerLimit|ThreadsPerChild|MaxRequestWorkers) (\d+)$",
                                             text, re.M)}


@pytest.mark.parametrize("clients,parallel,workers", [
    (100, 4, 512),  # CATNIP's 10 servers' clients on one: 400 connections, 7 children, one more of room
    (10, 4, 128),   # CATNIP section IV-A: 10 clients per server
    (1, 4, 128),    # a tree destination with its one source
    (16, 4, 128), (17, 4, 192),  # 64 connections fill one child exactly; 68 need two
    (0, 4, 128),    # a server no client was given still starts
])
def test_workers_cover_every_connection_with_one_child_of_room(clients, parallel, workers):
    assert apache.workers_for(clients, parallel) == workers


@pytest.mark.parametrize("clients,parallel", [(1, 1), (1, 4), (10, 4), (100, 4), (300, 4), (64, 16)])
def test_started_threads_hold_every_connection(clients, parallel):
    d = _directives(apache.workers_for(clients, parallel))
    started = d["StartServers"] * d["ThreadsPerChild"]
    assert started >= clients * parallel  # no request waits for Apache to spawn a child
    assert started == d["MaxRequestWorkers"] and d["ServerLimit"] >= d["StartServers"]
    assert started - clients * parallel <= 2 * d["ThreadsPerChild"]  # and not hundreds of idle threads
