"""Feetech SCS/STS packet codec, sans-I/O: bytes in, packets out.

The protocol is Feetech's "FT-SCS" (communication protocol user manual; the vendor
SDK ``scservo_sdk``): close to Dynamixel Protocol 1.0. A packet is::

    0xFF 0xFF  ID  LENGTH  INSTRUCTION|ERROR  PARAM 1 ... PARAM N  CHECKSUM

with ``LENGTH = N + 2`` and ``CHECKSUM = ~(ID + LENGTH + INSTRUCTION + PARAMS) & 0xFF``.
Instruction packets carry an instruction, status packets the servo's status byte
(:class:`StatusError`). Broadcast id 0xFE reaches every servo; none answers it
except a ping. Sync read (0x82, STS series) is answered by one status packet per
listed servo, in list order; sync write (0x83) by none.

Nothing here does I/O: :func:`encode_instruction` and :func:`encode_status` build
bytes, :class:`PacketDecoder` turns a byte stream into packets and
:class:`DecodeError` items (a frame whose checksum fails), resynchronising on the
next header as the SDK does.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hilbot.hal.backend import HardwareErrorFlags, bits_from_flags, flags_from_bits

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
MAX_ID = 0xFD  # ids 0 ~ 253 (memory table, ID register)
#: Longest packet the vendor SDK sends or accepts (``TXPACKET_MAX_LEN``).
MAX_PACKET = 250
#: Bytes of a packet around its parameters: header 2, id, length, instruction, checksum.
OVERHEAD = 6


class Instruction(enum.IntEnum):
    """Instruction codes (protocol manual 1.3; FTServo ``INST.h``)."""

    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    #: The manual's "RESET: reset the control table to factory values" (FTServo: RECOVERY).
    FACTORY_RESET = 0x06
    #: Restart the servo (FTServo ``INST_RESET``; newer firmware).
    REBOOT = 0x0A
    #: Set the present position as the middle (FTServo ``INST_CAL`` / ``INST_OFSCAL``).
    CALIBRATE_OFFSET = 0x0B
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83


class StatusError(enum.IntFlag):
    """Bits of a status packet's ERROR byte and of the Status register (65).

    STS memory table, "Servo Status": bit 0 voltage, 1 magnetic encoder (angle
    sensor), 2 temperature, 3 current, 5 load; SDK ``ERRBIT_*``. SCS servos have no
    angle-sensor or current bit.
    """

    NONE = 0
    VOLTAGE = 1 << 0
    ANGLE_SENSOR = 1 << 1
    OVERHEAT = 1 << 2
    OVERCURRENT = 1 << 3
    OVERLOAD = 1 << 5

    def describe(self) -> str:
        """Human-readable list of the set bits, e.g. ``"overload, overheat"``."""
        names = [str(f.name).lower().replace("_", " ") for f in StatusError if f and f in self]
        return ", ".join(names) if names else "none"


#: Feetech status bit -> the HAL's common hardware-error flag. Over-current has no
#: bit of its own there: Electrical Shock is Dynamixel's bit for a fault in the drive
#: circuit, the nearest meaning; ``StatusError`` keeps the exact bit.
_TO_HARDWARE = {
    StatusError.VOLTAGE: HardwareErrorFlags.INPUT_VOLTAGE,
    StatusError.ANGLE_SENSOR: HardwareErrorFlags.MOTOR_ENCODER,
    StatusError.OVERHEAT: HardwareErrorFlags.OVERHEATING,
    StatusError.OVERCURRENT: HardwareErrorFlags.ELECTRICAL_SHOCK,
    StatusError.OVERLOAD: HardwareErrorFlags.OVERLOAD,
}


def hardware_flags(error: int) -> HardwareErrorFlags:
    """The common hardware-error flags of a Feetech ERROR byte (unknown bits dropped)."""
    return flags_from_bits(error, _TO_HARDWARE)


def status_error(flags: HardwareErrorFlags) -> StatusError:
    """The Feetech ERROR bits that stand for the common ``flags``."""
    return StatusError(bits_from_flags(flags, _TO_HARDWARE))


@dataclass(frozen=True, slots=True)
class InstructionPacket:
    """A packet from the host: ``id``, ``instruction`` and its parameter bytes."""

    id: int
    instruction: int
    params: bytes = b""


@dataclass(frozen=True, slots=True)
class StatusPacket:
    """A servo's reply: its ``id``, the ERROR byte and the data (for a read)."""

    id: int
    error: int
    params: bytes = b""

    @property
    def flags(self) -> StatusError:
        """The ERROR byte as :class:`StatusError` bits."""
        return StatusError(self.error & 0xFF)


