"""A streaming decoder: Dynamixel packets out of a byte stream in any chunking."""

from __future__ import annotations

import enum

from hilbot.hal.dynamixel.packets import (
    BROADCAST_ID,
    HEADER_1,
    HEADER_2,
    MAX_LENGTH_2,
    DecodeError,
    DecodeErrorReason,
    Instruction,
    InstructionPacket,
    Packet,
    PacketKind,
    StatusPacket,
    checksum,
    crc16,
    unstuff,
)


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
