"""Which Host and Origin the dashboard answers: a WSGI guard in front of the Flask app.

A dashboard on loopback still starts runs as root, so a page elsewhere must not drive it: DNS
rebinding points a name of the attacker's (evil.example) at 127.0.0.1, and the browser then
sends `Host: evil.example` with the page's own cookies and tokens. Only the names the dashboard
is bound to are answered (loopback names always, plus the bound address and any `--allow-host`);
a state-changing request must also come from the dashboard's own origin (Origin, or Referer
when a browser sent no Origin; one of them is required: a page elsewhere can have its Referer
left out). A malformed Host is a 400 here, before Flask parses it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = {"0.0.0.0", "::"}
SAFE_METHODS = {"GET", "HEAD", "OPTIONS", "TRACE"}

# A DNS name (labels of letters, digits, '-') or an IPv4 address, or an IPv6 one in brackets;
# then an optional port.
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]{2,45})\]|(?P<name>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?))"
                   r"(?::(?P<port>[0-9]{1,5}))?")
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def normalise(name: str) -> str | None:
    """A host name as compared: lower case, an IP address in its canonical form (IPv6 without
    brackets); None when it is no valid name or address."""
    name = name.strip()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    if not all(_LABEL.fullmatch(label) for label in name.split(".")) or len(name) > 253:
        return None
    return name.lower()


def parse_host(value: str) -> tuple[str, int | None] | None:
    """`Host` header -> (normalised name, port or None), or None when malformed."""
    m = _HOST.fullmatch(value)
    if m is None:
        return None
    port = int(m["port"]) if m["port"] is not None else None
    if port is not None and not 0 < port <= 65535:
        return None
    if m["v6"] is not None:
        try:
            ip = ipaddress.ip_address(m["v6"])
        except ValueError:
            return None
        if ip.version != 6:
            return None
        return str(ip), port
    name = normalise(m["name"])
    return (name, port) if name is not None else None


def allowed_names(bound: str | None = None, extra: Iterable[str] = ()) -> frozenset[str]:
    """Loopback names, the bound address or name unless it is a wildcard (0.0.0.0 and :: say
    nothing about the name clients use), and the extra names; each checked and normalised."""
    names = set(LOOPBACK_NAMES)
    for raw in ([bound] if bound and bound not in WILDCARDS else []) + list(extra):
        name = normalise(raw)
        if name is None or name in WILDCARDS:
            raise ValueError(f"{raw[:80]!r} is not a host name or address the dashboard can be reached by")
        names.add(name)
    return frozenset(names)


def _origin(url: str) -> tuple[str, str, int] | None:
    """scheme://host[:port] of a URL as (scheme, name, port with the scheme's default), or None."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc or "@" in parts.netloc:
        return None
    host = parse_host(parts.netloc)
    if host is None:
        return None
    return parts.scheme, host[0], host[1] or (443 if parts.scheme == "https" else 80)


class HostGuard:
    """WSGI middleware: answers 400 to a malformed or foreign Host, 403 to a state-changing
    request whose Origin (or Referer) is not the dashboard itself or that has neither; passes
    the rest to `app`."""

    def __init__(self, app: Callable, names: frozenset[str]):
        self.app, self.names = app, names

    def __call__(self, environ: dict, start_response: Callable):
        raw = environ.get("HTTP_HOST")
        if raw is None:
            return _refuse(start_response, "400 Bad Request", "a Host header is required")
        host = parse_host(raw)
        if host is None:
            return _refuse(start_response, "400 Bad Request", f"malformed Host header {raw[:80]!r}")
        if host[0] not in self.names:
            return _refuse(start_response, "400 Bad Request",
                           f"this dashboard does not answer to host {host[0][:80]!r}; it answers to"
                           f" {', '.join(sorted(self.names))} (`catnip web --allow-host NAME` adds one)")
        if environ.get("REQUEST_METHOD", "GET").upper() not in SAFE_METHODS:
            scheme = environ.get("wsgi.url_scheme", "http")
            ours = (scheme, host[0], host[1] or (443 if scheme == "https" else 80))
            header = next((h for h in ("HTTP_ORIGIN", "HTTP_REFERER") if h in environ), None)
            if header is None:  # a browser names where a POST comes from; a page elsewhere may strip Referer
                return _refuse(start_response, "403 Forbidden",
                               "cross-origin request refused: neither Origin nor Referer says it comes from this"
                               f" dashboard ({scheme}://{raw[:80]}); a script must send one of them")
            source = environ[header]  # Origin when the browser sent one, else Referer
            if _origin(source) != ours:
                return _refuse(start_response, "403 Forbidden",
                               f"cross-origin request refused: {header[5:].title()} {source[:80]!r}"
                               f" is not this dashboard ({scheme}://{raw[:80]})")
        return self.app(environ, start_response)


def _refuse(start_response: Callable, status: str, message: str) -> list[bytes]:
    body = (message + "\n").encode("utf-8", "replace")
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))),
                            ("X-Content-Type-Options", "nosniff")])
    return [body]
