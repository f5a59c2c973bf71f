"""Fast Sync Read / Fast Bulk Read replies: one packet carrying every servo's slice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hilbot.hal.dynamixel.packets import (
    BROADCAST_ID,
    HEADER_2,
    MAX_ID,
    Instruction,
    StatusPacket,
    crc16,
)


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
