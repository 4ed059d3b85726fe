"""The web client of one client host: replays sessions of pages against its server.

    python -m catnip.workloads.client CONFIG.json OUT.jsonl [--gate]

Runs inside the client host's network namespace. A session fetches the configured pages in a
seeded random order, `rounds` times, with think times between pages (CATNIP section IV-B); or,
with `stop_at` (a time.monotonic() instant), keeps making such passes until stop_at: no page
starts later, the one under way finishes or times out.

* HTTP/1.0: the HTML over its own connection, then its images (parsed from the HTML's <img>
  tags) over up to `parallel` concurrent connections, one connection per object.
* HTTP/1.1: one persistent connection for the whole session (or, with `persistent: page`, a
  new one for each page); the HTML request, then every image request pipelined on it (the
  approximate HTTP/1.1 model of section V-F). With `pipeline`, the HTML's request and every
  image's go out at once (their URLs from `catalog`), the responses read in order: Nouredine and
  Tobagi's HTTP/1.1 model, where "all object requests are considered to be received together"
  (section 2.2.1).

`catalog` maps each page number to its URLs, HTML first (default: CATNIP's paths); `page_set`
names the set the pages come from, copied into every page record. `start_at` (a time.monotonic()
instant) is when the first page is due; the "start" record says when the client was ready (the
runner checks it was ready by the common start, docs/fidelity.md). With `--gate` it loads, says
READY and reads CONFIG only after GO (workloads/gate.py): the runner sets the start once all are
loaded.

A page's time runs from its first connection attempt to the latest completion among its
objects (section IV-D). Every object and page becomes one JSON line in OUT (flushed at once, so
the runner can follow progress); failures are recorded with their error, never fatal.
Times are `time.monotonic()` (CLOCK_MONOTONIC, one clock for every host of the machine).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from catnip.workloads import gate
from catnip.workloads.pages import page as page_of
from catnip.workloads.thinktime import sampler

IMG_SRC = re.compile(rb'<img\s+[^>]*src="([^"]+)"', re.IGNORECASE)
REQUIRED = {"client", "server", "port", "pages", "seed", "http_version", "parallel"}
OPTIONAL = {"server_name", "rounds", "think_time", "object_timeout", "session_timeout", "start_at", "persistent",
            "page_set", "catalog", "pipeline", "stop_at"}


class ConfigError(ValueError):
    pass


def load_config(path: str) -> dict[str, Any]:
    with open(path) as fh:
        cfg = json.load(fh)
    missing = REQUIRED - cfg.keys()
    unknown = cfg.keys() - REQUIRED - OPTIONAL
    if missing or unknown:
        raise ConfigError(f"{path}: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}")
    if cfg["http_version"] not in ("1.0", "1.1"):
        raise ConfigError(f"{path}: http_version {cfg['http_version']!r} not allowed: '1.0' or '1.1'")
    if not isinstance(cfg["pages"], list) or not cfg["pages"]:
        raise ConfigError(f"{path}: pages must be a non-empty list of page numbers")
    if not isinstance(cfg["parallel"], int) or cfg["parallel"] < 1:
        raise ConfigError(f"{path}: parallel must be a whole number of at least 1")
    cfg.setdefault("rounds", 1)
    cfg.setdefault("think_time", {"model": "zero"})
    cfg.setdefault("object_timeout", 60.0)
    cfg.setdefault("session_timeout", 3600.0)
    cfg.setdefault("start_at", None)
    if cfg["start_at"] is not None and not isinstance(cfg["start_at"], (int, float)):
        raise ConfigError(f"{path}: start_at must be a time.monotonic() instant or null")
    cfg.setdefault("persistent", "session")
    if cfg["persistent"] not in ("session", "page"):
        raise ConfigError(f"{path}: persistent {cfg['persistent']!r} not allowed: 'session' or 'page'")
    cfg.setdefault("page_set", "catnip")
    cfg.setdefault("pipeline", False)
    cfg.setdefault("stop_at", None)
    if "catalog" not in cfg:
        try:
            cfg["catalog"] = {str(p): page_of(p).objects for p in cfg["pages"]}
        except KeyError as exc:
            raise ConfigError(f"{path}: {exc.args[0]}; other pages need a catalog") from None
    if not isinstance(cfg["pipeline"], bool):
        raise ConfigError(f"{path}: pipeline must be true or false")
    if cfg["pipeline"] and cfg["http_version"] != "1.1":
        raise ConfigError(f"{path}: pipeline needs http_version '1.1'")
    if cfg["stop_at"] is not None and not isinstance(cfg["stop_at"], (int, float)):
        raise ConfigError(f"{path}: stop_at must be a time.monotonic() instant or null")
    catalog = cfg["catalog"]
    unknown = [p for p in cfg["pages"] if not isinstance(catalog, dict) or not catalog.get(str(p))]
    if unknown:
        raise ConfigError(f"{path}: catalog has no URLs for pages {unknown[:5]}")
    return cfg


@dataclass
class Response:
    status: int
    header_bytes: int
    body: bytes
    first_byte: float


class HttpError(Exception):
    pass


async def read_response(reader: asyncio.StreamReader) -> Response:
    """Status line and headers, then exactly Content-Length bytes of body (we serve static files)."""
    first = await reader.readuntil(b"\r\n")
    first_byte = time.monotonic()
    head = first + await reader.readuntil(b"\r\n\r\n")
    parts = first.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise HttpError(f"bad status line {first[:60]!r}")
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length is None:
        raise HttpError("response without Content-Length")
    body = await reader.readexactly(length)
    return Response(int(parts[1]), len(head), body, first_byte)


def request(url: str, host: str, version: str) -> bytes:
    close = "Connection: close\r\n" if version == "1.0" else ""
    return f"GET {url} HTTP/{version}\r\nHost: {host}\r\nUser-Agent: catnip-client\r\n{close}\r\n".encode()


def _error(exc: BaseException) -> str:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, asyncio.IncompleteReadError):
        return f"connection closed after {len(exc.partial)} bytes"
    return f"{type(exc).__name__}: {exc}"


class Session:
    def __init__(self, cfg: dict[str, Any], out: TextIO):
        self.cfg, self.out = cfg, out
        self.host = cfg["server"]
        self.conn_counter = 0
        self.persistent: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    def emit(self, record: dict[str, Any]) -> None:
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    def _object(self, page: int, rnd: int, url: str, conn: int, start: float) -> dict[str, Any]:
        return {"kind": "object", "client": self.cfg["client"], "server": self.cfg.get("server_name"),
                "page": page, "round": rnd, "url": url, "conn": conn, "start": start, "connect_done": None,
                "first_byte": None, "end": None, "body_bytes": 0, "header_bytes": 0, "status": None,
                "error": None}

    def _finish(self, rec: dict[str, Any], resp: Response) -> None:
        rec.update(first_byte=resp.first_byte, end=time.monotonic(), body_bytes=len(resp.body),
                   header_bytes=resp.header_bytes, status=resp.status)
        if resp.status != 200:
            rec["error"] = f"HTTP {resp.status}"

    async def fetch_new_connection(self, page: int, rnd: int, url: str) -> tuple[dict[str, Any], bytes]:
        """HTTP/1.0: one object over its own connection."""
        self.conn_counter += 1
        rec = self._object(page, rnd, url, self.conn_counter, time.monotonic())
        body = b""
        writer = None
        try:
            async def go():
                nonlocal writer, body
                reader, writer = await asyncio.open_connection(self.host, self.cfg["port"])
                rec["connect_done"] = time.monotonic()
                writer.write(request(url, self.host, "1.0"))
                await writer.drain()
                resp = await read_response(reader)
                self._finish(rec, resp)
                body = resp.body
            await asyncio.wait_for(go(), self.cfg["object_timeout"])
        except Exception as exc:  # noqa: BLE001 - any failure is a recorded outcome
            rec["error"], rec["end"] = _error(exc), time.monotonic()
        finally:
            if writer is not None:
                writer.close()
        return rec, body

    def urls(self, page: int) -> list[str]:
        """The page's URLs, HTML first."""
        return self.cfg["catalog"][str(page)]

    async def page_http10(self, page: int, rnd: int) -> list[dict[str, Any]]:
        html, body = await self.fetch_new_connection(page, rnd, self.urls(page)[0])
        records = [html]
        if html["error"]:
            return records
        images = [m.decode() for m in IMG_SRC.findall(body)]
        gate = asyncio.Semaphore(self.cfg["parallel"])

        async def one(url: str) -> dict[str, Any]:
            async with gate:
                return (await self.fetch_new_connection(page, rnd, url))[0]
        records += await asyncio.gather(*(one(u) for u in images))
        return records

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.persistent is None or self.persistent[1].is_closing():
            self.conn_counter += 1
            self.persistent = await asyncio.open_connection(self.host, self.cfg["port"])
        return self.persistent

    async def page_http11(self, page: int, rnd: int) -> list[dict[str, Any]]:
        """HTML, then every image pipelined, all on the session's persistent connection."""
        html = self._object(page, rnd, self.urls(page)[0], 0, time.monotonic())
        records = [html]
        current = html
        try:
            async def go():
                nonlocal current
                new = self.persistent is None or self.persistent[1].is_closing()
                reader, writer = await self._connection()
                html["conn"] = self.conn_counter
                html["connect_done"] = time.monotonic() if new else html["start"]
                writer.write(request(html["url"], self.host, "1.1"))
                await writer.drain()
                resp = await read_response(reader)
                self._finish(html, resp)
                if html["error"]:
                    return
                urls = [m.decode() for m in IMG_SRC.findall(resp.body)]
                sent = time.monotonic()
                recs = [self._object(page, rnd, u, self.conn_counter, sent) for u in urls]
                records.extend(recs)
                writer.write(b"".join(request(u, self.host, "1.1") for u in urls))
                await writer.drain()
                for rec in recs:
                    current = rec
                    rec["connect_done"] = sent
                    self._finish(rec, await read_response(reader))
            await asyncio.wait_for(go(), self.cfg["object_timeout"] * max(1, len(records)))
        except Exception as exc:  # noqa: BLE001
            now = time.monotonic()
            for rec in records[records.index(current):]:
                if rec["end"] is None:
                    rec["error"], rec["end"] = _error(exc), now
            if self.persistent is not None:
                self.persistent[1].close()
                self.persistent = None
        return records

    async def page_pipelined(self, page: int, rnd: int) -> list[dict[str, Any]]:
        """Every request of the page written at once on the persistent connection, the responses
        read in order (Nouredine and Tobagi section 2.2.1). Each step (connecting, writing, each
        response) must end within object_timeout; a failure fails the objects not yet received."""
        start = time.monotonic()
        records = [self._object(page, rnd, url, 0, start) for url in self.urls(page)]
        timeout = self.cfg["object_timeout"]
        current = 0
        try:
            new = self.persistent is None or self.persistent[1].is_closing()
            reader, writer = await asyncio.wait_for(self._connection(), timeout)
            sent = time.monotonic()
            for rec in records:
                rec["conn"], rec["connect_done"] = self.conn_counter, sent if new else start
            for rec in records[1:]:
                rec["start"] = sent  # the images' requests leave with the HTML's
            writer.write(b"".join(request(rec["url"], self.host, "1.1") for rec in records))
            await asyncio.wait_for(writer.drain(), timeout)
            for current, rec in enumerate(records):
                self._finish(rec, await asyncio.wait_for(read_response(reader), timeout))
        except Exception as exc:  # noqa: BLE001 - any failure is a recorded outcome
            now = time.monotonic()
            for rec in records[current:]:
                rec["error"], rec["end"] = _error(exc), now
            if self.persistent is not None:
                self.persistent[1].close()
                self.persistent = None
        return records

    def passes(self):
        """(round, page) in the order the session loads them: each round a seeded shuffle of the
        pages; `rounds` of them, or without end when the session runs until stop_at."""
        order_rng = random.Random(self.cfg["seed"])
        rnd = 0
        while self.cfg["stop_at"] is not None or rnd < self.cfg["rounds"]:
            order = list(self.cfg["pages"])
            order_rng.shuffle(order)
            for page in order:
                yield rnd, page
            rnd += 1

    async def run(self) -> None:
        cfg = self.cfg
        self.emit({"kind": "start", "client": cfg["client"], "wall": time.time(), "mono": time.monotonic()})
        # An instant, not a delay: how long this process took to start must not shift the session.
        if cfg["start_at"] is not None:
            await asyncio.sleep(max(0.0, cfg["start_at"] - time.monotonic()))
        deadline = time.monotonic() + cfg["session_timeout"]
        stop_at = cfg["stop_at"]
        think = sampler(cfg["think_time"], cfg["seed"] + 1)
        if cfg["http_version"] == "1.0":
            fetch = self.page_http10
        else:
            fetch = self.page_pipelined if cfg["pipeline"] else self.page_http11
        done = 0
        total = None if stop_at is not None else cfg["rounds"] * len(cfg["pages"])
        for rnd, page in self.passes():
            if time.monotonic() > deadline:
                self.emit({"kind": "end", "client": cfg["client"], "reason": "session_timeout"})
                return
            if stop_at is not None and time.monotonic() >= stop_at:
                break
            start = time.monotonic()
            records = await fetch(page, rnd)
            if cfg["persistent"] == "page" and self.persistent is not None:
                self.persistent[1].close()  # the next page opens its own connection
                self.persistent = None
            for rec in records:
                self.emit(rec)
            errors = [r["error"] for r in records if r["error"]]
            end = max(r["end"] for r in records)
            self.emit({"kind": "page", "client": cfg["client"], "server": cfg.get("server_name"),
                       "page_set": cfg["page_set"], "page": page, "round": rnd, "start": start, "end": end,
                       "duration": end - start, "objects": len(records),
                       "bytes": sum(r["body_bytes"] for r in records), "error": errors[0] if errors else None})
            done += 1
            if total is not None and done >= total:
                break
            pause = think()
            if stop_at is not None and time.monotonic() + pause >= stop_at:
                break  # the next page would start after the session's end
            await asyncio.sleep(pause)
        if self.persistent is not None:
            self.persistent[1].close()
        self.emit({"kind": "end", "client": cfg["client"], "reason": "done", "mono": time.monotonic()})


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[2:] not in ([], ["--gate"]):
        print("usage: python -m catnip.workloads.client CONFIG.json OUT.jsonl [--gate]", file=sys.stderr)
        return 2
    if argv[2:] == ["--gate"]:
        gate.wait_for_go()
    try:
        cfg = load_config(argv[0])
    except (OSError, ValueError) as exc:
        print(f"catnip.workloads.client: {exc}", file=sys.stderr)
        return 2
    with open(argv[1], "a") as out:
        asyncio.run(Session(cfg, out).run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
