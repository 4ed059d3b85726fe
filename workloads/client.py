"""The web client of one client host: replays page sessions against its server and records them.

    python -m workloads.client CONFIG.json OUT.jsonl

Runs inside the client host's network namespace (the runner starts it there). A session fetches
the configured pages in a seeded random order, `rounds` times, with a think time after every page
but the last (CATNIP section IV-B; ns-2's `Http` model also pauses after each page).

* HTTP/1.0 (sections IV-A, V-G): the HTML over its own connection, then the images its <img>
  tags name over up to `parallel` concurrent connections, one connection per object, each
  request saying `Connection: close`.
* HTTP/1.1 (section V-F): one persistent connection for the whole session; per page the HTML
  request, then every image request pipelined on that connection in one write, responses read
  back in order by Content-Length.

Page time runs from the page's first connection attempt (HTTP/1.1: its first request, or the
connect if the connection had to be opened) to the latest completion among its objects
(section IV-D). Times are `time.monotonic()` (CLOCK_MONOTONIC: one clock for every namespace of
the machine). A failed object is recorded with its error, never fatal. OUT gets a `start` line,
then per page its `object` lines and one `page` line (flushed, so the runner can follow
progress), and an `end` line. Field definitions: docs/workload.md.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from typing import Any, TextIO
from urllib.parse import urljoin, urlsplit

from workloads.pages import TABLE_II, html_path
from workloads.thinktime import ThinkTimeError, parse_spec, sampler

USER_AGENT = "catnip-client/1"
MAX_HEADER = 64 * 1024  # a longer response head is an error, not a reason to buffer forever
# asyncio stops reading a socket whose buffer exceeds twice this: keep it far above any page so
# the kernel's receive window, never our buffer, governs TCP.
READ_LIMIT = 4 * 1024 * 1024


class ConfigError(ValueError):
    pass


class HttpError(Exception):
    """A response this strict client does not accept (bad status line, no Content-Length...)."""


# --- configuration --------------------------------------------------------------------------
@dataclass(frozen=True)
class ClientConfig:
    client: str
    server: str
    port: int
    seed: int
    http_version: str
    parallel: int
    server_name: str | None = None
    pages: tuple[int, ...] = tuple(p for p, _, _ in TABLE_II)
    rounds: int = 1
    think_time: dict = field(default_factory=lambda: {"model": "zero"})
    object_timeout: float = 60.0
    session_timeout: float = 3600.0
    start_delay: float = 0.0


_REQUIRED = ("client", "server", "port", "seed", "http_version", "parallel")
_OPTIONAL = ("server_name", "pages", "rounds", "think_time", "object_timeout", "session_timeout", "start_delay")


def _whole(cfg: dict, key: str, low: int, high: int | None = None) -> int:
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < low or (high is not None and v > high):
        span = f"{low} to {high}" if high is not None else f">= {low}"
        raise ConfigError(f"{key}: {v!r} not allowed: a whole number {span}")
    return v


def _seconds(cfg: dict, key: str, positive: bool) -> float:
    v = cfg[key]
    number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not number or v < 0 or (positive and v == 0):
        raise ConfigError(f"{key}: {v!r} not allowed: seconds {'> 0' if positive else '>= 0'}")
    return float(v)


def parse_config(raw: Any) -> ClientConfig:
    """Validate a config dict; errors name the key, the bad value and what is allowed."""
    if not isinstance(raw, dict):
        raise ConfigError("the config must be a JSON object")
    missing = [k for k in _REQUIRED if k not in raw]
    unknown = sorted(set(raw) - set(_REQUIRED) - set(_OPTIONAL))
    if missing or unknown:
        raise ConfigError(f"missing keys {missing}, unknown keys {unknown}; required: {list(_REQUIRED)}, "
                          f"optional: {list(_OPTIONAL)}")
    cfg = {**{k: v for k, v in asdict(ClientConfig("", "", 1, 0, "1.0", 1)).items() if k in _OPTIONAL}, **raw}
    for key in ("client", "server"):
        if not isinstance(cfg[key], str) or not cfg[key]:
            raise ConfigError(f"{key}: {cfg[key]!r} not allowed: a non-empty string")
    if cfg["server_name"] is not None and not isinstance(cfg["server_name"], str):
        raise ConfigError(f"server_name: {cfg['server_name']!r} not allowed: a string or null")
    if cfg["http_version"] not in ("1.0", "1.1"):
        raise ConfigError(f"http_version: {cfg['http_version']!r} not allowed: '1.0' or '1.1'")
    pages = cfg["pages"]
    if (not isinstance(pages, (list, tuple)) or not pages
            or any(isinstance(p, bool) or not isinstance(p, int) or p < 1 for p in pages)):
        raise ConfigError(f"pages: {pages!r} not allowed: a non-empty list of page numbers >= 1")
    try:
        parse_spec(cfg["think_time"])
    except ThinkTimeError as exc:
        raise ConfigError(str(exc)) from None
    return ClientConfig(
        client=cfg["client"], server=cfg["server"], port=_whole(cfg, "port", 1, 65535),
        seed=_whole(cfg, "seed", 0), http_version=cfg["http_version"], parallel=_whole(cfg, "parallel", 1),
        server_name=cfg["server_name"], pages=tuple(pages), rounds=_whole(cfg, "rounds", 1),
        think_time=dict(cfg["think_time"] or {"model": "zero"}), object_timeout=_seconds(cfg, "object_timeout", True),
        session_timeout=_seconds(cfg, "session_timeout", True), start_delay=_seconds(cfg, "start_delay", False))


def load_config(path: str) -> ClientConfig:
    try:
        with open(path) as fh:
            raw = json.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from None
    try:
        return parse_config(raw)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


# --- HTTP -------------------------------------------------------------------------------------
@dataclass
class Response:
    status: int
    header_bytes: int   # status line + headers + the blank line
    body: bytes
    first_byte: float   # monotonic time the first byte of the response arrived
    close: bool         # the server said Connection: close


def request(url: str, host: str, version: str) -> bytes:
    close = "Connection: close\r\n" if version == "1.0" else ""
    return f"GET {url} HTTP/{version}\r\nHost: {host}\r\nUser-Agent: {USER_AGENT}\r\n{close}\r\n".encode("ascii")


async def read_response(reader: asyncio.StreamReader) -> Response:
    """One response: status line, headers, then exactly Content-Length body bytes."""
    first = await reader.readexactly(1)
    first_byte = time.monotonic()
    try:
        head = first + await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        head = b""
    if not head or len(head) > MAX_HEADER:
        raise HttpError(f"response head longer than {MAX_HEADER} bytes")
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if (len(parts) < 2 or parts[0] not in (b"HTTP/1.0", b"HTTP/1.1")
            or not (parts[1].isdigit() and len(parts[1]) == 3)):
        raise HttpError(f"bad status line {lines[0][:60]!r}")
    status = int(parts[1])
    if status < 200:
        raise HttpError(f"unexpected informational response {status}")
    length: int | None = None
    close = parts[0] == b"HTTP/1.0"
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or name != name.strip() or line[:1] in (b" ", b"\t"):
            raise HttpError(f"bad header line {line[:60]!r}")
        name, value = name.lower(), value.strip()
        if name == b"content-length":
            if not value.isdigit() or (length is not None and length != int(value)):
                raise HttpError(f"bad Content-Length {value[:30]!r}")
            length = int(value)
        elif name == b"transfer-encoding":
            raise HttpError(f"Transfer-Encoding {value[:30]!r} not supported: need Content-Length")
        elif name == b"connection":
            close = b"close" in value.lower()
    if length is None:
        if status in (204, 304):
            length = 0
        else:
            raise HttpError(f"status {status} response without Content-Length")
    body = await reader.readexactly(length)
    return Response(status, len(head), body, first_byte, close)


class _ImgParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.srcs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            src = dict(attrs).get("src")
            if src:
                self.srcs.append(src)


def image_urls(html: bytes, page_url: str) -> list[str]:
    """The page's <img src> as absolute paths, in document order, each once (a browser would
    fetch a repeated image once). Images on other servers are kept as full URLs."""
    parser = _ImgParser()
    parser.feed(html.decode("utf-8", errors="replace"))
    parser.close()
    urls: list[str] = []
    for src in parser.srcs:
        parts = urlsplit(urljoin(page_url, src))
        url = parts.geturl() if parts.netloc else (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if url not in urls:
            urls.append(url)
    return urls


def describe(exc: BaseException) -> str:
    """A short, stable error text: its first word is the kind (reports group by it)."""
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return f"refused: {exc}"
    if isinstance(exc, ConnectionResetError):
        return f"reset: {exc}"
    if isinstance(exc, asyncio.IncompleteReadError):
        return f"closed: connection closed after {len(exc.partial)} of {exc.expected or '?'} bytes"
    if isinstance(exc, HttpError):
        return f"http: {exc}"
    if isinstance(exc, OSError):
        return f"oserror: {exc}"
    return f"{type(exc).__name__}: {exc}"


# --- records ----------------------------------------------------------------------------------
@dataclass
class ObjectRecord:
    client: str
    server: str | None
    page: int
    round: int
    url: str
    conn: int | None = None          # connection index within the session (1, 2, ...)
    start: float | None = None       # connect attempt (HTTP/1.1: request written)
    connect_done: float | None = None  # connection established (None: reused connection)
    first_byte: float | None = None
    end: float | None = None         # last body byte, or the moment it failed
    body_bytes: int = 0
    header_bytes: int = 0
    request_bytes: int = 0
    status: int | None = None
    error: str | None = None

    def fail(self, error: str, now: float | None = None) -> None:
        if self.error is None:
            self.error = error
        if self.end is None:
            self.end = time.monotonic() if now is None else now

    def take(self, resp: Response) -> None:
        self.first_byte, self.end = resp.first_byte, time.monotonic()
        self.status, self.header_bytes, self.body_bytes = resp.status, resp.header_bytes, len(resp.body)
        if resp.status != 200:
            self.error = f"status: HTTP {resp.status}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "object", **asdict(self)}


@dataclass
class _Conn:
    index: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


class Session:
    def __init__(self, cfg: ClientConfig, out: TextIO):
        self.cfg, self.out = cfg, out
        name = f"[{cfg.server}]" if ":" in cfg.server else cfg.server  # IPv6 literal
        self.host = name if cfg.port == 80 else f"{name}:{cfg.port}"  # the Host header
        self.conn_count = 0
        self.persistent: _Conn | None = None
        self.pages_done = self.pages_failed = 0

    def emit(self, *records: dict[str, Any]) -> None:
        self.out.write("".join(json.dumps(r) + "\n" for r in records))
        self.out.flush()

    def _record(self, page: int, rnd: int, url: str) -> ObjectRecord:
        return ObjectRecord(self.cfg.client, self.cfg.server_name, page, rnd, url)

    async def _connect(self, rec: ObjectRecord) -> _Conn:
        self.conn_count += 1
        rec.conn = self.conn_count
        reader, writer = await asyncio.open_connection(self.cfg.server, self.cfg.port, limit=READ_LIMIT)
        rec.connect_done = time.monotonic()
        return _Conn(self.conn_count, reader, writer)

    # HTTP/1.0 ---------------------------------------------------------------------------------
    async def _fetch_alone(self, rec: ObjectRecord) -> bytes:
        """One object over its own connection; failures end up in rec."""
        rec.start = time.monotonic()
        conn = None
        try:
            async with asyncio.timeout(self.cfg.object_timeout):
                conn = await self._connect(rec)
                req = request(rec.url, self.host, "1.0")
                rec.request_bytes = len(req)
                conn.writer.write(req)
                await conn.writer.drain()
                resp = await read_response(conn.reader)
                rec.take(resp)
                return resp.body
        except Exception as exc:  # noqa: BLE001 - every failure is a recorded outcome
            rec.fail(describe(exc))
            return b""
        finally:
            if conn is not None:
                conn.close()

    async def _page_http10(self, page: int, rnd: int, recs: list[ObjectRecord]) -> None:
        html = self._record(page, rnd, html_path(page))
        recs.append(html)
        body = await self._fetch_alone(html)
        if html.error:
            return
        images = [self._record(page, rnd, url) for url in image_urls(body, html.url)]
        recs.extend(images)
        gate = asyncio.Semaphore(self.cfg.parallel)

        async def one(rec: ObjectRecord) -> None:
            async with gate:
                if urlsplit(rec.url).netloc:
                    rec.start = time.monotonic()
                    rec.fail("external: image on another server, not fetched")
                    return
                await self._fetch_alone(rec)
        await asyncio.gather(*(one(r) for r in images))

    # HTTP/1.1 ---------------------------------------------------------------------------------
    def _drop_persistent(self) -> None:
        if self.persistent is not None:
            self.persistent.close()
            self.persistent = None

    async def _page_http11(self, page: int, rnd: int, recs: list[ObjectRecord]) -> None:
        html = self._record(page, rnd, html_path(page))
        recs.append(html)
        html.start = time.monotonic()
        resp = None
        for attempt in (1, 2):
            reused = self.persistent is not None and self.persistent.usable()
            if not reused:
                self._drop_persistent()
            try:
                async with asyncio.timeout(self.cfg.object_timeout):
                    if not reused:
                        self.persistent = await self._connect(html)
                    html.conn = self.persistent.index
                    req = request(html.url, self.host, "1.1")
                    html.request_bytes = len(req)
                    self.persistent.writer.write(req)
                    await self.persistent.writer.drain()
                    resp = await read_response(self.persistent.reader)
                break
            except Exception as exc:  # noqa: BLE001
                self._drop_persistent()
                # The server may close an idle connection just as we reuse it: a request that
                # got no byte back on a reused connection is retried once on a fresh one.
                nothing = isinstance(exc, (ConnectionResetError, BrokenPipeError)) or (
                    isinstance(exc, asyncio.IncompleteReadError) and not exc.partial)
                if not (reused and nothing and attempt == 1):
                    html.fail(describe(exc))
                    return
        html.take(resp)
        if resp.close:  # the server will not take more requests on this connection
            self._drop_persistent()
        if html.error:
            return
        images = [self._record(page, rnd, url) for url in image_urls(resp.body, html.url)]
        recs.extend(images)
        local = [r for r in images if not urlsplit(r.url).netloc]
        for rec in images:
            if urlsplit(rec.url).netloc:
                rec.start = time.monotonic()
                rec.fail("external: image on another server, not fetched")
        if not local:
            return
        reqs = [request(r.url, self.host, "1.1") for r in local]
        sent = time.monotonic()
        for rec, req in zip(local, reqs):
            rec.start, rec.request_bytes = sent, len(req)
        try:
            if self.persistent is None or not self.persistent.usable():
                self._drop_persistent()
                async with asyncio.timeout(self.cfg.object_timeout):
                    self.persistent = await self._connect(local[0])
            conn = self.persistent
            for rec in local:
                rec.conn = conn.index
            conn.writer.write(b"".join(reqs))  # pipelined: every request before any response
            for rec in local:
                async with asyncio.timeout(self.cfg.object_timeout):
                    await conn.writer.drain()
                    resp = await read_response(conn.reader)
                rec.take(resp)
                if resp.close and rec is not local[-1]:
                    raise HttpError("server closed the persistent connection mid-pipeline")
            if resp.close:
                self._drop_persistent()
        except Exception as exc:  # noqa: BLE001
            # A broken pipeline cannot be resynchronised: the rest of the page fails with it.
            now = time.monotonic()
            for rec in local:
                if rec.end is None:
                    rec.fail(describe(exc), now)
            self._drop_persistent()

    # session ------------------------------------------------------------------------------
    async def run(self, began: float) -> str:
        """The whole session; returns why it ended ('done' or 'session_timeout')."""
        cfg = self.cfg
        deadline = began + cfg.session_timeout
        rng = random.Random(cfg.seed)
        think = sampler(cfg.think_time, rng.getrandbits(64))
        fetch = self._page_http10 if cfg.http_version == "1.0" else self._page_http11
        await asyncio.sleep(max(0.0, min(cfg.start_delay, deadline - time.monotonic())))
        total = cfg.rounds * len(cfg.pages)
        try:
            for rnd in range(cfg.rounds):
                order = list(cfg.pages)
                rng.shuffle(order)
                for page in order:
                    if time.monotonic() >= deadline:
                        return "session_timeout"
                    recs: list[ObjectRecord] = []
                    timed_out = False
                    try:
                        async with asyncio.timeout_at(self._loop_time(deadline)):
                            await fetch(page, rnd, recs)
                    except TimeoutError:
                        timed_out = True
                        now = time.monotonic()
                        for rec in recs:
                            rec.fail("deadline: session_timeout reached", now)
                        self._drop_persistent()
                    pause = think() if self.pages_done + self.pages_failed + 1 < total and not timed_out else None
                    self._emit_page(page, rnd, recs, pause)
                    if timed_out:
                        return "session_timeout"
                    if pause:
                        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            return "done"
        finally:
            self._drop_persistent()

    @staticmethod
    def _loop_time(mono: float) -> float:
        # asyncio's clock is time.monotonic() on Linux; convert explicitly in case it is not.
        loop = asyncio.get_running_loop()
        return loop.time() + (mono - time.monotonic())

    def _emit_page(self, page: int, rnd: int, recs: list[ObjectRecord], pause: float | None) -> None:
        errors = [f"{r.url}: {r.error}" for r in recs if r.error]
        start = recs[0].start
        end = max(r.end for r in recs if r.end is not None)
        if errors:
            self.pages_failed += 1
        else:
            self.pages_done += 1
        self.emit(*(r.to_json() for r in recs), {
            "kind": "page", "client": self.cfg.client, "server": self.cfg.server_name, "page": page,
            "round": rnd, "start": start, "end": end, "duration": end - start, "objects": len(recs),
            "bytes": sum(r.body_bytes for r in recs), "header_bytes": sum(r.header_bytes for r in recs),
            "failed_objects": len(errors), "error": errors[0] if errors else None, "think_after": pause})


async def _main_task(cfg: ClientConfig, out: TextIO) -> str:
    began = time.monotonic()
    session = Session(cfg, out)
    session.emit({"kind": "start", "client": cfg.client, "server": cfg.server_name, "wall": time.time(),
                  "mono": began, "pid": os.getpid(), "config": asdict(cfg)})
    reason = "crash"
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        reason = await session.run(began)
    except asyncio.CancelledError:
        reason = "terminated"
    except Exception as exc:  # noqa: BLE001 - reported in the end line and on stderr
        reason = f"crash: {describe(exc)}"
        traceback.print_exc()
    finally:
        session.emit({"kind": "end", "client": cfg.client, "reason": reason, "wall": time.time(),
                      "mono": time.monotonic(), "pages": session.pages_done + session.pages_failed,
                      "pages_failed": session.pages_failed})
    return reason


def run_session(cfg: ClientConfig, out_path: str) -> str:
    """Run one session writing OUT; returns the end reason."""
    with open(out_path, "w") as out:
        return asyncio.run(_main_task(cfg, out))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m workloads.client CONFIG.json OUT.jsonl", file=sys.stderr)
        return 2
    try:
        cfg = load_config(argv[0])
    except ConfigError as exc:
        print(f"workloads.client: {exc}", file=sys.stderr)
        return 2
    reason = run_session(cfg, argv[1])
    return 1 if reason.startswith("crash") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
