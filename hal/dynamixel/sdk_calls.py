"""dynamixel-sdk's single-servo calls, with the checks the SDK leaves out.

The SDK frames packets and checks CRCs well, but indexes the data of a status packet
without checking its length: a reply that is short yet well formed (a stale status
packet, a confused servo; the virtual bus's ``truncate`` fault) makes
``PacketHandler.ping`` raise a raw ``IndexError`` (Protocol 1.0: its internal read of
the model number), or makes ``readTxRx`` return the CRC bytes as data, since it slices
past the parameters. Here a read and a ping check the parameter count the status packet
announces, and any exception the SDK raises while decoding becomes
:class:`~hilbot.hal.errors.MalformedReply`, naming the servo and the instruction.

A read and a ping also check the id of the status packet that answers: the SDK's
``txRxPacket`` skips a packet from another id and waits on, so a reply re-addressed by
a glitch (or a stray one) ended as a timeout that named nothing; here it is refused at
once as :class:`~hilbot.hal.errors.WrongReplyId`, naming both ids (see :func:`txrx`).

Every function returns what the SDK would, ``(value, COMM_* result, ERR byte)``, so
:class:`~hilbot.hal.dynamixel.bus.DynamixelBus` keeps one retry loop for all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import dynamixel_sdk as sdk

from hilbot.hal.errors import MalformedReply, WrongReplyId

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


def txrx(
    packets: Any, port: Any, protocol: int, tx: list[int], instruction: str
) -> tuple[list[int], int, int]:
    """Send ``tx`` and receive its status packet: ``(rx, result, ERR)``, as ``txRxPacket``.

    The SDK's own loop with its reply timeouts (the data length + the status frame),
    except that the first valid status packet must come from the id addressed.

    Raises:
        WrongReplyId: it came from another id (its data is never used).
    """
    result = packets.txPacket(port, tx)
    if result != sdk.COMM_SUCCESS:
        return [], result, 0
    if protocol == 1:  # FF FF ID LEN INST params.. CHK; READ's length is tx[6]
        port.setPacketTimeout((tx[6] if tx[4] == _READ else 0) + 6)
        rx, result = packets.rxPacket(port)
        at_id, at_error = 2, 4
    else:  # FF FF FD 00 ID LEN_L LEN_H INST params.. CRC; READ's length is tx[10:12]
        port.setPacketTimeout((tx[10] | tx[11] << 8 if tx[7] == _READ else 0) + 11)
        rx, result = packets.rxPacket(port, False)
        at_id, at_error = 4, 8
    if result != sdk.COMM_SUCCESS:
        return rx, result, 0
    if rx[at_id] != tx[at_id]:
        raise WrongReplyId(tx[at_id], rx[at_id], instruction)
    return rx, result, rx[at_error]


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
        MalformedReply: the status packet carries another number of bytes than asked
            (``WrongReplyId``: it comes from another servo).
    """
    if protocol == 1:
        tx = [0] * 8
        tx[2], tx[3], tx[4], tx[5], tx[6] = servo_id, 4, _READ, address, length
    else:
        tx = [0] * 14
        tx[4], tx[5], tx[7] = servo_id, 7, _READ
        tx[8], tx[9], tx[10], tx[11] = address & 0xFF, address >> 8, length & 0xFF, length >> 8
    rx, result, error = guarded(servo_id, "READ", lambda: txrx(packets, port, protocol, tx, "READ"))
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
        MalformedReply: a reply without the model number (``WrongReplyId``: a reply from
            another servo).
    """
    if protocol == 1:
        tx = [0] * 6
        tx[2], tx[3], tx[4] = servo_id, 2, _PING
    else:
        tx = [0] * 10
        tx[4], tx[5], tx[7] = servo_id, 3, _PING
    rx, result, error = guarded(servo_id, "PING", lambda: txrx(packets, port, protocol, tx, "PING"))
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
