"""The CATNIP paper's run-page view: a seed of the gap study links to its table over the seeds."""

from __future__ import annotations

from typing import Any

from catnip.results import study as study_mod
from catnip.results.store import Store


def study_seed(store: Store, run_id: str, page: dict[str, Any]) -> dict[str, Any] | None:
    """Something to show for a run of a study scenario with both ends, else None."""
    return {"study": True} if study_mod.applies(store, run_id) else None
