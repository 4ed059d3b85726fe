"""JSON read from a stream of text chunks, without holding the whole text (results/archive.py).

An export is one JSON object whose bulk is `tables.NAME.rows`: lists of rows. Those containers
(the top object, `tables`, each table, each `rows` list) are walked here token by token; every
other value, each row included, is decoded whole by the json module's own decoder
(`JSONDecoder.raw_decode`, C speed) from a window of text that is refilled as the stream goes.
So what is held is the window (about a chunk, or one value while it is being read) and what was
decoded, never the whole text (and the rows are counted: small rows cost more as objects than
as text); invalid text is refused where it is met, not after the rest of
the stream has been decompressed. The result is what `json.loads` gives for the same text
(duplicate keys: the last wins; NaN and Infinity read as floats).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
# Containers walked here, by path: the top object's `tables`, every table in it, a table's `rows`.
_WALKED = {(): ("tables",), ("tables",): None}


class StreamError(ValueError):
    """Not a JSON document; the message says what was met where."""


class _Window:
    def __init__(self, chunks: Iterator[str], max_value: int, max_rows: int):
        self.chunks, self.max_value, self.max_rows, self.rows_left = chunks, max_value, max_rows, max_rows
        self.buf, self.pos, self.eof, self.offset = "", 0, False, 0
        self.decoder = json.JSONDecoder()

    def more(self, at_least: int = 0) -> bool:
        """Appends chunks (at least `at_least` characters, or one chunk); False at the end."""
        if self.eof:
            return False
        if self.pos > (1 << 20):  # drop what was read
            self.offset += self.pos
            self.buf, self.pos = self.buf[self.pos:], 0
        parts, got = [self.buf], 0
        while got <= at_least:
            chunk = next(self.chunks, None)
            if chunk is None:
                self.eof = True
                break
            parts.append(chunk)
            got += len(chunk)
        self.buf = "".join(parts)
        return got > 0

    def peek(self) -> str:
        """The next character that is not white space ('' at the end)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or not self.more():
                return self.buf[self.pos:self.pos + 1]

    def expect(self, chars: str, where: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            met = repr(c) if c else "the end"
            raise StreamError(f"expected {' or '.join(repr(x) for x in chars)} {where} at character"
                              f" {self.offset + self.pos}, met {met}")
        self.pos += 1
        return c

    def value(self) -> Any:
        """One whole JSON value from here."""
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # Cut short by the window's end (an unterminated string reports where it began): read on.
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buf) - 8
                if self.eof or not cut:
                    raise StreamError(f"{exc.msg} at character {self.offset + exc.pos}") from None
                if len(self.buf) - self.pos > self.max_value:
                    raise StreamError(f"a value of more than {self.max_value} characters") from None
                self.more(len(self.buf) - self.pos)  # doubles what is read: a long value costs O(its size)
                continue
            except RecursionError:
                raise StreamError(f"nested too deep at character {self.offset + self.pos}") from None
            except ValueError as exc:  # an integer of more than 4300 digits
                raise StreamError(str(exc)[:200]) from None
            if not self.eof and len(self.buf) - end <= 64:
                self.more()  # a number may go on in the next chunk ("1." | "5"): read it with what follows
                continue
            self.pos = end
            return value


def _object(w: _Window, path: tuple[str, ...]) -> dict[str, Any]:
    w.expect("{", "to open an object")
    out: dict[str, Any] = {}
    if w.peek() == "}":
        w.pos += 1
        return out
    walked = _WALKED.get(path, ()) if len(path) < 2 else ()
    while True:
        if w.peek() != '"':
            w.expect('"', "to begin an object's key")
        key = w.value()
        w.expect(":", "after an object's key")
        c = w.peek()
        if c == "{" and (walked is None or key in walked):
            out[key] = _object(w, (*path, key))
        elif c == "[" and len(path) == 2 and path[0] == "tables" and key == "rows":
            out[key] = _rows(w)
        else:
            out[key] = w.value()
        if w.expect(",}", "after an object's value") == "}":
            return out


def _rows(w: _Window) -> list[Any]:
    w.expect("[", "to open a list")
    out: list[Any] = []
    if w.peek() == "]":
        w.pos += 1
        return out
    while True:
        # Small rows cost far more as objects than as text ("[0]," is a 56-byte list): counted.
        w.rows_left -= 1
        if w.rows_left < 0:
            raise StreamError(f"more than {w.max_rows} rows in its tables, the most an import reads")
        out.append(w.value())
        if w.expect(",]", "after a list's value") == "]":
            return out


def loads(chunks: Iterator[str], max_value: int, max_rows: int) -> Any:
    """The JSON document of the text `chunks` make; StreamError when it is not one (one value,
    white space around it), when a single value runs past `max_value` characters, or when the
    tables' `rows` lists hold more than `max_rows` rows together."""
    w = _Window(chunks, max_value, max_rows)
    document = _object(w, ()) if w.peek() == "{" else w.value()
    if w.peek():
        raise StreamError(f"more after the document, at character {w.offset + w.pos}")
    return document
