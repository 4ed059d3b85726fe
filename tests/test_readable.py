"""workloads/readable.py: waiting on a pipe whose descriptor is 1024 or more, as a large
topology's run holds (the 160-pair tree failed with select()'s "filedescriptor out of range")."""

from __future__ import annotations

import os
import resource
import select

import pytest

from catnip.workloads.readable import readable

HIGH = 1500


@pytest.fixture
def high_pipe():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= HIGH:
        pytest.skip(f"the hard limit of open files is {hard}: no descriptor {HIGH} to test with")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, HIGH + 1), hard))
    r, w = os.pipe()
    os.dup2(r, HIGH)
    os.close(r)
    try:
        yield HIGH, w
    finally:
        os.close(HIGH)
        os.close(w)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_high_descriptor_waits_and_wakes(high_pipe):
    fd, w = high_pipe
    with pytest.raises(ValueError, match="out of range"):  # what the runner met
        select.select([fd], [], [], 0)
    assert readable(fd, 0.05) is False
    os.write(w, b"READY\n")
    assert readable(fd, 5) is True and os.read(fd, 100) == b"READY\n"


def test_the_end_of_a_pipe_is_readable(high_pipe):
    fd, w = high_pipe
    os.close(os.dup(w))
    with open(os.dup(fd), "rb") as f:
        os.close(w)
        os.dup2(os.open(os.devnull, os.O_WRONLY), w)  # keep the fixture's close valid
        assert readable(f, 5) is True and f.read() == b""
