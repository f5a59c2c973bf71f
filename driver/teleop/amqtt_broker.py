"""amqtt's broker as hilbot runs it: each client read through an :class:`IngressReader`.

Imported only when an embedded broker starts (amqtt is slow to import).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from amqtt.adapters import StreamWriterAdapter
from amqtt.broker import Broker
from amqtt.plugins.authentication import FileAuthPlugin as _AmqttFileAuthPlugin
from amqtt.plugins.base import BaseAuthPlugin
from amqtt.session import Session

from hilbot import _compat_asyncio as aio

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


# Per-connection ingress of the embedded broker: commands first, floods conflated.
#
# amqtt reads each client's packets one at a time and queues every PUBLISH in one
# broker-wide broadcast queue, which a single task drains far slower than a
# client can send: under 10,000 messages/s the queue grows by thousands a second,
# and an ``estop`` from any client waits behind all of them (seconds), one from
# the flooding client behind its own backlog besides (tens of seconds).
#
# :class:`IngressReader` sits between a client's socket and amqtt. A task reads
# the socket as fast as bytes arrive and splits them into MQTT packets (sans-I/O:
# :func:`split_packets`). Each packet then takes one of three lanes:
#
# - *urgent*, in arrival order: any publish on a command topic (``.../cmd``),
#   whatever its QoS, and every packet that is no publish (CONNECT, SUBSCRIBE,
#   PINGREQ, acknowledgements) except DISCONNECT;
# - *held*, in arrival order: QoS 1/2 publishes on other topics;
# - *bulk*: QoS 0 publishes on other topics, at most the newest one per topic
#   (MQTT gives QoS 0 no delivery guarantee; a target is superseded by the next
#   anyway); beyond ``max_topics`` distinct topics, new ones are dropped;
# - *last*: DISCONNECT, handed on once the other lanes are empty, so that what
#   a client published before disconnecting is not lost.
#
# amqtt is handed urgent packets at once, held and bulk ones only while the
# broker's broadcast queue is short (``may_pass``), so the queue never builds up
# and an e-stop waits behind a handful of messages at most, from any client. Past
# ``MAX_URGENT`` packets waiting in the urgent and held lanes, the socket is no
# longer read until they drain (TCP backpressure on that client only).

#: MQTT control packet types (MQTT 3.1.1, section 2.2.1).
PUBLISH = 3
DISCONNECT = 14
#: Urgent packets buffered before the reader stops reading the socket (backpressure).
MAX_URGENT = 1024
#: Bytes read from the socket at a time.
CHUNK = 65536
#: Larger packets end the filtering of a connection: its bytes go to amqtt as they come
#: (hilbot's payloads are at most a few kB; buffering a huge one here would copy it over).
MAX_PACKET = 1 << 20
#: How often a held bulk packet re-checks ``may_pass`` [s].
POLL_S = 0.0005


class Frame(NamedTuple):
    """One MQTT packet as received: its type, and for a PUBLISH its QoS and topic."""

    kind: int
    qos: int
    topic: bytes
    data: bytes


class FramingError(ValueError):
    """The stream is not MQTT (a remaining length longer than 4 bytes), or a packet is huge."""


def split_packets(buffer: bytes) -> tuple[list[Frame], bytes]:
    """Split ``buffer`` into whole packets; returns them and the incomplete rest.

    Raises:
        FramingError: a remaining-length field longer than the 4 bytes MQTT allows, or
            a packet larger than :data:`MAX_PACKET`.
    """
    frames: list[Frame] = []
    start, size = 0, len(buffer)
    while start + 2 <= size:
        length, multiplier, index = 0, 1, start + 1
        while True:
            if index >= size:
                return frames, buffer[start:]
            byte = buffer[index]
            length += (byte & 0x7F) * multiplier
            index += 1
            if not byte & 0x80:
                break
            multiplier *= 128
            if multiplier > 128**3:
                raise FramingError("remaining length longer than 4 bytes")
        if length > MAX_PACKET:
            raise FramingError(f"a packet of {length} bytes")
        end = index + length
        if end > size:
            break
        first = buffer[start]
        kind, qos, topic = first >> 4, (first >> 1) & 3, b""
        if kind == PUBLISH and length >= 2:
            topic_end = index + 2 + int.from_bytes(buffer[index : index + 2], "big")
            topic = buffer[index + 2 : min(topic_end, end)]
        frames.append(Frame(kind, qos, topic, buffer[start:end]))
        start = end
    return frames, buffer[start:]


def is_command_topic(topic: bytes) -> bool:
    """Whether ``topic`` is a robot's command topic (``<prefix>/cmd``)."""
    return topic == b"cmd" or topic.endswith(b"/cmd")


class IngressCounters:
    """What one connection's ingress did: bulk messages replaced by newer ones, or dropped."""

    __slots__ = ("conflated", "dropped")

    def __init__(self) -> None:
        self.conflated = 0
        self.dropped = 0


