"""What the servos on a virtual bus answer to each instruction packet, for every family.

Pure with respect to I/O: an instruction (decoded by the family's codec in
``hilbot.hal``) goes in, the status packets to send come out as ``Reply`` values, each
with the delay its servo waits before answering (Return Delay Time plus any injected
delay). The bus turns those into bytes on the pty at the right times. One handler
serves every family; a :class:`Dialect` holds what differs: the status packet's
framing, which instruction codes exist, from which status level a servo answers, and
whether bad frames and unknown instructions are answered with an error.

Rules implemented: unicast and broadcast addressing (a broadcast answers nothing but
PING, which Protocol 2.0 and Feetech servos answer in id order and Protocol 1.0 ones
ignore); the status level (Dynamixel Status Return Level 0: ping only, 1: ping and
reads, 2: everything; Feetech Response Status Level 0: ping and reads, 1: everything);
sync and bulk reads (one status per servo, in the listed order; a model without them
stays silent); fast sync and fast bulk reads (one packet from the broadcast id, each
servo appending its slice, cut short where a servo does not answer); corrupt
instructions answered with the CRC error (2.0) or checksum bit (1.0), unknown ones with
the instruction error (on Protocol 1.0 also Reboot and Clear, which 1.0 does not define,
and an Action with no Reg Write before it); a Feetech servo ignores both, having no
status bit for them. Injected faults decide per reply whether it is delivered, lost,
corrupted or truncated (its parameters cut, with a valid CRC).

Every instruction packet a servo receives (its own id, a broadcast, or a group
instruction that lists it) restarts its Bus Watchdog timer (``VirtualServo.heard``); a
corrupt frame, or a packet for other ids only, does not.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from hilbot.hal.dynamixel import protocol as dxl
from hilbot.hal.dynamixel.protocol import (
    BROADCAST_ID,
    DecodeErrorReason,
    FastStatusPart,
    Protocol1Error,
    StatusErrorCode,
    encode_fast_status,
)
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.feetech import protocol as ft
from hilbot.hal.feetech.tables import FeetechRegister
from hilbot.sim.faults import FaultTable, ReplyFate, glitch_read
from hilbot.sim.pty_server import Reply, corrupt, faulted_reply, online

Ins = dxl.Instruction
_BREAKS_FAST = (ReplyFate.DROP, ReplyFate.TRUNCATE)
_GROUP_READS = (Ins.SYNC_READ, Ins.FAST_SYNC_READ, Ins.BULK_READ, Ins.FAST_BULK_READ)


class Packet(Protocol):
    """A decoded instruction packet, of either codec."""

    @property
    def id(self) -> int:
        """The id it is addressed to."""
        ...

    @property
    def instruction(self) -> int:
        """Its instruction code."""
        ...

    @property
    def params(self) -> bytes:
        """Its parameter bytes."""
        ...


class BadFrame(Protocol):
    """A frame the codec refused (bad CRC or checksum, malformed)."""

    @property
    def id(self) -> int | None:
        """The id it seemed addressed to, if it could be told."""
        ...

    @property
    def reason(self) -> enum.Enum:
        """Why it was refused."""
        ...


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one family's servos frame and answer instructions.

    Args:
        protocol: 2 (Dynamixel Protocol 2.0) or 1 (Dynamixel 1.0 and Feetech framing).
        status: ``(id, error, params)`` -> the status packet's bytes.
        ops: instruction code -> the instruction it is (Protocol 2.0 names); a code
            not listed is unknown.
        read_level, write_level: the status level from which a servo answers reads
            and other instructions (PING is always answered).
        broadcast_ping: whether every servo answers a broadcast PING.
        answers_errors: whether bad frames and unknown instructions get an error
            status (Dynamixel) or are ignored (Feetech).
        position: the Present Position register's name (for the glitch fault).
        group_width: bytes of a sync read's address and length.
        goal: the Goal Position register's name.
        decoder: a fresh decoder of the host's bytes.
        overhead: bytes of an instruction packet around its parameters.
        items: what the decoder yields for the handler (instructions and bad frames).
    """

    protocol: int
    status: Callable[[int, int, bytes], bytes]
    ops: Mapping[int, Ins]
    read_level: int
    write_level: int
    broadcast_ping: bool
    answers_errors: bool
    position: enum.Enum
    group_width: int
    goal: enum.Enum
    decoder: Callable[[], Any]
    overhead: int
    items: tuple[type, ...]

    @property
    def width(self) -> int:
        """Bytes of an address in READ and WRITE."""
        return 2 if self.protocol == 2 else 1


