"""Bounds on what reading a scenario may cost, checked before the schema sees anything.

A scenario comes from a file, `--set` overrides or the dashboard's form, and is read as root: a
hostile or unlucky input must be refused in one short line, quickly, never hang or exhaust
memory. Files are read only when regular and small (a FIFO would block, /dev/zero never ends);
text must be UTF-8; YAML is first walked as events, counting the nodes its aliases expand to
(billion laughs: a few hundred characters that expand to 10^9 nodes), its nesting depth (the
composer recurses) and the digits of its integers (Python refuses more than 4300), then loaded.
"""

from __future__ import annotations

import os
import re
import reprlib
import stat
from pathlib import Path
from typing import Any

import yaml

MAX_FILE_BYTES = 1024 * 1024       # a scenario file; the largest shipped one is under 8 KB
MAX_DATA_FILE_BYTES = 4 * 1024 * 1024   # a file a scenario names (a think-time CDF)
MAX_OVERRIDE_CHARS = 64 * 1024     # one `--set key=value`
MAX_OVERRIDES = 200                # `--set` options of one command
MAX_DEPTH = 32                     # nesting of mappings and lists; scenarios use fewer than 10
MAX_NODES = 20_000                 # values after aliases are expanded; scenarios use fewer than 1000
MAX_INT_DIGITS = 30                # no field takes more (seeds, counts; sizes and rates have units)
MAX_SWEEP_POINTS = 200             # combinations of swept values, each checked in full; shipped: at most 52
MAX_POINT_RUNS = 5000              # sweep points x run.repetitions
MAX_LINE = 300                     # characters of one error line
MAX_LINES = 10                     # error lines of one rejection, then a count of the others

# YAML 1.1 integers as PyYAML's SafeLoader reads them (decimal, 0x, 0o/0, 0b, with '_').
_INT = re.compile(r"[-+]?(0b[0-1_]+|0x[0-9a-fA-F_]+|0o?[0-7_]+|[0-9][0-9_]*)")

_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxlevel = 80, 80, 3
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = 6


class InputError(ValueError):
    """An input beyond the bounds; the message is one line naming what and where."""


def short(value: Any) -> str:
    """repr() of a value shortened to about a hundred characters, however big or deep it is."""
    return _short.repr(value)