class IngressReader:
    """amqtt's ``ReaderAdapter`` for one TCP client, with the lanes of the module docstring.

    Args:
        reader: the client's stream.
        may_pass: whether a bulk packet may go to amqtt now (the broadcast queue is short).
        urgent_topic: which publish topics are commands, never conflated nor held back.
        max_topics: distinct bulk topics held at once; publishes on further ones are dropped.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        *,
        may_pass: Callable[[], bool],
        urgent_topic: Callable[[bytes], bool] = is_command_topic,
        max_topics: int = 256,
    ) -> None:
        self.counters = IngressCounters()
        self._reader = reader
        self._may_pass = may_pass
        self._urgent_topic = urgent_topic
        self._max_topics = max_topics
        self._urgent: deque[bytes] = deque()
        self._held: deque[bytes] = deque()
        self._bulk: dict[bytes, bytes] = {}
        self._last: deque[bytes] = deque()
        self._current = b""
        self._offset = 0
        self._eof = False
        self._arrived = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._pump: asyncio.Task[None] | None = None

    async def read(self, n: int = -1) -> bytes:
        """Return exactly ``n`` bytes (fewer only at end of stream), as amqtt expects."""
        if self._pump is None:
            self._pump = asyncio.get_running_loop().create_task(self._read_socket())
        wanted = n if n >= 0 else CHUNK
        parts: list[bytes] = []
        while wanted > 0:
            if self._offset >= len(self._current):
                packet = await self._next_packet()
                if packet is None:
                    break
                self._current, self._offset = packet, 0
            piece = self._current[self._offset : self._offset + wanted]
            self._offset += len(piece)
            wanted -= len(piece)
            parts.append(piece)
            if n < 0:
                break
        return b"".join(parts)

    def feed_eof(self) -> None:
        """End the stream: reads return what is left, then nothing."""
        self._eof = True
        self._arrived.set()
        self._reader.feed_eof()

    def close(self) -> None:
        """Stop reading the socket (the connection is over)."""
        if self._pump is not None:
            self._pump.cancel()

    async def _next_packet(self) -> bytes | None:
        while True:
            if self._urgent:
                return self._taken(self._urgent.popleft())
            if self._held or self._bulk:
                if self._may_pass():
                    if self._held:
                        return self._taken(self._held.popleft())
                    return self._bulk.pop(next(iter(self._bulk)))
                self._arrived.clear()
                with contextlib.suppress(TimeoutError):
                    async with aio.timeout(POLL_S):
                        await self._arrived.wait()
                continue
            if self._last:
                return self._last.popleft()
            if self._eof:
                return None
            self._arrived.clear()
            await self._arrived.wait()

    def _taken(self, packet: bytes) -> bytes:
        if len(self._urgent) + len(self._held) < MAX_URGENT // 2:
            self._room.set()
        return packet

    async def _read_socket(self) -> None:
        rest = b""
        try:
            while True:
                await self._room.wait()
                data = await self._reader.read(CHUNK)
                if not data:
                    break
                try:
                    frames, rest = split_packets(rest + data)
                except FramingError:
                    # Not MQTT, or a huge packet: from here on the bytes go to amqtt as
                    # they come (it closes a connection that is not MQTT).
                    raw, rest = rest + data, b""
                    await self._pass_through(raw)
                    break
                for frame in frames:
                    self._sort(frame)
                self._arrived.set()
        except (ConnectionError, OSError):
            pass
        finally:
            if rest:
                self._urgent.append(rest)
            self._eof = True
            self._arrived.set()

    async def _pass_through(self, raw: bytes) -> None:
        # Whole packets held back so far go first, so raw chunks are never interleaved.
        pending = [*self._urgent, *self._held, *self._bulk.values()]
        self._held.clear()
        self._bulk.clear()
        self._urgent.clear()
        self._urgent.extend([*pending, raw])
        self._arrived.set()
        while data := await self._reader.read(CHUNK):
            await self._room.wait()
            self._urgent.append(data)
            if len(self._urgent) >= MAX_URGENT:
                self._room.clear()
            self._arrived.set()

    def _sort(self, frame: Frame) -> None:
        if frame.kind == PUBLISH and not self._urgent_topic(frame.topic):
            if frame.qos > 0:
                self._held.append(frame.data)
            elif frame.topic in self._bulk:
                self.counters.conflated += 1
            elif len(self._bulk) >= self._max_topics:
                self.counters.dropped += 1
                return
            if frame.qos == 0:
                self._bulk[frame.topic] = frame.data
        elif frame.kind == DISCONNECT:
            self._last.append(frame.data)
        else:
            self._urgent.append(frame.data)
        if len(self._urgent) + len(self._held) >= MAX_URGENT:
            self._room.clear()
