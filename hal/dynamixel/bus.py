"""Synchronous bus transactions on one serial port: the backend's worker thread calls these.

Every instruction is framed with our own codec (:mod:`hilbot.hal.dynamixel.protocol`)
on the engine's port (:class:`~hilbot.hal.bus.port.BlockingPortHandler`), whose reply
deadlines run on the wire clock: from when the instruction left the adapter, the
reply's wire time, the return delay, the adapter's latency and a margin. A single-servo
instruction (ping, read, write, reboot) takes the first valid status packet, which must
come from the id addressed and carry the bytes asked for. Group reads (sync read, fast
sync read, bulk read, one read per servo) keep each servo's ERR byte (a hardware-error
alert is never lost), go on past a missing servo, and salvage the slices of a fast-read
reply that came before one. (dynamixel-sdk is only the independent client the tests
check the virtual buses with.)

Every transaction is counted in :attr:`DynamixelBus.counters`; failures raise
the typed errors of :mod:`hilbot.hal.errors` and are retried a bounded number
of times first. A value is never invented for a servo that did not answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from hilbot.hal.backend import BusCounters
from hilbot.hal.bus.port import DEFAULT_MARGIN_MS, SerialPort
from hilbot.hal.dynamixel import protocol as P
from hilbot.hal.dynamixel.protocol import crc16
from hilbot.hal.dynamixel.timing import RETURN_DELAY_UNIT, ReadMethod
from hilbot.hal.errors import (
    CommError,
    CommResult,
    CommTimeout,
    CrcError,
    DataLimitError,
    MalformedReply,
    ServoError,
    WrongReplyId,
)

log = logging.getLogger(__name__)


class DynamixelBus:
    """Transactions on one Dynamixel bus. Not thread-safe: use from one thread.

    Args:
        port: serial device path.
        baudrate: [bit/s].
        protocol: 1 or 2.
        retries: extra attempts after a timeout or corrupt reply.
        margin_ms: reply deadline slack beyond wire time [ms].
        latency_ms: USB adapter latency; read from sysfs when ``None``.
    """

    def __init__(
        self,
        port: str,
        baudrate: int,
        protocol: int = 2,
        *,
        retries: int = 1,
        margin_ms: float = DEFAULT_MARGIN_MS,
        latency_ms: float | None = None,
    ) -> None:
        if protocol not in (1, 2):
            raise ValueError(f"protocol must be 1 or 2, got {protocol!r}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries!r}")
        self.port_name = port
        self.baudrate = baudrate
        self.protocol = protocol
        self.retries = retries
        self.port = SerialPort(port, baudrate, margin_ms=margin_ms, latency_ms=latency_ms)
        self.counters = BusCounters()
        self.return_delay = 0.0  # [s] the slowest servo's return delay time
        self.byte_time = 10.0 / baudrate
        self._plans: dict[tuple[ReadMethod, tuple[tuple[int, int, int], ...]], _ReadPlan] = {}
        self._write_heads: dict[tuple[int, ...], _WriteHead] = {}
        #: ``{id asked for: id that answered instead}`` of the group read attempt under way.
        self._wrong: dict[int, int] = {}
        #: Called (on this bus's thread) as soon as a group read's reply has fully arrived,
        #: before it is decoded: the bus is free then, and the backend sends the goal write
        #: queued behind the read. It must only send; errors it raises end the read.
        self.on_reply: Callable[[], None] | None = None
        #: Called right after a group read's instruction is written, before waiting for
        #: the reply (the backend hands the previous cycle's state over then).
        self.on_sent: Callable[[], None] | None = None

    # --- lifecycle -----------------------------------------------------------------

    def open(self) -> None:
        """Open the port at the bus's baud rate (``PortError`` when it cannot be)."""
        self.port.open()

    def close(self) -> None:
        """Close the port (idempotent)."""
        self.port.close()

    def set_baudrate(self, baudrate: int) -> None:
        """Switch the host side to another baud rate (scan, ``hilbot servo --set-baud``)."""
        self.port.set_baudrate(baudrate)
        self.baudrate = baudrate
        self.byte_time = 10.0 / baudrate

    def set_return_delay(self, register_value: int) -> None:
        """Tell the bus the largest Return Delay Time among its servos (2 µs units)."""
        self.return_delay = register_value * RETURN_DELAY_UNIT

    # --- single-servo instructions --------------------------------------------------

    def _servo_error(
        self, servo_id: int, instruction: str, error: int, address: int | None = None
    ) -> None:
        if error and command_failed(self.protocol, error):
            self.counters.servo_errors += 1
            if is_data_limit(self.protocol, error):
                self.counters.data_limit_errors += 1
                raise DataLimitError(servo_id, instruction, error, address=address)
            raise ServoError(servo_id, instruction, error, describe_error(self.protocol, error))

    def _retrying(
        self,
        servo_id: int,
        instruction: P.Instruction,
        params: bytes = b"",
        length: int | None = 0,
        address: int | None = None,
        name: str = "",
    ) -> tuple[bytes, int]:
        """One instruction to one servo with bounded retries on timeouts and corrupt replies.

        Returns the status packet's ``(params, ERR)``; ``length``: the parameters it must
        carry (``None``: any); ``name``: the instruction errors name (its own by default).
        """
        name = name or instruction.name
        packet = P.encode_instruction(
            P.InstructionPacket(self.protocol, servo_id, instruction, params)
        )
        for attempt in range(self.retries + 1):
            self.counters.transactions += 1
            if attempt:
                self.counters.retries += 1
            try:
                reply = self._status(servo_id, name, packet, length or 0)
            except MalformedReply:
                self.counters.crc_errors += 1
                if attempt == self.retries:
                    raise
                continue
            except (CommTimeout, CrcError):
                if attempt == self.retries:
                    raise
                continue
            if length is not None and len(reply.params) != length:
                self.counters.crc_errors += 1
                if attempt == self.retries:
                    raise MalformedReply(
                        servo_id, name, f"{len(reply.params)} data bytes, expected {length}"
                    )
                continue
            self._servo_error(servo_id, name, reply.error, address)
            return reply.params, reply.error
        raise AssertionError("unreachable")  # pragma: no cover

    def _status(self, servo_id: int, name: str, wire: bytes, length: int) -> P.StatusPacket:
        """Send ``wire`` and wait, until the wire-clock deadline, for ``servo_id``'s status."""
        self.port.discard_waiting()
        self.port.write(wire)
        size = (6 if self.protocol == 1 else 11) + length
        deadline = self.port.reply_deadline(size, self.return_delay)
        decoder = P.PacketDecoder(self.protocol, P.PacketKind.STATUS)
        received = False
        while chunk := self.port.read_available(deadline - time.monotonic()):
            received = True
            for item in decoder.feed(chunk):
                if not isinstance(item, P.StatusPacket):  # a corrupt frame
                    self.counters.crc_errors += 1
                    raise CrcError(servo_id, name)
                if item.id != servo_id:  # valid, but from another servo: never its data
                    raise WrongReplyId(servo_id, item.id, name)
                return item
        if received:  # a reply cut short
            self.counters.crc_errors += 1
            raise CrcError(servo_id, name)
        self.counters.timeouts += 1
        raise CommTimeout(servo_id, name)

    def ping(self, servo_id: int) -> int:
        """Ping one servo; return its model number.

        Protocol 1.0 has no model number in its ping reply: it is read (address 0, 2 bytes).

        Raises:
            CommTimeout: no answer (after retries).
            MalformedReply: a reply without the model number (after retries).
        """
        if self.protocol == 1:
            self._retrying(servo_id, P.Instruction.PING)
            read = P.read_params(1, 0, 2)
            data, _ = self._retrying(servo_id, P.Instruction.READ, read, 2, name="PING")
        else:
            data, _ = self._retrying(servo_id, P.Instruction.PING, length=_PING_PARAMS)
        return data[0] | data[1] << 8

    def try_ping(self, servo_id: int) -> int | None:
        """Ping once without retries; the model number, or ``None`` when nothing answers."""
        retries, self.retries = self.retries, 0
        try:
            return self.ping(servo_id)
        except (CommTimeout, CrcError):
            return None
        finally:
            self.retries = retries

    def read(self, servo_id: int, address: int, length: int) -> tuple[bytes, int]:
        """Read ``length`` bytes at ``address``; return ``(data, ERR byte)``.

        Raises:
            CommTimeout, CrcError: no valid answer after retries (``MalformedReply``: a
                reply with another number of bytes than asked).
            ServoError: the servo rejected the read.
        """
        params = P.read_params(self.protocol, address, length)
        return self._retrying(servo_id, P.Instruction.READ, params, length)

    def write(self, servo_id: int, address: int, data: bytes) -> int:
        """Write ``data`` at ``address`` and wait for the status; return the ERR byte.

        Raises:
            CommTimeout, CrcError: no valid status after retries.
            DataLimitError: the value is outside the servo's limit registers.
            ServoError: the servo rejected the write (range, access, EEPROM locked, ...).
        """
        params = P.write_params(self.protocol, address, data)
        return self._retrying(servo_id, P.Instruction.WRITE, params, None, address)[1]

    def reboot(self, servo_id: int) -> None:
        """Send REBOOT (Protocol 2.0); the servo answers, then restarts.

        Raises:
            CommError: Protocol 1.0 has no reboot (result ``NOT_AVAILABLE``), or no answer.
        """
        if self.protocol == 1:
            raise CommError(servo_id, "REBOOT", CommResult.NOT_AVAILABLE)
        self._retrying(servo_id, P.Instruction.REBOOT, length=None)

    def broadcast_ping(self) -> dict[int, tuple[int, int]]:
        """Protocol 2.0 broadcast ping: ``{id: (model number, firmware)}`` of every servo.

        Every id may answer after its own return delay (up to 3 ms each, as the SDK waits).
        """
        if self.protocol == 1:
            raise CommError(None, "PING", CommResult.NOT_AVAILABLE)
        self.counters.transactions += 1
        ping = P.InstructionPacket(2, P.BROADCAST_ID, P.Instruction.PING)
        self._send_bytes(P.encode_instruction(ping), count=False)
        ids = P.MAX_ID + 1
        deadline = time.monotonic() + (14 * ids * self.byte_time + 0.003 * ids + 0.016)
        decoder = P.PacketDecoder(2, P.PacketKind.STATUS)
        found: dict[int, tuple[int, int]] = {}
        while (left := deadline - time.monotonic()) > 0:
            for item in decoder.feed(self.port.read_available(left)):
                if isinstance(item, P.StatusPacket) and len(item.params) == _PING_PARAMS:
                    found[item.id] = (item.params[0] | item.params[1] << 8, item.params[2])
        return found

    # --- group instructions (own codec) ------------------------------------------------

    def sync_write(self, address: int, length: int, data: Mapping[int, bytes]) -> None:
        """Sync Write ``data[id]`` (``length`` bytes each) at ``address``; no reply."""
        if data:
            self.send_sync_write(self.sync_write_packet(address, length, data))

    def sync_write_packet(self, address: int, length: int, data: Mapping[int, bytes]) -> bytes:
        """The encoded Sync Write of ``data[id]`` at ``address`` (pure: any thread may call it).

        The backend encodes goal packets on the caller's side, so that the bus thread
        only has to send them.
        """
        head = self._write_heads.get((address, length, *data))
        if head is None:
            head = self._write_head(address, length, data)
        prefix, crc, ids = head
        if not prefix:
            return _encode_sync_write(self.protocol, address, length, data)
        # Protocol 2.0: everything up to the first id is the same for every packet to
        # these ids (and so is its CRC); only the goals are new.
        parts = [b""]
        for servo_id, chunk in zip(ids, data.values(), strict=True):
            if len(chunk) != length:
                raise ValueError(
                    f"sync write to id {servo_id[0]}: {len(chunk)} bytes, expected {length}"
                )
            parts += (servo_id, chunk)
        body = b"".join(parts)
        if _STUFF in body:  # rare: goals that need byte stuffing
            return _encode_sync_write(self.protocol, address, length, data)
        return prefix + body + P.crc16(body, crc).to_bytes(2, "little")

    def _write_head(self, address: int, length: int, data: Mapping[int, bytes]) -> _WriteHead:
        """The fixed start of the sync writes of ``data``'s ids (``_NO_HEAD``: Protocol 1.0)."""
        if self.protocol != 2:
            return _NO_HEAD
        size = 3 + 4 + len(data) * (1 + length)  # instruction, CRC, address and length, data
        prefix = P.HEADER_2 + bytes(
            (
                P.BROADCAST_ID,
                size & 0xFF,
                size >> 8,
                P.Instruction.SYNC_WRITE,
                address & 0xFF,
                address >> 8,
                length & 0xFF,
                length >> 8,
            )
        )
        if _STUFF in prefix[7:] or prefix[-1] == 0xFF:  # stuffing, here or across: generic
            return _NO_HEAD
        head = (prefix, P.crc16(prefix), tuple(bytes((i,)) for i in data))
        if len(self._write_heads) >= _MAX_PLANS:
            self._write_heads.clear()
        key = (address, length, *data)  # not in the brackets: mypy takes that for 3.11 syntax
        self._write_heads[key] = head
        return head

    def send_sync_write(self, wire: bytes) -> None:
        """Send a packet made by :meth:`sync_write_packet`."""
        # No reply comes, so stale input is left for the next read's send to drop: the
        # write goes out without a flush in front of it (it is on the cycle's critical path).
        self._send_bytes(wire, flush=False)

    def _send_bytes(self, wire: bytes, *, flush: bool = True, count: bool = True) -> None:
        if flush:
            self.port.discard_waiting()
        self.counters.transactions += count
        self.port.write(wire)

    def _drain(self) -> None:
        """Discard bytes left over from a failed transaction before the next one.

        Dynamixel packets carry no sequence number, so a reply that arrives after its
        deadline could pass for the answer to the next instruction. Whatever has
        arrived is dropped here without waiting (waiting would lengthen the stall a
        missing servo causes); a reply still in flight is caught by the length check
        when the next read asks for other registers, and is at most one cycle old
        when it asks for the same ones.
        """
        self.port.discard_waiting()

    def group_read(
        self, method: ReadMethod, reads: Sequence[tuple[int, int, int]]
    ) -> dict[int, ServoReply]:
        """Read ``(id, address, length)`` from every servo with ``method``, retrying the missing.

        A retry reads only the servos that did not answer, with a plain (not fast)
        read, so one slow servo cannot break a fast reply twice.

        Raises:
            CrcError: a servo's reply was still corrupt after the retries
                (``WrongReplyId``: a valid reply came from another id in its place).
            CommTimeout: a servo still did not answer (``servo_id`` is the first one).
        """
        replies, pending, corrupt = self.group_read_partial(method, reads)
        if not pending:
            return replies
        name = (plain(method) if self.retries else method).name
        refused = next((i for i in pending if i in corrupt and i in self._wrong), None)
        if refused is not None:  # named first: another id answered in its place
            raise WrongReplyId(refused, self._wrong[refused], name)
        if any(i in corrupt for i in pending):
            raise CrcError(next(i for i in pending if i in corrupt), name)
        raise CommTimeout(pending[0], name)

    def group_read_partial(
        self, method: ReadMethod, reads: Sequence[tuple[int, int, int]]
    ) -> tuple[dict[int, ServoReply], list[int], set[int]]:
        """Like :meth:`group_read`, but a servo that never answers validly does not raise.

        Returns ``(replies of the servos that answered, ids that did not, ids of those
        whose last reply was corrupt)``: the torque-off read-back reports per servo.
        """
        replies: dict[int, ServoReply] = {}
        pending = list(reads)
        corrupt: set[int] = set()
        for attempt in range(self.retries + 1):
            if attempt:
                self.counters.retries += 1
                method = plain(method)
            self._wrong = {}
            got, corrupt = self._group_attempt(method, pending)
            if not attempt and len(got) == len(pending):  # the usual cycle: all answered
                return got, [], set()
            replies.update(got)
            missing = [r for r in pending if r[0] not in got]
            self.counters.timeouts += sum(1 for r in missing if r[0] not in corrupt)
            if not missing:
                return replies, [], set()
            pending = missing
            self._drain()
        return replies, [r[0] for r in pending], corrupt

    def _group_attempt(
        self, method: ReadMethod, reads: Sequence[tuple[int, int, int]]
    ) -> tuple[dict[int, ServoReply], set[int]]:
        if method is ReadMethod.READ_EACH:
            replies: dict[int, ServoReply] = {}
            corrupt: set[int] = set()
            for read in reads:
                got, bad = self._transact(method, [read])
                replies.update(got)
                corrupt |= bad
            return replies, corrupt
        return self._transact(method, reads)

    def _transact(
        self, method: ReadMethod, reads: Sequence[tuple[int, int, int]]
    ) -> tuple[dict[int, ServoReply], set[int]]:
        plan = self._read_plan(method, reads)
        self._send_bytes(plan.wire)
        if self.on_sent is not None:
            self.on_sent()
        # From when the instruction, and a sync write queued before it, left the adapter.
        deadline = self.port.reply_deadline(plan.reply_bytes, plan.delays * self.return_delay)
        # Once the whole reply is in, the bus is free: packets waiting for that go out
        # before the reply is decoded (one read per servo is several transactions: no).
        on_reply = self.on_reply if method is not ReadMethod.READ_EACH else None
        chunk = self.port.read_available(deadline - time.monotonic())
        if len(chunk) == plan.reply_bytes:  # the usual cycle: the whole reply at once
            if on_reply is not None:
                on_reply()
            replies = plan.whole.take(chunk)
            if replies is not None:
                return replies, set()
            on_reply = None
        collector = ReplyCollector(self.protocol, reads, fast=plan.fast, counters=self.counters)
        received = 0
        while chunk:
            if on_reply is not None:
                received += len(chunk)
                if received == plan.reply_bytes:
                    on_reply()
            collector.feed(chunk)
            if collector.complete:
                break
            chunk = self.port.read_available(deadline - time.monotonic())
        if collector.wrong:
            self._wrong.update(collector.wrong)
        return collector.finish()

    def _read_plan(self, method: ReadMethod, reads: Sequence[tuple[int, int, int]]) -> _ReadPlan:
        """The encoded instruction and reply size of a group read, built once per read set."""
        key = (method, tuple(reads))
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        packet = read_packet(self.protocol, method, reads)
        fast = method in (ReadMethod.FAST_SYNC_READ, ReadMethod.FAST_BULK_READ)
        if fast:
            reply_bytes, delays = 8 + sum(r[2] + 4 for r in reads), 1
        else:
            header = 11 if self.protocol == 2 else 6
            reply_bytes, delays = sum(header + r[2] for r in reads), len(reads)
        plan = _ReadPlan(
            P.encode_instruction(packet),
            packet.instruction.name,
            fast,
            reply_bytes,
            delays,
            WholeReply(self.protocol, reads, fast=fast),
        )
        if len(self._plans) >= _MAX_PLANS:  # reads of changing id sets (retries): start over
            self._plans.clear()
        self._plans[key] = plan
        return plan


