"""`telnet`: Nouredine & Tobagi's interactive Telnet (section 2.2.2; reading notes 3.2).

One echo server per server host and one client per client host, each client on one persistent
connection to its server (workloads/telnet.py):

    python -m catnip.workloads.telnet server SERVER_IP PORT [--nodelay]
    python -m catnip.workloads.telnet client WORKDIR/telnet-CLIENT.json WORKDIR/telnet-CLIENT.jsonl

A keystroke is one segment of `payload` bytes; the client waits for its echo, then a gap, and
types the next. The paper's packet is 100 bytes "containing a few characters, a 40+ byte TCP/IP
header, as well as the MAC frame overhead" (footnote 2). Linux sends TCP timestamps, so the
headers are 20 (IP) + 32 (TCP with timestamps) = 52 bytes; with the 14-byte Ethernet header,
payload 34 gives 100 bytes on the wire: the default. The gap is exponential with mean 0.2 s by
default (about five characters per second, a fast typist [33]); it starts at the echo, so the
typing rate is slightly below 1/mean. Nagle's algorithm stays on (the paper's client is
"regulated by Nagle's algorithm"); `nodelay` sets TCP_NODELAY on both ends.

Samples: `echo_delay` (s) per keystroke at the client, from the write to the echo's last byte;
t = the write; flow = "CLIENT/N", N the client's connection number (a keystroke that fails closes
its connection and the next opens connection N+1); tag = the client host's tag. A failed
keystroke is a sample with `error` (a measurement, not missing data).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from catnip.spec.apps import AppSpec

from catnip.workloads.apps.base import Host, register
from catnip.workloads.apps.common import ClientServerApp, Duration, Size, need_servers, sample


class TelnetSpec(AppSpec):
    kind: Literal["telnet"] = "telnet"
    payload: Size = Field(default=34, le=1400, description="bytes per keystroke segment (34: 100 B on the wire"
                          " with IP, TCP timestamps and Ethernet headers)")
    model: Literal["exponential", "fixed"] = Field(default="exponential",
                                                   description="gap between an echo and the next keystroke")
    mean: Duration = Field(default=0.2, le=3600, description="mean gap (the fixed gap with model 'fixed'),"
                           " e.g. '200ms'")
    duration: Duration | None = Field(default=None, gt=0, description="seconds of typing after the common"
                                      " start; exactly one of duration and keystrokes")
    keystrokes: int | None = Field(default=None, ge=1, le=10_000_000, description="keystrokes per client;"
                                   " exactly one of duration and keystrokes")
    nodelay: bool = Field(default=False, description="TCP_NODELAY on client and server (Nagle off)")
    timeout: Duration = Field(default=30.0, gt=0, description="an echo later than this is a failed keystroke")
    port: int = Field(default=2323, ge=1, le=65535, description="TCP port of the echo servers")

    @model_validator(mode="after")
    def _check(self) -> TelnetSpec:
        need_servers(self)
        if (self.duration is None) == (self.keystrokes is None):
            raise ValueError("duration, keystrokes: give exactly one")
        return self

    def planned_seconds(self):
        return ("duration", self.duration) if self.duration is not None else None


@register
class Telnet(ClientServerApp):
    kind = "telnet"
    Spec = TelnetSpec
    progress_unit = "keystrokes"
    module, unit, unit_name = "telnet", "echo", "keystrokes"


    def server_args(self) -> list:
        return ["--nodelay"] if self.spec.nodelay else []

    def client_config(self, client: Host, server: Host) -> dict:
        s = self.spec
        return {"payload": s.payload, "model": s.model, "mean": s.mean, "duration": s.duration,
                "keystrokes": s.keystrokes, "nodelay": s.nodelay, "timeout": s.timeout}

    def expected(self, client: Host) -> int | None:
        return self.spec.keystrokes

    def samples_of(self, rec: dict, client: Host, server: Host) -> list[dict]:
        return [sample(self.spec.instance, "echo_delay", client, server, f"{client.name}/{rec.get('conn')}",
                       rec.get("t"), rec.get("delay"), "s", rec.get("error"))]
