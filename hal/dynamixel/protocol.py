"""Sans-I/O codec for Dynamixel Protocol 1.0 and 2.0: bytes in, packets out.

Protocol 2.0 (https://emanual.robotis.com/docs/en/dxl/protocol2/)::

    FF FF FD 00 | ID | LEN_L LEN_H | INST | PARAMS ... | CRC_L CRC_H

``LEN`` counts INST, the (stuffed) parameters and the CRC. A status packet's
INST is 0x55 followed by the ERR byte. The CRC is CRC-16 with polynomial
0x8005, initial value 0, no reflection, over every byte before it. Wherever the
payload (INST onwards) contains ``FF FF FD``, the sender appends ``FD`` so that a
header never appears inside a packet ("byte stuffing").

Protocol 1.0 (https://emanual.robotis.com/docs/en/dxl/protocol1/)::

    FF FF | ID | LEN | INST or ERR | PARAMS ... | CHECKSUM

``LEN`` is the parameter count + 2; the checksum is ``~(ID + LEN + INST +
sum(PARAMS)) & 0xFF``. There is no stuffing.

Nothing here does I/O: :func:`encode_instruction` and :func:`encode_status`
build bytes, and :class:`PacketDecoder` turns a byte stream (in any chunking)
into packets, skipping garbage and reporting corrupt packets as
:class:`DecodeError` values so that a bus server can count them.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hilbot.hal.backend import HardwareErrorFlags, bits_from_flags, flags_from_bits

__all__ = [
    "ALERT_BIT",
    "BROADCAST_ID",
    "CRC_TABLE",
    "HEADER_1",
    "HEADER_2",
    "MAX_ID",
    "MAX_LENGTH_1",
    "MAX_LENGTH_2",
    "PROTOCOL_1_INSTRUCTIONS",
    "DecodeError",
    "DecodeErrorReason",
    "FastStatusPart",
    "Instruction",
    "InstructionPacket",
    "Packet",
    "PacketDecoder",
    "PacketKind",
    "Protocol1Error",
    "StatusErrorCode",
    "StatusPacket",
    "bulk_read_params",
    "bulk_write_params",
    "checksum",
    "crc16",
    "decode_all",
    "encode",
    "encode_fast_status",
    "encode_instruction",
    "encode_status",
    "fast_status_prefix",
    "hardware_flags_from_protocol1",
    "hardware_flags_to_protocol1",
    "read_params",
    "split_fast_status",
    "stuff",
    "sync_read_params",
    "sync_write_params",
    "unstuff",
    "write_params",
]


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


def _le(value: int, size: int) -> bytes:
    return (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def read_params(protocol: int, address: int, length: int) -> bytes:
    """Parameters of a READ: address and length (1 byte each in 1.0, 2 in 2.0)."""
    size = 1 if protocol == 1 else 2
    return _le(address, size) + _le(length, size)


def write_params(protocol: int, address: int, data: bytes) -> bytes:
    """Parameters of a WRITE / REG_WRITE: address, then the data bytes."""
    return _le(address, 1 if protocol == 1 else 2) + data


def sync_read_params(address: int, length: int, ids: Iterable[int]) -> bytes:
    """Parameters of a (Fast) Sync Read (Protocol 2.0 only)."""
    return _le(address, 2) + _le(length, 2) + bytes(ids)


def sync_write_params(protocol: int, address: int, length: int, data: Mapping[int, bytes]) -> bytes:
    """Parameters of a Sync Write: address, length, then ``id data`` per servo."""
    size = 1 if protocol == 1 else 2
    out = bytearray(_le(address, size) + _le(length, size))
    for servo_id, chunk in data.items():
        if len(chunk) != length:
            raise ValueError(f"sync write to id {servo_id}: {len(chunk)} bytes, expected {length}")
        out += bytes((servo_id,)) + chunk
    return bytes(out)


def bulk_read_params(protocol: int, reads: Sequence[tuple[int, int, int]]) -> bytes:
    """Parameters of a (Fast) Bulk Read from ``(id, address, length)`` triples.

    Protocol 1.0 (MX only) puts a 0x00 first and orders each triple as
    ``length id address``; 2.0 uses ``id addr_l addr_h len_l len_h``.
    """
    if protocol == 1:
        out = bytearray(b"\x00")
        for servo_id, address, length in reads:
            out += bytes((length, servo_id, address))
        return bytes(out)
    out = bytearray()
    for servo_id, address, length in reads:
        out += bytes((servo_id,)) + _le(address, 2) + _le(length, 2)
    return bytes(out)


def bulk_write_params(writes: Sequence[tuple[int, int, bytes]]) -> bytes:
    """Parameters of a Bulk Write (Protocol 2.0) from ``(id, address, data)`` triples."""
    out = bytearray()
    for servo_id, address, data in writes:
        out += bytes((servo_id,)) + _le(address, 2) + _le(len(data), 2) + data
    return bytes(out)


class _Skip(enum.Enum):
    """Marker for a frame the decoder consumed without producing anything."""

    SKIP = 0


_SKIP = _Skip.SKIP


class PacketDecoder:
    """Frames packets of one protocol and kind out of a byte stream.

    Feed it bytes as they arrive, in any chunking. Bytes that cannot start a
    packet are skipped (counted in :attr:`discarded`); a complete frame with a
    bad CRC/checksum is returned as a :class:`DecodeError` and dropped whole, as
    a servo drops it. Valid frames of the other kind (a status packet on an
    instruction stream) are skipped.
    """

    def __init__(self, protocol: int, kind: PacketKind) -> None:
        if protocol not in (1, 2):
            raise ValueError(f"protocol must be 1 or 2, got {protocol!r}")
        self.protocol = protocol
        self.kind = kind
        self.discarded = 0
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        """Bytes buffered towards an incomplete packet."""
        return len(self._buf)

    def reset(self) -> None:
        """Drop buffered bytes (after a timeout, say)."""
        self._buf.clear()

    def take_pending(self) -> bytes:
        """Return and drop the bytes buffered towards an incomplete packet."""
        data = bytes(self._buf)
        self._buf.clear()
        return data

    def feed(self, data: bytes) -> list[Packet | DecodeError]:
        """Add bytes; return every packet (or rejected frame) completed by them."""
        self._buf += data
        out: list[Packet | DecodeError] = []
        frame = self._frame_2 if self.protocol == 2 else self._frame_1
        while True:
            item = frame()
            if item is None:
                return out
            if item is not _SKIP:
                out.append(item)

    def _sync(self, header: bytes) -> bool:
        """Drop bytes before the first possible header; True when a header starts the buffer."""
        idx = self._buf.find(header)
        if idx < 0:
            keep = min(len(header) - 1, len(self._buf))
            # keep a tail that may be the start of a header split across chunks
            while keep and not header.startswith(self._buf[len(self._buf) - keep :]):
                keep -= 1
            drop = len(self._buf) - keep
            self.discarded += drop
            del self._buf[:drop]
            return False
        self.discarded += idx
        del self._buf[:idx]
        return True

    def _drop(self, n: int) -> _Skip:
        self.discarded += n
        del self._buf[:n]
        return _SKIP

    def _frame_2(self) -> Packet | DecodeError | _Skip | None:
        if not self._sync(HEADER_2) or len(self._buf) < 7:
            return None
        length = self._buf[5] | (self._buf[6] << 8)
        minimum = 4 if self.kind is PacketKind.STATUS else 3
        if self._buf[4] > BROADCAST_ID or not minimum <= length <= MAX_LENGTH_2:
            return self._drop(1)
        total = 7 + length
        if len(self._buf) < total:
            return None
        raw = bytes(self._buf[:total])
        del self._buf[:total]
        if crc16(raw[:-2]) != int.from_bytes(raw[-2:], "little"):
            return DecodeError(DecodeErrorReason.CRC, raw, raw[4])
        return self._packet_2(raw)

    def _packet_2(self, raw: bytes) -> Packet | DecodeError | _Skip:
        packet_id, inst = raw[4], raw[7]
        if self.kind is PacketKind.STATUS:
            if inst != Instruction.STATUS:
                return _SKIP
            body = raw[8:-2] if packet_id == BROADCAST_ID else unstuff(raw[8:-2])
            return StatusPacket(2, packet_id, body[0], bytes(body[1:]))
        if inst == Instruction.STATUS:
            return _SKIP
        try:
            instruction = Instruction(inst)
        except ValueError:
            return DecodeError(DecodeErrorReason.MALFORMED, raw, packet_id)
        return InstructionPacket(2, packet_id, instruction, unstuff(raw[8:-2]))

    def _frame_1(self) -> Packet | DecodeError | _Skip | None:
        if not self._sync(HEADER_1) or len(self._buf) < 4:
            return None
        if self._buf[2] == 0xFF:  # FF FF FF: the first FF was noise
            return self._drop(1)
        length = self._buf[3]
        if length < 2:
            return self._drop(1)
        total = 4 + length
        if len(self._buf) < total:
            return None
        raw = bytes(self._buf[:total])
        del self._buf[:total]
        if checksum(raw[2:-1]) != raw[-1]:
            return DecodeError(DecodeErrorReason.CHECKSUM, raw, raw[2])
        packet_id, code, params = raw[2], raw[4], raw[5:-1]
        if self.kind is PacketKind.STATUS:
            return StatusPacket(1, packet_id, code, params)
        try:
            instruction = Instruction(code)
            return InstructionPacket(1, packet_id, instruction, params)
        except ValueError:
            return DecodeError(DecodeErrorReason.MALFORMED, raw, packet_id)


def decode_all(protocol: int, kind: PacketKind, data: bytes) -> list[Packet | DecodeError]:
    """Decode every packet in ``data`` (a convenience for tests and one-shot parsing)."""
    return PacketDecoder(protocol, kind).feed(data)


@dataclass(frozen=True, slots=True)
class FastStatusPart:
    """One servo's slice of a fast-read reply: its id, ERR byte and data."""

    id: int
    error: int
    data: bytes


