"""Parameter bytes of each instruction, for both protocol versions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


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
