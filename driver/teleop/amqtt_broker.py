"""amqtt's broker as hilbot runs it: each client read through an :class:`IngressReader`.

Imported only when an embedded broker starts (amqtt is slow to import).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from dataclasses import dataclass, field
from typing import Any

from amqtt.adapters import StreamWriterAdapter
from amqtt.broker import Broker
from amqtt.plugins.authentication import FileAuthPlugin as _AmqttFileAuthPlugin
from amqtt.plugins.base import BaseAuthPlugin
from amqtt.session import Session

from hilbot.driver.teleop.ingress import IngressCounters, IngressReader

#: Broadcasts queued in amqtt above which bulk (QoS 0, non-command) publishes wait.
BROADCAST_BACKLOG = 8


class FilteringBroker(Broker):  # type: ignore[misc]  # amqtt ships no type information
    """amqtt's ``Broker``; every TCP client's packets pass an :class:`IngressReader`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The ingress counters of connected clients.
        self.ingress: set[IngressCounters] = set()

    def _may_pass(self) -> bool:
        # amqtt keeps one broadcast queue for all clients, drained by one task; holding
        # bulk publishes while it is long keeps every command near its head.
        return bool(self._broadcast_queue.qsize() < BROADCAST_BACKLOG)

    async def _publish_retained_messages_for_subscription(
        self, subscription: tuple[str, int], session: Session
    ) -> None:
        """Send ``session`` the retained messages of ``subscription``, if it is its own.

        amqtt 0.12.1 calls this on every connect for the filters of all clients, so a
        client subscribed to nothing received, say, every robot's retained ``status``.
        Only a filter this session has subscribed to passes (on a SUBSCRIBE it has just
        been added; on a connect, a resumed session's own filters).
        """
        subscribers = self._subscriptions.get(subscription[0], ())
        if any(other.client_id == session.client_id for other, _ in subscribers):
            await super()._publish_retained_messages_for_subscription(subscription, session)

    async def stream_connected(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener_name: str
    ) -> None:
        """Serve one TCP client (amqtt calls this for each accepted connection)."""
        ingress = IngressReader(reader, may_pass=self._may_pass)
        self.ingress.add(ingress.counters)
        try:
            await self.external_connected(ingress, StreamWriterAdapter(writer), listener_name)
        finally:
            ingress.close()
            self.ingress.discard(ingress.counters)
            # amqtt leaves the socket of a refused login open: close it here, whatever ended
            # the connection, so no transport outlives it (or the event loop)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()


class CredentialsAuthPlugin(BaseAuthPlugin):  # type: ignore[misc]  # amqtt: no types
    """Accepts a client whose user name and password match one of ``users``."""

    @dataclass
    class Config:
        """The accepted ``{user name: password}``."""

        users: dict[str, str] = field(default_factory=dict)

    async def authenticate(self, *, session: Session) -> bool | None:
        """True for a known user with the right password, False otherwise."""
        users: dict[str, str] = self.config.users
        expected = users.get(session.username or "")
        if expected is None or session.password is None:
            return False
        return hmac.compare_digest(session.password.encode(), expected.encode())


class FileAuthPlugin(_AmqttFileAuthPlugin):  # type: ignore[misc]  # amqtt: no types
    """amqtt's password-file check, its argon2 hash computed off the event loop.

    amqtt computes it on the loop: 0.3 s per login on an idle 2-core host, 0.5-1.2 s
    with two CPU-bound neighbours, during which nothing else of the process ran (the
    teleop bridge's e-stops, its own two connects, which then timed out). A thread
    computes it here (argon2 releases the GIL); the loop serves on meanwhile.
    """

    async def authenticate(self, *, session: Session) -> bool | None:
        """True for a user of the file with the right password; None without a user name."""
        if not session:
            return False
        if not session.username:
            return None
        stored: str | None = self._users.get(session.username)
        if not stored:
            return False
        verify = self.pwd_hasher.verify
        return bool(await asyncio.to_thread(verify, session.password or "", stored))