@dataclass(frozen=True, slots=True)
class _ReadPlan:
    """What a group read sends and expects back; independent of baud rate and delays."""

    wire: bytes  # the encoded instruction packet
    name: str  # its instruction, for errors
    fast: bool  # one fast-read reply rather than one status per servo
    reply_bytes: int  # size of the complete reply [bytes]
    delays: int  # return delays the reply includes (one per status packet)
    whole: WholeReply  # takes the whole valid reply in one check


#: Group-read plans kept per bus: the cycle's read, the temperature read, and retries.
_MAX_PLANS = 32


def _encode_sync_write(
    protocol: int, address: int, length: int, data: Mapping[int, bytes]
) -> bytes:
    params = P.sync_write_params(protocol, address, length, data)
    packet = P.InstructionPacket(protocol, P.BROADCAST_ID, P.Instruction.SYNC_WRITE, params)
    return P.encode_instruction(packet)


#: A Protocol 2.0 sync write's fixed start: the bytes up to the first id, their CRC,
#: and each id as one byte.
_WriteHead = tuple[bytes, int, tuple[bytes, ...]]
_NO_HEAD: _WriteHead = (b"", 0, ())
_STUFF = b"\xff\xff\xfd"  # a payload holding this needs byte stuffing


#: Protocol 2.0 ping reply: model number (2 bytes) and firmware version.
_PING_PARAMS = 3


