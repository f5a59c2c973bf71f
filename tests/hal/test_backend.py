"""The real DynamixelBackend, unchanged, against the virtual bus: cycles and start-up checks."""

import asyncio
import logging
import math

import numpy as np
import pytest

from hilbot.hal.backend import Backend, EffortUnit, HardwareErrorFlags
from hilbot.hal.dynamixel.tables import RegisterName as N
from hilbot.hal.dynamixel.timing import ReadMethod
from hilbot.hal.errors import CommandError, ConfigError, StartupError, StartupProblem
from hilbot.hal.mapping import ServoSpec


async def settle(backend, joint, target, timeout=30.0):
    """Read until ``joint`` is within 0.01 rad of ``target``; return the last state."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        state = await backend.read()
        if abs(state.position[state.index(joint)] - target) < 0.01 or loop.time() > end:
            return state
        await asyncio.sleep(0.01)


async def test_protocol2_chain_reads_and_writes(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 3)
    vbus = open_bus(servos, initial_positions={1: 2048 + 512, 2: 2048, 3: 1024})
    async with backend_for(vbus, servos) as arm:
        assert isinstance(arm, Backend)
        assert arm.method is ReadMethod.FAST_SYNC_READ
        state = await arm.read()
        assert state.names == ("j1", "j2", "j3")
        np.testing.assert_allclose(state.position, [math.pi / 4, 0.0, -math.pi / 2], atol=2e-3)
        assert state.effort_unit == (EffortUnit.AMPERE,) * 3
        assert np.all(np.isfinite(state.temperature))
        assert state.hardware_errors == (HardwareErrorFlags.NONE,) * 3
        # goal was set to present before anything else, and torque is still off
        assert vbus.register(1, N.GOAL_POSITION) == 2048 + 512
        assert vbus.register(1, N.TORQUE_ENABLE) == 0
        await arm.set_torque(True)
        await arm.write({"j2": 0.5})
        state = await settle(arm, "j2", 0.5)
        assert state.position[1] == pytest.approx(0.5, abs=0.01)
        assert state.position[0] == pytest.approx(math.pi / 4, abs=0.01)  # held: no jump
        assert state.counters.transactions > 5
        assert state.counters.timeouts == 0
    assert vbus.register(2, N.TORQUE_ENABLE) == 0  # torque off on exit


async def test_plain_sync_read_when_fast_read_is_off(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 2)
    vbus = open_bus(servos)
    async with backend_for(vbus, servos, fast_read=False) as arm:
        assert arm.method is ReadMethod.SYNC_READ
        state = await arm.read()
        np.testing.assert_allclose(state.position, 0.0, atol=2e-3)


async def test_mixed_model_chain(open_bus, backend_for):
    servos = [
        ServoSpec(1, "XL430-W250", "base"),
        ServoSpec(2, "XM430-W350", "shoulder"),
        ServoSpec(3, "XL330-M288", "gripper"),
    ]
    vbus = open_bus(servos)
    async with backend_for(vbus, servos) as arm:
        state = await arm.read()
        assert state.effort_unit == (EffortUnit.PERCENT, EffortUnit.AMPERE, EffortUnit.AMPERE)
        await arm.set_torque(True, ["gripper"])
        assert vbus.register(3, N.TORQUE_ENABLE) == 1
        assert vbus.register(1, N.TORQUE_ENABLE) == 0
        await arm.write({"gripper": -0.4})
        state = await settle(arm, "gripper", -0.4)
        assert state.position[2] == pytest.approx(-0.4, abs=0.01)


@pytest.mark.parametrize("method", [ReadMethod.BULK_READ, ReadMethod.FAST_BULK_READ])
async def test_mixed_chain_on_a_bulk_read(open_bus, backend_for, method):
    servos = [ServoSpec(1, "XL430-W250", "base"), ServoSpec(2, "XM540-W270", "shoulder")]
    vbus = open_bus(servos, initial_positions={1: 1024, 2: 3072})
    async with backend_for(vbus, servos, read_method=method) as arm:
        assert arm.method is method
        state = await arm.read()
        np.testing.assert_allclose(state.position, [-math.pi / 2, math.pi / 2], atol=2e-3)
        assert state.effort_unit == (EffortUnit.PERCENT, EffortUnit.AMPERE)


@pytest.mark.parametrize(
    ("models", "method"),
    [
        (["AX-12A", "AX-12A"], ReadMethod.READ_EACH),
        (["MX-28", "MX-64"], ReadMethod.BULK_READ),
        (["AX-18A", "MX-106"], ReadMethod.READ_EACH),
    ],
    ids=["ax", "mx", "ax+mx"],
)
async def test_protocol1_chains(open_bus, models, method, backend_for):
    servos = [ServoSpec(i + 1, m, f"j{i + 1}") for i, m in enumerate(models)]
    vbus = open_bus(servos, protocol=1)
    async with backend_for(vbus, servos, protocol=1) as arm:
        assert arm.method is method
        state = await arm.read()
        np.testing.assert_allclose(state.position, 0.0, atol=6e-3)
        assert state.effort_unit == (EffortUnit.PERCENT,) * 2
        assert np.all(np.isfinite(state.temperature))
        await arm.set_torque(True)
        await arm.write({"j2": 0.3})
        state = await settle(arm, "j2", 0.3)
        assert state.position[1] == pytest.approx(0.3, abs=0.01)


async def test_shadow_servo_mirrors_its_primary(open_bus, backend_for):
    servos = [
        ServoSpec(1, "XM430-W350", "shoulder"),
        ServoSpec(2, "XM430-W350", "shoulder", direction=-1, shadow_of=1),
        ServoSpec(3, "XM430-W350", "elbow"),
    ]
    vbus = open_bus(servos)
    async with backend_for(vbus, servos) as arm:
        assert arm.joint_names == ("shoulder", "elbow")
        await arm.set_torque(True)
        assert vbus.register(2, N.TORQUE_ENABLE) == 1
        await arm.write({"shoulder": 0.2})
        await settle(arm, "shoulder", 0.2)
        assert vbus.register(1, N.GOAL_POSITION) - 2048 == -(
            vbus.register(2, N.GOAL_POSITION) - 2048
        )


async def test_bad_commands_write_nothing(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 2)
    vbus = open_bus(servos)
    async with backend_for(vbus, servos) as arm:
        with pytest.raises(CommandError) as err:
            await arm.write({"nope": 0.0})
        assert err.value.joint == "nope"
        with pytest.raises(CommandError) as err:
            await arm.write({"j1": 0.1, "j2": 10.0})
        assert err.value.joint == "j2"
        assert vbus.register(1, N.GOAL_POSITION) == 2048
        for bad in (math.inf, -math.inf, math.nan, 1e308):
            with pytest.raises(CommandError, match="j2") as err:
                await arm.write({"j1": 0.1, "j2": bad})
            assert err.value.joint == "j2"
        with pytest.raises(CommandError):
            await arm.set_torque(True, ["elbow"])


@pytest.mark.parametrize(("protocol", "model"), [(2, "XM430-W350"), (1, "AX-12A")])
async def test_missing_servo_is_named(open_bus, backend_for, chain, protocol, model):
    vbus = open_bus(chain(model, 2), protocol=protocol)
    with pytest.raises(StartupError) as err:
        async with backend_for(vbus, chain(model, 3), protocol=protocol):
            pass
    assert err.value.servo_id == 3
    assert err.value.problem is StartupProblem.MISSING
    assert "hilbot scan" in str(err.value)


@pytest.mark.parametrize(
    ("protocol", "present", "configured"),
    [(2, "XL430-W250", "XM430-W350"), (1, "AX-12A", "MX-28")],
)
async def test_wrong_model_is_named(open_bus, backend_for, chain, protocol, present, configured):
    vbus = open_bus({1: configured, 2: present}, protocol=protocol)
    with pytest.raises(StartupError) as err:
        async with backend_for(vbus, chain(configured, 2), protocol=protocol):
            pass
    assert err.value.servo_id == 2
    assert err.value.problem is StartupProblem.WRONG_MODEL
    assert (err.value.expected, err.value.found) == (configured, present)


async def test_unsupported_model_is_named(open_bus, backend_for, chain):
    servos = chain("AX-12A", 2)
    vbus = open_bus(servos, protocol=1)
    vbus.servo(2).memory.set(N.MODEL_NUMBER, 999)  # a model hilbot has no table for
    with pytest.raises(StartupError) as err:
        async with backend_for(vbus, servos, protocol=1):
            pass
    assert err.value.servo_id == 2
    assert err.value.problem is StartupProblem.UNSUPPORTED_MODEL
    assert (err.value.expected, err.value.found) == ("AX-12A", 999)
    assert vbus.register(1, N.TORQUE_ENABLE) == 0  # nothing was armed


async def test_wrong_operating_mode(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 2)
    vbus = open_bus(servos)
    vbus.servo(2).memory.set(N.OPERATING_MODE, 1)  # velocity mode
    with pytest.raises(StartupError) as err:
        async with backend_for(vbus, servos):
            pass
    assert err.value.servo_id == 2
    assert err.value.problem is StartupProblem.WRONG_MODE
    assert "address 11" in str(err.value)


async def test_wheel_mode_on_protocol1(open_bus, backend_for, chain):
    servos = chain("AX-12A", 1)
    vbus = open_bus(servos, protocol=1)
    vbus.servo(1).memory.set(N.CCW_ANGLE_LIMIT, 0)
    vbus.servo(1).memory.set(N.CW_ANGLE_LIMIT, 0)
    with pytest.raises(StartupError) as err:
        async with backend_for(vbus, servos, protocol=1):
            pass
    assert err.value.problem is StartupProblem.WRONG_MODE


async def test_status_return_level_zero(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 1)
    vbus = open_bus(servos)
    vbus.servo(1).memory.set(N.STATUS_RETURN_LEVEL, 0)
    with pytest.raises(StartupError) as err:
        async with backend_for(vbus, servos, retries=0):
            pass
    assert err.value.problem is StartupProblem.NO_STATUS_RETURN


async def test_return_delay_time_warns_with_the_fix(open_bus, caplog, backend_for, chain):
    servos = chain("XM430-W350", 1)
    vbus = open_bus(servos, return_delay_time=250)
    with caplog.at_level(logging.WARNING):
        async with backend_for(vbus, servos) as arm:
            await arm.read()
            assert arm.budget().return_delay == pytest.approx(500e-6)
    assert "--return-delay 0" in caplog.text


async def test_config_errors_before_any_io():
    with pytest.raises(ConfigError, match="twice"):
        backend_for_port([ServoSpec(1, "XM430-W350", "a"), ServoSpec(1, "XM430-W350", "b")])
    with pytest.raises(ConfigError, match="protocol"):
        backend_for_port([ServoSpec(1, "AX-12A", "a")])
    with pytest.raises(ConfigError, match="shadow"):
        backend_for_port([ServoSpec(1, "XM430-W350", "a"), ServoSpec(2, "XM430-W350", "a")])
    with pytest.raises(ConfigError, match="not a primary"):
        backend_for_port([ServoSpec(2, "XM430-W350", "a", shadow_of=5)])


def backend_for_port(servos):
    from hilbot.hal.dynamixel.backend import DynamixelBackend
    from hilbot.hal.mapping import BusSpec

    return DynamixelBackend(BusSpec("/dev/null-hilbot"), servos)


async def test_port_that_does_not_exist():
    from hilbot.hal.errors import PortError

    backend = backend_for_port([ServoSpec(1, "XM430-W350", "a")])
    with pytest.raises(PortError) as err:
        async with backend:
            pass
    assert err.value.port == "/dev/null-hilbot"


async def test_not_reentrant_and_close_twice(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 1)
    vbus = open_bus(servos)
    arm = backend_for(vbus, servos)
    async with arm:
        with pytest.raises(RuntimeError, match="reentrant"):
            await arm.__aenter__()
    await arm.close()
    with pytest.raises(RuntimeError, match="closed"):
        await arm.read()


async def test_watchdog_arm_and_disarm(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 2)
    vbus = open_bus(servos)
    async with backend_for(vbus, servos) as arm:
        await arm.arm_watchdog(0.1)
        await arm.read()  # a round trip: the sync writes before it have been served
        assert vbus.register(1, N.BUS_WATCHDOG) == 5
        await arm.disarm_watchdog()
        await arm.read()
        assert vbus.register(2, N.BUS_WATCHDOG) == 0
        with pytest.raises(ValueError, match="watchdog"):
            await arm.arm_watchdog(10.0)


async def test_event_loop_keeps_running_during_bus_io(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 3)
    vbus = open_bus(servos)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async with backend_for(vbus, servos) as arm:
        task = asyncio.create_task(ticker())
        for _ in range(20):
            await arm.read()
        task.cancel()
    assert ticks > 20  # the loop ran while the worker thread waited for replies
