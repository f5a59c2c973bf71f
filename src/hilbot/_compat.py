"""Names that Python 3.11 added, for Python 3.10 (Ubuntu 22.04, ROS 2 Humble, JetPack).

Import them from here, never from ``enum``/``typing``/the builtins directly, so the package
imports on every supported Python (3.10 to 3.13)::

    from hilbot._compat import BaseExceptionGroup, Self, StrEnum

``asyncio.TaskGroup`` and ``asyncio.timeout`` are in :mod:`hilbot._compat_asyncio` (kept apart
so that importing this module does not import asyncio). ``except*`` is a syntax error on 3.10:
use :func:`split_group` instead. This module imports no other hilbot module.
"""

from __future__ import annotations

import enum
import sys
from typing import TypeVar

if sys.version_info >= (3, 11):
    from builtins import BaseExceptionGroup, ExceptionGroup
    from enum import StrEnum
    from typing import Self, Unpack
else:  # pragma: no cover - exercised by the Python 3.10 CI job
    from exceptiongroup import BaseExceptionGroup, ExceptionGroup
    from typing_extensions import Self, Unpack

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


E = TypeVar("E", bound=BaseException)


def split_group(
    exc: BaseException, kind: type[E]
) -> tuple[BaseExceptionGroup[E] | None, BaseException | None]:
    """What ``except* kind`` sees of ``exc``: the part that is ``kind``, and the rest.

    As with ``except*``, a bare exception counts as a group of one. Either part is ``None``
    when empty; the rest is ``exc`` itself when nothing matched.
    """
    if isinstance(exc, BaseExceptionGroup):
        matched, rest = exc.split(kind)
        return matched, rest
    if isinstance(exc, kind):
        return BaseExceptionGroup("", [exc]), None
    return None, exc


__all__ = [
    "BaseExceptionGroup",
    "ExceptionGroup",
    "Self",
    "StrEnum",
    "Unpack",
    "split_group",
]