#: ``(servo id, address, length)`` of one servo's part of a group read.
Read = tuple[int, int, int]


class ServoReply(NamedTuple):
    """One servo's answer to a read: its data and the raw ERR byte.

    A NamedTuple (built in a fraction of a frozen dataclass's time): every cycle makes
    one per servo, on the path between the reply's arrival and the next packet.
    """

    id: int
    data: bytes
    error: int


#: ``ServoReply`` from a tuple without the Python-level ``__new__`` a NamedTuple adds (a
#: frame per servo per cycle, on the path from a reply's arrival to the next packet).
_reply = tuple.__new__


def describe_error(protocol: int, error: int) -> str:
    """Readable form of the command part of an ERR byte."""
    code = P.StatusPacket(protocol, 0, error).error_code
    if protocol == 2:
        return str(code.name).lower().replace("_", " ")
    return P.Protocol1Error(int(code)).name or "none"


#: ERR bits that reject the instruction (``StatusPacket.error_code`` non-zero): in 2.0 the
#: 7-bit error code (bit 7 is the hardware alert); in 1.0 every bit but the hardware ones.
_COMMAND_BITS = {
    2: 0x7F,
    1: int(
        P.Protocol1Error.ANGLE_LIMIT
        | P.Protocol1Error.RANGE
        | P.Protocol1Error.CHECKSUM
        | P.Protocol1Error.INSTRUCTION
    ),
}


