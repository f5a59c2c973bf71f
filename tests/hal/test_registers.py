"""The family-neutral register data: encodings, ranges given by other registers, values."""

import enum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilbot.hal.registers import (
    Access,
    Area,
    Bound,
    DependentRange,
    Encoding,
    Register,
    check_layout,
    named_table,
)


class Name(enum.Enum):
    GOAL = "Goal"
    LIMIT = "Limit"
    MODE = "Mode"


def test_an_unbounded_register_takes_the_raw_range_of_its_encoding():
    plain = Register(Name.GOAL, 0, 2, Access.RW, Area.RAM)
    assert (plain.min, plain.max) == (0, 0xFFFF)
    signed = Register(Name.GOAL, 0, 4, Access.RW, Area.RAM, encoding=Encoding.SIGNED)
    assert (signed.min, signed.max) == (-(2**31), 2**31 - 1)
    sm15 = Register(Name.GOAL, 0, 2, Access.RW, Area.RAM, encoding=Encoding.SIGN_MAGNITUDE_15)
    assert (sm15.min, sm15.max) == (-0x7FFF, 0x7FFF)
    assert signed.end == 4


@pytest.mark.parametrize(
    ("encoding", "size", "low", "high"),
    [
        (Encoding.UNSIGNED, 2, 0, 0xFFFF),
        (Encoding.SIGNED, 4, -(2**31), 2**31 - 1),
        (Encoding.SIGN_MAGNITUDE_10, 2, -0x3FF, 0x3FF),
        (Encoding.SIGN_MAGNITUDE_15, 2, -0x7FFF, 0x7FFF),
    ],
)
@given(data=st.data())
def test_encodings_round_trip(encoding, size, low, high, data):
    reg = Register(Name.GOAL, 10, size, Access.RW, Area.RAM, encoding=encoding)
    value = data.draw(st.integers(low, high))
    assert reg.decode(reg.encode(value)) == value
    assert len(reg.encode(value)) == size


def test_sign_magnitude_15_puts_the_sign_in_bit_15():
    reg = Register(Name.GOAL, 0, 2, Access.RW, Area.RAM, encoding=Encoding.SIGN_MAGNITUDE_15)
    assert reg.encode(-5) == (0x8005).to_bytes(2, "little")
    assert reg.decode((0x8005).to_bytes(2, "little")) == -5


def test_a_dependent_range_reads_its_bounds_and_applies_in_its_modes():
    values = {Name.LIMIT: 300, Name.MODE: 1}
    rule = DependentRange(Bound(Name.LIMIT, negate=True), Bound(Name.LIMIT))
    goal = Register(
        Name.GOAL,
        0,
        2,
        Access.RW,
        Area.RAM,
        min=-1000,
        max=1000,
        encoding=Encoding.SIGNED,
        dependent=(DependentRange(0, 100, frozenset({3})), rule),
    )
    assert goal.limit_range(1, values.__getitem__) == (-300, 300)  # the second rule
    assert goal.limit_range(3, values.__getitem__) == (0, 100)  # the first applies in mode 3
    assert Register(Name.LIMIT, 2, 2, Access.RW, Area.EEPROM).limit_range(1, values.get) is None


def test_listed_values_narrow_the_range():
    mode = Register(
        Name.MODE, 0, 1, Access.RW, Area.EEPROM, min=0, max=16, values=frozenset({1, 3})
    )
    assert [v for v in range(20) if mode.in_range(v)] == [1, 3]
    assert Register(Name.MODE, 0, 1, Access.RW, Area.EEPROM, min=0, max=2).in_range(2)


def test_layouts_refuse_overlaps_and_duplicates():
    a = Register(Name.GOAL, 0, 4, Access.RW, Area.RAM)
    b = Register(Name.LIMIT, 2, 2, Access.RW, Area.RAM)
    with pytest.raises(ValueError, match="Goal overlaps Limit"):
        check_layout([b, a])
    with pytest.raises(ValueError, match="duplicate"):
        named_table([a, Register(Name.GOAL, 8, 1, Access.RW, Area.RAM)])
    series = Register(Name.LIMIT, 4, 2, Access.RW, Area.RAM, index=7)
    assert series.label == "Limit 7"
    assert list(named_table([series, a])) == [Name.GOAL, Name.LIMIT]


def test_a_register_size_must_be_1_2_or_4():
    with pytest.raises(ValueError, match="size must be 1, 2 or 4"):
        Register(Name.GOAL, 0, 3, Access.RW, Area.RAM)
