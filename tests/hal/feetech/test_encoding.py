"""Feetech word order and sign-magnitude encodings."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilbot.hal.feetech import encoding as e


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
