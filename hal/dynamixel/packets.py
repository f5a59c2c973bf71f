"""Dynamixel packets as values: instructions, status, error bytes, CRC, stuffing, framing.

See :mod:`hilbot.hal.dynamixel.protocol` for the wire format.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.error_bits import bits_from_flags, flags_from_bits

BROADCAST_ID = 0xFE
MAX_ID = 0xFC  # 253 (0xFD) is reserved in Protocol 2.0

HEADER_2 = b"\xff\xff\xfd\x00"
HEADER_1 = b"\xff\xff"
_STUFF_PATTERN = b"\xff\xff\xfd"

#: Largest LEN accepted by the decoder; the SDK's RXPACKET_MAX_LEN is 1024 bytes in all.
MAX_LENGTH_2 = 1024
#: Protocol 1.0's LEN is one byte.
MAX_LENGTH_1 = 255


class Instruction(enum.IntEnum):
    """Instruction byte values (Protocol 2.0 numbering; 1.0 uses the subset it has)."""

    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    FACTORY_RESET = 0x06
    REBOOT = 0x08
    CLEAR = 0x10
    STATUS = 0x55
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83
    FAST_SYNC_READ = 0x8A
    BULK_READ = 0x92
    BULK_WRITE = 0x93
    FAST_BULK_READ = 0x9A


#: Instructions Protocol 1.0 has (MX-1.0 adds bulk read; sync read exists on none).
PROTOCOL_1_INSTRUCTIONS = frozenset(
    {
        Instruction.PING,
        Instruction.READ,
        Instruction.WRITE,
        Instruction.REG_WRITE,
        Instruction.ACTION,
        Instruction.FACTORY_RESET,
        Instruction.REBOOT,
        Instruction.SYNC_WRITE,
        Instruction.BULK_READ,
    }
)


class PacketKind(enum.Enum):
    """Which side of the conversation a decoder listens to."""

    INSTRUCTION = "instruction"  # what a servo (or the virtual bus) receives
    STATUS = "status"  # what the host receives


class StatusErrorCode(enum.IntEnum):
    """Protocol 2.0 status ERR byte, bits 0..6 (bit 7 is the hardware-error alert)."""

    NONE = 0
    RESULT_FAIL = 1
    INSTRUCTION_ERROR = 2
    CRC_ERROR = 3
    DATA_RANGE_ERROR = 4
    DATA_LENGTH_ERROR = 5
    DATA_LIMIT_ERROR = 6
    ACCESS_ERROR = 7


#: Protocol 2.0 ERR bit 7: the servo's Hardware Error Status register is non-zero.
ALERT_BIT = 0x80


class Protocol1Error(enum.IntFlag):
    """Protocol 1.0 status ERR bits (https://emanual.robotis.com/docs/en/dxl/protocol1/#status-packetreturn-packet)."""

    NONE = 0
    INPUT_VOLTAGE = 1 << 0
    ANGLE_LIMIT = 1 << 1
    OVERHEATING = 1 << 2
    RANGE = 1 << 3
    CHECKSUM = 1 << 4
    OVERLOAD = 1 << 5
    INSTRUCTION = 1 << 6


_P1_HARDWARE = {
    Protocol1Error.INPUT_VOLTAGE: HardwareErrorFlags.INPUT_VOLTAGE,
    Protocol1Error.OVERHEATING: HardwareErrorFlags.OVERHEATING,
    Protocol1Error.OVERLOAD: HardwareErrorFlags.OVERLOAD,
}


def hardware_flags_from_protocol1(error: int) -> HardwareErrorFlags:
    """Translate the hardware bits of a Protocol 1.0 ERR byte to :class:`HardwareErrorFlags`."""
    return flags_from_bits(error, _P1_HARDWARE)


def hardware_flags_to_protocol1(flags: HardwareErrorFlags) -> int:
    """Inverse of :func:`hardware_flags_from_protocol1` (flags with no 1.0 bit are dropped)."""
    return bits_from_flags(flags, _P1_HARDWARE)


class DecodeErrorReason(enum.Enum):
    """Why a framed packet was rejected."""

    CRC = "crc"  # Protocol 2.0 CRC mismatch
    CHECKSUM = "checksum"  # Protocol 1.0 checksum mismatch
    MALFORMED = "malformed"  # a valid frame whose content cannot be a packet of this kind


@dataclass(frozen=True, slots=True)
class InstructionPacket:
    """An instruction from the host: ``params`` are unstuffed parameter bytes."""

    protocol: int
    id: int
    instruction: Instruction
    params: bytes = b""

    def __post_init__(self) -> None:
        _check_common(self.protocol, self.id, self.params)
        if self.protocol == 1 and self.instruction not in PROTOCOL_1_INSTRUCTIONS:
            raise ValueError(f"instruction {self.instruction.name} does not exist in Protocol 1.0")


@dataclass(frozen=True, slots=True)
class StatusPacket:
    """A status (reply) packet: ``error`` is the raw ERR byte, ``params`` the data bytes."""

    protocol: int
    id: int
    error: int = 0
    params: bytes = b""

    def __post_init__(self) -> None:
        _check_common(self.protocol, self.id, self.params)
        if not 0 <= self.error <= 0xFF:
            raise ValueError(f"status error byte must be 0..255, got {self.error!r}")

    @property
    def alert(self) -> bool:
        """True when the servo reports a hardware error (2.0 alert bit, 1.0 hardware bits)."""
        if self.protocol == 2:
            return bool(self.error & ALERT_BIT)
        return bool(hardware_flags_from_protocol1(self.error))

    @property
    def error_code(self) -> StatusErrorCode | Protocol1Error:
        """The command part of ERR: a 2.0 error code, or the 1.0 bits that are not hardware."""
        if self.protocol == 2:
            code = self.error & 0x7F
            try:
                return StatusErrorCode(code)
            except ValueError:
                return StatusErrorCode.RESULT_FAIL
        hardware = hardware_flags_to_protocol1(hardware_flags_from_protocol1(self.error))
        return Protocol1Error(self.error & ~hardware & 0x7F)


@dataclass(frozen=True, slots=True)
class DecodeError:
    """A frame that was found but rejected; ``raw`` is the frame as received."""

    reason: DecodeErrorReason
    raw: bytes
    id: int | None = None


Packet = InstructionPacket | StatusPacket


def _check_common(protocol: int, packet_id: int, params: bytes) -> None:
    if protocol not in (1, 2):
        raise ValueError(f"protocol must be 1 or 2, got {protocol!r}")
    if not 0 <= packet_id <= BROADCAST_ID or packet_id == 0xFD:
        raise ValueError(f"packet id must be 0..252 or 254 (broadcast), got {packet_id!r}")
    if not isinstance(params, bytes):
        raise TypeError(f"params must be bytes, got {type(params).__name__}")
    limit = MAX_LENGTH_1 - 2 if protocol == 1 else MAX_LENGTH_2 - 4
    if len(params) > limit:
        raise ValueError(f"{len(params)} parameter bytes exceed the protocol {protocol} limit")


# CRC-16 table for polynomial 0x8005, as printed in the e-manual
# (https://emanual.robotis.com/docs/en/dxl/crc/); generated rather than typed in.
def _crc_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


CRC_TABLE = _crc_table()


def _crc_pair_table() -> list[int]:
    """``CRC_TABLE`` applied twice: entry ``w`` is the CRC update for the 16-bit word ``w``.

    A 16-bit CRC fed two bytes ``b0 b1`` from state ``crc`` becomes
    ``table[crc ^ (b0 << 8 | b1)]``, so the per-byte Python loop runs half as often
    (built with numpy in about a millisecond; 65536 entries).
    """
    byte = np.array(CRC_TABLE, dtype=np.uint32)
    word = np.arange(1 << 16, dtype=np.uint32)
    high = byte[word >> 8]
    pair: list[int] = (((high << 8) ^ byte[(high >> 8) ^ (word & 0xFF)]) & 0xFFFF).tolist()
    return pair


_CRC_PAIRS = _crc_pair_table()


def crc16(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-16/BUYPASS (poly 0x8005, init 0) of ``data``, continuing from ``crc``."""
    n = len(data)
    start = n & 1
    if start:
        crc = ((crc << 8) ^ CRC_TABLE[((crc >> 8) ^ data[0]) & 0xFF]) & 0xFFFF
    words = _WORDS.get(n)
    if words is None:  # one compiled format per length (a cycle uses two or three)
        words = _WORDS[n] = struct.Struct(f">{n >> 1}H").unpack_from
    table = _CRC_PAIRS
    for word in words(data, start):
        crc = table[crc ^ word]
    return crc


#: ``unpack_from`` of the 16-bit big-endian words of a ``crc16`` input, by input length.
_WORDS: dict[int, Callable[..., tuple[int, ...]]] = {}


def checksum(body: bytes) -> int:
    """Protocol 1.0 checksum of ``ID LEN INST/ERR PARAMS``."""
    return (~sum(body)) & 0xFF


def stuff(payload: bytes) -> bytes:
    """Insert ``FD`` after every ``FF FF FD`` in a Protocol 2.0 payload."""
    if _STUFF_PATTERN not in payload:
        return payload
    return payload.replace(_STUFF_PATTERN, _STUFF_PATTERN + b"\xfd")


def unstuff(payload: bytes) -> bytes:
    """Remove the ``FD`` that :func:`stuff` inserted."""
    if _STUFF_PATTERN not in payload:
        return payload
    return payload.replace(_STUFF_PATTERN + b"\xfd", _STUFF_PATTERN)


def _frame_2(packet_id: int, payload: bytes) -> bytes:
    length = len(payload) + 2
    head = HEADER_2 + bytes((packet_id, length & 0xFF, length >> 8))
    body = head + payload
    return body + crc16(body).to_bytes(2, "little")


def _frame_1(packet_id: int, payload: bytes) -> bytes:
    body = bytes((packet_id, len(payload) + 1)) + payload
    return HEADER_1 + body + bytes((checksum(body),))


def encode_instruction(packet: InstructionPacket) -> bytes:
    """Bytes on the wire for an instruction packet."""
    payload = bytes((packet.instruction,)) + packet.params
    if packet.protocol == 1:
        return _frame_1(packet.id, payload)
    return _frame_2(packet.id, stuff(payload))


def encode_status(packet: StatusPacket) -> bytes:
    """Bytes on the wire for a status packet.

    A Protocol 2.0 status from the broadcast id is a fast-read reply (see
    :func:`encode_fast_status`): it is not stuffed, because every servo writes
    its slice of it and the length is fixed in advance (the SDK does not unstuff it).
    """
    if packet.protocol == 1:
        return _frame_1(packet.id, bytes((packet.error,)) + packet.params)
    payload = bytes((Instruction.STATUS, packet.error)) + packet.params
    if packet.id != BROADCAST_ID:
        payload = stuff(payload)
    return _frame_2(packet.id, payload)


def encode(packet: Packet) -> bytes:
    """Encode either kind of packet."""
    if isinstance(packet, InstructionPacket):
        return encode_instruction(packet)
    return encode_status(packet)
