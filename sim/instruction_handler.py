"""What the servos on a virtual bus answer to each instruction packet.

Pure with respect to I/O: an instruction (decoded by ``hilbot.hal.dynamixel.protocol``)
goes in, the status packets to send come out as ``Reply`` values, each with the delay
its servo waits before answering (Return Delay Time plus any injected delay). The bus
turns those into bytes on the pty at the right times.

Rules implemented: unicast and broadcast addressing; Status Return Level (0: ping
only, 1: ping and reads, 2: everything); the 2.0 broadcast ping (every servo answers,
in id order); sync and bulk reads (one status per servo, in the listed order); fast
sync and fast bulk reads (one packet from the broadcast id, each servo appending its
slice, cut short where a servo does not answer); corrupt instructions answered with
the CRC error (2.0) or checksum bit (1.0); unknown instructions with the instruction
error (on Protocol 1.0 also Reboot and Clear, which 1.0 does not define, and an
Action with no Reg Write before it). Injected faults decide per reply whether it is
delivered, lost, corrupted or truncated (its parameters cut, with a valid CRC).

Every instruction packet a servo receives (its own id, a broadcast, or a group
instruction that lists it) restarts its Bus Watchdog timer (see ``VirtualServo.heard``);
a corrupt frame, or a packet for other ids only, does not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from hilbot.hal.dynamixel.protocol import (
    BROADCAST_ID,
    DecodeError,
    DecodeErrorReason,
    FastStatusPart,
    Instruction,
    InstructionPacket,
    Protocol1Error,
    StatusErrorCode,
    StatusPacket,
    encode_fast_status,
    encode_status,
)
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.sim.faults import FaultTable, ReplyFate, glitch_read
from hilbot.sim.pty_server import Reply, corrupt, faulted_reply, online
from hilbot.sim.virtual_servo import VirtualServo

Ins = Instruction
#: The instructions Protocol 1.0 defines (e-manual, Protocol 1.0 "Instruction": ping,
#: read, write, reg write, action, factory reset, sync write; bulk read on the MX
#: pages). Anything else, Reboot (0x08) and Clear (0x10) included, is answered with the
#: instruction error bit.
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
_BREAKS_FAST = (ReplyFate.DROP, ReplyFate.TRUNCATE)


def _le(data: bytes) -> int:
    return int.from_bytes(data, "little")


class InstructionHandler:
    """Executes instructions on the servos of one bus and plans their replies.

    Args:
        protocol: 1 or 2.
        servos: every servo on the bus (answering or not).
        faults: injected faults, by servo id.
        host_baudrate: the bit rate the host talks at now; servos set to another
            rate do not hear it, and none hears an unknown rate (``None``).
    """

    def __init__(
        self,
        protocol: int,
        servos: Sequence[VirtualServo],
        faults: FaultTable,
        host_baudrate: Callable[[], int | None],
    ) -> None:
        self.protocol = protocol
        self.servos = list(servos)
        self.faults = faults
        self._host_baudrate = host_baudrate
        self.instructions = 0  # instructions received
        self.corrupt = 0  # corrupt instruction frames received

    # ------------------------------------------------------------------ addressing

    def online(self) -> dict[int, VirtualServo]:
        """Servos that hear the host now, by id: present, and at the host's bit rate."""
        return online(self.servos, self.faults, self._host_baudrate())

    def _targets(self, packet_id: int, online: dict[int, VirtualServo]) -> list[VirtualServo]:
        if packet_id == BROADCAST_ID:
            return [online[i] for i in sorted(online)]
        servo = online.get(packet_id)
        return [] if servo is None else [servo]

    def _status(self, servo: VirtualServo, error: int, params: bytes = b"") -> Reply | None:
        packet = StatusPacket(self.protocol, servo.id, error, params)
        return self._deliver(packet, servo.return_delay)

    def _read(
        self, servo: VirtualServo, address: int, length: int, now: float
    ) -> tuple[int, bytes]:
        """``servo.read``, its Present Position moved by an injected glitch (``glitch_read``)."""
        error, data = servo.read(address, length, now)
        return error, glitch_read(
            self.faults.get(servo.id), servo.spec, RegisterName.PRESENT_POSITION, address, data
        )

    def _deliver(self, packet: StatusPacket, delay: float) -> Reply | None:
        faults = self.faults.get(packet.id)
        answer_id = packet.id if faults is None or faults.reply_id is None else faults.reply_id

        def encode(keep: int | None) -> bytes:
            cut = packet.params[:keep]
            return encode_status(StatusPacket(packet.protocol, answer_id, packet.error, cut))

        return faulted_reply(faults, delay, encode)

    @staticmethod
    def _hear(servos: Iterable[VirtualServo | None], now: float) -> None:
        """The servos received an instruction packet (their Bus Watchdog restarts)."""
        for servo in servos:
            if servo is not None:
                servo.heard(now)

    # ------------------------------------------------------------------ dispatch

    def handle(self, item: InstructionPacket | DecodeError, now: float) -> list[Reply]:
        """Execute one decoded instruction (or rejected frame); return the replies."""
        online = self.online()
        if isinstance(item, DecodeError):
            self.corrupt += 1
            return self._rejected(item, online)
        self.instructions += 1
        inst = item.instruction
        if inst is Ins.PING:
            return self._ping(item, online, now)
        if inst is Ins.REBOOT and self.protocol == 2:
            return self._reboot(item, online)
        if inst in (Ins.SYNC_READ, Ins.FAST_SYNC_READ, Ins.BULK_READ, Ins.FAST_BULK_READ):
            return self._group_read(item, online, now)
        if inst in (Ins.SYNC_WRITE, Ins.BULK_WRITE):
            self._group_write(item, online, now)
            return []
        targets = self._targets(item.id, online)
        self._hear(targets, now)
        replies = [self._unicast(item, servo, now) for servo in targets]
        if item.id == BROADCAST_ID:
            return []
        return [r for r in replies if r is not None]

    def _rejected(self, item: DecodeError, online: dict[int, VirtualServo]) -> list[Reply]:
        servo = online.get(item.id) if item.id is not None else None
        if servo is None or servo.status_return_level < 2:
            return []
        if item.reason is DecodeErrorReason.MALFORMED:
            code, p1 = StatusErrorCode.INSTRUCTION_ERROR, Protocol1Error.INSTRUCTION
        else:
            code, p1 = StatusErrorCode.CRC_ERROR, Protocol1Error.CHECKSUM
        reply = self._status(servo, servo.error_byte(code, int(p1)))
        return [] if reply is None else [reply]

    def _ping(
        self, item: InstructionPacket, online: dict[int, VirtualServo], now: float
    ) -> list[Reply]:
        if item.id == BROADCAST_ID and self.protocol == 1:
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

    def _reboot(self, item: InstructionPacket, online: dict[int, VirtualServo]) -> list[Reply]:
        # A browned-out servo is silent but still hears a reboot, which revives it.
        targets = [s for s in self.servos if item.id in (BROADCAST_ID, s.id)]
        replies = []
        rate = self._host_baudrate()
        for servo in targets:
            faults = self.faults.get(servo.id)
            alive = faults.rebooted() if faults is not None else True
            if not alive or rate is None or servo.baudrate != rate:
                continue
            if item.id != BROADCAST_ID and servo.status_return_level == 2:
                reply = self._status(servo, servo.error_byte())
                if reply is not None:
                    replies.append(reply)
            servo.reboot()
        return replies

    def _unicast(self, item: InstructionPacket, servo: VirtualServo, now: float) -> Reply | None:
        # The reply follows the servo's settings as the instruction found them: a write
        # of ID, Status Return Level or Return Delay Time takes effect afterwards.
        servo_id, level, delay = servo.id, servo.status_return_level, servo.return_delay
        error, params, needed = self._execute(item, servo, now)
        if level < needed:
            return None
        return self._deliver(StatusPacket(self.protocol, servo_id, error, params), delay)

    def _execute(
        self, item: InstructionPacket, servo: VirtualServo, now: float
    ) -> tuple[int, bytes, int]:
        """Run READ/WRITE/REG_WRITE/ACTION/FACTORY_RESET/CLEAR: ``(ERR, data, level)``.

        ``level`` is the Status Return Level from which the servo answers.
        """
        inst, p = item.instruction, item.params
        width = 2 if self.protocol == 2 else 1
        if self.protocol == 1 and inst not in _PROTOCOL_1:
            return servo.error_byte(p1=int(Protocol1Error.INSTRUCTION)), b"", 2
        if inst is Ins.READ:
            if len(p) != 2 * width:
                return self._length_error(servo), b"", 1
            error, data = self._read(servo, _le(p[:width]), _le(p[width:]), now)
            return error, data, 1
        if inst in (Ins.WRITE, Ins.REG_WRITE):
            if len(p) <= width:
                return self._length_error(servo), b"", 2
            write = servo.write if inst is Ins.WRITE else servo.reg_write
            return write(_le(p[:width]), p[width:], now), b"", 2
        if inst is Ins.ACTION:
            return servo.action(now), b"", 2
        if inst is Ins.FACTORY_RESET:
            mode = p[0] if p else 0xFF
            error = servo.error_byte()
            servo.factory_reset(keep_id=mode in (0x01, 0x02), keep_baud=mode == 0x02)
            return error, b"", 2
        if inst is Ins.CLEAR:
            return servo.error_byte(), b"", 2
        code = StatusErrorCode.INSTRUCTION_ERROR
        return servo.error_byte(code, int(Protocol1Error.INSTRUCTION)), b"", 2

    def _length_error(self, servo: VirtualServo) -> int:
        return servo.error_byte(StatusErrorCode.DATA_LENGTH_ERROR, int(Protocol1Error.INSTRUCTION))

    # ------------------------------------------------------------------ group instructions

    def _group_write(
        self, item: InstructionPacket, online: dict[int, VirtualServo], now: float
    ) -> None:
        for servo_id, address, data in self._write_entries(item):
            servo = online.get(servo_id)
            if servo is not None:
                servo.heard(now)
                servo.write(address, data, now)

    def _write_entries(self, item: InstructionPacket) -> Iterable[tuple[int, int, bytes]]:
        p, width = item.params, 2 if self.protocol == 2 else 1
        if item.instruction is Ins.SYNC_WRITE:
            address, length = _le(p[:width]), _le(p[width : 2 * width])
            at = 2 * width
            while length and at + 1 + length <= len(p):
                yield p[at], address, p[at + 1 : at + 1 + length]
                at += 1 + length
            return
        at = 0
        while at + 5 <= len(p):  # BULK_WRITE: id, address(2), length(2), data
            length = _le(p[at + 3 : at + 5])
            yield p[at], _le(p[at + 1 : at + 3]), p[at + 5 : at + 5 + length]
            at += 5 + length

    def _read_entries(self, item: InstructionPacket) -> list[tuple[int, int, int]]:
        p = item.params
        if item.instruction in (Ins.SYNC_READ, Ins.FAST_SYNC_READ):
            address, length = _le(p[0:2]), _le(p[2:4])
            return [(servo_id, address, length) for servo_id in p[4:]]
        if self.protocol == 1:  # 1.0 bulk read: 0x00, then (length, id, address) triples
            return [(p[k + 1], p[k + 2], p[k]) for k in range(1, len(p) - 2, 3)]
        return [
            (p[k], _le(p[k + 1 : k + 3]), _le(p[k + 3 : k + 5])) for k in range(0, len(p) - 4, 5)
        ]

    def _group_read(
        self, item: InstructionPacket, online: dict[int, VirtualServo], now: float
    ) -> list[Reply]:
        if item.id != BROADCAST_ID:
            return []
        entries = self._read_entries(item)
        self._hear((online.get(servo_id) for servo_id, _, _ in entries), now)
        if item.instruction in (Ins.FAST_SYNC_READ, Ins.FAST_BULK_READ):
            return self._fast_read(entries, online, now)
        bulk = item.instruction is Ins.BULK_READ
        replies = []
        for servo_id, address, length in entries:
            servo = online.get(servo_id)
            if servo is None or servo.status_return_level < 1:
                continue
            if bulk and not servo.spec.has_bulk_read:
                continue
            error, data = self._read(servo, address, length, now)
            reply = self._status(servo, error, data)
            if reply is not None:
                replies.append(reply)
        return replies

    def _fast_read(
        self,
        entries: list[tuple[int, int, int]],
        online: dict[int, VirtualServo],
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
            return [Reply(self._truncated_fast(parts, entries), delay)]
        data = encode_fast_status(parts)
        return [Reply(corrupt(data) if damaged else data, delay)]

    def _truncated_fast(
        self, parts: list[FastStatusPart], entries: list[tuple[int, int, int]]
    ) -> bytes:
        # LEN announces the full reply, as the first servo wrote it; each slice's
        # running CRC covers that header, so the slices before the gap stay valid.
        return encode_fast_status(parts, announced=[length for _, _, length in entries])
