"""A Data Limit Error at run time is a named fault at once, on the virtual bus, end to end.

Start-up refuses joint limits past a servo's own limit registers, but with torque off
another tool may narrow them later (``hilbot servo``, the vendor's wizard). Enabling
re-reads them; a goal past the narrowed register is then refused before the sync write
(which the firmware would drop unseen), and the runtime faults at once naming servo,
register and value, instead of riding it out as a failing bus for 0.25 s. Never a clamp.
"""

from __future__ import annotations

import logging

import pytest
import yaml

from hilbot.configs import config_path
from hilbot.driver.runtime.backends import dynamixel_backend, virtual_margin_ms
from hilbot.driver.runtime.config import parse_config
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command, FaultKind
from hilbot.hal.dynamixel.tables import RegisterName as N
from hilbot.hal.dynamixel.tables import model
from hilbot.hal.errors import DataLimitError
from hilbot.hal.mapping import ServoSpec
from hilbot.sim import running_virtual_bus

JOINT = "joint1"


def tick_of(spec: ServoSpec, joint: float) -> int:
    """The Goal Position tick of a joint position, by the mapping's formula."""
    m = model(spec.model)
    scale = spec.direction * m.radians_per_tick / spec.gear_ratio
    return round(m.center_tick + (joint - spec.offset) / scale)


def _config(estop_action: str = "hold"):
    path = config_path("openmanipulator_x")
    data = yaml.safe_load(path.read_text())
    data["urdf"] = str(path.parent / data["urdf"])
    data.update(chains=[], rate_hz=100.0)
    data["safety"]["estop_action"] = estop_action
    return parse_config(data)


def _narrow(vbus, spec: ServoSpec, home: float, past: float) -> tuple[str, int]:
    """Narrow the servo's limit register on the side of ``past``, torque off, as a tool would."""
    limit = tick_of(spec, (home + past) / 2)
    up = tick_of(spec, past) > tick_of(spec, home)
    name = N.MAX_POSITION_LIMIT if up else N.MIN_POSITION_LIMIT
    assert vbus.write_register(spec.id, name, limit) == 0  # torque off: EEPROM writable
    return name.value, limit


async def _until(rt: Runtime, done, cycles: int = 400) -> None:
    for _ in range(cycles // 5):
        if done():
            return
        await rt.wait_cycles(5)


async def test_a_goal_past_a_register_narrowed_since_startup_faults_at_once_naming_it(caplog):
    config = _config()
    specs = config.servo_specs()
    spec = next(s for s in specs if s.joint == JOINT)
    home = config.home[JOINT]
    past = home + 0.3
    async with running_virtual_bus(specs, initial_positions=dict(config.home)) as vbus:
        backend = dynamixel_backend(config, {"main": vbus.port}, margin_ms=virtual_margin_ms())
        async with Runtime(config, backend) as rt:
            await rt.wait_cycles(3)
            register, limit = _narrow(vbus, spec, home, past)
            caplog.set_level(logging.WARNING)
            await rt.command(Command.ENABLE)
            assert f"servo {spec.id}: its limit registers changed since start-up" in caplog.text
            rt.set_joint_targets({JOINT: past})
            await _until(rt, lambda: rt.mode is not Mode.ARMED)
            state = rt.state()
            assert state.mode is Mode.FAULTED
            limit_faults = [f for f in state.faults if f.kind is FaultKind.LIMIT]
            assert [f.joint for f in limit_faults] == [JOINT]
            detail = limit_faults[0].detail
            assert f"servo {spec.id}" in detail and register in detail and str(limit) in detail
            assert "refused, not clamped" in detail
            # not the transient bus path: no bus fault, no bus error counted
            assert not [f for f in state.fault_log if f.kind is FaultKind.BUS]
            assert state.stats.bus_errors == 0
            await rt.wait_cycles(3)
            state = rt.state()
            assert state.joints is not None and state.joints.counters.data_limit_errors == 1
            # the servo never got a goal past its register, and holds where it is (hold)
            goal = vbus.register(spec.id, N.GOAL_POSITION)
            # strictly inside: a goal clamped onto the register would sit on it
            assert goal < limit if register.startswith("Max") else goal > limit
            assert vbus.register(spec.id, N.TORQUE_ENABLE) == 1
            # reported once, not once a cycle
            assert len([f for f in rt.state().fault_log if f.kind is FaultKind.LIMIT]) == 1
            await rt.command(Command.RESET)
            assert not [f for f in rt.state().faults if f.kind is FaultKind.LIMIT]


async def test_with_torque_off_as_the_safe_state_torque_goes_off():
    config = _config("torque_off")
    specs = config.servo_specs()
    spec = next(s for s in specs if s.joint == JOINT)
    home = config.home[JOINT]
    past = home - 0.3
    async with running_virtual_bus(specs, initial_positions=dict(config.home)) as vbus:
        backend = dynamixel_backend(config, {"main": vbus.port}, margin_ms=virtual_margin_ms())
        async with Runtime(config, backend) as rt:
            await rt.wait_cycles(3)
            _narrow(vbus, spec, home, past)
            await rt.command(Command.ENABLE)
            rt.set_joint_targets({JOINT: past})
            await _until(rt, lambda: rt.mode is not Mode.ARMED)
            assert rt.mode is Mode.FAULTED
            assert [f.kind for f in rt.state().faults] == [FaultKind.LIMIT]
            await _until(rt, lambda: vbus.register(spec.id, N.TORQUE_ENABLE) == 0)
            assert all(vbus.register(s.id, N.TORQUE_ENABLE) == 0 for s in specs)


async def test_the_backend_checks_goals_against_the_registers_read_at_enable(
    open_bus, backend_for, chain
):
    servos = chain("XM430-W350", 2)
    vbus = open_bus(servos)
    async with backend_for(vbus, servos) as arm:
        present = tick_of(servos[1], 0.0)
        await arm.write({"j1": 0.0, "j2": 0.2})  # torque off: the goal is taken
        assert vbus.write_register(2, N.MAX_POSITION_LIMIT, present + 50) == 0
        await arm.set_torque(True)
        try:
            await arm.write({"j1": 0.0, "j2": 0.0})  # inside the new register: fine
            with pytest.raises(DataLimitError) as info:
                await arm.write({"j1": 0.0, "j2": 0.2})
            err = info.value
            assert (err.servo_id, err.register, err.limit) == (
                2,
                "Max Position Limit",
                present + 50,
            )
            assert err.value == tick_of(servos[1], 0.2) and err.joint == "j2"
            assert vbus.register(2, N.GOAL_POSITION) == present  # the last goal taken, not clamped
            # EEPROM is locked while torque is on: the registers cannot change under us
            assert vbus.write_register(2, N.MAX_POSITION_LIMIT, present + 10) != 0
        finally:
            await arm.set_torque(False)