_STUFFED = b"\xff\xff\xfd"  # a payload holding this was (or should have been) byte-stuffed
_FAST_HEAD = P.HEADER_2 + bytes((P.BROADCAST_ID,))


def command_failed(protocol: int, error: int) -> bool:
    """True when ERR says the instruction was rejected (not merely a hardware alert)."""
    return bool(error & _COMMAND_BITS[protocol])


def is_data_limit(protocol: int, error: int) -> bool:
    """True when ERR is a limit refusal: 2.0 Data Limit Error (6), 1.0 Angle Limit (bit 1).

    (https://emanual.robotis.com/docs/en/dxl/protocol2/#error: "Data Limit Error: data to
    be written is out of the range of the limit value"; Protocol 1.0 sets Angle Limit Error
    when "Goal Position is written out of the range from CW Angle Limit to CCW Angle Limit".)
    """
    if protocol == 2:
        return error & 0x7F == int(P.StatusErrorCode.DATA_LIMIT_ERROR)
    return bool(error & P.Protocol1Error.ANGLE_LIMIT)


class WholeReply:
    """Takes the whole, well-formed reply to one Protocol 2.0 group read in one check.

    The usual cycle's reply arrives in one chunk: one valid, unstuffed status per servo
    in order, or the one fast-read packet. :meth:`take` checks such a chunk in place
    instead of framing it packet by packet; for anything else (a CRC error, a command
    error, stuffing, another id or length, a part) it returns ``None`` having changed
    nothing, and the :class:`ReplyCollector` sorts the bytes out: the outcome is the
    same either way, only cheaper here. Built once per read set (the bus keeps it with
    the read's plan); ``size`` is 0 where it does not apply (Protocol 1.0, too long).
    """

    __slots__ = ("_checks", "_crc_end", "_head", "_protocol", "fast", "size")

    def __init__(self, protocol: int, reads: Sequence[Read], *, fast: bool) -> None:
        self.fast = fast
        self.size = 0
        self._head = b""
        self._crc_end = 0
        self._protocol = protocol
        # per servo: (id, where its ERR byte is, where its data starts and ends, packet
        # start) in the reply
        self._checks: tuple[tuple[int, int, int, int, int], ...] = ()
        ids = {r[0] for r in reads}
        if len(ids) != len(reads) or not reads:
            return
        if protocol == 1:  # FF FF id length ERR data checksum, per servo
            at, checks1 = 0, []
            for servo_id, _, n in reads:
                checks1.append((servo_id, at + 4, at + 5, at + 5 + n, at))
                at += 6 + n
            self._checks, self.size = tuple(checks1), at
            return
        if sum(r[2] + 4 for r in reads) + 1 > P.MAX_LENGTH_2:
            return
        checks = []
        if fast:
            at = 8
            for servo_id, _, n in reads:
                checks.append((servo_id, at, at + 2, at + 2 + n, at))
                at += n + 4
            length = at - 7
            self._head = _FAST_HEAD + bytes((length & 0xFF, length >> 8, P.Instruction.STATUS))
        else:
            at = 0
            for servo_id, _, n in reads:
                checks.append((servo_id, at + 8, at + 9, at + 9 + n, at))
                at += 11 + n
        self._checks = tuple(checks)
        self.size = at

    def take(self, data: bytes) -> dict[int, ServoReply] | None:
        """Every servo's reply, if ``data`` is exactly the whole valid reply; else ``None``."""
        if len(data) != self.size or not self.size:
            return None
        if self._protocol == 1:
            return self._take_1(data)
        return self._take_fast(data) if self.fast else self._take_sync(data)

    def _take_1(self, data: bytes) -> dict[int, ServoReply] | None:
        replies = {}
        for servo_id, err, start, end, at in self._checks:
            if (
                data[at] != 0xFF
                or data[at + 1] != 0xFF
                or data[at + 2] != servo_id
                or data[at + 3] != end - start + 2
                or data[err] & _COMMAND_BITS[1]
                or (~sum(data[at + 2 : end])) & 0xFF != data[end]
            ):
                return None
            replies[servo_id] = _reply(ServoReply, (servo_id, data[start:end], data[err]))
        return replies

    def _take_fast(self, data: bytes) -> dict[int, ServoReply] | None:
        if not data.startswith(self._head):
            return None
        if crc16(memoryview(data)[:-2]) != data[-2] | data[-1] << 8:
            return None
        replies = {}
        for servo_id, err, start, end, _ in self._checks:
            if data[err + 1] != servo_id:
                return None
            replies[servo_id] = _reply(ServoReply, (servo_id, data[start:end], data[err]))
        return replies

    def _take_sync(self, data: bytes) -> dict[int, ServoReply] | None:
        view = memoryview(data)
        replies = {}
        for servo_id, err, start, end, at in self._checks:
            n = end - start + 4
            if (
                data[at : at + 4] != P.HEADER_2
                or data[at + 4] != servo_id
                or data[at + 5] | data[at + 6] << 8 != n
                or data[at + 7] != P.Instruction.STATUS
                or data[err] & _COMMAND_BITS[2]
                or _STUFFED in data[err:end]
                or crc16(view[at:end]) != data[end] | data[end + 1] << 8
            ):
                return None
            replies[servo_id] = _reply(ServoReply, (servo_id, data[start:end], data[err]))
        return replies


