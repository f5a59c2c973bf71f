"""Control tables as data: model numbers, addresses, the XL430 load trap, encodings."""

import itertools

import pytest

from hilbot.hal.backend import EffortUnit, HardwareErrorFlags
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
from hilbot.hal.dynamixel.timing import ReadMethod, choose_read_method
from hilbot.hal.mapping import ServoSpec

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
    "XL-320": 350,
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


def test_xl320_table_units_and_error_bits():
    """The XL-320 e-manual page: Protocol 2.0 on a table of its own, 1 024 ticks over 300°."""
    m = model("XL-320")
    assert (m.protocol, m.model_number) == (2, 350)
    assert model_by_number(2, 350) is m
    expected = {
        N.CW_ANGLE_LIMIT: 6,
        N.CCW_ANGLE_LIMIT: 8,
        N.CONTROL_MODE: 11,
        N.TORQUE_ENABLE: 24,
        N.GOAL_POSITION: 30,
        N.MOVING_SPEED: 32,
        N.TORQUE_LIMIT: 35,
        N.PRESENT_POSITION: 37,
        N.PRESENT_SPEED: 39,
        N.PRESENT_LOAD: 41,
        N.PRESENT_TEMPERATURE: 46,
        N.HARDWARE_ERROR_STATUS: 50,
    }
    assert {k: m.register(k).address for k in expected} == expected
    assert m.register(N.GOAL_POSITION).max == 1023
    assert m.ticks_per_rev * 300 / 360 == pytest.approx(1024)
    assert m.center_tick == 512
    assert (m.velocity_register, m.effort_register) == (N.PRESENT_SPEED, N.PRESENT_LOAD)
    assert m.limit_registers == (N.CW_ANGLE_LIMIT, N.CCW_ANGLE_LIMIT)
    assert not m.has(N.OPERATING_MODE) and not m.has_bus_watchdog
    assert not m.has_fast_sync_read
    assert m.baud_value(1_000_000) == 3
    assert (
        m.hardware_errors(0b101) == HardwareErrorFlags.OVERLOAD | HardwareErrorFlags.INPUT_VOLTAGE
    )
    assert model("XM430-W350").hardware_errors(0x21) == (
        HardwareErrorFlags.OVERLOAD | HardwareErrorFlags.INPUT_VOLTAGE
    )
    assert m.operating_mode({N.CONTROL_MODE: 2}.__getitem__) == 3  # joint
    assert m.operating_mode({N.CONTROL_MODE: 1}.__getitem__) == 1  # wheel


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


# Verified against each model's e-manual page (see the source comments in tables.py):
# Present/Goal Current unit [A per tick] and the Current Limit(38) maximum.
CURRENT = {
    "XL330-M077": (0.001, 1750),
    "XL330-M288": (0.001, 1750),
    "XM430-W210": (0.00269, 1193),
    "XM430-W350": (0.00269, 1193),
    "XM540-W150": (0.00269, 2047),
    "XM540-W270": (0.00269, 2047),
    "XH430-W210": (0.00269, 648),
    "XH430-W350": (0.00269, 648),
    "XH540-W150": (0.00269, 2047),
    "XH540-W270": (0.00269, 2047),
    "MX-64(2.0)": (0.00336, 1941),
    "MX-106(2.0)": (0.00336, 2047),
}


@pytest.mark.parametrize("name", sorted(CURRENT))
def test_current_unit_and_current_limit(name):
    amps, limit = CURRENT[name]
    m = model(name)
    assert m.effort_unit is EffortUnit.AMPERE
    assert m.effort_register is N.PRESENT_CURRENT
    assert m.effort_per_tick == pytest.approx(amps)
    assert (m.register(N.CURRENT_LIMIT).address, m.register(N.CURRENT_LIMIT).size) == (38, 2)
    assert (m.register(N.CURRENT_LIMIT).min, m.register(N.CURRENT_LIMIT).max) == (0, limit)
    goal = m.register(N.GOAL_CURRENT)
    assert (goal.address, goal.min, goal.max) == (102, -limit, limit)
    assert m.register(N.PRESENT_CURRENT).encoding is Encoding.SIGNED


def test_every_protocol2_model_with_current_sensing_is_pinned():
    sensing = {
        n for n, m in MODELS.items() if m.protocol == 2 and m.effort_unit is EffortUnit.AMPERE
    }
    assert sensing == set(CURRENT)
    for n, m in MODELS.items():
        if m.protocol == 2 and n not in CURRENT:
            assert not m.has(N.CURRENT_LIMIT) and not m.has(N.GOAL_CURRENT), n


