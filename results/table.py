"""A typed table: columns with a type and a unit, rows of values in column order; text, CSV and
JSON render it alike, so every table's numbers come from one aggregation (results/layouts.py
registers the tables that reproduce a paper's; results/report.py builds Table II's rows)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,), "json": (object,)}


@dataclass(frozen=True)
class Column:
    """A column: `type` one of TYPES; `unit` of its values ("s", "B", "pkt", "bit/s", "1" for a
    dimensionless ratio or fraction), or None for labels and counts; `unit_from` names the column
    that holds each row's unit where it varies by row (application metrics); `fmt` how text shows
    a number: a format spec (".2f") or "%" (a fraction as a percentage)."""
    name: str
    type: str
    unit: str | None = None
    unit_from: str | None = None
    fmt: str | None = None

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"column {self.name}: type {self.type!r} is not one of {', '.join(TYPES)}")

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("name", self.name), ("type", self.type), ("unit", self.unit),
                                  ("unit_from", self.unit_from)) if v is not None}


@dataclass(frozen=True)
class Table:
    """A layout's result: rows are tuples in column order; None is a missing value in any column."""
    layout: str
    title: str
    paper: str
    run_ids: tuple[str, ...]
    columns: tuple[Column, ...]
    rows: tuple[tuple, ...]
    notes: tuple[str, ...] = ()
    source: Any = field(default=None, repr=False, compare=False)  # what the layout's own text renders

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.layout}: a column name twice in {names}")
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"{self.layout}: row {i} has {len(row)} values for {len(self.columns)} columns")
            for c, v in zip(self.columns, row):
                if v is not None and (not isinstance(v, TYPES[c.type]) or (c.type in ("int", "float")
                                                                            and isinstance(v, bool))):
                    raise TypeError(f"{self.layout}: row {i}, column {c.name} ({c.type}) holds {v!r}")

    def column(self, name: str) -> list[Any]:
        i = [c.name for c in self.columns].index(name)
        return [r[i] for r in self.rows]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip((c.name for c in self.columns), r)) for r in self.rows]


def render_json(table: Table) -> str:
    return json.dumps({"layout": table.layout, "title": table.title, "paper": table.paper,
                       "run_ids": list(table.run_ids), "columns": [c.to_dict() for c in table.columns],
                       "rows": table.records(), "notes": list(table.notes)}, indent=2, default=str)


def render_csv(table: Table) -> str:
    """A header of column names, a line per row; json columns as sorted JSON, None empty."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([c.name for c in table.columns])
    for row in table.rows:
        w.writerow([json.dumps(v, sort_keys=True) if c.type == "json" and v is not None else v
                    for c, v in zip(table.columns, row)])
    return buf.getvalue()


def _cell(c: Column, v: Any) -> str:
    if v is None:
        return "-"
    if c.type == "bool":
        return "yes" if v else "no"
    if c.type == "json":
        return json.dumps(v, sort_keys=True)
    if c.type == "float":
        if c.fmt == "%":
            return f"{100 * v:.2f}%"
        return format(v, c.fmt or ".4g")
    if c.type == "int":
        return format(v, c.fmt or "")
    return str(v)


def render_generic_text(table: Table) -> str:
    """Aligned columns, units in the header: any layout's table."""
    heads = [c.name + (f" ({c.unit})" if c.unit and c.unit != "1" else "") for c in table.columns]
    cells = [[_cell(c, v) for c, v in zip(table.columns, row)] for row in table.rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(heads)]
    left = [c.type in ("str", "json") for c in table.columns]

    def line(values: list[str]) -> str:
        return "  ".join(v.ljust(w) if lf else v.rjust(w) for v, w, lf in zip(values, widths, left)).rstrip()
    out = [f"{table.title} ({table.paper}): {', '.join(table.run_ids)}", "", line(heads)]
    out += [line(r) for r in cells]
    out += [""] + list(table.notes) if table.notes else []
    return "\n".join(out)
