"""``asyncio.TaskGroup`` and ``asyncio.timeout`` on every supported Python (3.10 to 3.13).

On 3.11+ these are asyncio's own. On 3.10 they come from the ``taskgroup`` backport, whose
``timeout`` counts cancellations like 3.11's (``Task.cancelling``/``uncancel``, provided by
running the block in a task subclass that has them): it turns only its own cancel into
``TimeoutError`` (the builtin one, as on 3.11) and lets every other cancel through::

    from hilbot._compat_asyncio import TaskGroup, timeout

A ``TaskGroup`` raises :class:`hilbot._compat.BaseExceptionGroup` on every Python.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    from asyncio import TaskGroup, timeout
else:  # pragma: no cover - exercised by the Python 3.10 CI job
    from taskgroup import TaskGroup, timeout

__all__ = ["TaskGroup", "timeout"]