def test_fast_reads_by_model_and_firmware():
    for name in ("MX-28(2.0)", "MX-64(2.0)", "MX-106(2.0)"):
        # ROBOTIS: MX(2.0) firmware does not answer Fast Sync / Fast Bulk Read.
        assert not model(name).has_fast_sync_read, name
    for name in ("XL330-M077", "XL330-M288"):
        assert model(name).has_fast_sync_read
        assert model(name).fast_read_min_firmware == 46
    for name in ("XL430-W250", "XC430-W150", "XM430-W350", "XM540-W270", "XH430-W350"):
        assert model(name).has_fast_sync_read
        assert model(name).fast_read_min_firmware == 45
    for m in MODELS.values():
        if m.protocol == 1:
            assert not m.has_fast_sync_read, m.name


def test_an_mx2_chain_is_read_with_plain_sync_or_bulk_read():
    assert choose_read_method([model("MX-64(2.0)"), model("MX-106(2.0)")]) is (ReadMethod.SYNC_READ)
    mixed = [model("XM430-W350"), model("MX-28(2.0)")]
    assert choose_read_method(mixed) is ReadMethod.SYNC_READ
    assert choose_read_method([model("XM430-W350")]) is ReadMethod.FAST_SYNC_READ


def test_bus_watchdog_by_model_and_firmware():
    for m in MODELS.values():
        if m.protocol == 1 or m.name == "XL-320":
            assert not m.has_bus_watchdog and not m.has(N.BUS_WATCHDOG), m.name
            continue
        reg = m.register(N.BUS_WATCHDOG)
        assert m.has_bus_watchdog, m.name
        assert (reg.address, reg.size, reg.area, reg.encoding) == (98, 1, Area.RAM, Encoding.SIGNED)
        assert (reg.min, reg.max) == (0, 127)
        # "available from firmware v38" on the X series; every XL330 and every MX(2.0)
        # firmware (Protocol 2.0 on the MX starts at v39) has it.
        expected = 0 if m.name.startswith(("XL330", "MX-")) else 38
        assert m.bus_watchdog_min_firmware == expected, m.name


async def test_mx2_chain_on_the_virtual_bus_uses_sync_read(open_bus, backend_for):
    servos = [
        ServoSpec(1, "MX-64(2.0)", "shoulder"),
        ServoSpec(2, "MX-106(2.0)", "elbow"),
        ServoSpec(3, "MX-28(2.0)", "wrist"),
    ]
    vbus = open_bus(servos)
    async with backend_for(vbus, servos) as arm:
        assert arm.method is ReadMethod.SYNC_READ
        state = await arm.read()
        assert state.effort_unit == (EffortUnit.AMPERE, EffortUnit.AMPERE, EffortUnit.PERCENT)
        await arm.arm_watchdog(0.5)
        assert [vbus.register(i, N.BUS_WATCHDOG) for i in (1, 2, 3)] == [25, 25, 25]
        await arm.disarm_watchdog()
        assert [vbus.register(i, N.BUS_WATCHDOG) for i in (1, 2, 3)] == [0, 0, 0]


@pytest.mark.parametrize(("firmware", "method"), [(45, "SYNC_READ"), (46, "FAST_SYNC_READ")])
async def test_xl330_fast_reads_from_firmware_46(open_bus, backend_for, chain, firmware, method):
    servos = chain("XL330-M288", 2)
    vbus = open_bus(servos)
    for s in servos:
        vbus.servo(s.id).memory.set(N.FIRMWARE_VERSION, firmware)
    async with backend_for(vbus, servos) as arm:
        assert arm.method is ReadMethod[method]
        state = await arm.read()
        assert state.effort_unit == (EffortUnit.AMPERE,) * 2


async def test_bus_watchdog_is_not_armed_below_its_firmware(open_bus, backend_for, chain, caplog):
    servos = chain("XM430-W350", 2)
    vbus = open_bus(servos)
    vbus.servo(1).memory.set(N.FIRMWARE_VERSION, 37)  # before v38: no Bus Watchdog
    vbus.servo(2).memory.set(N.FIRMWARE_VERSION, 38)
    async with backend_for(vbus, servos) as arm:
        assert "firmware too old for the Bus Watchdog" in caplog.text
        await arm.arm_watchdog(0.1)
        await arm.read()  # a round trip: the writes before it have been served
        assert [vbus.register(i, N.BUS_WATCHDOG) for i in (1, 2)] == [0, 5]