def shorten(text: str, limit: int = MAX_LINE) -> str:
    """A line cut to `limit` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit - 30]}... ({len(text)} characters)"


def bound_message(text: str) -> str:
    """An error message of at most MAX_LINES lines of at most MAX_LINE characters."""
    lines = [shorten(line) for line in text.splitlines() or [""]]
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES] + [f"... and {len(lines) - MAX_LINES} more problems"]
    return "\n".join(lines)


def read_text(path: str | Path, what: str = "", limit: int = MAX_FILE_BYTES) -> str:
    """A regular file's text, refused (InputError, naming `what` and the path) unless it is a
    regular file of at most `limit` bytes of UTF-8. Never blocks: a FIFO or a device is refused
    before anything is read from it."""
    label = f"{what} {path}" if what else str(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (its type is then refused).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"{label}: cannot read ({exc.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket")
        raise InputError(f"{label}: is {kind}, not a regular file")
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)  # the size is read, not trusted: /proc files say 0
    if len(data) > limit:
        raise InputError(f"{label}: larger than {limit // 1024} KB, the most accepted")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
                         ) from None


def count_nodes(value: Any, limit: int = MAX_NODES) -> int:
    """Values in a loaded structure, a shared one counted each time it appears (as validation
    walks it); stops counting past `limit`."""
    count, todo = 0, [value]
    while todo and count <= limit:
        item = todo.pop()
        count += 1
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
    return count


def _where(stack: list[list[Any]]) -> str:
    parts = [str(frame[1]) for frame in stack if frame[1] is not None]
    return ".".join(parts) or "(top level)"


def check_events(text: str, source: str) -> None:
    """Walk the YAML events of `text` and refuse (InputError) a document whose aliases expand
    to more than MAX_NODES values, nested deeper than MAX_DEPTH, or with an integer of more than
    MAX_INT_DIGITS digits. The parser is iterative: no recursion, and nothing is built."""
    # One frame per open collection: [kind, key or index (for the error's path), expecting a key,
    # the node count when it opened, the deepest level inside it, its anchor].
    stack: list[list[Any]] = []
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, levels) of its value expanded
    total = 0

    def visit(nodes: int, depth: int) -> None:
        nonlocal total
        total += nodes
        if total > MAX_NODES:
            raise InputError(f"{source}: {_where(stack)}: more than {MAX_NODES} values (an alias counts as"
                             " every value of the anchor it repeats)")
        if depth > MAX_DEPTH:
            raise InputError(f"{source}: {_where(stack)}: nested deeper than {MAX_DEPTH} levels")
        if stack:
            stack[-1][4] = max(stack[-1][4], depth)

    def advance(key: str | None = None) -> None:
        """A key or value ended inside the open collection: its position moves on."""
        if not stack:
            return
        top = stack[-1]
        if top[0] == "seq":
            top[1] += 1
            return
        if top[2]:
            top[1] = shorten(key, 40) if key is not None else "?"
        top[2] = not top[2]

    try:
        for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(event, yaml.ScalarEvent):
                value = event.value
                if not event.style and len(value) > MAX_INT_DIGITS and _INT.fullmatch(value):
                    raise InputError(f"{source}: {_where(stack)}: an integer of {len(value)} digits; at most"
                                     f" {MAX_INT_DIGITS}")
                visit(1, len(stack) + 1)
                if event.anchor:
                    anchors[event.anchor] = (1, 1)
                advance(value)
            elif isinstance(event, yaml.AliasEvent):
                nodes, levels = anchors.get(event.anchor, (1, 1))
                visit(nodes, len(stack) + levels)
                advance("*" + event.anchor)
            elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth = len(stack) + 1
                visit(1, depth)
                kind = "map" if isinstance(event, yaml.MappingStartEvent) else "seq"
                stack.append([kind, None if kind == "map" else 0, True, total - 1, depth, event.anchor])
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                _, _, _, start, deepest, anchor = stack.pop()
                depth = len(stack) + 1
                if anchor:
                    anchors[anchor] = (total - start, deepest - depth + 1)
                if stack:
                    stack[-1][4] = max(stack[-1][4], deepest)
                advance()
    except yaml.YAMLError:
        return  # the loader reports the syntax error, with its line


class _DuplicateKey(Exception):
    pass


_MERGE = "tag:yaml.org,2002:merge"


class _UniqueKeys(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader, refusing a mapping that gives a key twice: PyYAML keeps the last one
    silently, so a second `topology:` block would replace the first without a word. A key after a
    merge (`<<: *anchor`) overrides the merged one, as merges are meant to: not a duplicate."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=False)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _DuplicateKey(f"line {line}: key {short(key)} given twice (first at line {seen[key]}); a"
                                        " second one would silently replace the first")
                seen[key] = line
        return super().construct_mapping(node, deep)


def load_yaml(text: str, source: str) -> Any:
    """yaml.safe_load of `text` within the bounds above, refusing duplicate keys (InputError beyond
    them; yaml.YAMLError for a syntax error, as safe_load raises it)."""
    check_events(text, source)
    try:
        return yaml.load(text, Loader=_UniqueKeys)
    except _DuplicateKey as exc:
        raise InputError(f"{source}: {exc}") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # a value the constructor cannot build
        raise InputError(f"{source}: a value cannot be read: {shorten(str(exc), 120)}") from None


def coerced_booleans(model: Any, raw: Any, path: tuple = ()) -> list[str]:
    """Field paths where `raw` (what the user wrote) has a boolean and the validated `model` a
    number: pydantic's lax mode reads `true` as 1, so `clients: true` would mean one client.
    Walks the fields the input names, into models, lists and mappings."""
    from pydantic import BaseModel

    out: list[str] = []
    if isinstance(raw, bool):
        if isinstance(model, (int, float)) and not isinstance(model, bool):
            out.append(".".join(str(p) for p in path) or "(top level)")
    elif isinstance(model, BaseModel) and isinstance(raw, dict):
        fields = type(model).model_fields
        for key, value in raw.items():
            if isinstance(key, str) and key in fields:
                out += coerced_booleans(getattr(model, key, None), value, path + (key,))
    elif isinstance(model, (list, tuple)) and isinstance(raw, list) and len(model) == len(raw):
        for i, (m, r) in enumerate(zip(model, raw)):
            out += coerced_booleans(m, r, path + (i,))
    elif isinstance(model, dict) and isinstance(raw, dict):
        for key, value in raw.items():
            if isinstance(key, (str, int)) and key in model:
                out += coerced_booleans(model[key], value, path + (key,))
    return out
