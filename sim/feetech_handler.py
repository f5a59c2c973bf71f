"""What the servos on a virtual Feetech bus answer to each instruction packet.

Pure with respect to I/O, like ``hilbot.sim.instruction_handler`` for Dynamixel: a
decoded instruction goes in, the status packets to send come out as ``Reply`` values
with the delay their servo waits. Rules (protocol manual; where it is silent, said):

- unicast answers one status packet; a broadcast (0xFE) answers nothing, except
  PING, which every servo answers ("only PING responds"), in id order here;
- Response Status Level 0: only PING and READ (and SYNC READ) are answered;
- SYNC READ (STS): each listed servo answers its own status packet, in list order;
  a model without sync read (SCS0009, per rustypot) stays silent;
- SYNC WRITE: each listed servo applies its slice; nobody answers;
- a frame with a bad checksum, an unknown instruction or a malformed parameter
  block is ignored: the status byte has no bit to report them (not documented);
- REBOOT (0x0A) restarts the servo after its answer and revives a browned-out one.

Injected faults (``hilbot.sim.faults``) decide per reply whether it is delivered,
lost, corrupted (last byte flipped: the checksum fails) or truncated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hilbot.hal.feetech.protocol import (
    BROADCAST_ID,
    DecodeError,
    Instruction,
    InstructionPacket,
    StatusPacket,
    encode_status,
    parse_sync_read,
    parse_sync_write,
)
from hilbot.hal.feetech.tables import FeetechRegister
from hilbot.sim.faults import FaultTable, glitch_read
from hilbot.sim.feetech_servo import FeetechServo
from hilbot.sim.pty_server import Reply, faulted_reply, online

Ins = Instruction


class FeetechInstructionHandler:
    """Executes instructions on the servos of one Feetech bus and plans their replies.

    Args:
        servos: every servo on the bus.
        faults: injected faults, by servo id.
        host_baudrate: the bit rate the host talks at now; servos set to another
            rate do not hear it, and none hears an unknown rate (``None``).
    """

    def __init__(
        self,
        servos: Sequence[FeetechServo],
        faults: FaultTable,
        host_baudrate: Callable[[], int | None],
    ) -> None:
        self.servos = list(servos)
        self.faults = faults
        self._host_baudrate = host_baudrate
        self.instructions = 0  # instructions received
        self.corrupt = 0  # frames with a bad checksum
        self.ignored = 0  # instructions no servo could act on (unknown, malformed)

    def online(self) -> dict[int, FeetechServo]:
        """Servos that hear the host now, by id: present, and at the host's bit rate."""
        return online(self.servos, self.faults, self._host_baudrate())

    def handle(self, item: InstructionPacket | DecodeError, now: float) -> list[Reply]:
        """Execute one instruction (or rejected frame); return the replies."""
        if isinstance(item, DecodeError):
            self.corrupt += 1
            return []
        self.instructions += 1
        if item.instruction == Ins.REBOOT:
            return self._reboot(item)
        online = self.online()
        if item.instruction == Ins.SYNC_READ:
            return self._sync_read(item, online, now)
        if item.instruction == Ins.SYNC_WRITE:
            self._sync_write(item, online, now)
            return []
        if item.id == BROADCAST_ID:
            targets = [online[i] for i in sorted(online)]
        else:
            targets = [online[item.id]] if item.id in online else []
        replies = []
        for servo in targets:
            reply = self._unicast(item, servo, now)
            if reply is not None and (item.id != BROADCAST_ID or item.instruction == Ins.PING):
                replies.append(reply)
        return replies

    # ------------------------------------------------------------------ replies

    def _read(
        self, servo: FeetechServo, address: int, length: int, now: float
    ) -> tuple[int, bytes]:
        """``servo.read``, its Present Position moved by an injected glitch (``glitch_read``)."""
        error, data = servo.read(address, length, now)
        return error, glitch_read(
            self.faults.get(servo.id), servo.spec, FeetechRegister.PRESENT_POSITION, address, data
        )

    def _deliver(self, servo_id: int, error: int, params: bytes, delay: float) -> Reply | None:
        faults = self.faults.get(servo_id)
        answer_id = servo_id if faults is None or faults.reply_id is None else faults.reply_id

        def encode(keep: int | None) -> bytes:
            return encode_status(StatusPacket(answer_id, error, params[:keep]))

        return faulted_reply(faults, delay, encode)

    def _unicast(self, item: InstructionPacket, servo: FeetechServo, now: float) -> Reply | None:
        # The reply follows the settings the instruction found (a write of ID or of
        # Response Status Level takes effect afterwards).
        servo_id, level, delay = servo.id, servo.status_return_level, servo.return_delay
        result = self._execute(item, servo, now)
        if result is None:
            self.ignored += 1
            return None
        error, params, needs_level = result
        if level < needs_level:
            return None
        return self._deliver(servo_id, error, params, delay)

    def _execute(
        self, item: InstructionPacket, servo: FeetechServo, now: float
    ) -> tuple[int, bytes, int] | None:
        """``(ERROR, data, level)`` of PING/READ/WRITE/REG WRITE/ACTION/RESET, or ``None``.

        ``level`` is the Response Status Level from which the servo answers.
        """
        inst, p = item.instruction, item.params
        if inst == Ins.PING:
            return servo.error_byte(), b"", 0
        if inst == Ins.READ:
            if len(p) != 2:
                return None
            error, data = self._read(servo, p[0], p[1], now)
            return error, data, 0
        if inst in (Ins.WRITE, Ins.REG_WRITE):
            if len(p) < 2:
                return None
            write = servo.write if inst == Ins.WRITE else servo.reg_write
            return write(p[0], p[1:], now), b"", 1
        if inst == Ins.ACTION:
            return servo.action(now), b"", 1
        if inst == Ins.FACTORY_RESET:
            error = servo.error_byte()
            servo.factory_reset()
            return error, b"", 1
        return None

    # ------------------------------------------------------------------ group and reboot

    def _sync_read(
        self, item: InstructionPacket, online: dict[int, FeetechServo], now: float
    ) -> list[Reply]:
        if item.id != BROADCAST_ID:
            return []
        try:
            request = parse_sync_read(item.params)
        except ValueError:
            self.ignored += 1
            return []
        replies = []
        for servo_id in request.ids:
            servo = online.get(servo_id)
            if servo is None or not servo.spec.has_sync_read:
                continue
            error, data = self._read(servo, request.address, request.length, now)
            reply = self._deliver(servo_id, error, data, servo.return_delay)
            if reply is not None:
                replies.append(reply)
        return replies

    def _sync_write(
        self, item: InstructionPacket, online: dict[int, FeetechServo], now: float
    ) -> None:
        try:
            request = parse_sync_write(item.params)
        except ValueError:
            self.ignored += 1
            return
        for servo_id, data in request.entries:
            servo = online.get(servo_id)
            if servo is not None:
                servo.write(request.address, data, now)

    def _reboot(self, item: InstructionPacket) -> list[Reply]:
        # A browned-out servo is silent but still hears a reboot, which revives it.
        rate = self._host_baudrate()
        replies = []
        for servo in self.servos:
            if item.id not in (BROADCAST_ID, servo.id):
                continue
            faults = self.faults.get(servo.id)
            alive = faults.rebooted() if faults is not None else True
            if not alive or rate is None or servo.baudrate != rate:
                continue
            if item.id != BROADCAST_ID and servo.status_return_level >= 1:
                reply = self._deliver(servo.id, servo.error_byte(), b"", servo.return_delay)
                if reply is not None:
                    replies.append(reply)
            servo.reboot()
        return replies
