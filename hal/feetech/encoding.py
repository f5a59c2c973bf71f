"""Feetech value encodings as pure functions: word order and sign-magnitude.

STS (magnetic-encoder) servos store words low byte first, SCS (potentiometer)
servos high byte first ("Byte Order" in Feetech's communication protocol manual;
the END register at address 2 reads 0 on STS). Several registers hold a
sign-magnitude value, the sign in one bit and the magnitude below it (Feetech STS
memory table; LeRobot's ``STS_SMS_SERIES_ENCODINGS_TABLE``; rustypot's ``Offset``):

- Homing Offset (31): bit 11, magnitude 0 ~ 2047;
- Goal Position (42), Goal Speed (46), Present Position (56), Present Speed (58):
  bit 15;
- Present Load (60) and the PWM-mode Goal Time (44): bit 10.
"""

from __future__ import annotations

import enum


class WordOrder(enum.Enum):
    """Byte order of a Feetech series' multi-byte registers."""

    LITTLE = "little"  # STS / SMS: low byte at the lower address
    BIG = "big"  # SCS: high byte at the lower address


#: Sign bit of the sign-magnitude registers, by the manual's description.
HOMING_OFFSET_SIGN_BIT = 11
SPEED_SIGN_BIT = 15
POSITION_SIGN_BIT = 15
LOAD_SIGN_BIT = 10


def sign_magnitude_decode(raw: int, sign_bit: int) -> int:
    """The signed value of ``raw`` with its sign in ``sign_bit``.

    Bits above the sign bit are ignored, as the firmware ignores them.
    """
    if raw < 0:
        raise ValueError(f"raw register value must be >= 0, got {raw}")
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if raw >> sign_bit & 1 else magnitude


def sign_magnitude_encode(value: int, sign_bit: int) -> int:
    """The raw form of ``value`` with its sign in ``sign_bit``.

    Raises:
        ValueError: ``|value|`` does not fit below the sign bit.
    """
    limit = (1 << sign_bit) - 1
    if abs(value) > limit:
        raise ValueError(
            f"{value} does not fit a sign-magnitude value with the sign in bit {sign_bit} "
            f"(|value| <= {limit})"
        )
    return abs(value) | (1 << sign_bit) if value < 0 else value


def word_to_bytes(value: int, size: int, order: WordOrder) -> bytes:
    """The ``size`` bytes of unsigned ``value`` in ``order``."""
    return int(value).to_bytes(size, order.value)


def word_from_bytes(data: bytes, order: WordOrder) -> int:
    """The unsigned value of ``data`` in ``order``."""
    return int.from_bytes(data, order.value)
