"""Names that Python 3.11 added, for Python 3.10 (Ubuntu 22.04, ROS 2 Humble, JetPack).

Import them from here, never from ``enum``/``typing`` directly, so the package imports on
every supported Python (3.10 to 3.13)::

    from hilbot._compat import Self, StrEnum
"""

from __future__ import annotations

import enum
import sys

if sys.version_info >= (3, 11):
    from enum import StrEnum
    from typing import Self
else:  # pragma: no cover - exercised by the Python 3.10 CI job
    from typing_extensions import Self

    class StrEnum(str, enum.Enum):
        """``enum.StrEnum`` of Python 3.11: members are strings, ``str()`` is the value."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return str.__format__(str(self.value), spec)

        @staticmethod
        def _generate_next_value_(
            name: str, start: int, count: int, last_values: list[object]
        ) -> str:
            return name.lower()


__all__ = ["Self", "StrEnum"]