class DecodeErrorReason(enum.Enum):
    """Why a frame was rejected."""

    CHECKSUM = "checksum"


@dataclass(frozen=True, slots=True)
class DecodeError:
    """A frame that was framed (header, id, length) but failed its checksum."""

    reason: DecodeErrorReason
    id: int
    raw: bytes


def checksum(body: bytes | bytearray) -> int:
    """``~(sum of body) & 0xFF``, over id, length, instruction/error and params."""
    return ~sum(body) & 0xFF


def _frame(packet_id: int, code: int, params: bytes) -> bytes:
    if not 0 <= packet_id <= BROADCAST_ID:
        raise ValueError(f"packet id must be 0 ~ {BROADCAST_ID}, got {packet_id}")
    if not 0 <= code <= 0xFF:
        raise ValueError(f"instruction/error must be one byte, got {code}")
    if len(params) + OVERHEAD > MAX_PACKET:
        raise ValueError(f"packet of {len(params) + OVERHEAD} bytes is longer than {MAX_PACKET}")
    body = bytes((packet_id, len(params) + 2, code)) + params
    return HEADER + body + bytes((checksum(body),))


def encode_instruction(packet: InstructionPacket) -> bytes:
    """The bytes of an instruction packet."""
    return _frame(packet.id, packet.instruction, bytes(packet.params))


def encode_status(packet: StatusPacket) -> bytes:
    """The bytes of a status packet."""
    return _frame(packet.id, packet.error, bytes(packet.params))


# ---------------------------------------------------------------------- builders


def _byte(name: str, value: int) -> int:
    if not 0 <= value <= 0xFF:
        raise ValueError(f"{name} must be 0 ~ 255, got {value}")
    return value


def ping(servo_id: int) -> InstructionPacket:
    """PING ``servo_id``; the servo answers an empty status packet."""
    return InstructionPacket(servo_id, Instruction.PING)


def read(servo_id: int, address: int, length: int) -> InstructionPacket:
    """READ ``length`` bytes at ``address``."""
    return InstructionPacket(
        servo_id, Instruction.READ, bytes((_byte("address", address), _byte("length", length)))
    )


def write(servo_id: int, address: int, data: bytes) -> InstructionPacket:
    """WRITE ``data`` at ``address``."""
    if not data:
        raise ValueError("a write needs at least one data byte")
    return InstructionPacket(
        servo_id, Instruction.WRITE, bytes((_byte("address", address),)) + data
    )


def reg_write(servo_id: int, address: int, data: bytes) -> InstructionPacket:
    """REG WRITE: like WRITE, applied at the next ACTION."""
    packet = write(servo_id, address, data)
    return InstructionPacket(servo_id, Instruction.REG_WRITE, packet.params)


def action(servo_id: int = BROADCAST_ID) -> InstructionPacket:
    """ACTION: run the registered writes (usually broadcast)."""
    return InstructionPacket(servo_id, Instruction.ACTION)


def factory_reset(servo_id: int) -> InstructionPacket:
    """Reset the memory table to factory values (instruction 0x06)."""
    return InstructionPacket(servo_id, Instruction.FACTORY_RESET)


def reboot(servo_id: int) -> InstructionPacket:
    """Restart the servo (instruction 0x0A)."""
    return InstructionPacket(servo_id, Instruction.REBOOT)


def sync_read(address: int, length: int, ids: Sequence[int]) -> InstructionPacket:
    """SYNC READ ``length`` bytes at ``address`` from each of ``ids``, in that order."""
    if not ids:
        raise ValueError("a sync read needs at least one servo id")
    head = bytes((_byte("address", address), _byte("length", length)))
    return InstructionPacket(BROADCAST_ID, Instruction.SYNC_READ, head + bytes(_ids(ids)))


def sync_write(
    address: int, length: int, entries: Iterable[tuple[int, bytes]]
) -> InstructionPacket:
    """SYNC WRITE ``length`` bytes at ``address``: ``(id, data)`` per servo.

    Built once a cycle for the goals, so the checks are inline.
    """
    params = bytearray((_byte("address", address), _byte("length", length)))
    for servo_id, data in entries:
        if len(data) != length:
            raise ValueError(f"servo {servo_id}: {len(data)} data bytes, expected {length}")
        if not 0 <= servo_id <= MAX_ID:
            raise ValueError(f"servo id must be 0 ~ {MAX_ID}, got {servo_id}")
        params.append(servo_id)
        params += data
    if len(params) == 2:
        raise ValueError("a sync write needs at least one servo")
    return InstructionPacket(BROADCAST_ID, Instruction.SYNC_WRITE, bytes(params))


