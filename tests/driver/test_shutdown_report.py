"""What `hilbot run` says its shutdown did, through the real backend on the virtual bus."""

from __future__ import annotations

import pytest

from hilbot.driver.commands.shutdown_report import TorqueWatch, shutdown_text
from hilbot.driver.runtime.backends import dynamixel_backend, virtual_margin_ms
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.errors import BusError
from hilbot.sim import running_virtual_bus


@pytest.fixture
def omx(make_config):
    return make_config("openmanipulator_x")


async def test_torque_off_on_every_servo_is_reported(omx):
    with running_virtual_bus(omx.servo_specs(), return_delay_time=0) as vbus:
        ports = {"main": vbus.port}
        async with TorqueWatch(
            dynamixel_backend(omx, ports, margin_ms=virtual_margin_ms())
        ) as watch:
            await watch.set_torque(True)
            assert shutdown_text(omx, watch).startswith("shutdown: could not turn torque off")
            await watch.set_torque(False)
            assert all(vbus.register(i, RegisterName.TORQUE_ENABLE) == 0 for i in range(11, 16))
    assert shutdown_text(omx, watch) == "shutdown: torque off on 5 servos"


async def test_a_torque_off_that_fails_says_so_and_what_stops_the_servos(omx):
    with running_virtual_bus(omx.servo_specs(), return_delay_time=0) as vbus:
        ports = {"main": vbus.port}
        backend = dynamixel_backend(omx, ports, margin_ms=virtual_margin_ms(), retries=0)
        async with TorqueWatch(backend) as watch:
            await watch.set_torque(True)
            for servo_id in range(11, 16):
                vbus.faults(servo_id).unplug()  # the bus goes quiet
            with pytest.raises(BusError):
                await watch.set_torque(False)
            text = shutdown_text(omx, watch)
            for servo_id in range(11, 16):
                vbus.faults(servo_id).replug()
    assert text.startswith("shutdown: could not turn torque off on 5 servos: ")
    assert text.endswith("servos with a bus watchdog stop by themselves within 0.5 s")
