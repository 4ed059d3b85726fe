"""What a row of each table may hold, checked before an imported run is written (results/archive.py).

An export comes from someone else's machine, or by hand: its rows are checked against one pydantic
model per table, built from the columns the receiving database has (PRAGMA table_info), so a
table or column a migration adds is checked too. The columns this code writes get their exact type
(COLUMNS: a run's start is a finite time, a point number a whole number from 0, a status one of
STATUSES, `resolved` a JSON object, a run's note one `catnip note` takes, ...); any other column
gets its declared SQLite type (INTEGER: a whole number, REAL: a finite number, TEXT: bounded text). Every string is bounded and must be
UTF-8 (a lone surrogate would break the page that shows it), every number finite, JSON values at
most MAX_JSON_DEPTH deep. The first wrong value is reported in one line: table, row, column, what
was wrong and what is allowed.

What is checked is what readers rely on: `catnip list` sorts by `started`, `catnip report` averages
`pages.duration` of pages without an error, the run page decodes `resolved` and `assignment`, the
loss table reads the counters of `link_stats`; a value outside these types broke them (issue 47).
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from catnip.results import run_notes

MAX_TEXT = 64 * 1024           # any text column not bounded tighter below
MAX_NAME = 200                 # names: a run's, a host's, an application's, a metric's
MAX_ERROR = 64 * 1024          # an error message
MAX_JSON_TEXT = 16 * 1024 * 1024  # one JSON column (a point's environment: every host's qdiscs)
MAX_JSON_DEPTH = 64
MAX_INDEX = 2**31 - 1          # point and repetition numbers (a sweep has at most 200 points x 5000 runs)
INT64 = (-(2**63), 2**63 - 1)  # what an SQLite INTEGER holds
MAX_TIME = 1e11                # seconds since 1970: the year 5138

# Statuses a run or point is recorded with (`recovered`: controller/recover.py, records read back
# after its runner died); `running`/`queued` only while its runner lives, so an
# import turns them into `interrupted` (results/archive.py: an imported run is never running).
STATUSES = ("done", "failed", "cancelled", "interrupted", "recovered", "running", "queued")
LIVE_STATUSES = ("running", "queued")

# Columns the store writes as JSON text, by table (results/store_runs.py: dumps).
JSON_COLUMNS = {
    "runs": ("scenario", "sweep", "versions", "capabilities", "imported"),
    "points": ("assignment", "resolved", "fidelity", "sysctls", "offloads", "marking", "environment",
               "environment_after", "record"),
    "link_stats": ("config",),
}


class SchemaError(ValueError):
    """A value an import will not write; the message is one line."""


def _utf8(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"not UTF-8 text (a lone surrogate at character {exc.start})") from None
    return value


def _text(limit: int):
    # pydantic's strict str refuses a lone surrogate itself ("unable to parse raw data as a unicode string").
    return Annotated[str, Field(max_length=limit)]


def _walk(value: Any, depth: int = 0) -> None:
    """JSON as the store writes it: finite numbers, UTF-8 strings, at most MAX_JSON_DEPTH deep."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"holds {value!r}, not a finite number")
    if isinstance(value, str):
        _utf8(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _utf8(k)
            _walk(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _walk(v, depth + 1)


def _json_of(kind: str):
    def check(value: Any) -> Any:
        _walk(value)
        if kind == "object" and not isinstance(value, dict):
            raise ValueError(f"is JSON {type(value).__name__}, not an object")
        return value
    return AfterValidator(check)


def _run_note(value: Any) -> Any:
    # A run's note as `catnip note` takes it (results/run_notes.py): one rule wherever a note comes from.
    why = run_notes.problem(value)
    if why is not None:
        raise ValueError(why)
    return value


def _point_record(value: Any) -> Any:
    # The resolved record of a point (spec/record.py) is read by reports and the dashboard: its own schema.
    from catnip.spec import record as record_mod
    try:
        record_mod.parse(value)
    except record_mod.RecordError as exc:
        raise ValueError(str(exc)[:300]) from None
    return value


Int64 = Annotated[int, Field(ge=INT64[0], le=INT64[1])]
Count = Annotated[int, Field(ge=0, le=INT64[1])]
Index = Annotated[int, Field(ge=0, le=MAX_INDEX)]
Real = Annotated[float, Field(allow_inf_nan=False)]
Time = Annotated[float, Field(allow_inf_nan=False, ge=0, le=MAX_TIME)]
Duration = Annotated[float, Field(allow_inf_nan=False, ge=0)]
Flag = Literal[0, 1]
Status = Literal[STATUSES]  # type: ignore[valid-type]
Name = _text(MAX_NAME)
Text = _text(MAX_TEXT)
Error = _text(MAX_ERROR)
Path = _text(4096)
JsonObject = Annotated[Any, _json_of("object")]
JsonAny = Annotated[Any, _json_of("any")]
PointRecordJson = Annotated[Any, _json_of("object"), AfterValidator(_point_record)]
Note = Annotated[str, AfterValidator(_run_note)]

# Type of each column this code writes (None allowed unless the column is NOT NULL in the schema).
COLUMNS: dict[str, dict[str, Any]] = {
    "runs": {"id": Name, "name": Name, "source": Path, "scenario": JsonObject, "sweep": JsonObject, "seed": Int64,
             "git_rev": Name, "versions": JsonAny, "capabilities": JsonAny, "started": Time, "finished": Time,
             "status": Status, "error": Error, "runner": Name, "imported": JsonObject, "note": Note},
    "points": {"run_id": Name, "point": Index, "rep": Index, "assignment": JsonObject, "resolved": JsonObject,
               "seed": Int64, "switch_kind": Name, "link_backend": Name, "started": Time, "finished": Time,
               "status": Status, "error": Error, "realtime_ok": Flag, "fidelity": JsonObject, "sysctls": JsonAny,
               "offloads": JsonAny, "capture": Path, "marking": JsonObject, "environment": JsonAny,
               "environment_after": JsonAny, "record": PointRecordJson},
    "objects": {"client": Name, "server": Name, "page": Int64, "round": Int64, "url": Path, "conn": Int64,
                "start": Real, "connect_done": Real, "first_byte": Real, "end": Real, "body_bytes": Count,
                "header_bytes": Count, "status": Int64, "error": Error},
    "pages": {"client": Name, "server": Name, "page": Int64, "round": Int64, "start": Real, "end": Real,
              "duration": Duration, "objects": Count, "bytes": Count, "error": Error},
    "link_stats": {"router": Name, "link": Name, "role": Name, "config": JsonAny, "class": Name,
                   "arrived_pkts": Count, "arrived_bytes": Count, "sent_pkts": Count, "sent_bytes": Count,
                   "dropped_pkts": Count, "dropped_bytes": Count},
    "link_summary": {"router": Name, "link": Name, "role": Name, "max_queue_pkts": Count, "max_queue_bytes": Count,
                     "late_events": Count, "max_late_us": Real, "kernel_queue_dropped": Count,
                     "kernel_user_dropped": Count},
    "queue_samples": {"router": Name, "link": Name, "t": Real, "queue_pkts": Count, "queue_bytes": Count,
                      "sent_bytes": Count, "dropped_pkts": Count, "dropped_high": Count, "dropped_low": Count},
    "progress": {"t": Real, "elapsed": Real, "phase": Name, "pages_done": Count, "pages_total": Count},
    "tcp_counters": {"host": Name, "counter": Name, "value": Int64},
    "transfer_trials": {"profile": Name, "p": Real, "p_high": Real, "trial": Int64, "size": Count, "packets": Count,
                        "latency": Real, "data_segments": Count, "retransmissions": Count, "high_segments": Count,
                        "error": Error},
    "samples": {"app": Name, "metric": Name, "host": Name, "peer": Name, "flow": Text, "tag": Text, "t": Real,
                "value": Real, "unit": Name, "error": Error},
}
# Every table a run owns is keyed by run_id and point (results/store.py).
KEYS = {"run_id": Name, "point": Index}
# A column of another table gets its declared type's kind.
BY_AFFINITY = {"INTEGER": Int64, "REAL": Real, "TEXT": Text}


def _pages_complete(row: dict[str, Any]) -> str | None:
    # `catnip report` averages the durations of pages without an error: such a page needs one.
    if row.get("error") is None and row.get("duration") is None:
        return "column duration is missing: a page without an error needs its duration (seconds, from 0)"
    return None


def _marking_counts(row: dict[str, Any]) -> str | None:
    # The report adds the marker's counters: where given they are whole numbers from 0.
    marking = row.get("marking")
    if isinstance(marking, dict):
        for key in ("data_high", "data_low", "data_high_bytes", "data_low_bytes", "control_high", "control_low"):
            v = marking.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                return f"column marking: {key} is {str(v)[:40]!r}, not a whole number from 0"
    return None


ROW_CHECKS = {"pages": _pages_complete, "points": _marking_counts}


def row_model(table: str, columns: list[tuple[str, str, bool]]) -> TypeAdapter:
    """The checker of a list of rows (dicts by column) of `table` in a database whose columns are
    (name, declared type, NOT NULL): known columns typed exactly, others by their declared type."""
    known = {**KEYS, **COLUMNS.get(table, {})}
    fields: dict[str, Any] = {}
    for i, (name, declared, notnull) in enumerate(columns):
        kind = known.get(name) or BY_AFFINITY.get(declared.upper(), JsonAny)
        required = notnull or name in ("id", "run_id") or (table != "runs" and name == "point")
        # A column's own name as the alias: a column may be called `class` or shadow BaseModel's names.
        fields[f"c{i}"] = (kind, Field(alias=name)) if required else (Optional[kind], Field(None, alias=name))
    model = create_model(f"{table}_row", __config__=ConfigDict(strict=True, extra="forbid"), **fields)
    return TypeAdapter(list[model])


def _describe(error: dict[str, Any]) -> str:
    kind, msg = error.get("type", ""), error.get("msg", "")
    value = error.get("input")
    shown = repr(value[:60]) + (f" ({len(value)} characters)" if len(value) > 60 else "") \
        if isinstance(value, str) else repr(value)[:80]
    if kind == "missing":
        return "is missing (the column is required)"
    if kind == "extra_forbidden":
        return "is not a column of this table"
    if kind == "finite_number":
        return f"is {shown}, not a finite number"
    return f"is {shown}: {msg.removeprefix('Value error, ')[:200]}"


def check_rows(table: str, checker: TypeAdapter, columns: list[str], rows: list[list[Any]]) -> None:
    """Every row of a table checked, CHUNK rows at a time (the rows as dicts cost more memory
    than the rows); SchemaError at the first wrong value: `table T row N column C is ...: why`."""
    check = ROW_CHECKS.get(table)
    for first in range(0, len(rows), CHUNK):
        dicts = [dict(zip(columns, row)) for row in rows[first:first + CHUNK]]
        try:
            checker.validate_python(dicts)
        except ValidationError as exc:
            e = exc.errors(include_url=False)[0]
            loc = e.get("loc", ())
            where = f"table {table} row {first + loc[0] if loc and isinstance(loc[0], int) else '?'}"
            if len(loc) > 1 and isinstance(loc[1], str):
                where += f" column {loc[1]}"
            raise SchemaError(f"{where} {_describe(e)}") from None
        if check is not None:
            for n, d in enumerate(dicts, first):
                why = check(d)
                if why is not None:
                    raise SchemaError(f"table {table} row {n} {why}")


CHUNK = 5000


def decode_json(table: str, column: str, n: int, text: Any) -> Any:
    """A JSON column carried as text: its value, or SchemaError (NaN and Infinity are not JSON)."""
    if not isinstance(text, str):
        raise SchemaError(f"table {table} row {n} column {column} is {type(text).__name__}, not JSON text")
    if len(text) > MAX_JSON_TEXT:
        raise SchemaError(f"table {table} row {n} column {column} is {len(text)} characters of JSON;"
                          f" at most {MAX_JSON_TEXT}")

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")
    try:
        return json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError) as exc:
        raise SchemaError(f"table {table} row {n} column {column} is not JSON text"
                          f" ({str(exc)[:120] or type(exc).__name__})") from None
