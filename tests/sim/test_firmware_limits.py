"""The firmware's limit rules on a virtual servo: Data Limit Error per operating mode,
the EEPROM lock, instructions a protocol lacks, and the registers real servos have."""

import pytest

from hilbot.hal.dynamixel.protocol import Protocol1Error, StatusErrorCode
from hilbot.hal.dynamixel.tables import RegisterName as N
from hilbot.hal.dynamixel.tables import model
from hilbot.sim.servo_firmware import VirtualServo
from hilbot.sim.servo_model import ServoModel
from hilbot.sim.servo_physics import physics_for

LIMIT = StatusErrorCode.DATA_LIMIT_ERROR  # 0x06 (e-manual, Protocol 2.0 status packet)
RANGE = StatusErrorCode.DATA_RANGE_ERROR  # 0x04
ACCESS = StatusErrorCode.ACCESS_ERROR  # 0x07


def servo(name: str) -> VirtualServo:
    spec = model(name)
    return VirtualServo(spec, 1, ServoModel([physics_for(name)]), 0)


def write(s: VirtualServo, name: N, value: int) -> int:
    reg = s.spec.register(name)
    return s.write(reg.address, reg.encode(value), 0.0)


def read(s: VirtualServo, name: N) -> int:
    reg = s.spec.register(name)
    error, data = s.read(reg.address, reg.size, 0.0)
    assert error == 0
    return reg.decode(data)


def in_mode(name: str, mode: int) -> VirtualServo:
    s = servo(name)
    assert write(s, N.OPERATING_MODE, mode) == 0
    return s


@pytest.mark.parametrize("name", ["XM430-W350", "XL430-W250", "XL330-M288", "MX-64(2.0)"])
def test_position_mode_refuses_goals_beyond_the_position_limits(name):
    s = in_mode(name, 3)
    assert write(s, N.MAX_POSITION_LIMIT, 3000) == 0
    assert write(s, N.MIN_POSITION_LIMIT, 1000) == 0
    assert write(s, N.TORQUE_ENABLE, 1) == 0
    before = read(s, N.GOAL_POSITION)
    assert write(s, N.GOAL_POSITION, 3500) == LIMIT
    assert write(s, N.GOAL_POSITION, 999) == LIMIT
    assert read(s, N.GOAL_POSITION) == before  # unchanged, and the model's goal too
    assert write(s, N.GOAL_POSITION, 3000) == 0
    assert read(s, N.GOAL_POSITION) == 3000


@pytest.mark.parametrize("mode", [4, 5], ids=["extended", "current-based"])
def test_multi_turn_modes_ignore_the_position_limits(mode):
    s = in_mode("XM430-W350", mode)
    assert write(s, N.MAX_POSITION_LIMIT, 3000) == 0
    assert write(s, N.GOAL_POSITION, 10_000) == 0
    assert write(s, N.GOAL_POSITION, -1_048_575) == 0
    assert write(s, N.GOAL_POSITION, 1_048_576) == RANGE  # the register's own range


def test_extended_mode_on_a_model_without_current_sensing():
    s = in_mode("XL430-W250", 4)
    assert write(s, N.GOAL_POSITION, 40_000) == 0


@pytest.mark.parametrize("mode", [1, 3], ids=["velocity", "position"])
def test_goal_velocity_within_the_velocity_limit(mode):
    s = in_mode("XM430-W350", mode)
    assert write(s, N.VELOCITY_LIMIT, 150) == 0
    assert write(s, N.GOAL_VELOCITY, 150) == 0
    assert write(s, N.GOAL_VELOCITY, -150) == 0
    assert write(s, N.GOAL_VELOCITY, 151) == LIMIT
    assert write(s, N.GOAL_VELOCITY, -151) == LIMIT
    assert read(s, N.GOAL_VELOCITY) == -150
    assert write(s, N.GOAL_VELOCITY, 1024) == RANGE  # beyond Velocity Limit's own range


def test_goal_current_within_the_current_limit():
    s = in_mode("XM430-W350", 0)
    assert read(s, N.CURRENT_LIMIT) == 1193
    assert write(s, N.GOAL_CURRENT, 1193) == 0
    assert write(s, N.CURRENT_LIMIT, 500) == 0
    assert write(s, N.GOAL_CURRENT, 501) == LIMIT
    assert write(s, N.GOAL_CURRENT, -501) == LIMIT
    assert write(s, N.GOAL_CURRENT, -500) == 0
    assert read(s, N.GOAL_CURRENT) == -500


def test_current_based_position_checks_goal_current_too():
    s = in_mode("XL330-M288", 5)
    assert write(s, N.CURRENT_LIMIT, 300) == 0
    assert write(s, N.GOAL_CURRENT, 301) == LIMIT
    assert write(s, N.GOAL_CURRENT, 300) == 0


def test_goal_pwm_within_the_pwm_limit():
    s = in_mode("XL430-W250", 16)
    assert write(s, N.PWM_LIMIT, 400) == 0
    assert write(s, N.GOAL_PWM, 401) == LIMIT
    assert write(s, N.GOAL_PWM, -400) == 0
    assert write(s, N.GOAL_PWM, 886) == RANGE


def test_a_sync_style_write_of_several_goals_is_all_or_nothing():
    s = in_mode("XM430-W350", 3)
    assert write(s, N.VELOCITY_LIMIT, 100) == 0
    # Goal Velocity (104) then Profile Acceleration, Profile Velocity, Goal Position:
    data = (200).to_bytes(4, "little") + bytes(8) + (2000).to_bytes(4, "little")
    before = read(s, N.GOAL_POSITION)
    assert s.write(104, data, 0.0) == LIMIT
    assert read(s, N.GOAL_POSITION) == before


