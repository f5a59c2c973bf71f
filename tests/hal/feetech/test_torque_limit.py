"""A Feetech servo's ``torque_limit``: Torque Limit written at start-up, read back, capped."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from types import MappingProxyType

import pytest

from hilbot.hal.backend import HardwareErrorFlags, JointState
from hilbot.hal.errors import ConfigError, StartupError
from hilbot.hal.feetech.backend import FeetechBackend
from hilbot.hal.feetech.tables import FeetechModel, model
from hilbot.hal.feetech.tables import FeetechRegister as N
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.hal.registers import Access
from hilbot.sim.virtual_bus import FeetechVirtualBus

MARGIN_MS = 30.0  # the loaded test machine: generous reply slack
GRIPPER = ServoSpec(2, "STS3215", "gripper", torque_limit=0.5)
SERVOS = [ServoSpec(1, "STS3215", "a"), GRIPPER]
OBJECT = 0.4  # [rad] where the jaw meets the object


@pytest.fixture
def vbus() -> Iterator[FeetechVirtualBus]:
    with FeetechVirtualBus({1: "STS3215", 2: "STS3215"}, return_delay_time=0) as bus:
        yield bus
        assert bus.errors == []


def backend(port: str, servos: list[ServoSpec] = SERVOS) -> FeetechBackend:
    return FeetechBackend(BusSpec(port, family="feetech"), servos, margin_ms=MARGIN_MS)


def _stall(bus: FeetechVirtualBus, servo_id: int) -> float:
    return bus.model.physics[bus.servo(servo_id).index].stall_torque


def _cap(bus: FeetechVirtualBus, servo_id: int) -> float:
    return float(bus.model.torque_limit[bus.servo(servo_id).index])


async def test_the_torque_limit_is_written_at_start_up_and_read_back(vbus):
    async with backend(vbus.port):
        assert vbus.register(2, N.TORQUE_LIMIT) == 500  # 0.1 % steps
        assert vbus.register(1, N.TORQUE_LIMIT) == 1000  # none configured: as it powered up
        assert _cap(vbus, 2) == pytest.approx(0.5 * _stall(vbus, 2))
        # RAM only: the EEPROM's Max Torque (the power-up value) and Lock are untouched.
        assert vbus.register(2, N.MAX_TORQUE) == 1000
        assert vbus.register(2, N.LOCK) == 0


async def test_a_reboot_writes_it_again(vbus):
    async with backend(vbus.port) as arm:
        before = arm.counters
        await arm.reboot(["gripper"])  # the firmware loads Max Torque (1000) again
        assert vbus.register(2, N.TORQUE_LIMIT) == 500
        assert _cap(vbus, 2) == pytest.approx(0.5 * _stall(vbus, 2))
        # The reboot's own status packet was not taken for a later reply: neither the
        # rewrite nor the cycles after it need a retry (a CRC error and a retry, before).
        for _ in range(3):
            await arm.read()
        assert (arm.counters.retries, arm.counters.crc_errors) == (
            before.retries,
            before.crc_errors,
        )


def _read_only_torque_limit() -> FeetechModel:
    """An STS3215 whose firmware does not take a Torque Limit write (it keeps Max Torque's)."""
    sts = model("STS3215")
    frozen = dataclasses.replace(sts.table[N.TORQUE_LIMIT], access=Access.R)
    return dataclasses.replace(sts, table=MappingProxyType({**sts.table, N.TORQUE_LIMIT: frozen}))


async def test_a_servo_that_does_not_take_it_is_refused_in_one_line():
    variant = {"STS3215": _read_only_torque_limit()}
    with FeetechVirtualBus({1: "STS3215", 2: "STS3215"}, models=variant) as bus:
        arm = backend(bus.port)
        with pytest.raises(StartupError) as info:
            await arm.__aenter__()
        assert (info.value.servo_id, info.value.expected, info.value.found) == (2, 500, 1000)
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith("servo 2 ('gripper', STS3215): Torque Limit (48) reads 1000")
        assert "after writing 500 (torque_limit 0.5)" in message
        assert "Max Torque (16) reads 1000" in message
        assert [bus.register(i, N.TORQUE_ENABLE) for i in (1, 2)] == [0, 0]


def test_a_model_without_torque_limit_refuses_it_before_any_io():
    spec = ServoSpec(1, "SCS0009", "j", torque_limit=0.5)
    with pytest.raises(ConfigError) as info:
        FeetechBackend(BusSpec("x", family="feetech"), [spec])
    assert info.value.field == "torque_limit"
    assert "Torque Limit register, which the SCS series lacks" in str(info.value)


def test_a_limit_below_one_step_is_refused():
    spec = ServoSpec(1, "STS3215", "j", torque_limit=0.0004)
    with pytest.raises(ConfigError, match=r"below Torque Limit.s step of 0\.001"):
        FeetechBackend(BusSpec("x", family="feetech"), [spec])


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan")], ids=str)
def test_a_spec_outside_0_to_1_is_refused(bad):
    with pytest.raises(ValueError, match=r"torque_limit must be in \(0, 1\]"):
        ServoSpec(1, "STS3215", "j", torque_limit=bad)


async def _squeeze(spec: ServoSpec, seconds: float) -> tuple[JointState, int]:
    """Close ``spec``'s jaw past an object for ``seconds``; the last state, Torque Enable."""
    with FeetechVirtualBus({2: "STS3215"}, return_delay_time=0) as bus:
        bus.model.set_obstacle(bus.servo(2).index, high=OBJECT)
        async with backend(bus.port, [spec]) as arm:
            await arm.set_torque(True)
            await arm.write({"gripper": 1.2})  # well past the object
            loop = asyncio.get_running_loop()
            end = loop.time() + seconds  # longer than the overload time (1.5 s)
            state = await arm.read()
            while loop.time() < end:
                state = await arm.read()
                await asyncio.sleep(0.05)
            torque = bus.register(2, N.TORQUE_ENABLE)
        assert bus.errors == []
    return state, torque


async def test_the_gripper_stops_at_the_object_and_pushes_with_its_limit():
    state, torque = await _squeeze(GRIPPER, 2.5)
    assert state.position[0] == pytest.approx(OBJECT, abs=0.01)
    assert state.effort[0] == pytest.approx(50.0, abs=1.0)  # [%]: Present Load at the cap
    assert state.hardware_errors[0] == HardwareErrorFlags.NONE
    assert torque == 1  # still holding


async def test_without_a_torque_limit_the_squeeze_overloads():
    state, torque = await _squeeze(dataclasses.replace(GRIPPER, torque_limit=None), 2.5)
    assert HardwareErrorFlags.OVERLOAD in state.hardware_errors[0]
    assert torque == 0  # Unloading Condition: the firmware cut torque
