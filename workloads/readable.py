"""Waiting for a pipe to have something to read, for any descriptor number.

select.select refuses descriptors from 1024 up ("filedescriptor out of range in select()"), and a
run of a large topology holds more than that: the 160-pair tree's 320 hosts with their servers'
and clients' pipes failed so while starting its servers. poll has no such limit."""

from __future__ import annotations

import select
from typing import IO, Any


def readable(source: int | IO[Any], timeout: float | None) -> bool:
    """True once `source` (a descriptor or a file object) has data or its end to read; False when
    `timeout` seconds (None: no limit) passed first."""
    poller = select.poll()
    poller.register(source, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(None if timeout is None else max(0.0, timeout) * 1000))
