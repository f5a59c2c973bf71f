"""Torque off after a bus fault is reported servo by servo, and the report is true.

One servo of the chain stops answering: the torque-off read-back keeps every reply that
came, so the error (and the runtime's log) says which servos took torque off and which
did not answer, instead of "could not disable torque" while most servos already had.
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
from hilbot.hal.errors import TorqueNotConfirmed
from hilbot.hal.mapping import ServoSpec
from hilbot.sim import running_virtual_bus


async def test_torque_off_names_the_servos_that_are_off_and_the_one_that_is_silent(
    open_bus, backend_for, chain
):
    servos = chain("XM430-W350", 3)
    vbus = open_bus(servos)
    async with backend_for(vbus, servos, retries=0) as arm:
        await arm.set_torque(True)
        vbus.faults(3).unplug()
        with pytest.raises(TorqueNotConfirmed) as info:
            await arm.set_torque(False)
        err = info.value
        assert (err.off, err.on, err.silent) == ((1, 2), (), (3,))
        assert str(err) == (
            "torque is off on servo(s) 1 (j1), 2 (j2); servo(s) 3 (j3) did not answer: "
            "their torque is unknown"
        )
        assert [vbus.register(i, N.TORQUE_ENABLE) for i in (1, 2)] == [0, 0]
        vbus.faults(3).replug()
        await arm.set_torque(False)  # every servo confirms now: no error


async def test_close_reports_per_servo_too(open_bus, backend_for, chain, caplog):
    servos = chain("XM430-W350", 2)
    vbus = open_bus(servos)
    async with backend_for(vbus, servos, retries=0) as arm:
        await arm.set_torque(True)
        vbus.faults(2).unplug()
    assert "torque is off on servo(s) 1 (j1); servo(s) 2 (j2) did not answer" in caplog.text
    assert vbus.register(1, N.TORQUE_ENABLE) == 0


def _config(rate: float):
    path = config_path("openmanipulator_x")
    data = yaml.safe_load(path.read_text())
    data["urdf"] = str(path.parent / data["urdf"])
    data.update(chains=[], rate_hz=rate)
    return parse_config(data)


async def test_the_runtime_logs_which_servos_took_torque_off_after_a_bus_fault(caplog):
    config = _config(100.0)
    assert config.safety.estop_action.value == "stop"  # a bus fault turns torque off anyway
    specs: list[ServoSpec] = config.servo_specs()
    silent = specs[-1]
    async with running_virtual_bus(specs, initial_positions=dict(config.home)) as vbus:
        backend = dynamixel_backend(config, {"main": vbus.port}, margin_ms=virtual_margin_ms())
        async with Runtime(config, backend) as rt:
            await rt.command(Command.ENABLE)
            caplog.set_level(logging.INFO)
            vbus.faults(silent.id).unplug()
            for _ in range(200):
                await rt.wait_cycles(5)
                if "fault: torque off" in caplog.text:
                    break
            assert rt.mode is Mode.FAULTED
            assert any(f.kind is FaultKind.BUS for f in rt.state().fault_log)
            text = caplog.text
            assert "could not disable torque" not in text
            assert "torque off not confirmed on every servo (retrying)" in text
            answered = ", ".join(f"{s.id} ({s.joint})" for s in specs[:-1])
            assert f"torque is off on servo(s) {answered}" in text
            assert f"servo(s) {silent.id} ({silent.joint}) did not answer" in text
            assert all(vbus.register(s.id, N.TORQUE_ENABLE) == 0 for s in specs[:-1])
            vbus.faults(silent.id).replug()
            for _ in range(100):
                await rt.wait_cycles(5)
                if any(r.getMessage() == "fault: torque off" for r in caplog.records):
                    break
            assert any(r.getMessage() == "fault: torque off" for r in caplog.records)
            assert vbus.register(silent.id, N.TORQUE_ENABLE) == 0
