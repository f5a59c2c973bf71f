"""A host stall longer than the servos' Bus Watchdog, end to end.

The virtual bus (in-process, real protocol on a pty), the real ``DynamixelBackend`` and
the runtime: a cycle listener blocks the event loop longer than ``safety.bus_watchdog``,
the X-series servos trip (they stop and ignore goals, as the e-manual describes), the
backend finds the trip in its periodic slow read, and the runtime disarms and reports
it. ``reset`` then ``enable`` clears and re-arms the watchdog without a jump.
"""

from __future__ import annotations

import time

import pytest

from hilbot.driver.runtime.backends import dynamixel_backend, virtual_margin_ms
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command, CycleRecord, FaultKind
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.sim import running_virtual_bus

N = RegisterName
RATE = 100.0  # modest: the virtual servos share this (busy, 2-core) machine
#: [s] the servos' watchdog: more than the shipped 0.1 s, so that this shared, busy test
#: machine does not trip it by accident outside the stall (it stalls ~0.13 s at times).
BUS_WATCHDOG = 0.3
UNITS = round(BUS_WATCHDOG / 0.02)
STALL = 0.6  # [s] the host blocks this long
IDS = range(11, 16)


@pytest.fixture
def config(make_config):
    return make_config(
        "openmanipulator_x", chains=[], rate_hz=RATE, safety={"bus_watchdog": BUS_WATCHDOG}
    )


class Staller:
    """A cycle listener that blocks the loop once, when told to, and records commands."""

    def __init__(self, vbus) -> None:
        self.vbus = vbus
        self.armed = False
        self.ticks_after_stall: int | None = None
        self.written: list[tuple[int, float]] = []  # (cycle, joint1 command) written

    def __call__(self, rec: CycleRecord) -> None:
        if rec.written:
            self.written.append((rec.cycle, float(rec.command[0])))
        if self.armed:
            self.armed = False
            time.sleep(STALL)  # the host hangs: no instruction reaches the servos
            self.stall_cycle = rec.cycle
            self.ticks_after_stall = self.vbus.register(11, N.PRESENT_POSITION)


async def test_a_stall_trips_the_servo_watchdog_disarms_and_enable_recovers(config, running):
    async with running(config) as (vbus, rt):
        staller = Staller(vbus)
        rt.add_cycle_listener(staller)
        await rt.command(Command.ENABLE)
        assert vbus.register(11, N.BUS_WATCHDOG) == UNITS  # 20 ms units
        target = float(rt.state().joints.positions()["joint1"]) + 1.0
        for _ in range(20):  # joint1 on its way (at the step bound)
            rt.set_joint_targets({"joint1": target})
            await rt.wait_cycles(1)
        staller.armed = True
        for _ in range(200):  # keep asking for motion through the stall and after it
            rt.set_joint_targets({"joint1": target})
            await rt.wait_cycles(1)
            if rt.mode is Mode.FAULTED:
                break
        state = rt.state()
        assert state.mode is Mode.FAULTED
        tripped = {f.joint for f in state.faults if f.kind is FaultKind.BUS_WATCHDOG}
        assert tripped == set(rt.joint_names)
        assert state.joints.bus_watchdog_tripped
        assert state.joints.counters.watchdog_trips == len(IDS)
        assert all(vbus.register(i, N.BUS_WATCHDOG) == -1 for i in IDS)
        # The runtime kept streaming goals after the stall until it noticed; none moved
        # the tripped servo (goals are read-only to it).
        after = [c for cycle, c in staller.written if cycle > staller.stall_cycle]
        stopped = state.joints.positions()["joint1"]
        assert after and after[-1] > stopped + 0.015  # it asked for motion past the stop
        assert staller.ticks_after_stall is not None
        assert abs(vbus.register(11, N.PRESENT_POSITION) - staller.ticks_after_stall) <= 3
        await rt.wait_cycles(2)
        assert all(vbus.register(i, N.TORQUE_ENABLE) == 0 for i in IDS)  # disarmed: torque off
        assert "bus watchdog tripped" in _status(rt)

        await rt.command(Command.RESET)  # clears the trip (torque is off)
        assert rt.mode is Mode.DISARMED
        assert all(vbus.register(i, N.BUS_WATCHDOG) == 0 for i in IDS)
        await rt.wait_cycles(30)  # a slow read or more: nothing is reported again
        assert not [f for f in rt.state().faults if f.kind is FaultKind.BUS_WATCHDOG]
        before = rt.state().joints.positions()
        await rt.command(Command.ENABLE)  # re-arms, goal = present before torque
        assert all(vbus.register(i, N.BUS_WATCHDOG) == UNITS for i in IDS)
        await rt.wait_cycles(3)
        now = rt.state().joints.positions()
        for joint, value in before.items():
            assert now[joint] == pytest.approx(value, abs=0.01)  # no jump
        start = now["joint1"]
        for _ in range(30):
            rt.set_joint_targets({"joint1": start + 0.2})
            await rt.wait_cycles(1)
        assert rt.mode is Mode.ARMED
        assert rt.state().joints.positions()["joint1"] > start + 0.1  # it tracks again


async def test_a_trip_left_by_an_earlier_host_is_reported_and_cleared_by_enable(config):
    # A host that dies leaves torque on, and the servos' watchdog trips.
    async with running_virtual_bus(
        config.servo_specs(), baudrate=1_000_000, initial_positions=dict(config.home)
    ) as vbus:
        with vbus.lock:
            for i in IDS:
                servo = vbus.servo(i)
                servo.heard(time.monotonic())
                assert servo.write(98, bytes((UNITS,)), time.monotonic()) == 0
                assert servo.write(64, bytes((1,)), time.monotonic()) == 0
        time.sleep(BUS_WATCHDOG + 0.05)
        assert vbus.register(11, N.BUS_WATCHDOG) == -1
        backend = dynamixel_backend(
            config, {"main": vbus.port}, margin_ms=virtual_margin_ms(BUS_WATCHDOG)
        )
        async with Runtime(config, backend) as rt:
            assert rt.state().joints.bus_watchdog_tripped == rt.joint_names
            await rt.wait_cycles(2)
            assert rt.mode is Mode.DISARMED  # reported, not faulted: it was not armed
            assert {f.joint for f in rt.state().faults} == set(rt.joint_names)
            before = rt.state().joints.positions()
            await rt.command(Command.ENABLE)
            assert all(vbus.register(i, N.BUS_WATCHDOG) == UNITS for i in IDS)
            await rt.wait_cycles(3)
            assert rt.mode is Mode.ARMED
            assert not rt.state().faults
            now = rt.state().joints.positions()
            for joint, value in before.items():
                assert now[joint] == pytest.approx(value, abs=0.01)


def _status(rt: Runtime) -> str:
    from hilbot.driver.commands.run import status_text

    return status_text(rt.state())
