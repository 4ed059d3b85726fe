"""`ftp`: Nouredine & Tobagi's FTPshort (section 2.2.3; reading notes 3.2): files of Pareto sizes
(shape 1.2, mean 200 KB) separated by exponential gaps (mean 2 s), each file on a new TCP
connection; or the paper's fixed-size probes (`size: 200KB`).

One file server per server host and one client per client host (workloads/ftp.py):

    python -m catnip.workloads.ftp server SERVER_IP PORT --timeout TIMEOUT
    python -m catnip.workloads.ftp client WORKDIR/ftp-CLIENT.json WORKDIR/ftp-CLIENT.jsonl

`direction`: `download` (server -> client files), `upload` (client -> server), or `both`: the
client runs a download stream and an upload stream at once, each with its own sizes and gaps
(the paper's FTPshort sources also send "on the reverse path", destination -> source). 200 KB
is 204800 bytes here (1 KB = 1024 B, spec/units.py). A Pareto draw above `max_size` becomes
`max_size` (the cap lowers the mean; without a cap the variance is infinite at shape 1.2).

Samples, per file, at the RECEIVER (host = the client for downloads, the server for uploads;
peer = the other end; tag = the receiving host's tag); flow = "CLIENT/DIR/N/SIZE", DIR "down" or
"up", N the file's number in its stream, SIZE the file's size in bytes (`flow.split("/")`):

* `file_time` (s): from the connection start (just before connect) to the last byte at the
  receiver (for uploads the server's time of its last byte; CLOCK_MONOTONIC is one clock for all
  namespaces, and across machines both ends are on the controller's clock within the offset's
  uncertainty and drift: fidelity `clocks`, docs/cluster.md); t = the connection start.
* `file_bytes` (bytes): the bytes the receiver got (the size when complete).
A failed file is a pair of samples with `error` (file_bytes: what arrived, None if unknown for an
upload): a measurement, not missing data.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from catnip.spec.apps import AppSpec

from catnip.workloads.apps.base import Host, register
from catnip.workloads.apps.common import ClientServerApp, Duration, Size, need_servers, sample
from catnip.workloads.ftp import MAX_SIZE, pareto_scale

DIRECTIONS = {"download": ["down"], "upload": ["up"], "both": ["down", "up"]}


class FtpSpec(AppSpec):
    kind: Literal["ftp"] = "ftp"
    direction: Literal["download", "upload", "both"] = Field(
        default="download", description="'download': files from server to client; 'upload': client to server;"
        " 'both': one stream each way at once")
    size: Size | None = Field(default=None, description="fixed file size (probe mode, e.g. '200KB'); excludes"
                              " mean_size, shape and max_size")
    mean_size: Size = Field(default=200 * 1024, description="mean of the Pareto file sizes, e.g. '200KB'")
    shape: float = Field(default=1.2, gt=1.0, le=10.0, description="Pareto shape (above 1: a finite mean)")
    max_size: Size | None = Field(default=None, description="cap on a Pareto draw (a larger draw becomes the"
                                  " cap), e.g. '10MB'")
    gap_model: Literal["exponential", "fixed"] = Field(default="exponential",
                                                       description="gap between a file's end and the next file")
    gap_mean: Duration = Field(default=2.0, le=3600, description="mean gap (the fixed gap with gap_model 'fixed')")
    files: int | None = Field(default=None, ge=1, le=1_000_000, description="files per stream (per direction)"
                              " and client; exactly one of files and duration")
    duration: Duration | None = Field(default=None, gt=0, description="seconds after the common start during"
                                      " which files start; exactly one of files and duration")
    timeout: Duration = Field(default=120.0, gt=0, description="a file taking longer than this fails")
    port: int = Field(default=2121, ge=1, le=65535, description="TCP port of the file servers")

    @model_validator(mode="after")
    def _check(self) -> FtpSpec:
        need_servers(self)
        if (self.files is None) == (self.duration is None):
            raise ValueError("files, duration: give exactly one")
        if self.size is not None:
            clash = [f for f in ("mean_size", "shape", "max_size")  # a dumped spec holds the defaults
                     if getattr(self, f) != type(self).model_fields[f].default]
            if clash:
                raise ValueError(f"size: a fixed size excludes {', '.join(clash)}")
        for name in ("size", "mean_size", "max_size"):
            value = getattr(self, name)
            if value is not None and value > MAX_SIZE:
                raise ValueError(f"{name}: {value} bytes is above the 16 GB limit")
        if self.max_size is not None and self.max_size <= pareto_scale(self.mean_size, self.shape):
            raise ValueError(f"max_size: {self.max_size} bytes is not above the smallest Pareto size"
                             f" {pareto_scale(self.mean_size, self.shape):.0f} (mean_size (shape - 1) / shape)")
        return self

    def size_model(self) -> dict:
        if self.size is not None:
            return {"model": "fixed", "size": self.size}
        return {"model": "pareto", "mean": self.mean_size, "shape": self.shape, "max_size": self.max_size}

    def planned_seconds(self):
        return ("duration", self.duration) if self.duration is not None else None


@register
class Ftp(ClientServerApp):
    kind = "ftp"
    Spec = FtpSpec
    progress_unit = "files"
    module, unit, unit_name = "ftp", "file", "files"


    def server_args(self) -> list:
        return ["--timeout", f"{self.spec.timeout:g}"]

    def client_config(self, client: Host, server: Host) -> dict:
        s = self.spec
        return {"directions": DIRECTIONS[s.direction], "sizes": s.size_model(),
                "gaps": {"model": s.gap_model, "mean": s.gap_mean}, "files": s.files, "duration": s.duration,
                "timeout": s.timeout}

    def expected(self, client: Host) -> int | None:
        return None if self.spec.files is None else self.spec.files * len(DIRECTIONS[self.spec.direction])

    def samples_of(self, rec: dict, client: Host, server: Host) -> list[dict]:
        receiver, sender = (client, server) if rec.get("dir") == "down" else (server, client)
        flow = f"{client.name}/{rec.get('dir')}/{rec.get('seq')}/{rec.get('size')}"
        app, t, err = self.spec.instance, rec.get("t"), rec.get("error")
        return [sample(app, "file_time", receiver, sender, flow, t, rec.get("time"), "s", err),
                sample(app, "file_bytes", receiver, sender, flow, t, rec.get("received"), "bytes", err)]