def _dxl_status(protocol: int) -> Callable[[int, int, bytes], bytes]:
    def status(servo_id: int, error: int, params: bytes) -> bytes:
        return dxl.encode_status(dxl.StatusPacket(protocol, servo_id, error, params))

    return status


def _ft_status(servo_id: int, error: int, params: bytes) -> bytes:
    return ft.encode_status(ft.StatusPacket(servo_id, error, params))


_ALL = {int(i): i for i in Ins if i is not Ins.STATUS}
#: The instructions Protocol 1.0 defines (e-manual, Protocol 1.0 "Instruction": ping,
#: read, write, reg write, action, factory reset, sync write; bulk read on the MX
#: pages). Any other unicast, Reboot (0x08) and Clear (0x10) included, is answered with
#: the instruction error bit.
_PROTOCOL_1 = frozenset(
    {
        Ins.PING,
        Ins.READ,
        Ins.WRITE,
        Ins.REG_WRITE,
        Ins.ACTION,
        Ins.FACTORY_RESET,
        Ins.SYNC_WRITE,
        Ins.BULK_READ,
    }
)
#: Feetech's instruction table (FT-SCS protocol manual): the 1.0 subset, REBOOT at 0x0A.
_FEETECH = {
    int(ft.Instruction.PING): Ins.PING,
    int(ft.Instruction.READ): Ins.READ,
    int(ft.Instruction.WRITE): Ins.WRITE,
    int(ft.Instruction.REG_WRITE): Ins.REG_WRITE,
    int(ft.Instruction.ACTION): Ins.ACTION,
    int(ft.Instruction.FACTORY_RESET): Ins.FACTORY_RESET,
    int(ft.Instruction.REBOOT): Ins.REBOOT,
    int(ft.Instruction.SYNC_READ): Ins.SYNC_READ,
    int(ft.Instruction.SYNC_WRITE): Ins.SYNC_WRITE,
}


def _dynamixel(protocol: int) -> Dialect:
    N = RegisterName
    return Dialect(
        protocol,
        _dxl_status(protocol),
        _ALL,
        read_level=1,
        write_level=2,
        broadcast_ping=protocol == 2,
        answers_errors=True,
        position=N.PRESENT_POSITION,
        group_width=2,
        goal=N.GOAL_POSITION,
        decoder=lambda: dxl.PacketDecoder(protocol, dxl.PacketKind.INSTRUCTION),
        # 2.0: header 4, id, length 2, instruction, CRC 2; 1.0: header 2, id, length, checksum
        overhead=10 if protocol == 2 else 6,
        items=(dxl.InstructionPacket, dxl.DecodeError),
    )


DYNAMIXEL_2 = _dynamixel(2)
DYNAMIXEL_1 = _dynamixel(1)
FEETECH = Dialect(
    1,
    _ft_status,
    _FEETECH,
    read_level=0,
    write_level=1,
    broadcast_ping=True,
    answers_errors=False,
    position=FeetechRegister.PRESENT_POSITION,
    group_width=1,
    goal=FeetechRegister.GOAL_POSITION,
    decoder=lambda: ft.PacketDecoder(ft.PacketKind.INSTRUCTION),
    overhead=ft.OVERHEAD,
    items=(ft.InstructionPacket, ft.DecodeError),
)


def _le(data: bytes) -> int:
    return int.from_bytes(data, "little")


