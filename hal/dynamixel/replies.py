"""Collecting the status packets of one group read: per-servo data, errors, corruption.

Pure bookkeeping over the codec (no I/O): :class:`ReplyCollector` is fed the bytes
that arrive after a group read instruction and sorts what they hold into valid
replies, corrupt replies and servo-reported errors, counting each in the bus counters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from hilbot.hal.backend import BusCounters
from hilbot.hal.dynamixel import protocol as P
from hilbot.hal.dynamixel.protocol import crc16
from hilbot.hal.dynamixel.timing import ReadMethod
from hilbot.hal.errors import ServoError

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
