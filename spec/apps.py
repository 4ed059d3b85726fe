"""What a scenario says of an application: the fields every application has (`AppSpec`) and the
schema of each kind, registered by its plug-in (workloads/apps/base.py `register`). The built-in
applications register when their package is imported, which the `catnip.applications` entry point
names (spec/plugins.py): spec/ never imports them itself."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from catnip.spec import plugins


class AppSpec(BaseModel):
    """Fields every application has; each plug-in's `Spec` adds its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str
    name: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]{0,31}$",
                             description="instance name in the results (default: the kind)")
    clients: str = Field(description="host group whose hosts run the clients (they open the connections)")
    servers: str | None = Field(default=None, description="host group whose hosts run the servers")

    @property
    def instance(self) -> str:
        return self.name or self.kind

    def groups(self) -> list[str]:
        return [g for g in (self.clients, self.servers) if g]

    def planned_seconds(self) -> tuple[str, float] | None:
        """(field, seconds) of the work this spec plans, when known in advance: the scenario checks
        it fits in run.time_limit when it loads."""
        return None


SPECS: dict[str, type[AppSpec]] = {}
_builtins_loaded = False


def register(spec: type[AppSpec]) -> None:
    kind = spec.model_fields["kind"].default
    if kind in SPECS and SPECS[kind] is not spec:
        raise TypeError(f"application kind {kind!r} is registered twice")
    SPECS[kind] = spec


def unregister(kind: str) -> None:
    SPECS.pop(kind, None)


def kinds() -> list[str]:
    _load_builtins()
    return sorted(SPECS)


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        plugins.load(plugins.APPLICATIONS)  # importing them registers them
        _builtins_loaded = True


def spec_of(kind: Any) -> type[AppSpec]:
    _load_builtins()
    if kind not in SPECS:
        raise ValueError(f"application kind {kind!r} not allowed: {', '.join(sorted(SPECS))}")
    return SPECS[kind]


def parse_spec(raw: Any) -> AppSpec:
    """A scenario's application entry, validated by its plug-in's schema (errors name the field)."""
    if isinstance(raw, AppSpec):
        return raw
    if not isinstance(raw, dict):
        raise ValueError(f"an application is a mapping with a 'kind', got {raw!r}")
    return spec_of(raw.get("kind")).model_validate(raw)
