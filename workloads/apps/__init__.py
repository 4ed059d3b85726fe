"""The built-in applications; importing this package registers them (workloads/apps/base.py)."""

from catnip.workloads.apps import (
    base,  # noqa: F401
    bulk,  # noqa: F401
    burst,  # noqa: F401
    ftp,  # noqa: F401
    telnet,  # noqa: F401
    web,  # noqa: F401
)
