"""The bridge's incoming-message queue: it hands each message on the moment it arrives."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiomqtt import Message as RawMessage

#: Handles one raw message: ``(topic, payload, retained)``.
Handler = Callable[[str, bytes, bool], object]


class DispatchingQueue(asyncio.Queue[Any]):
    """An ``asyncio.Queue`` for aiomqtt that queues nothing: it handles each message at once.

    aiomqtt puts each incoming message with ``put_nowait`` from its socket
    callback; this one calls :meth:`handle` right there. The bridge parses and
    validates the message and, if valid, stores it in the runtime's
    latest-value slot before the loop can run another callback (a control
    cycle that is due would otherwise run first and the target wait a period),
    so every bad payload is reported however fast the next one follows, and
    conflation happens only among valid targets, in the runtime's slots (or the
    teleop worker's batch). Subclass with :func:`dispatching_queue`.
    """

    def handle(self, topic: str, payload: bytes, retained: bool) -> None:
        """Handle one message; nothing by default."""
        del topic, payload, retained

    def put_nowait(self, item: RawMessage) -> None:
        """Handle ``item`` now; it is never queued."""
        self.handle(item.topic.value, _payload_bytes(item.payload), item.retain)


def dispatching_queue(handler: Handler) -> type[DispatchingQueue]:
    """Return a :class:`DispatchingQueue` class whose ``handle`` calls ``handler``.

    aiomqtt takes the queue as a class (``Client(queue_type=...)``), hence the factory.
    """

    class _Queue(DispatchingQueue):
        def handle(self, topic: str, payload: bytes, retained: bool) -> None:
            handler(topic, payload, retained)

    return _Queue


def _payload_bytes(payload: Any) -> bytes:
    match payload:
        case bytes():
            return payload
        case bytearray():
            return bytes(payload)
        case str():
            return payload.encode()
        case None:
            return b""
    return str(payload).encode()