def _ids(ids: Iterable[int]) -> list[int]:
    out = list(ids)
    for servo_id in out:
        if not 0 <= servo_id <= MAX_ID:
            raise ValueError(f"servo id must be 0 ~ {MAX_ID}, got {servo_id}")
    return out


# ---------------------------------------------------------------------- parsers


@dataclass(frozen=True, slots=True)
class SyncRead:
    """The parameters of a SYNC READ."""

    address: int
    length: int
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SyncWrite:
    """The parameters of a SYNC WRITE."""

    address: int
    length: int
    entries: tuple[tuple[int, bytes], ...]


def parse_sync_read(params: bytes) -> SyncRead:
    """Address, length and ids of a SYNC READ; ``ValueError`` when too short."""
    if len(params) < 3:
        raise ValueError(f"sync read parameters: {len(params)} bytes, need at least 3")
    return SyncRead(params[0], params[1], tuple(params[2:]))


def parse_sync_write(params: bytes) -> SyncWrite:
    """Address, length and ``(id, data)`` entries of a SYNC WRITE.

    Raises:
        ValueError: the entries do not fill the parameters exactly.
    """
    if len(params) < 2:
        raise ValueError(f"sync write parameters: {len(params)} bytes, need at least 2")
    address, length = params[0], params[1]
    body = params[2:]
    step = length + 1
    if length == 0 or not body or len(body) % step:
        raise ValueError(
            f"sync write: {len(body)} bytes of entries do not divide into (id + {length} bytes)"
        )
    entries = tuple((body[k], bytes(body[k + 1 : k + step])) for k in range(0, len(body), step))
    return SyncWrite(address, length, entries)


# ---------------------------------------------------------------------- decoder


class PacketKind(enum.Enum):
    """Which side's packets a decoder reads."""

    INSTRUCTION = "instruction"  # what a servo (the virtual bus) reads
    STATUS = "status"  # what the host reads


Decoded = InstructionPacket | StatusPacket | DecodeError


class PacketDecoder:
    """Frames a byte stream into packets.

    ``feed`` takes any chunk of bytes and returns the packets completed by it. A
    frame is ``0xFF 0xFF``, an id other than 0xFF, and a length of at least 2; a
    byte that cannot start one is skipped (resynchronisation). A complete frame
    whose checksum fails is returned as a :class:`DecodeError` and consumed.
    Status frames with an ERROR byte above 0x7F are not status packets (the SDK
    skips them the same way).
    """

    def __init__(self, kind: PacketKind) -> None:
        self.kind = kind
        self._buffer = bytearray()

    @property
    def pending(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buffer)

    def reset(self) -> None:
        """Drop any incomplete frame."""
        self._buffer.clear()

    def feed(self, data: bytes) -> list[Decoded]:
        """Append ``data``; return every packet (or rejected frame) it completes."""
        buf = self._buffer
        buf += data
        out: list[Decoded] = []
        while True:
            start = buf.find(HEADER)
            if start < 0:
                # Keep a trailing 0xFF: it may be the first byte of a header.
                del buf[: len(buf) - 1 if buf.endswith(b"\xff") else len(buf)]
                return out
            del buf[:start]
            # Skip runs of 0xFF so that the id is the first byte after the header.
            while len(buf) > 2 and buf[2] == 0xFF:
                del buf[0]
            if len(buf) < 4:
                return out
            length = buf[3]
            if length < 2 or length + 4 > MAX_PACKET:
                del buf[0]
                continue
            if not self._plausible(buf):
                del buf[0]
                continue
            end = length + 4
            if len(buf) < end:
                return out
            frame = bytes(buf[:end])
            del buf[:end]
            out.append(self._packet(frame))

    def _plausible(self, buf: bytearray) -> bool:
        if self.kind is PacketKind.STATUS:
            if buf[2] > MAX_ID:
                return False
            return len(buf) < 5 or buf[4] <= 0x7F
        return True

    def _packet(self, frame: bytes) -> Decoded:
        if checksum(frame[2:-1]) != frame[-1]:
            return DecodeError(DecodeErrorReason.CHECKSUM, frame[2], frame)
        if self.kind is PacketKind.INSTRUCTION:
            return InstructionPacket(frame[2], frame[4], frame[5:-1])
        return StatusPacket(frame[2], frame[4], frame[5:-1])
