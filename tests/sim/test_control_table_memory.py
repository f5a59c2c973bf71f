"""Control-table memory rules and the firmware behind one virtual servo, without a pty."""

import pytest

from hilbot.hal.dynamixel.protocol import ALERT_BIT, Protocol1Error, StatusErrorCode
from hilbot.hal.dynamixel.tables import RegisterName as N
from hilbot.hal.dynamixel.tables import model
from hilbot.sim.control_table_memory import ControlTableMemory, WriteFault, WriteRefused
from hilbot.sim.servo_firmware import VirtualServo
from hilbot.sim.servo_model import ServoModel
from hilbot.sim.servo_physics import physics_for

XM = model("XM430-W350")
AX = model("AX-12A")


def test_defaults_and_identity():
    memory = ControlTableMemory(XM, 7, XM.baud_value(1_000_000))
    assert memory.get(N.MODEL_NUMBER) == 1020
    assert memory.get(N.ID) == 7
    assert memory.get(N.BAUD_RATE) == 3
    assert memory.get(N.RETURN_DELAY_TIME) == 250
    assert memory.get(N.MAX_POSITION_LIMIT) == 4095
    assert memory.read(0, 2) == (1020).to_bytes(2, "little")
    assert memory.read(memory.size - 1, 2) is None  # past the table


@pytest.mark.parametrize(
    ("address", "data", "torque_on", "fault", "register"),
    [
        (132, b"\0\0\0\0", False, WriteFault.ACCESS, N.PRESENT_POSITION),
        (11, b"\x04", True, WriteFault.ACCESS, N.OPERATING_MODE),
        (64, b"\x02", False, WriteFault.RANGE, N.TORQUE_ENABLE),
        (117, b"\0\0", False, WriteFault.LENGTH, N.GOAL_POSITION),
        (14, b"\0", False, WriteFault.ACCESS, None),  # a gap between registers
    ],
    ids=["read-only", "eeprom-locked", "range", "partial", "undefined"],
)
def test_writes_are_checked_register_by_register(address, data, torque_on, fault, register):
    memory = ControlTableMemory(XM, 1)
    refused = memory.check_write(address, data, torque_on=torque_on, eeprom_lock=True)
    assert isinstance(refused, WriteRefused)
    assert (refused.fault, refused.register) == (fault, register)


def test_a_write_spanning_registers_is_all_or_nothing():
    memory = ControlTableMemory(XM, 1)
    # Profile Acceleration (108) then Profile Velocity (112): the second is out of range.
    data = (100).to_bytes(4, "little") + (40000).to_bytes(4, "little")
    refused = memory.check_write(108, data, torque_on=False, eeprom_lock=True)
    assert refused == WriteRefused(WriteFault.RANGE, N.PROFILE_VELOCITY, 40000)
    ok = memory.check_write(
        108, data[:4] + (50).to_bytes(4, "little"), torque_on=False, eeprom_lock=True
    )
    assert [(reg.name, value) for reg, value in ok] == [
        (N.PROFILE_ACCELERATION, 100),
        (N.PROFILE_VELOCITY, 50),
    ]


def servo(spec, **kwargs) -> VirtualServo:
    physics = physics_for(spec.name)
    return VirtualServo(spec, 1, ServoModel([physics]), 0, **kwargs)


def test_homing_offset_shifts_present_and_goal():
    xm = servo(XM)
    assert xm.write(20, (100).to_bytes(4, "little", signed=True), 0.0) == 0  # Homing Offset
    assert xm.read(132, 4, 0.0) == (0, (2148).to_bytes(4, "little"))
    xm.write(64, b"\x01", 0.0)
    xm.write(116, (2148 + 512).to_bytes(4, "little"), 0.0)
    assert xm.model.goal[0] == pytest.approx(512 * XM.radians_per_tick)


def test_reboot_restores_ram_and_keeps_eeprom():
    xm = servo(XM, return_delay_time=0)
    xm.write(64, b"\x01", 0.0)
    xm.write(112, (77).to_bytes(4, "little"), 0.0)  # Profile Velocity (RAM)
    xm.model.raise_error([0], 32)
    assert xm.error_byte() == ALERT_BIT
    xm.reboot()
    assert xm.memory.get(N.PROFILE_VELOCITY) == 0
    assert xm.memory.get(N.RETURN_DELAY_TIME) == 0  # EEPROM survives
    assert xm.error_byte() == 0 and not xm.model.torque_enabled[0]


def test_protocol_1_error_bits():
    ax = servo(AX)
    assert ax.write(30, (5000).to_bytes(2, "little"), 0.0) == Protocol1Error.RANGE
    ax.model.raise_error([0], 32 | 4)  # overload | overheating
    assert ax.error_byte() == Protocol1Error.OVERLOAD | Protocol1Error.OVERHEATING
    assert ax.read(36, 2, 0.0)[0] == Protocol1Error.OVERLOAD | Protocol1Error.OVERHEATING
    assert servo(XM).read(900, 2, 0.0) == (StatusErrorCode.ACCESS_ERROR, b"")


def test_present_pwm_is_the_motor_torque_on_the_pwm_limit_scale():
    xm = servo(XM)
    reg, stall = XM.register(N.PRESENT_PWM), xm.model.physics[0].stall_torque
    assert XM.register(N.PWM_LIMIT).max == 885  # 100 % (e-manual, PWM Limit(36))
    for share, pwm in ((0.4, 354), (-1.0, -885), (0.0, 0)):
        xm.model.motor_torque[0] = share * stall
        err, data = xm.read(reg.address, reg.size, 0.0)
        assert (err, reg.decode(data)) == (0, pwm)