class ReplyCollector:
    """Sorts the replies to one group read.

    Every reply is checked against the id that was asked for: a fast-read slice against
    the servo at its place in the request, a status packet against the order in which
    the servos answer a sync or bulk read (the request's). A valid reply from an id not
    asked for, from one that already answered or out of turn, is refused: its data is
    taken for no servo, the servo whose turn it was counts as corrupt (``corrupt``,
    ``BusCounters.crc_errors``) and ``wrong`` remembers the two ids for the error.

    Args:
        protocol: 1 or 2.
        reads: what each servo was asked for.
        fast: the reply is one fast-read packet from the broadcast id.
        counters: bus counters to add CRC and servo errors to.
    """

    def __init__(
        self, protocol: int, reads: Sequence[Read], *, fast: bool, counters: BusCounters
    ) -> None:
        self.protocol = protocol
        self.reads = list(reads)
        self.fast = fast
        self.counters = counters
        self.lengths = {r[0]: r[2] for r in reads}
        self.replies: dict[int, ServoReply] = {}
        self.corrupt: set[int] = set()
        #: ``{id asked for: id that answered in its place}`` of refused replies.
        self.wrong: dict[int, int] = {}
        self._order = {r[0]: k for k, r in enumerate(self.reads)}
        self._next = 0  # the place in ``reads`` of the next status packet expected
        self._turns: dict[int, int] = {}  # id -> the place that was next when it answered
        self._decoder = P.PacketDecoder(protocol, P.PacketKind.STATUS)
        self._whole = WholeReply(protocol, self.reads, fast=fast)

    @property
    def complete(self) -> bool:
        """Every servo is accounted for (or the one fast reply has arrived)."""
        if self.fast and (self.replies or self.corrupt):
            return True
        if not self.wrong:
            return len(self.replies) + len(self.corrupt) >= len(self.reads)
        return len(self.replies.keys() | self.corrupt) >= len(self.reads)

    def feed(self, data: bytes) -> None:
        """Add received bytes.

        Raises:
            ServoError: a servo answered with a command error.
        """
        if not self._decoder.pending and not self.replies:
            replies = self._whole.take(data)
            if replies is not None:
                self.replies = replies
                return
        for item in self._decoder.feed(data):
            if isinstance(item, P.DecodeError):
                self._corrupt(item)
            elif isinstance(item, P.StatusPacket):
                self._status(item)

    def finish(self) -> tuple[dict[int, ServoReply], set[int]]:
        """Valid replies by id, and the ids whose reply was corrupt.

        A fast reply cut short by a silent servo still yields the slices before it.
        """
        if self.fast and not self.replies and self._decoder.pending:
            raw = self._decoder.take_pending()
            self._slices(P.fast_status_prefix(raw, [r[2] for r in self.reads]))
        return self.replies, self.corrupt

    def _refuse(self, expected: int, received: int) -> None:
        """A valid reply from ``received`` where ``expected`` was to answer."""
        self.counters.crc_errors += 1
        self.corrupt.add(expected)
        self.wrong[expected] = received

    def _out_of_turn(self, received: int) -> None:
        """Refuse a status packet from an id not asked for, or from one that answered."""
        turn = self._next
        if received in self._turns:
            # A second reply with this id: which of the two is its own is unknown, so
            # neither is taken. If the first came in an earlier servo's turn (skipping
            # it), that servo's reply is the one that was re-addressed.
            self.replies.pop(received, None)
            self.corrupt.add(received)
            turn = min(turn, self._turns.pop(received))
            if self.reads[turn][0] == received:
                turn = self._next
        if turn < len(self.reads):
            self._refuse(self.reads[turn][0], received)
        else:  # after every servo's turn: it displaces no one's reply
            self.counters.crc_errors += 1

    def _slices(self, parts: Sequence[P.FastStatusPart]) -> None:
        """Take fast-read slices, each from the servo at its place in the request."""
        for (servo_id, _, length), part in zip(self.reads, parts, strict=False):
            if part.id != servo_id:
                self._refuse(servo_id, part.id)
            elif len(part.data) == length:
                self.replies[servo_id] = ServoReply(servo_id, part.data, part.error)

    def _corrupt(self, item: P.DecodeError) -> None:
        self.counters.crc_errors += 1
        if self.fast and item.id == P.BROADCAST_ID:
            self.corrupt.update(self.lengths)
        elif item.id is not None and item.id in self.lengths:
            self.corrupt.add(item.id)

    def _status(self, item: P.StatusPacket) -> None:
        if self.fast and item.id == P.BROADCAST_ID:
            try:
                parts = P.split_fast_status(item, [r[2] for r in self.reads])
            except ValueError:
                self.counters.crc_errors += 1
                self.corrupt.update(self.lengths)
                return
            self._slices(parts)
            return
        place = self._order.get(item.id, -1)
        if place < self._next:  # not asked for, or a second reply of one id
            self._out_of_turn(item.id)
            return
        self._turns[item.id] = self._next
        self._next = place + 1  # the servos in between did not answer (timeouts)
        if command_failed(self.protocol, item.error):
            self.counters.servo_errors += 1
            reason = describe_error(self.protocol, item.error)
            raise ServoError(item.id, "READ", item.error, reason)
        if len(item.params) != self.lengths[item.id]:
            self.counters.crc_errors += 1
            self.corrupt.add(item.id)
            return
        self.replies[item.id] = ServoReply(item.id, item.params, item.error)