class InstructionHandler:
    """Executes instructions on the servos of one bus and plans their replies.

    Args:
        dialect: the family's framing and rules (``DYNAMIXEL_2``, ``DYNAMIXEL_1``,
            ``FEETECH``), or a Dynamixel protocol number, 1 or 2.
        servos: every servo on the bus (answering or not).
        faults: injected faults, by servo id.
        host_baudrate: the bit rate the host talks at now; servos set to another
            rate do not hear it, and none hears an unknown rate (``None``).
    """

    def __init__(
        self,
        dialect: Dialect | int,
        servos: Sequence[Any],
        faults: FaultTable,
        host_baudrate: Callable[[], int | None],
    ) -> None:
        if isinstance(dialect, int):
            dialect = DYNAMIXEL_2 if dialect == 2 else DYNAMIXEL_1
        self.dialect = dialect
        self.protocol = dialect.protocol
        self.servos = list(servos)
        self.faults = faults
        self._host_baudrate = host_baudrate
        self.instructions = 0  # instructions received
        self.corrupt = 0  # corrupt instruction frames received
        self.ignored = 0  # instructions no servo acted on (Feetech: unknown, malformed)
        self._p1_only = dialect.answers_errors and dialect.protocol == 1

    # ------------------------------------------------------------------ addressing

    def online(self) -> dict[int, Any]:
        """Servos that hear the host now, by id: present, and at the host's bit rate."""
        return online(self.servos, self.faults, self._host_baudrate())

    def _targets(self, packet_id: int, online: dict[int, Any]) -> list[Any]:
        if packet_id == BROADCAST_ID:
            return [online[i] for i in sorted(online)]
        servo = online.get(packet_id)
        return [] if servo is None else [servo]

    def _status(self, servo: Any, error: int, params: bytes = b"") -> Reply | None:
        return self._deliver(servo.id, error, params, servo.return_delay)

    def _read(self, servo: Any, address: int, length: int, now: float) -> tuple[int, bytes]:
        """``servo.read``, its Present Position moved by an injected glitch (``glitch_read``)."""
        error, data = servo.read(address, length, now)
        faults = self.faults.get(servo.id)
        return error, glitch_read(faults, servo.spec, self.dialect.position, address, data)

    def _deliver(self, servo_id: int, error: int, params: bytes, delay: float) -> Reply | None:
        faults = self.faults.get(servo_id)
        answer_id = servo_id if faults is None or faults.reply_id is None else faults.reply_id

        def encode(keep: int | None) -> bytes:
            return self.dialect.status(answer_id, error, params[:keep])

        return faulted_reply(faults, delay, encode)

    @staticmethod
    def _hear(servos: Iterable[Any], now: float) -> None:
        """The servos received an instruction packet (their Bus Watchdog restarts)."""
        for servo in servos:
            if servo is not None:
                servo.heard(now)

    # ------------------------------------------------------------------ dispatch

    def handle(self, item: Packet | BadFrame, now: float) -> list[Reply]:
        """Execute one decoded instruction (or rejected frame); return the replies."""
        online = self.online()
        if not hasattr(item, "instruction"):
            self.corrupt += 1
            return self._rejected(item, online)
        packet = cast(Packet, item)
        self.instructions += 1
        inst = self.dialect.ops.get(int(packet.instruction))
        if inst is Ins.PING:
            return self._ping(packet, online, now)
        if inst is Ins.REBOOT and (self.protocol == 2 or not self.dialect.answers_errors):
            return self._reboot(packet)
        if inst in _GROUP_READS:
            return self._group_read(packet, inst, online, now)
        if inst in (Ins.SYNC_WRITE, Ins.BULK_WRITE):
            self._group_write(packet, inst, online, now)
            return []
        targets = self._targets(packet.id, online)
        self._hear(targets, now)
        replies = [self._unicast(packet, inst, servo, now) for servo in targets]
        if packet.id == BROADCAST_ID:
            return []
        return [r for r in replies if r is not None]

    def _rejected(self, item: BadFrame, online: dict[int, Any]) -> list[Reply]:
        servo = online.get(item.id) if item.id is not None else None
        if (
            not self.dialect.answers_errors
            or servo is None
            or servo.status_return_level < self.dialect.write_level
        ):
            return []
        if item.reason is DecodeErrorReason.MALFORMED:
            code, p1 = StatusErrorCode.INSTRUCTION_ERROR, Protocol1Error.INSTRUCTION
        else:
            code, p1 = StatusErrorCode.CRC_ERROR, Protocol1Error.CHECKSUM
        reply = self._status(servo, servo.error_byte(code, int(p1)))
        return [] if reply is None else [reply]

    def _ping(self, item: Packet, online: dict[int, Any], now: float) -> list[Reply]:
        if item.id == BROADCAST_ID and not self.dialect.broadcast_ping:
            return []  # Protocol 1.0 has no broadcast ping: servos stay silent
        replies = []
        for servo in self._targets(item.id, online):
            servo.heard(now)
            params = b""
            if self.protocol == 2:
                number = servo.spec.model_number.to_bytes(2, "little")
                params = number + bytes((servo.firmware,))
            reply = self._status(servo, servo.error_byte(), params)
            if reply is not None:
                replies.append(reply)
        return replies

    def _reboot(self, item: Packet) -> list[Reply]:
        # A browned-out servo is silent but still hears a reboot, which revives it.
        targets = [s for s in self.servos if item.id in (BROADCAST_ID, s.id)]
        replies = []
        rate = self._host_baudrate()
        for servo in targets:
            faults = self.faults.get(servo.id)
            alive = faults.rebooted() if faults is not None else True
            if not alive or rate is None or servo.baudrate != rate:
                continue
            if item.id != BROADCAST_ID and servo.status_return_level >= self.dialect.write_level:
                reply = self._status(servo, servo.error_byte())
                if reply is not None:
                    replies.append(reply)
            servo.reboot()
        return replies

    def _unicast(self, item: Packet, inst: Ins | None, servo: Any, now: float) -> Reply | None:
        # The reply follows the servo's settings as the instruction found them: a write
        # of ID, Status Return Level or Return Delay Time takes effect afterwards.
        servo_id, level, delay = servo.id, servo.status_return_level, servo.return_delay
        result = self._execute(item, inst, servo, now)
        if result is None:
            self.ignored += 1
            return None
        error, params, needed = result
        if level < needed:
            return None
        return self._deliver(servo_id, error, params, delay)

    def _execute(
        self, item: Packet, inst: Ins | None, servo: Any, now: float
    ) -> tuple[int, bytes, int] | None:
        """Run READ/WRITE/REG_WRITE/ACTION/FACTORY_RESET/CLEAR: ``(ERR, data, level)``.

        ``level`` is the status level from which the servo answers; ``None``: ignored.
        """
        p, width, d = item.params, self.dialect.width, self.dialect
        if self._p1_only and inst not in _PROTOCOL_1:
            inst = None
        if inst is Ins.READ:
            if len(p) != 2 * width:
                return self._length_error(servo, d.read_level)
            error, data = self._read(servo, _le(p[:width]), _le(p[width:]), now)
            return error, data, d.read_level
        if inst in (Ins.WRITE, Ins.REG_WRITE):
            if len(p) <= width:
                return self._length_error(servo, d.write_level)
            write = servo.write if inst is Ins.WRITE else servo.reg_write
            return write(_le(p[:width]), p[width:], now), b"", d.write_level
        if inst is Ins.ACTION:
            return servo.action(now), b"", d.write_level
        if inst is Ins.FACTORY_RESET:
            error = servo.error_byte()
            if d.answers_errors:
                mode = p[0] if p else 0xFF
                servo.factory_reset(keep_id=mode in (0x01, 0x02), keep_baud=mode == 0x02)
            else:
                servo.factory_reset()  # Feetech: every register but ID
            return error, b"", d.write_level
        if inst is Ins.CLEAR and d.answers_errors:
            return servo.error_byte(), b"", d.write_level
        if not d.answers_errors:
            return None
        code = StatusErrorCode.INSTRUCTION_ERROR
        return servo.error_byte(code, int(Protocol1Error.INSTRUCTION)), b"", d.write_level

    def _length_error(self, servo: Any, level: int) -> tuple[int, bytes, int] | None:
        if not self.dialect.answers_errors:
            return None
        code = StatusErrorCode.DATA_LENGTH_ERROR
        return servo.error_byte(code, int(Protocol1Error.INSTRUCTION)), b"", level

    # ------------------------------------------------------------------ group instructions

    def _group_write(self, item: Packet, inst: Ins, online: dict[int, Any], now: float) -> None:
        for servo_id, address, data in self._write_entries(item, inst):
            servo = online.get(servo_id)
            if servo is not None:
                servo.heard(now)
                servo.write(address, data, now)

    def _write_entries(self, item: Packet, inst: Ins) -> Iterable[tuple[int, int, bytes]]:
        p, width = item.params, self.dialect.width
        if inst is Ins.SYNC_WRITE:
            address, length = _le(p[:width]), _le(p[width : 2 * width])
            at = 2 * width
            malformed = not length or len(p) == at or (len(p) - at) % (1 + length)
            if malformed and not self.dialect.answers_errors:
                self.ignored += 1  # Feetech: entries that do not fill the packet
                return
            while length and at + 1 + length <= len(p):
                yield p[at], address, p[at + 1 : at + 1 + length]
                at += 1 + length
            return
        at = 0
        while at + 5 <= len(p):  # BULK_WRITE: id, address(2), length(2), data
            length = _le(p[at + 3 : at + 5])
            yield p[at], _le(p[at + 1 : at + 3]), p[at + 5 : at + 5 + length]
            at += 5 + length

    def _read_entries(self, item: Packet, inst: Ins) -> list[tuple[int, int, int]]:
        p, w = item.params, self.dialect.group_width
        if inst in (Ins.SYNC_READ, Ins.FAST_SYNC_READ):
            address, length = _le(p[0:w]), _le(p[w : 2 * w])
            return [(servo_id, address, length) for servo_id in p[2 * w :]]
        if self.protocol == 1:  # 1.0 bulk read: 0x00, then (length, id, address) triples
            return [(p[k + 1], p[k + 2], p[k]) for k in range(1, len(p) - 2, 3)]
        return [
            (p[k], _le(p[k + 1 : k + 3]), _le(p[k + 3 : k + 5])) for k in range(0, len(p) - 4, 5)
        ]

    def _group_read(
        self, item: Packet, inst: Ins, online: dict[int, Any], now: float
    ) -> list[Reply]:
        if item.id != BROADCAST_ID:
            return []
        if len(item.params) < 2 * self.dialect.group_width + 1 and inst is Ins.SYNC_READ:
            self.ignored += 1
            return []
        entries = self._read_entries(item, inst)
        self._hear((online.get(servo_id) for servo_id, _, _ in entries), now)
        if inst in (Ins.FAST_SYNC_READ, Ins.FAST_BULK_READ):
            return self._fast_read(entries, online, now)
        replies = []
        for servo_id, address, length in entries:
            servo = online.get(servo_id)
            if servo is None or servo.status_return_level < self.dialect.read_level:
                continue
            spec = servo.spec
            if inst is Ins.BULK_READ and not spec.has_bulk_read:
                continue
            if inst is Ins.SYNC_READ and not getattr(spec, "has_sync_read", True):
                continue  # a model without it (SCS0009) stays silent
            error, data = self._read(servo, address, length, now)
            reply = self._status(servo, error, data)
            if reply is not None:
                replies.append(reply)
        return replies

    def _fast_read(
        self,
        entries: list[tuple[int, int, int]],
        online: dict[int, Any],
        now: float,
    ) -> list[Reply]:
        parts: list[FastStatusPart] = []
        delay, complete, damaged = 0.0, True, False
        for servo_id, address, length in entries:
            servo = online.get(servo_id)
            faults = self.faults.get(servo_id)
            fate = ReplyFate.DELIVER if faults is None else faults.reply_fate()
            if servo is None or not servo.spec.has_fast_sync_read or fate in _BREAKS_FAST:
                # The chain breaks: later servos wait in vain for a slice (a truncated
                # slice ends the reply just as a missing one does).
                complete = False
                break
            error, data = self._read(servo, address, length, now)
            answer_id = servo_id if faults is None or faults.reply_id is None else faults.reply_id
            parts.append(FastStatusPart(answer_id, error, data.ljust(length, b"\0")))
            delay = max(delay, servo.return_delay + (faults.delay if faults else 0.0))
            damaged |= fate is ReplyFate.CORRUPT
        if not parts:
            return []
        if not complete:
            # LEN announces the full reply, as the first servo wrote it; each slice's
            # running CRC covers that header, so the slices before the gap stay valid.
            announced = [length for _, _, length in entries]
            return [Reply(encode_fast_status(parts, announced=announced), delay)]
        data = encode_fast_status(parts)
        return [Reply(corrupt(data) if damaged else data, delay)]
