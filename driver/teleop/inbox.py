"""The bridge's incoming-message queue: each message parsed on arrival, valid ones conflated."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiomqtt import Message as RawMessage

from hilbot.driver.teleop.messages import CommandMessage, JointTarget, Message

#: Parses and validates one raw message; returns None for a rejected one (reported by it).
Accept = Callable[[str, bytes, bool], Message | None]

#: What the queue hands out: the topic and its validated message.
Parsed = tuple[str, Message]


class ConflatingQueue(asyncio.Queue[Any]):
    """An ``asyncio.Queue`` for aiomqtt that parses each message as it arrives.

    aiomqtt puts each incoming message with ``put_nowait``. Every one is
    parsed and validated there at once by :meth:`accept`, so a bad payload is
    rejected (and reported) even when a newer message follows it within
    microseconds. Only valid messages are queued, as ``(topic, message)``
    (:data:`Parsed`): a pose target replaces a valid one still waiting on its
    topic (a flood occupies one slot per topic, the reader gets the latest); a
    joint target is merged into the waiting one, as the runtime merges joint
    targets (the newer value of a joint wins, the seq is the newer one's).
    Commands are queued in order, none dropped. A rejected message never
    displaces a waiting valid one. Subclass with :func:`conflating_queue`.

    Attributes:
        replaced: valid targets superseded (or merged) before the reader took them.
    """

    _slots: dict[str, Message]
    _queue: deque[str | Parsed]  # topic name for a conflated slot, else (topic, message)
    replaced: int

    def accept(self, topic: str, payload: bytes, retained: bool) -> Message | None:
        """Parse and validate one message; None if it is rejected. Accepts nothing here."""
        del topic, payload, retained
        return None

    def superseded(self) -> None:
        """Called each time a waiting valid target is replaced; nothing by default."""

    def _init(self, maxsize: int) -> None:
        del maxsize
        self._queue = deque()
        self._slots = {}
        self.replaced = 0

    def _put(self, item: Parsed) -> None:
        topic, message = item
        if isinstance(message, CommandMessage):
            self._queue.append(item)
        elif topic in self._slots:
            # Replace the waiting target; the queue length does not change.
            waiting = self._slots[topic]
            if isinstance(message, JointTarget) and isinstance(waiting, JointTarget):
                message = replace(message, positions={**waiting.positions, **message.positions})
            self._slots[topic] = message
            self.replaced += 1
            self.superseded()
        else:
            self._slots[topic] = message
            self._queue.append(topic)

    def _get(self) -> Parsed:
        entry = self._queue.popleft()
        if isinstance(entry, str):
            return entry, self._slots.pop(entry)
        return entry

    def put_nowait(self, item: RawMessage) -> None:
        """Parse ``item`` and queue it if valid; a replaced target is not a new task."""
        topic = item.topic.value
        message = self.accept(topic, _payload_bytes(item.payload), item.retain)
        if message is None:
            return
        if topic in self._slots and not isinstance(message, CommandMessage):
            self._put((topic, message))
            return
        super().put_nowait((topic, message))


def conflating_queue(
    accept: Accept, superseded: Callable[[], None] | None = None
) -> type[ConflatingQueue]:
    """Return a :class:`ConflatingQueue` class with these ``accept`` and ``superseded``.

    aiomqtt takes the queue as a class (``Client(queue_type=...)``), hence the factory.
    """

    class _Queue(ConflatingQueue):
        def accept(self, topic: str, payload: bytes, retained: bool) -> Message | None:
            return accept(topic, payload, retained)

        def superseded(self) -> None:
            if superseded is not None:
                superseded()

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
