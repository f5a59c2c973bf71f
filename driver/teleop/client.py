"""``MqttClient``: aiomqtt's client, with timeouts that never swallow a cancellation.

aiomqtt bounds every broker round trip (connect, subscribe, publish with QoS > 0,
disconnect) with ``asyncio.wait_for``. On Python 3.11, ``wait_for`` returns the
result instead of raising ``CancelledError`` when the awaited operation finishes
in the same loop iteration as a ``cancel()`` (CPython gh-86296, fixed in 3.12 by
reimplementing ``wait_for`` on ``asyncio.timeout``). A teleop bridge publishing
state at 50 Hz with QoS 1 hits that window within minutes of start/stop cycles,
and a cancel swallowed inside an ``asyncio.TaskGroup`` child hangs shutdown for
good: the group cancels each child once.

``asyncio.timeout`` counts cancellations (``Task.cancelling``/``uncancel``), so it
converts only its own cancel into ``TimeoutError`` and lets every other one
through. ``MqttClient`` routes aiomqtt's waits through it; everything else is
aiomqtt unchanged. Every MQTT client hilbot opens is an ``MqttClient``.

Python 3.10 has neither ``asyncio.timeout`` nor ``uncancel`` (and its ``wait_for`` has
the same flaw): :mod:`hilbot._compat_asyncio` gives it the ``taskgroup`` backport's
``timeout``, which runs the block in a task that counts cancellations the same way.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable
from typing import Any, TypeVar

import aiomqtt

from hilbot import _compat_asyncio as aio

T = TypeVar("T")


class MqttClient(aiomqtt.Client):
    """``aiomqtt.Client`` whose operation timeouts use ``asyncio.timeout`` (or its backport).

    A SUBACK or UNSUBACK whose (un)subscribe was cancelled or timed out (a driver that
    refuses to start cancels its sessions mid-round-trip; a busy host answers late) is
    expected, not an error: aiomqtt logs a traceback for it, this client a debug line.
    """

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, *args: Any) -> None:
        if mid not in self._pending_subscribes:
            self._logger.debug("a SUBACK (message %d) for a subscribe no longer waited for", mid)
            return
        super()._on_subscribe(client, userdata, mid, *args)

    def _on_unsubscribe(self, client: Any, userdata: Any, mid: int, *args: Any) -> None:
        if mid not in self._pending_unsubscribes:
            self._logger.debug(
                "an UNSUBACK (message %d) for an unsubscribe no longer waited for", mid
            )
            return
        super()._on_unsubscribe(client, userdata, mid, *args)

    async def _wait_for(self, fut: Awaitable[T], timeout: float | None) -> T:
        if timeout is None:
            timeout = self.timeout
        if timeout == math.inf:
            return await fut
        try:
            async with aio.timeout(timeout):
                return await fut
        except TimeoutError:
            raise aiomqtt.MqttError("Operation timed out") from None
        finally:
            if inspect.iscoroutine(fut):
                # On 3.10 entering the timeout suspends: a cancel then leaves ``fut`` (a
                # coroutine such as ``confirmation.wait()``) unawaited. Closing it is a no-op
                # once it has run.
                fut.close()