def plain(method: ReadMethod) -> ReadMethod:
    """The non-fast read of a fast one (retries use it)."""
    if method is ReadMethod.FAST_SYNC_READ:
        return ReadMethod.SYNC_READ
    if method is ReadMethod.FAST_BULK_READ:
        return ReadMethod.BULK_READ
    return method


def read_packet(
    protocol: int, method: ReadMethod, reads: Sequence[tuple[int, int, int]]
) -> P.InstructionPacket:
    """The instruction packet of one group read."""
    ins = P.Instruction
    match method:
        case ReadMethod.SYNC_READ | ReadMethod.FAST_SYNC_READ:
            _, address, length = reads[0]
            params = P.sync_read_params(address, length, [r[0] for r in reads])
            inst = ins.FAST_SYNC_READ if method is ReadMethod.FAST_SYNC_READ else ins.SYNC_READ
            return P.InstructionPacket(protocol, P.BROADCAST_ID, inst, params)
        case ReadMethod.BULK_READ | ReadMethod.FAST_BULK_READ:
            params = P.bulk_read_params(protocol, reads)
            inst = ins.FAST_BULK_READ if method is ReadMethod.FAST_BULK_READ else ins.BULK_READ
            return P.InstructionPacket(protocol, P.BROADCAST_ID, inst, params)
        case ReadMethod.READ_EACH:
            servo_id, address, length = reads[0]
            params = P.read_params(protocol, address, length)
            return P.InstructionPacket(protocol, servo_id, ins.READ, params)
    raise ValueError(f"unknown read method {method!r}")  # pragma: no cover
