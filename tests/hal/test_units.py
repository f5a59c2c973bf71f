"""Tick <-> SI conversions through offset, direction, gear ratio."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilbot.hal.backend import EffortUnit
from hilbot.hal.dynamixel.layout import ServoUnits, temperature, voltage
from hilbot.hal.errors import CommandError, ConfigError
from hilbot.hal.mapping import ServoSpec


def units(**kw):
    return ServoUnits.of(ServoSpec(1, kw.pop("model", "XM430-W350"), "j", **kw))


def test_center_tick_is_the_offset():
    u = units(offset=0.3)
    assert u.position(2048) == pytest.approx(0.3)
    assert u.ticks(0.3) == 2048


def test_quarter_turn_with_direction_and_gear():
    assert units().position(2048 + 1024) == pytest.approx(math.pi / 2)
    assert units(direction=-1).position(2048 + 1024) == pytest.approx(-math.pi / 2)
    assert units(gear_ratio=2.0).position(2048 + 1024) == pytest.approx(math.pi / 4)


def test_ax_has_300_degrees_over_1024_ticks():
    u = units(model="AX-12A")
    assert u.position(1023) - u.position(0) == pytest.approx(math.radians(300) * 1023 / 1024)
    assert u.ticks(0.0) == 512


def test_out_of_range_and_non_finite_commands():
    u = units()
    lo, hi = u.position_range()
    assert lo == pytest.approx(-math.pi)
    with pytest.raises(CommandError) as err:
        u.ticks(hi + 0.1)
    assert err.value.joint == "j"
    with pytest.raises(CommandError, match="not finite"):
        u.ticks(float("nan"))


def test_velocity_and_effort():
    u = units(direction=-1)
    assert u.velocity(100) == pytest.approx(-100 * 0.229 * 2 * math.pi / 60)
    assert u.effort(100) == pytest.approx(-0.269)
    assert u.effort_unit is EffortUnit.AMPERE
    assert units(model="XL430-W250").effort_unit is EffortUnit.PERCENT
    assert temperature(40) == 40.0
    assert voltage(120) == pytest.approx(12.0)


def test_unknown_model_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        units(model="XM999")
    assert err.value.servo_id == 1
    assert err.value.field == "model"


@given(
    ticks=st.integers(0, 4095),
    offset=st.floats(-3, 3),
    direction=st.sampled_from([1, -1]),
    gear=st.floats(0.5, 4),
)
def test_round_trip(ticks, offset, direction, gear):
    u = units(offset=offset, direction=direction, gear_ratio=gear)
    assert u.ticks(u.position(ticks)) == ticks


@pytest.mark.parametrize(
    ("model", "amps_per_tick"),
    [
        ("XL330-M288", 0.001),
        ("XM430-W350", 0.00269),
        ("XM540-W270", 0.00269),
        ("XH430-W210", 0.00269),
        ("XH430-W350", 0.00269),
        ("XH540-W270", 0.00269),
        ("MX-64(2.0)", 0.00336),
        ("MX-106(2.0)", 0.00336),
    ],
)
def test_present_current_in_amperes_per_model(model, amps_per_tick):
    u = units(model=model)
    assert u.effort_unit is EffortUnit.AMPERE
    assert u.effort(-1000) == pytest.approx(-1000 * amps_per_tick)
    assert units(model=model, direction=-1).effort(1000) == pytest.approx(-1000 * amps_per_tick)


@pytest.mark.parametrize("model", ["XL430-W250", "XC430-W240", "MX-28(2.0)"])
def test_present_load_in_percent(model):
    u = units(model=model)
    assert u.effort_unit is EffortUnit.PERCENT
    assert u.effort(1000) == pytest.approx(100.0)  # 0.1 % per tick, 1000 = 100 %
