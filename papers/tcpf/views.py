"""The TCP-friendly marking paper's run-page view: Tables 4-7 of a run of its experiment."""

from __future__ import annotations

from typing import Any

from catnip.results import layouts
from catnip.results.store import Store


def tables(store: Store, run_id: str, page: dict[str, Any]) -> dict[str, Any] | None:
    """The layout tcpf-tables' rows for a run of the paper's experiment, or None for any other run."""
    try:
        return {"rows": layouts.build("tcpf-tables", store, run_id).records()}
    except layouts.LayoutError:
        return None
