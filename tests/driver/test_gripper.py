"""A gripper in current-based position control closes on an object and holds at its limit."""

from __future__ import annotations

import asyncio
import math

import pytest

from hilbot.driver.runtime.backends import virtual_margin_ms
from hilbot.hal.backend import HardwareErrorFlags, JointState
from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.errors import StartupError
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim import running_virtual_bus

N = RegisterName
OBJECT = 0.5  # [rad] where the jaw meets the object
LIMIT = 0.3  # [A]
GRIPPER = ServoSpec(
    6,
    "XL330-M288",
    "gripper",
    mode="current_position",
    current_limit=LIMIT,
    profile_velocity=3.0,
    profile_acceleration=30.0,
)


async def _squeeze(spec: ServoSpec, seconds: float) -> tuple[JointState, dict[N, int]]:
    with running_virtual_bus([spec], return_delay_time=0) as bus:
        bus.model.set_obstacle(0, high=OBJECT)
        # retries: a loaded host loses the odd reply; this test is about the squeeze
        backend = DynamixelBackend(
            BusSpec(bus.port), [spec], margin_ms=virtual_margin_ms(), retries=3
        )
        async with backend as be:
            registers = {
                name: bus.register(6, name)
                for name in (N.OPERATING_MODE, N.CURRENT_LIMIT, N.GOAL_CURRENT, N.PROFILE_VELOCITY)
            }
            await be.set_torque(True)
            await be.write({"gripper": 1.4})  # close well past the object
            loop = asyncio.get_running_loop()
            end = loop.time() + seconds  # longer than the overload time (1.5 s)
            state = await be.read()
            while loop.time() < end:
                state = await be.read()
                await asyncio.sleep(0.05)
            torque_on = bool(bus.model.torque_enabled[0])
        assert bus.errors == []
    registers[N.TORQUE_ENABLE] = int(torque_on)
    return state, registers


async def test_the_gripper_stops_at_the_object_and_holds_at_its_current_limit() -> None:
    state, registers = await _squeeze(GRIPPER, 3.0)
    assert registers[N.OPERATING_MODE] == 5
    assert registers[N.CURRENT_LIMIT] == registers[N.GOAL_CURRENT] == 300  # 1 mA units
    assert registers[N.PROFILE_VELOCITY] == round(3.0 / (0.229 * 2 * math.pi / 60))
    assert state.position[0] == pytest.approx(OBJECT, abs=0.01)
    assert abs(state.effort[0]) == pytest.approx(LIMIT, abs=0.02)  # the measured effort
    assert state.hardware_errors[0] == HardwareErrorFlags.NONE
    assert registers[N.TORQUE_ENABLE] == 1  # still holding


async def test_without_a_current_limit_the_squeeze_overloads() -> None:
    state, registers = await _squeeze(ServoSpec(6, "XL330-M288", "gripper"), 3.0)
    assert HardwareErrorFlags.OVERLOAD in state.hardware_errors[0]
    assert registers[N.TORQUE_ENABLE] == 0  # the firmware's shutdown


async def test_a_reboot_writes_the_profiles_and_goal_current_again() -> None:
    # A reboot resets RAM (the virtual servo too, as the firmware): profile 0 is full speed.
    settings = (N.GOAL_CURRENT, N.PROFILE_VELOCITY, N.PROFILE_ACCELERATION)
    with running_virtual_bus([GRIPPER], return_delay_time=0) as bus:
        backend = DynamixelBackend(BusSpec(bus.port), [GRIPPER], margin_ms=virtual_margin_ms())
        async with backend as be:
            configured = {name: bus.register(6, name) for name in settings}
            assert all(configured.values())
            await be.reboot(["gripper"])
            assert {name: bus.register(6, name) for name in settings} == configured
            assert bus.register(6, N.TORQUE_ENABLE) == 0  # a reboot leaves torque off


async def test_a_mode_the_model_lacks_is_refused_at_start_up() -> None:
    spec = ServoSpec(1, "XL430-W250", "gripper", mode="current_position")
    with (
        running_virtual_bus([spec], return_delay_time=0) as bus,
        pytest.raises(StartupError, match="no current_position mode"),
    ):
        async with DynamixelBackend(BusSpec(bus.port), [spec], margin_ms=virtual_margin_ms()):
            pass


async def test_a_current_limit_on_a_model_without_the_register_is_refused_naming_it() -> None:
    # The XL430 has no Current Limit register: a start-up error, not a KeyError traceback.
    spec = ServoSpec(1, "XL430-W250", "gripper", current_limit=0.5)
    with (
        running_virtual_bus([spec], return_delay_time=0) as bus,
        pytest.raises(StartupError, match=r"servo 1 .*this model has no Current Limit register"),
    ):
        async with DynamixelBackend(BusSpec(bus.port), [spec], margin_ms=virtual_margin_ms()):
            pass


@pytest.mark.parametrize("field", ["mode", "current_limit", "profile_velocity"])
def test_a_dynamixel_setting_on_a_feetech_servo_is_refused_at_load(field: str) -> None:
    from hilbot.driver.runtime.config import load_config, parse_config
    from hilbot.driver.runtime.errors import ConfigError

    data = load_config("so101_follower").model_dump(mode="json")
    data["servos"][5][field] = "current_position" if field == "mode" else 0.3
    with pytest.raises(ConfigError, match=rf"servos\[5\]\.{field}: .*Feetech servo would ignore"):
        parse_config(data)


def test_the_koch_follower_gripper_is_configured_to_hold() -> None:
    from hilbot.driver.runtime.config import load_config

    gripper = load_config("koch_v1_1_follower").servo_specs()[5]
    assert (gripper.mode, gripper.current_limit) == ("current_position", 0.35)
