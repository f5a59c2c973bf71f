"""MultiBackend joins the Bus Watchdog reports of its buses and clears them on all."""

from __future__ import annotations

from hilbot.driver.runtime.backends import MultiBackend
from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim import running_virtual_bus


async def test_trips_on_two_buses_are_joined_counted_and_cleared():
    left = [ServoSpec(1, "XM430-W350", "l1"), ServoSpec(2, "XM430-W350", "l2")]
    right = [ServoSpec(1, "XM430-W350", "r1")]
    async with (
        running_virtual_bus(left, return_delay_time=0) as lbus,
        running_virtual_bus(right, return_delay_time=0) as rbus,
    ):
        backends = [
            DynamixelBackend(
                BusSpec(bus.port, 1_000_000, 2), servos, margin_ms=100.0, temperature_every=1
            )
            for bus, servos in ((lbus, left), (rbus, right))
        ]
        async with MultiBackend(backends) as both:
            await both.set_torque(True)
            await both.arm_watchdog(0.3)
            with lbus.lock:
                lbus.servo(2).trip_watchdog()
            with rbus.lock:
                rbus.servo(1).trip_watchdog()
            state = await both.read()
            assert state.bus_watchdog_tripped == ("l2", "r1")
            assert state.counters.watchdog_trips == 2
            await both.disarm_watchdog()
            state = await both.read()
            assert state.bus_watchdog_tripped == ()
            assert rbus.register(1, RegisterName.BUS_WATCHDOG) == 0