def test_eeprom_writes_with_torque_on_answer_access_error():
    s = servo("XM430-W350")
    assert write(s, N.TORQUE_ENABLE, 1) == 0
    for name, value in ((N.VELOCITY_LIMIT, 100), (N.OPERATING_MODE, 1), (N.ID, 5)):
        assert write(s, name, value) == ACCESS
    assert read(s, N.OPERATING_MODE) == 3


def test_protocol_1_moving_speed_range_depends_on_the_mode():
    ax = servo("AX-12A")
    assert write(ax, N.MOVING_SPEED, 1023) == 0
    assert write(ax, N.MOVING_SPEED, 1500) == Protocol1Error.RANGE  # joint mode: 0 ~ 1023
    assert write(ax, N.CCW_ANGLE_LIMIT, 0) == 0  # CW = CCW = 0: wheel mode
    assert write(ax, N.MOVING_SPEED, 1500) == 0  # wheel mode: 0 ~ 2047


def test_protocol_1_goal_beyond_the_angle_limits_sets_the_angle_limit_bit():
    ax = servo("AX-12A")
    assert write(ax, N.CCW_ANGLE_LIMIT, 800) == 0
    assert write(ax, N.GOAL_POSITION, 900) == Protocol1Error.ANGLE_LIMIT


@pytest.mark.parametrize("name", ["XM430-W350", "AX-12A"])
def test_action_without_reg_write_is_an_instruction_error(name):
    s = servo(name)
    expected = StatusErrorCode.INSTRUCTION_ERROR if s.protocol == 2 else Protocol1Error.INSTRUCTION
    assert s.action(0.0) == expected


@pytest.mark.parametrize("name", ["XM430-W350", "XL330-M288", "MX-28(2.0)"])
def test_feedforward_gains_are_readable_and_writable(name):
    s = servo(name)
    for reg in (N.FEEDFORWARD_1ST_GAIN, N.FEEDFORWARD_2ND_GAIN):
        assert read(s, reg) == 0
        assert write(s, reg, 1234) == 0
        assert read(s, reg) == 1234
        assert write(s, reg, 16384) == RANGE


@pytest.mark.parametrize("name", ["XL430-W250", "XL330-M288", "XM540-W270"])
def test_backup_ready_reads_zero_and_is_read_only(name):
    s = servo(name)
    assert s.read(147, 1, 0.0) == (0, b"\0")
    assert s.write(147, b"\x01", 0.0) == ACCESS


def indirect(s: VirtualServo, k: int) -> tuple[int, int]:
    """(Indirect Address k, Indirect Data k) addresses."""
    by = {(r.name, r.index): r.address for r in s.spec.series}
    return by[(N.INDIRECT_ADDRESS, k)], by[(N.INDIRECT_DATA, k)]


@pytest.mark.parametrize(
    ("name", "first"), [("XM430-W350", 1), ("XM430-W350", 29), ("XL330-M288", 1)]
)
def test_indirect_data_reads_and_writes_its_targets(name, first):
    s = servo(name)
    goal = s.spec.register(N.GOAL_POSITION).address
    for i in range(4):
        address, _ = indirect(s, first + i)
        assert s.write(address, (goal + i).to_bytes(2, "little"), 0.0) == 0
    _, data = indirect(s, first)
    assert s.write(data, (1500).to_bytes(4, "little"), 0.0) == 0
    assert read(s, N.GOAL_POSITION) == 1500
    assert s.read(data, 4, 0.0) == (0, (1500).to_bytes(4, "little"))
    # The rules of the target apply: beyond Max Position Limit is the Data Limit Error.
    assert write(s, N.MAX_POSITION_LIMIT, 3000) == 0
    assert s.write(data, (3500).to_bytes(4, "little"), 0.0) == LIMIT
    assert read(s, N.GOAL_POSITION) == 1500
    # Half a register through indirection is a data-length error.
    assert s.write(data, b"\x01\x02", 0.0) == StatusErrorCode.DATA_LENGTH_ERROR


def test_indirect_data_follows_a_present_value():
    s = servo("XL430-W250")
    present = s.spec.register(N.PRESENT_POSITION).address
    for i in range(4):
        address, _ = indirect(s, 1 + i)
        s.write(address, (present + i).to_bytes(2, "little"), 0.0)
    _, data = indirect(s, 1)
    assert s.read(data, 4, 0.0) == s.read(present, 4, 0.0)


def test_an_indirect_address_outside_its_range_is_a_range_error():
    s = servo("XL330-M288")
    address, _ = indirect(s, 1)
    assert s.write(address, (228).to_bytes(2, "little"), 0.0) == RANGE  # 64 ~ 227
    assert s.write(address, (63).to_bytes(2, "little"), 0.0) == RANGE


def test_reserved_addresses_read_zero_and_refuse_writes():
    s = servo("XM430-W350")
    assert s.read(14, 6, 0.0) == (0, bytes(6))  # between Protocol Type(13) and Homing Offset(20)
    assert s.write(14, b"\x01", 0.0) == ACCESS


@pytest.mark.parametrize(
    ("name", "modes"),
    [
        ("XM430-W350", {0, 1, 3, 4, 5, 16}),
        ("XL430-W250", {1, 3, 4, 16}),
        ("MX-28(2.0)", {1, 3, 4, 16}),
    ],
)
def test_operating_mode_takes_only_the_modes_the_model_has(name, modes):
    s = servo(name)
    for mode in range(18):
        assert write(s, N.OPERATING_MODE, mode) == (0 if mode in modes else RANGE), mode
