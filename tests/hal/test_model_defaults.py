"""Each model's defaults and ranges, pinned against a table written from its e-manual page.

The expected values below were copied by hand from the ROBOTIS e-manual source of
each model (github.com/ROBOTIS-GIT/emanual, docs/en/dxl/<series>/<model>.md, the
version named in ``hilbot.hal.dynamixel.tables``), independently of the code
that builds the tables, and are checked both in the tables and in the memory of a
virtual servo after power-up.
"""

import pytest

from hilbot.hal.dynamixel.tables import MODEL_TABLES, MODELS, Bound, RegisterName, model
from hilbot.sim.control_table_memory import ControlTableMemory

N = RegisterName

# Temperature Limit, Min Voltage Limit, Max Voltage Limit, PWM Limit, Current Limit
# (None: no current sensing), Velocity Limit, Shutdown; then Velocity I, Velocity P,
# Position D, Position I, Position P Gain; then the Velocity Limit range maximum.
X_PAGES = {
    "XL330-M077": (70, 35, 70, 885, 1750, 1620, 53, (400, 40, 0, 400, 400), 2047),
    "XL330-M288": (70, 35, 70, 885, 1750, 445, 53, (1600, 180, 0, 0, 400), 2047),
    "XL430-W250": (72, 60, 140, 885, None, 265, 52, (1000, 100, 4000, 0, 640), 1023),
    "XC430-W150": (80, 60, 160, 885, None, 460, 52, (1920, 100, 0, 0, 460), 1023),
    "XC430-W240": (80, 60, 160, 885, None, 306, 52, (1920, 100, 0, 0, 700), 1023),
    "XM430-W210": (80, 95, 160, 885, 1193, 330, 52, (1920, 100, 0, 0, 800), 1023),
    "XM430-W350": (80, 95, 160, 885, 1193, 200, 52, (1920, 100, 0, 0, 800), 1023),
    "XM540-W150": (80, 95, 160, 885, 2047, 230, 52, (1920, 100, 0, 0, 800), 1023),
    "XM540-W270": (80, 95, 160, 885, 2047, 128, 52, (1920, 100, 0, 0, 800), 1023),
    "XH430-W210": (80, 95, 160, 885, 648, 360, 52, (1920, 100, 0, 0, 900), 1023),
    "XH430-W350": (80, 95, 160, 885, 648, 130, 52, (1920, 100, 0, 0, 900), 1023),
    "XH540-W150": (80, 95, 160, 885, 2047, 300, 52, (1920, 100, 0, 0, 800), 1023),
    "XH540-W270": (80, 95, 160, 885, 2047, 167, 52, (1920, 100, 0, 0, 800), 1023),
    "MX-28(2.0)": (80, 95, 160, 885, None, 380, 52, (1920, 100, 0, 0, 850), 1023),
    "MX-64(2.0)": (80, 95, 160, 885, 1941, 435, 52, (1920, 100, 0, 0, 850), 1023),
    "MX-106(2.0)": (80, 95, 160, 885, 2047, 360, 52, (1920, 100, 0, 0, 850), 1023),
}
# Temperature Limit, Min / Max Voltage Limit, Max Torque (= Torque Limit at power-up),
# Alarm LED, Shutdown, Punch, Baud Rate.
P1_PAGES = {
    "AX-12A": (70, 60, 140, 1023, 36, 36, 32, 1),
    "AX-18A": (75, 60, 140, 983, 36, 36, 32, 1),
    "MX-28": (80, 60, 160, 1023, 36, 36, 0, 34),
    "MX-64": (80, 60, 240, 1023, 36, 36, 0, 34),
    "MX-106": (80, 60, 160, 1023, 36, 36, 0, 34),
}
# Temperature Limit, Min / Max Voltage Limit, Max Torque, Shutdown, Punch, Baud Rate,
# Control Mode (the XL-320 page: its own Protocol 2.0 table).
XL320_PAGE = (65, 60, 90, 1023, 3, 32, 3, 2)
GAINS = (
    N.VELOCITY_I_GAIN,
    N.VELOCITY_P_GAIN,
    N.POSITION_D_GAIN,
    N.POSITION_I_GAIN,
    N.POSITION_P_GAIN,
)


def test_every_model_has_a_page():
    assert set(X_PAGES) | set(P1_PAGES) | {"XL-320"} == set(MODELS) == set(MODEL_TABLES)
    for name, data in MODEL_TABLES.items():
        assert data.source.startswith("github.com/ROBOTIS-GIT/emanual/blob/"), name
        assert model(name).source == data.source


