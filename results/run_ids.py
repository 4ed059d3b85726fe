"""The one shape of a run id, whatever it comes from: `catnip run --run-id`, `catnip import --as`,
the id inside an imported file, the CLI's arguments and the dashboard's URLs.

A run id names a folder (runs/ID beside the database: configs, logs, captures), so besides its
characters it may not be `.`, `..`, a hidden name or something read as an option (`-rf`): it
starts with a letter or a digit. The pattern is results/store.py's RUN_ID (every reader of a
database matches it); the checks here say why an id is refused.
"""

from __future__ import annotations

from typing import Any

from catnip.results.store import RUN_ID
RULE = "letters, digits, '.', '_' and '-', at most 100, starting with a letter or digit"


class BadRunId(ValueError):
    """Not a run id; the message is one line naming where it came from and the rule."""


def problem(value: Any) -> str | None:
    """Why `value` is not a run id, or None when it is one."""
    if not isinstance(value, str):
        return f"is {type(value).__name__}, not text"
    if not RUN_ID.fullmatch(value):
        return f"{value[:120]!r} is not a run id ({RULE})"
    return None


def check(value: Any, what: str = "run id") -> str:
    """`value` if it is a run id, else BadRunId saying `what` was wrong."""
    why = problem(value)
    if why is not None:
        raise BadRunId(f"{what}: {why}")
    return value
