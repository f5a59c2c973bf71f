"""The bridge's incoming-message queue: the newest target per topic, every command."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from aiomqtt import Message


class ConflatingQueue(asyncio.Queue[Message]):
    """An ``asyncio.Queue`` for aiomqtt that keeps only the newest message per conflated topic.

    aiomqtt puts each incoming message with ``put_nowait``. For a topic where
    :meth:`conflates` is true (targets), a message waiting in the queue is
    replaced in place by a newer one, so a flood of targets occupies one slot
    per topic and the reader always gets the latest. Other topics (commands)
    are queued in order, none dropped. Subclass with :func:`conflating_queue`.
    """

    _slots: dict[str, Message]
    _queue: deque[str | Message]  # topic name for a conflated slot, else the message
    replaced: int

    def conflates(self, topic: str) -> bool:
        """Whether messages on ``topic`` replace each other; none by default."""
        del topic
        return False

    def _init(self, maxsize: int) -> None:
        del maxsize
        self._queue = deque()
        self._slots = {}
        self.replaced = 0

    def _put(self, item: Message) -> None:
        topic = item.topic.value
        if not self.conflates(topic):
            self._queue.append(item)
        elif topic in self._slots:
            # Replace the pending message; the queue length does not change.
            self._slots[topic] = item
            self.replaced += 1
        else:
            self._slots[topic] = item
            self._queue.append(topic)

    def _get(self) -> Message:
        entry = self._queue.popleft()
        if isinstance(entry, str):
            return self._slots.pop(entry)
        return entry

    def put_nowait(self, item: Message) -> None:
        """Queue ``item``; a replaced target does not count as a new task."""
        if self.conflates(item.topic.value) and item.topic.value in self._slots:
            self._put(item)
            return
        super().put_nowait(item)


def conflating_queue(conflates: Callable[[str], bool]) -> type[ConflatingQueue]:
    """Return a :class:`ConflatingQueue` class whose ``conflates`` is ``conflates``.

    aiomqtt takes the queue as a class (``Client(queue_type=...)``), hence the factory.
    """

    class _Queue(ConflatingQueue):
        def conflates(self, topic: str) -> bool:
            return conflates(topic)

    return _Queue
