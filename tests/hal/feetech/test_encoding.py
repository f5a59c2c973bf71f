"""Feetech word order and sign-magnitude encodings."""

import enum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilbot.hal.feetech import tables as e
from hilbot.hal.registers import Access, Area, Encoding, Register


class _Name(enum.Enum):
    OFFSET = "Offset"


@pytest.mark.parametrize(
    ("value", "bit", "raw"),
    [
        (0, 11, 0),
        (2047, 11, 2047),  # rustypot Offset: +pi -> 2047
        (-2047, 11, 4095),  # -pi -> 4095
        (-1023, 11, 3071),  # -pi/2 -> 3071
        (-1000, 15, 0x8000 | 1000),
        (-5, 10, 0x405),
    ],
)
def test_known_values(value: int, bit: int, raw: int) -> None:
    assert e.sign_magnitude_encode(value, bit) == raw
    assert e.sign_magnitude_decode(raw, bit) == value


@given(st.sampled_from([10, 11, 15]), st.data())
def test_sign_magnitude_round_trip(bit: int, data: st.DataObject) -> None:
    value = data.draw(st.integers(-((1 << bit) - 1), (1 << bit) - 1))
    raw = e.sign_magnitude_encode(value, bit)
    assert 0 <= raw < 1 << (bit + 1)
    assert e.sign_magnitude_decode(raw, bit) == value


def test_minus_zero_decodes_to_zero() -> None:
    assert e.sign_magnitude_decode(0x8000, 15) == 0


def test_too_large_is_refused() -> None:
    with pytest.raises(ValueError, match="bit 11"):
        e.sign_magnitude_encode(2048, 11)


@given(st.integers(0, 0xFFFF), st.sampled_from(list(e.WordOrder)))
def test_word_round_trip(value: int, order: e.WordOrder) -> None:
    data = e.word_to_bytes(value, 2, order)
    assert e.word_from_bytes(data, order) == value


def test_word_orders() -> None:
    assert e.word_to_bytes(0x0518, 2, e.WordOrder.LITTLE) == b"\x18\x05"  # STS
    assert e.word_to_bytes(0x0518, 2, e.WordOrder.BIG) == b"\x05\x18"  # SCS


@given(st.integers(-2047, 2047), st.sampled_from(["little", "big"]))
def test_register_codec_agrees_with_the_pure_functions(value: int, order: str) -> None:
    # hal.registers.Register with a byte order and bit-11 sign: as encoding.py computes it.
    reg = Register(
        _Name.OFFSET, 31, 2, Access.RW, Area.EEPROM,
        encoding=Encoding.SIGN_MAGNITUDE_11, byte_order=order,  # type: ignore[arg-type]
    )  # fmt: skip
    raw = e.sign_magnitude_encode(value, e.HOMING_OFFSET_SIGN_BIT)
    assert reg.encode(value) == e.word_to_bytes(raw, 2, e.WordOrder(order))
    assert reg.decode(reg.encode(value)) == value
    assert reg.raw_range() == (-2047, 2047)


def test_little_endian_stays_the_default() -> None:
    reg = Register(_Name.OFFSET, 0, 2, Access.RW, Area.RAM)
    assert reg.byte_order == "little"
    assert reg.encode(0x0102) == b"\x02\x01"
