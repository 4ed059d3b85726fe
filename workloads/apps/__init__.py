"""The built-in applications; importing this package registers them (workloads/apps/base.py)."""

from workloads.apps import base  # noqa: F401
from workloads.apps import bulk  # noqa: F401
from workloads.apps import web  # noqa: F401
from workloads.apps import telnet  # noqa: F401
from workloads.apps import burst  # noqa: F401
from workloads.apps import ftp  # noqa: F401