@pytest.mark.parametrize("name", sorted(X_PAGES))
def test_x_series_defaults_are_the_pages(name):
    temp, v_min, v_max, pwm, current, velocity, shutdown, gains, vel_max = X_PAGES[name]
    spec = model(name)
    memory = ControlTableMemory(spec, 1)
    expected = {
        N.TEMPERATURE_LIMIT: temp,
        N.MIN_VOLTAGE_LIMIT: v_min,
        N.MAX_VOLTAGE_LIMIT: v_max,
        N.PWM_LIMIT: pwm,
        N.VELOCITY_LIMIT: velocity,
        N.SHUTDOWN: shutdown,
        N.MAX_POSITION_LIMIT: 4095,
        N.MIN_POSITION_LIMIT: 0,
        N.OPERATING_MODE: 3,
        N.FEEDFORWARD_1ST_GAIN: 0,
        N.FEEDFORWARD_2ND_GAIN: 0,
        **dict(zip(GAINS, gains, strict=True)),
    }
    if current is not None:
        expected[N.CURRENT_LIMIT] = current
        assert spec.register(N.CURRENT_LIMIT).max == current
    else:
        assert not spec.has(N.CURRENT_LIMIT)
    assert {reg: spec.register(reg).default for reg in expected} == expected
    assert {reg: memory.get(reg) for reg in expected} == expected
    assert spec.register(N.VELOCITY_LIMIT).max == vel_max
    assert spec.register(N.GOAL_VELOCITY).max == vel_max


@pytest.mark.parametrize("name", sorted(P1_PAGES))
def test_protocol_1_defaults_are_the_pages(name):
    temp, v_min, v_max, torque, alarm, shutdown, punch, baud = P1_PAGES[name]
    spec = model(name)
    memory = ControlTableMemory(spec, 1)
    expected = {
        N.TEMPERATURE_LIMIT: temp,
        N.MIN_VOLTAGE_LIMIT: v_min,
        N.MAX_VOLTAGE_LIMIT: v_max,
        N.MAX_TORQUE: torque,
        N.TORQUE_LIMIT: torque,
        N.ALARM_LED: alarm,
        N.SHUTDOWN: shutdown,
        N.PUNCH: punch,
        N.BAUD_RATE: baud,
        N.CW_ANGLE_LIMIT: 0,
        N.CCW_ANGLE_LIMIT: spec.position_max,
    }
    assert {reg: memory.get(reg) for reg in expected} == expected


def test_xl320_defaults_are_its_page():
    temp, v_min, v_max, torque, shutdown, punch, baud, mode = XL320_PAGE
    spec = model("XL-320")
    expected = {
        N.TEMPERATURE_LIMIT: temp,
        N.MIN_VOLTAGE_LIMIT: v_min,
        N.MAX_VOLTAGE_LIMIT: v_max,
        N.MAX_TORQUE: torque,
        N.TORQUE_LIMIT: torque,
        N.SHUTDOWN: shutdown,
        N.PUNCH: punch,
        N.BAUD_RATE: baud,
        N.CONTROL_MODE: mode,
        N.P_GAIN: 32,
        N.CW_ANGLE_LIMIT: 0,
        N.CCW_ANGLE_LIMIT: 1023,
    }
    assert {reg: spec.register(reg).default for reg in expected} == expected


def test_the_xl330_velocity_limit_reaches_2047():
    # The issue: the XL330's Velocity Limit range was capped at 1023.
    memory = ControlTableMemory(model("XL330-M288"), 1)
    ok = memory.check_write(44, (2047).to_bytes(4, "little"), torque_on=False, eeprom_lock=True)
    assert [(reg.name, value) for reg, value in ok] == [(N.VELOCITY_LIMIT, 2047)]


@pytest.mark.parametrize("name", sorted(X_PAGES))
def test_goal_ranges_are_given_by_the_limit_registers(name):
    spec = model(name)
    for goal, limit in (
        (N.GOAL_PWM, N.PWM_LIMIT),
        (N.GOAL_VELOCITY, N.VELOCITY_LIMIT),
        (N.GOAL_CURRENT, N.CURRENT_LIMIT),
    ):
        if not spec.has(goal):
            continue
        (rule,) = spec.register(goal).dependent
        assert (rule.low, rule.high, rule.modes) == (Bound(limit, True), Bound(limit), set())
    (position,) = spec.register(N.GOAL_POSITION).dependent
    assert position.low == Bound(N.MIN_POSITION_LIMIT)
    assert position.high == Bound(N.MAX_POSITION_LIMIT)
    assert position.modes == {3}  # Position Control Mode only
    assert spec.register(N.GOAL_POSITION).max == 1_048_575  # the extended modes' range


@pytest.mark.parametrize(
    ("name", "areas"),
    [
        ("XL430-W250", [(1, 168, 224), (28, 222, 251), (29, 578, 634), (56, 632, 661)]),
        ("XM430-W350", [(1, 168, 224), (56, 632, 661)]),
        ("MX-64(2.0)", [(1, 168, 224), (56, 632, 661)]),
        ("XL330-M288", [(1, 168, 208), (20, 206, 227)]),
    ],
)
def test_indirect_address_and_data_are_where_the_page_puts_them(name, areas):
    spec = model(name)
    addresses = {r.index: r for r in spec.series if r.name is N.INDIRECT_ADDRESS}
    data = {r.index: r for r in spec.series if r.name is N.INDIRECT_DATA}
    for k, address, byte in areas:
        assert (addresses[k].address, addresses[k].default) == (address, byte)
        assert data[k].address == byte
    assert max(addresses) == areas[-1][0]