def encode_fast_status(
    parts: Sequence[FastStatusPart], *, announced: Sequence[int] | None = None
) -> bytes:
    """Encode the single reply to a Fast Sync Read / Fast Bulk Read (Protocol 2.0 only).

    Layout (one packet from the broadcast id)::

        FF FF FD 00 FE LEN_L LEN_H 55 | ERR1 ID1 DATA1 CRC1 | ERR2 ID2 DATA2 CRC2 | ...

    Each servo appends its slice in turn; each slice's CRC is the running CRC of
    every byte of the packet before it, so the last slice's CRC is the packet CRC.

    Args:
        parts: the slices sent.
        announced: data lengths of every slice the instruction asked for, when fewer
            were sent (a servo in the chain did not answer): LEN then announces the
            full reply, as the first servo wrote it, and the bytes stop short.
    """
    if not parts:
        raise ValueError("a fast-read reply needs at least one servo")
    lengths = [len(p.data) for p in parts] if announced is None else list(announced)
    if len(lengths) < len(parts):
        raise ValueError("announced lists fewer slices than were sent")
    length = 1 + sum(n + 4 for n in lengths)
    out = bytearray(
        HEADER_2 + bytes((BROADCAST_ID, length & 0xFF, length >> 8, Instruction.STATUS))
    )
    for part in parts:
        if not 0 <= part.id <= MAX_ID:
            raise ValueError(f"fast-read slice id must be 0..252, got {part.id!r}")
        out += bytes((part.error, part.id)) + part.data
        out += crc16(bytes(out)).to_bytes(2, "little")
    return bytes(out)


