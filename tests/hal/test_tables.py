"""Control tables as data: model numbers, addresses, the XL430 load trap, encodings."""

import itertools

import pytest

from hilbot.hal.backend import EffortUnit
from hilbot.hal.dynamixel.tables import (
    MODELS,
    MODELS_BY_NUMBER,
    Access,
    Area,
    Encoding,
    Register,
    RegisterName,
    model,
    model_by_number,
)

N = RegisterName

# Model numbers as dynamixel-sdk / DynamixelWorkbench define them.
KNOWN_NUMBERS = {
    "XL330-M077": 1190,
    "XL330-M288": 1200,
    "XL430-W250": 1060,
    "XC430-W150": 1070,
    "XC430-W240": 1080,
    "XM430-W210": 1030,
    "XM430-W350": 1020,
    "XM540-W150": 1130,
    "XM540-W270": 1120,
    "XH430-W210": 1010,
    "XH430-W350": 1000,
    "XH540-W150": 1110,
    "XH540-W270": 1100,
    "MX-28(2.0)": 30,
    "MX-64(2.0)": 311,
    "MX-106(2.0)": 321,
    "AX-12A": 12,
    "AX-18A": 18,
    "MX-28": 29,
    "MX-64": 310,
    "MX-106": 320,
}


def test_every_required_model_is_there_with_its_number():
    assert {name: m.model_number for name, m in MODELS.items()} == KNOWN_NUMBERS
    assert len(MODELS_BY_NUMBER) == len(MODELS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_has_what_the_backend_reads(name):
    m = MODELS[name]
    for reg in (N.MODEL_NUMBER, N.FIRMWARE_VERSION, N.ID, N.BAUD_RATE, N.RETURN_DELAY_TIME):
        assert m.register(reg).area is Area.EEPROM
    for reg in (N.TORQUE_ENABLE, N.GOAL_POSITION, N.PRESENT_POSITION, N.PRESENT_TEMPERATURE):
        assert m.has(reg)
    assert m.register(N.PRESENT_POSITION).access is Access.R
    assert m.register(m.effort_register).access is Access.R
    assert m.url.startswith("https://emanual.robotis.com/docs/en/dxl/")
    span = m.span([m.effort_register, m.velocity_register, N.PRESENT_POSITION])
    assert span[1] <= 10


@pytest.mark.parametrize("name", ["XL430-W250", "XC430-W150", "MX-28(2.0)"])
def test_address_126_is_present_load_on_models_without_current_sensing(name):
    m = model(name)
    assert not m.has(N.PRESENT_CURRENT)
    assert m.register(N.PRESENT_LOAD).address == 126
    assert m.effort_unit is EffortUnit.PERCENT
    with pytest.raises(KeyError, match="no current sensing"):
        m.register(N.PRESENT_CURRENT)


def test_x_series_addresses():
    m = model("XM430-W350")
    expected = {
        N.OPERATING_MODE: 11,
        N.TORQUE_ENABLE: 64,
        N.HARDWARE_ERROR_STATUS: 70,
        N.BUS_WATCHDOG: 98,
        N.GOAL_POSITION: 116,
        N.PRESENT_CURRENT: 126,
        N.PRESENT_VELOCITY: 128,
        N.PRESENT_POSITION: 132,
        N.PRESENT_TEMPERATURE: 146,
    }
    assert {k: m.register(k).address for k in expected} == expected
    assert m.effort_per_tick == pytest.approx(0.00269)


def test_ax_table_and_units():
    m = model("ax-12a")
    assert m.protocol == 1
    assert m.register(N.PRESENT_POSITION).address == 36
    assert m.register(N.GOAL_POSITION).size == 2
    assert m.center_tick == 512
    assert m.ticks_per_rev * 300 / 360 == pytest.approx(1024)
    assert not m.has_bulk_read
    assert model("MX-28").has_bulk_read


def test_lookup_errors_name_the_choices():
    with pytest.raises(KeyError, match="XM430-W350"):
        model("XM999")
    assert model_by_number(2, 12) is None
    assert model_by_number(1, 12).name == "AX-12A"


def test_baud_rates():
    assert model("XM430-W350").baud_value(1_000_000) == 3
    assert model("AX-12A").baud_value(1_000_000) == 1
    assert model("AX-12A").baud_value(57600) == 34
    with pytest.raises(ValueError, match="supports"):
        model("AX-12A").baud_value(4_000_000)


def test_register_encodings():
    signed = Register(N.PRESENT_VELOCITY, 128, 4, Access.R, Area.RAM, encoding=Encoding.SIGNED)
    assert signed.decode(signed.encode(-5)) == -5
    assert signed.min == -(2**31)
    sm = Register(N.PRESENT_SPEED, 38, 2, Access.R, Area.RAM, encoding=Encoding.SIGN_MAGNITUDE_10)
    assert sm.decode((1024 + 100).to_bytes(2, "little")) == -100
    assert sm.decode((100).to_bytes(2, "little")) == 100
    assert sm.encode(-100) == (1124).to_bytes(2, "little")
    with pytest.raises(ValueError, match="bytes"):
        signed.decode(b"\x00")
    with pytest.raises(ValueError, match="size"):
        Register(N.ID, 7, 3, Access.RW, Area.EEPROM)


def test_tables_have_no_overlapping_registers():
    for m in MODELS.values():
        regs = sorted(m.table.values(), key=lambda r: r.address)
        for a, b in itertools.pairwise(regs):
            assert a.end <= b.address, (m.name, a.name, b.name)
