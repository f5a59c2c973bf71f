"""What both virtual buses' instruction handlers share: replies, who hears, faults.

The Dynamixel handler (``hilbot.sim.instruction_handler``) and the Feetech one
(``hilbot.sim.feetech_handler``) differ in their instructions and packets; the
``Reply`` they plan, which servos hear the host, and how an injected fault
(``hilbot.sim.faults``) changes a reply are the same on both buses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from hilbot.sim.faults import FaultTable, ReplyFate, ServoFaults


@dataclass(frozen=True, slots=True)
class Reply:
    """Bytes one servo (or a fast-read chain) sends, after ``delay`` seconds."""

    data: bytes
    delay: float  # [s] return delay time + injected delay, from the previous bus activity


class ListeningServo(Protocol):
    """What deciding who hears the host needs of a simulated servo."""

    @property
    def id(self) -> int:
        """The id the servo answers to now."""
        ...

    @property
    def baudrate(self) -> int | None:
        """The bit rate it listens at [bit/s], ``None`` for an unlisted register value."""
        ...


ServoT = TypeVar("ServoT", bound=ListeningServo)


def corrupt(data: bytes) -> bytes:
    """``data`` with its last byte (the checksum or CRC) flipped."""
    return data[:-1] + bytes((data[-1] ^ 0xFF,))


def online(servos: Sequence[ServoT], faults: FaultTable, rate: int | None) -> dict[int, ServoT]:
    """Servos that hear a host at ``rate`` [bit/s], by id: present, and at that rate.

    Of two servos with the same id the first one listed answers. An unknown rate
    (``None``) is heard by none.
    """
    out: dict[int, ServoT] = {}
    if rate is None:
        return out
    for servo in servos:
        record = faults.get(servo.id)
        if record is not None and not record.answers:
            continue
        if servo.baudrate == rate:
            out.setdefault(servo.id, servo)
    return out


def faulted_reply(
    faults: ServoFaults | None, delay: float, encode: Callable[[int | None], bytes]
) -> Reply | None:
    """The reply a servo's injected faults let through, or ``None`` when it is lost.

    Args:
        faults: the servo's injected faults, ``None`` for none.
        delay: the servo's return delay [s].
        encode: the status packet's bytes with its parameters cut to a number of bytes
            (``None``: all of them).
    """
    if faults is None:
        return Reply(encode(None), delay)
    fate = faults.reply_fate()
    if fate is ReplyFate.DROP:
        return None
    data = encode(faults.truncate_keep if fate is ReplyFate.TRUNCATE else None)
    if fate is ReplyFate.CORRUPT:
        data = corrupt(data)
    return Reply(data, delay + faults.delay)
