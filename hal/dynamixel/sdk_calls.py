"""dynamixel-sdk's single-servo calls, with the checks the SDK leaves out.

The SDK frames packets and checks CRCs well, but indexes the data of a status packet
without checking its length: a reply that is short yet well formed (a stale status
packet, a confused servo; the virtual bus's ``truncate`` fault) makes
``PacketHandler.ping`` raise a raw ``IndexError`` (Protocol 1.0: its internal read of
the model number), or makes ``readTxRx`` return the CRC bytes as data, since it slices
past the parameters. Here a read and a ping check the parameter count the status packet
announces, and any exception the SDK raises while decoding becomes
:class:`~hilbot.hal.errors.MalformedReply`, naming the servo and the instruction.

Every function returns what the SDK would, ``(value, COMM_* result, ERR byte)``, so
:class:`~hilbot.hal.dynamixel.bus.DynamixelBus` keeps one retry loop for all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import dynamixel_sdk as sdk

from hilbot.hal.errors import MalformedReply

T = TypeVar("T")
#: What the SDK raises when it indexes a reply that is shorter than it assumes.
SDK_DECODE_ERRORS = (IndexError, KeyError, TypeError, ValueError)
_PING, _READ = 0x01, 0x02
#: Protocol 2.0 ping reply: model number (2 bytes) and firmware version.
_PING_PARAMS = 3


def guarded(servo_id: int | None, instruction: str, call: Callable[[], T]) -> T:
    """Run an SDK call; an exception it raises decoding a reply becomes ``MalformedReply``."""
    try:
        return call()
    except SDK_DECODE_ERRORS as exc:
        raise MalformedReply(servo_id, instruction, f"{type(exc).__name__}: {exc}") from exc


def status_params(protocol: int, rx: list[int]) -> bytes:
    """The parameters of a status packet the SDK received, as many as its LEN announces."""
    if protocol == 1:  # FF FF ID LEN ERR params.. CHK; LEN = params + 2
        start, count = 5, rx[3] - 2
    else:  # FF FF FD 00 ID LEN_L LEN_H 0x55 ERR params.. CRC_L CRC_H; LEN = params + 4
        start, count = 9, (rx[5] | rx[6] << 8) - 4
    if count < 0 or len(rx) < start + count:
        raise MalformedReply(rx[2 if protocol == 1 else 4], "status", "LEN beyond the packet")
    return bytes(rx[start : start + count])


def read(
    packets: Any, port: Any, protocol: int, servo_id: int, address: int, length: int
) -> tuple[bytes, int, int]:
    """READ ``length`` bytes at ``address``: ``(data, result, ERR)``; data checked in length.

    Raises:
        MalformedReply: the status packet carries another number of bytes than asked.
    """
    if protocol == 1:
        tx = [0] * 8
        tx[2], tx[3], tx[4], tx[5], tx[6] = servo_id, 4, _READ, address, length
    else:
        tx = [0] * 14
        tx[4], tx[5], tx[7] = servo_id, 7, _READ
        tx[8], tx[9], tx[10], tx[11] = address & 0xFF, address >> 8, length & 0xFF, length >> 8
    rx, result, error = guarded(servo_id, "READ", lambda: packets.txRxPacket(port, tx))
    if result != sdk.COMM_SUCCESS:
        return b"", result, error
    data = guarded(servo_id, "READ", lambda: status_params(protocol, rx))
    if len(data) != length:
        raise MalformedReply(
            servo_id, "READ", f"{len(data)} data bytes in the reply to a {length}-byte read"
        )
    return data, result, error


def ping(packets: Any, port: Any, protocol: int, servo_id: int) -> tuple[int, int, int]:
    """PING: ``(model number, result, ERR)``.

    Protocol 1.0 has no model number in its ping reply: it is read (address 0, 2 bytes),
    as the SDK does, but with the length checked.

    Raises:
        MalformedReply: a reply without the model number.
    """
    if protocol == 1:
        tx = [0] * 6
        tx[2], tx[3], tx[4] = servo_id, 2, _PING
    else:
        tx = [0] * 10
        tx[4], tx[5], tx[7] = servo_id, 3, _PING
    rx, result, error = guarded(servo_id, "PING", lambda: packets.txRxPacket(port, tx))
    if result != sdk.COMM_SUCCESS:
        return 0, result, error
    if protocol == 1:
        try:
            data, result, error = read(packets, port, 1, servo_id, 0, 2)
        except MalformedReply as exc:
            raise MalformedReply(servo_id, "PING", exc.detail) from exc
        if result != sdk.COMM_SUCCESS:
            return 0, result, error
    else:
        data = guarded(servo_id, "PING", lambda: status_params(2, rx))
        if len(data) != _PING_PARAMS:
            raise MalformedReply(servo_id, "PING", f"{len(data)} bytes, expected {_PING_PARAMS}")
    return data[0] | data[1] << 8, result, error
