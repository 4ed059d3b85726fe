"""results/json_stream.py against the json module: the same value, or both refuse, for generated
documents (the export's shape and any JSON, pretty-printed or not, one character changed or not)
cut into chunks of 1 to 40 characters, so every token is split somewhere; and its bounds.
Broken once each: a number ending near a chunk's end taken as it was ("1." | "5"), 685 of 3000
documents differed; an unterminated string refused instead of read on, 434 of 3000."""

from __future__ import annotations

import json
import random

import pytest

from catnip.results.json_stream import StreamError, loads

SEED, CASES = 47, 3000


def _chunks(text: str, rnd: random.Random):
    i = 0
    while i < len(text):
        n = rnd.randint(1, 40)
        yield text[i:i + n]
        i += n


def _value(rnd: random.Random, depth: int = 0):
    k = rnd.randrange(9 if depth < 3 else 5)
    if k == 0:
        return rnd.choice([None, True, False])
    if k == 1:
        return rnd.randint(-10**20, 10**20)
    if k == 2:
        return rnd.uniform(-1e10, 1e10) * 10.0 ** rnd.randint(-300, 290)
    if k == 3:
        return "s\u00e9\\\"x\n\ud83d\ude42" * rnd.randint(0, 3)
    if k == 4:
        return rnd.choice([1.5e-7, 0.1, -0.0, 10**30])
    if k in (5, 6):
        return [_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    if k == 7:
        return {f"k{i}": _value(rnd, depth + 1) for i in range(rnd.randint(0, 3))}
    return float(rnd.choice(["nan", "inf", "-inf"]))


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_the_stream_reads_what_json_loads_reads():
    rnd = random.Random(SEED)
    differ = []
    for n in range(CASES):
        doc = {"format": "x", "tables": {f"t{i}": {"columns": ["a"], "x": _value(rnd),
                                                   "rows": [[_value(rnd), _value(rnd)] for _ in range(rnd.randint(0, 5))]}
                                         for i in range(rnd.randint(0, 3))}, "z": _value(rnd)}
        if rnd.random() < 0.2:
            doc = _value(rnd)
        text = json.dumps(doc, indent=rnd.choice([None, 1, 2]), separators=rnd.choice([None, (",", ":"), (" , ", " : ")]))
        if rnd.random() < 0.4 and text:
            i = rnd.randrange(len(text))
            text = text[:i] + rnd.choice(["", "x", "]", "}", ",", '"', " ", "1", "[", "{", ":", "."]) + text[i + 1:]
        try:
            want = ("value", json.loads(text))
        except (ValueError, RecursionError):
            want = ("refused", None)
        try:
            got = ("value", loads(_chunks(text, rnd), 10**9, 10**9))
        except StreamError:
            got = ("refused", None)
        if want[0] != got[0] or not _same(want[1], got[1]):
            differ.append(f"{n}: json {want[0]}, stream {got[0]}: {text[:200]!r}")
    assert not differ, f"{len(differ)} of {CASES} differ:\n" + "\n".join(differ[:10])


def test_the_bounds():
    rows = '{"tables": {"pages": {"rows": [' + ",".join(["[0]"] * 11) + "]}}}"
    assert len(loads(iter([rows]), 100, 11)["tables"]["pages"]["rows"]) == 11
    with pytest.raises(StreamError, match="more than 10 rows"):
        loads(iter([rows]), 100, 10)
    with pytest.raises(StreamError, match="a value of more than 1000 characters"):
        loads(iter(['{"a": "'] + ["x" * 100] * 100), 1000, 10)
    with pytest.raises(StreamError, match="at character 0"):
        loads(iter(["\x00" * 10]), 1000, 10)  # refused where it is met, the rest never read
    with pytest.raises(StreamError, match="more after the document"):
        loads(iter(["{} {}"]), 1000, 10)