def split_fast_status(packet: StatusPacket, lengths: Sequence[int]) -> list[FastStatusPart]:
    """Split a decoded fast-read reply into per-servo slices.

    Args:
        packet: the status packet from the broadcast id, as :class:`PacketDecoder`
            returns it (its ``error`` is the first slice's ERR byte).
        lengths: the data length of each slice, in reply order.

    Raises:
        ValueError: the reply's size does not match ``lengths``.
    """
    raw = bytes((packet.error,)) + packet.params
    expected = sum(n + 4 for n in lengths) - 2  # the last CRC is the packet CRC, not in params
    if packet.protocol != 2 or packet.id != BROADCAST_ID or len(raw) != expected:
        raise ValueError(
            f"not a fast-read reply for {len(lengths)} servos: "
            f"{len(raw)} bytes, expected {expected}"
        )
    parts = []
    at = 0
    for n in lengths:
        parts.append(FastStatusPart(id=raw[at + 1], error=raw[at], data=raw[at + 2 : at + 2 + n]))
        at += n + 4
    return parts


def fast_status_prefix(raw: bytes, lengths: Sequence[int]) -> list[FastStatusPart]:
    """Recover the complete, CRC-valid leading slices of a truncated fast-read reply.

    When a servo in the middle of a fast read does not answer, the servos after it
    wait in vain and the reply stops short of its announced length. Because each
    slice ends with the running CRC of the packet so far, the slices before the gap
    can still be verified and used.

    Args:
        raw: bytes received, starting at the header.
        lengths: the data length of each expected slice, in request order.
    """
    at = 8
    if (
        len(raw) < at
        or raw[:4] != HEADER_2
        or raw[4] != BROADCAST_ID
        or raw[7] != Instruction.STATUS
    ):
        return []
    parts = []
    for n in lengths:
        end = at + 2 + n + 2
        if end > len(raw) or crc16(raw[: end - 2]) != int.from_bytes(raw[end - 2 : end], "little"):
            break
        parts.append(
            FastStatusPart(id=raw[at + 1], error=raw[at], data=bytes(raw[at + 2 : end - 2]))
        )
        at = end
    return parts
