"""Transactions on one Feetech bus: ping, read, write, sync read, sync write, with retries.

Every reply has a length known before the instruction goes out (6 bytes of frame plus
the data asked for), so a transaction writes its packet and reads exactly that many
bytes until a deadline: the wire time of both packets at the baud rate, the servos'
return delay and a margin for the host and the adapter. A timeout or a corrupt reply
is retried ``retries`` times (after the line went quiet), then raised; the counters
say how often each happened. Servo error bits in a reply are returned, not raised:
the backend decodes them into :class:`~hilbot.hal.backend.HardwareErrorFlags`.

Not thread-safe: the backend runs it on the engine's bus thread (:mod:`hilbot.hal.bus.worker`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from hilbot.hal.backend import BusCounters
from hilbot.hal.bus.port import SerialPort
from hilbot.hal.errors import (
    CommError,
    CommResult,
    CommTimeout,
    CrcError,
    MalformedReply,
    WrongReplyId,
)
from hilbot.hal.feetech import protocol

#: [ms] reply slack beyond wire time and return delay: the host's scheduling and a USB
#: adapter's latency (CH340/CH343 adapters of the SO-101 kits forward within 1 ms).
DEFAULT_MARGIN_MS = 3.0
STATUS_OVERHEAD = 6  # 0xFF 0xFF, id, length, error, checksum
T = TypeVar("T")


class FeetechBus:
    """One Feetech bus. Not thread-safe: use it from one thread.

    Args:
        port: serial device path.
        baudrate: [bit/s].
        retries: extra attempts after a timeout or a corrupt reply.
        margin_ms: reply deadline slack [ms] beyond the wire time.
        return_delay: the slowest servo's Return Delay Time [s] (2 µs per unit).
    """

    def __init__(
        self,
        port: str,
        baudrate: int,
        *,
        retries: int = 1,
        margin_ms: float = DEFAULT_MARGIN_MS,
        return_delay: float = 0.0,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries!r}")
        if not margin_ms >= 0:
            raise ValueError(f"margin_ms must be >= 0, got {margin_ms!r}")
        self.port = SerialPort(port, baudrate, margin_ms=margin_ms)
        self.retries = retries
        self.return_delay = return_delay
        self.counters = BusCounters()
        self._sync_reads: dict[tuple[int, int, tuple[int, ...]], bytes] = {}
        #: A transaction failed: a late reply may still arrive and must not be taken for
        #: the next one's (only then is the input checked before an instruction).
        self._stale = False
        #: Called (on the bus thread) as soon as a sync read's reply has fully arrived,
        #: before it is decoded: the goal write queued behind it goes out then
        #: (:mod:`hilbot.hal.bus.worker`). It must only send.
        self.on_reply: Callable[[], None] | None = None
        #: Called right after a read's instruction is written (the previous cycle's state
        #: is handed over then).
        self.on_sent: Callable[[], None] | None = None

    @property
    def baudrate(self) -> int:
        """The host side's bit rate [bit/s]."""
        return self.port.baudrate

    def open(self) -> None:
        """Open the port (``PortError`` when it cannot be)."""
        self.port.open()

    def close(self) -> None:
        """Close the port (idempotent)."""
        self.port.close()

    def set_baudrate(self, baudrate: int) -> None:
        """Switch the host side to ``baudrate`` [bit/s] (after the servos were told)."""
        self.port.set_baudrate(baudrate)

    # --- timing -----------------------------------------------------------------------

    def wire_time(self, n_bytes: int) -> float:
        """Time [s] ``n_bytes`` take on the wire (10 bits per byte: start, 8 data, stop)."""
        return n_bytes * 10.0 / self.port.baudrate

    # --- single-servo instructions ------------------------------------------------------

    def ping(self, servo_id: int) -> int:
        """Ping ``servo_id``; its error byte. ``CommError`` when it does not answer."""
        wire = protocol.encode_instruction(protocol.ping(servo_id))
        return self._retrying(lambda: self._attempt(servo_id, "PING", wire, 0))[0]

    def try_ping(self, servo_id: int) -> int | None:
        """Ping once, no retry; the error byte or ``None`` when nothing answered."""
        wire = protocol.encode_instruction(protocol.ping(servo_id))
        try:
            return self._attempt(servo_id, "PING", wire, 0)[0]
        except CommError:
            self._stale = True
            return None

    def read(self, servo_id: int, address: int, length: int) -> tuple[bytes, int]:
        """Read ``length`` bytes at ``address``: ``(data, error byte)``."""
        wire = protocol.encode_instruction(protocol.read(servo_id, address, length))
        error, data = self._retrying(lambda: self._attempt(servo_id, "READ", wire, length))
        return data, error

    def write(self, servo_id: int, address: int, data: bytes) -> int:
        """Write ``data`` at ``address`` and wait for the status; its error byte."""
        wire = protocol.encode_instruction(protocol.write(servo_id, address, data))
        return self._retrying(lambda: self._attempt(servo_id, "WRITE", wire, 0))[0]

    def sync_write(self, address: int, length: int, data: Mapping[int, bytes]) -> None:
        """Broadcast one SYNC WRITE of ``length`` bytes per servo (no reply)."""
        self.send(sync_write_packet(address, length, data))

    def send(self, wire: bytes) -> None:
        """Write a packet that has no reply (sync write, broadcast)."""
        self.counters.transactions += 1
        self.port.write(wire)

    send_sync_write = send  # the bus thread's name for it

    def settle(self) -> int:
        """Discard what arrives until the line is quiet (e.g. a REBOOT's own status packet).

        Returns the number of bytes discarded.
        """
        return self.port.drain(self._quiet())

    # --- sync read ----------------------------------------------------------------------

    def sync_read(
        self, address: int, length: int, ids: Sequence[int]
    ) -> dict[int, tuple[bytes, int]]:
        """SYNC READ (STS series): ``{id: (data, error byte)}`` of every servo in ``ids``.

        Raises:
            CommTimeout: a servo did not answer (``servo_id`` is the first one missing).
            CrcError: a reply arrived corrupt (after the retries).
        """
        key = (address, length, tuple(ids))
        wire = self._sync_reads.get(key)
        if wire is None:  # the same few packets every cycle: encoded once
            wire = protocol.encode_instruction(protocol.sync_read(address, length, ids))
            self._sync_reads[key] = wire
        return self._retrying(lambda: self._sync_read_once(wire, length, ids))

    def _sync_read_once(
        self, wire: bytes, length: int, ids: Sequence[int]
    ) -> dict[int, tuple[bytes, int]]:
        self.counters.transactions += 1
        each = STATUS_OVERHEAD + length
        self._discard_stale()
        self.port.write(wire)
        deadline = self.port.reply_deadline(each * len(ids), len(ids) * self.return_delay)
        if self.on_sent is not None:
            self.on_sent()
        raw = self.port.read(each * len(ids), deadline)
        if len(raw) == each * len(ids) and self.on_reply is not None:
            self.on_reply()
        out: dict[int, tuple[bytes, int]] = {}
        try:
            for k, servo_id in enumerate(ids):
                chunk = raw[k * each : (k + 1) * each]
                if len(chunk) < each:
                    raise CommTimeout(servo_id, "SYNC_READ")
                error, data = self._decode(servo_id, "SYNC_READ", chunk, length, count=False)
                out[servo_id] = (data, error)
        except CommError:
            return self._sync_read_framed(raw, length, ids)
        self.counters.servo_errors += sum(1 for _, error in out.values() if error)
        return out

    def _sync_read_framed(
        self, raw: bytes, length: int, ids: Sequence[int]
    ) -> dict[int, tuple[bytes, int]]:
        """The replies of a sync read that did not arrive in order and whole, framed one by one.

        A servo missing from the bus leaves its slot empty and the next servo's reply moves
        up, so the replies are found by their ids: the first id without one is the servo
        that timed out (or whose reply was corrupt). The servos answer in the order of
        ``ids``; a valid reply from an id not asked for, or out of that order (a second
        reply of one id), is refused and taken for no servo (``WrongReplyId``).
        """
        decoder = protocol.PacketDecoder(protocol.PacketKind.STATUS)
        replies: dict[int, tuple[bytes, int]] = {}
        corrupt: set[int] = set()
        wrong: dict[int, int] = {}  # id whose turn it was -> the id that answered
        order = {servo_id: k for k, servo_id in enumerate(ids)}
        turns: dict[int, int] = {}  # id -> the place that was next when it answered
        turn = 0  # the place in ``ids`` of the next reply expected
        for item in decoder.feed(raw):
            place = order.get(item.id, -1)
            if isinstance(item, protocol.StatusPacket) and place < turn:
                refused = turn
                if item.id in turns:  # a second reply of this id: neither is taken
                    replies.pop(item.id, None)
                    corrupt.add(item.id)
                    first = turns.pop(item.id)
                    refused = first if ids[first] != item.id else turn
                if refused < len(ids):
                    corrupt.add(ids[refused])
                    wrong[ids[refused]] = item.id
                continue
            if place >= turn:
                turns[item.id] = turn
                turn = place + 1
            if isinstance(item, protocol.DecodeError):
                corrupt.add(item.id)
            elif isinstance(item, protocol.StatusPacket) and len(item.params) == length:
                replies[item.id] = (bytes(item.params), item.error)
            else:
                corrupt.add(item.id)
        displaced = next((i for i in ids if i in wrong and i not in replies), None)
        if displaced is not None:  # named first: another id answered in its place
            self.counters.crc_errors += 1
            raise WrongReplyId(displaced, wrong[displaced], "SYNC_READ")
        for servo_id in ids:
            if servo_id in replies:
                continue
            if servo_id in corrupt or decoder.pending:
                self.counters.crc_errors += 1
                raise CrcError(servo_id, "SYNC_READ")
            self.counters.timeouts += 1
            raise CommTimeout(servo_id, "SYNC_READ")
        self.counters.servo_errors += sum(1 for i in ids if replies[i][1])
        return {i: replies[i] for i in ids}

    # --- the transaction ----------------------------------------------------------------

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """``attempt()``, again after the line went quiet while it fails, up to ``retries``."""
        for n in range(self.retries + 1):
            try:
                return attempt()
            except CommError:
                self._stale = True
                if n == self.retries:
                    raise
                self.counters.retries += 1
                self.port.drain(self._quiet())
        raise AssertionError("unreachable")

    def _attempt(
        self, servo_id: int, instruction: str, wire: bytes, length: int
    ) -> tuple[int, bytes]:
        self.counters.transactions += 1
        expected = STATUS_OVERHEAD + length
        self._discard_stale()
        self.port.write(wire)
        deadline = self.port.reply_deadline(expected, self.return_delay)
        if self.on_sent is not None:
            self.on_sent()
        reply = self.port.read(expected, deadline)
        if len(reply) < expected:
            self.counters.timeouts += 1
            if reply:
                self.counters.crc_errors += 1
                raise CrcError(servo_id, instruction)
            raise CommTimeout(servo_id, instruction)
        return self._decode(servo_id, instruction, reply, length)

    def _decode(
        self, servo_id: int, instruction: str, reply: bytes, length: int, *, count: bool = True
    ) -> tuple[int, bytes]:
        # The reply's length is known, so it is checked in place: header, id, length byte,
        # checksum (the stream decoder, protocol.PacketDecoder, is for unknown lengths).
        # ``count=False``: a sync read's fast path; its framed fallback does the counting.
        if reply[:2] != protocol.HEADER or reply[3] != length + 2:
            self.counters.crc_errors += count
            raise MalformedReply(
                servo_id, instruction, f"expected a status of id {servo_id} with {length} bytes"
            )
        if protocol.checksum(reply[2:-1]) != reply[-1]:
            self.counters.crc_errors += count
            raise CrcError(servo_id, instruction)
        if reply[2] != servo_id:  # valid, but from another servo: never its data
            self.counters.crc_errors += count
            raise WrongReplyId(servo_id, reply[2], instruction)
        error = reply[4]
        if error and count:
            self.counters.servo_errors += 1
        return error, reply[5:-1]

    def _discard_stale(self) -> None:
        if self._stale:
            self._stale = False
            self.port.discard_waiting()

    def _quiet(self) -> float:
        """How long the line must stay silent before a retry: two status packets' worth."""
        return max(self.wire_time(2 * 64), 0.002)


def sync_write_packet(address: int, length: int, data: Mapping[int, bytes]) -> bytes:
    """The bytes of a SYNC WRITE of ``length`` bytes per servo at ``address``.

    Raises:
        ValueError: no servo, an entry of another length, an id or address out of range.
    """
    return protocol.encode_instruction(protocol.sync_write(address, length, data.items()))


__all__ = ["DEFAULT_MARGIN_MS", "CommResult", "FeetechBus", "sync_write_packet"]
