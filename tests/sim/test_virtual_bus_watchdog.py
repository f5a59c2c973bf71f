"""The X-series Bus Watchdog (address 98) on the virtual bus, as dynamixel-sdk sees it.

What the e-manual ("Bus Watchdog(98)", X series) specifies, each checked here: the
watchdog watches while torque is on; when no instruction packet arrives for longer
than its value x 20 ms, the servo stops (no profile) and the register reads -1; the
goal registers are then read-only and a write is answered with the Data Range Error;
writing 0 clears the trip. Not in the e-manual, and modelled strictly: only packets
for the servo itself (its id, a broadcast, or a group instruction that lists it)
feed its watchdog.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dynamixel_sdk import COMM_SUCCESS, GroupSyncWrite

from hilbot.hal.dynamixel.protocol import StatusErrorCode
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.sim import running_virtual_bus

N = RegisterName
TORQUE_ENABLE, BUS_WATCHDOG, GOAL_POSITION = 64, 98, 116
TIMEOUT_UNITS = 5  # 100 ms
RANGE_ERROR = int(StatusErrorCode.DATA_RANGE_ERROR)


Sdk = Any  # tests/sim/conftest.py's handles: .bus, .port, .packet


class Clock:
    """A clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, dt: float) -> None:
        self.now += dt


@pytest.fixture
def wd(sdk_on) -> Iterator[tuple[Sdk, Clock]]:
    clock = Clock()
    servos = {1: "XM430-W350", 2: "XM430-W350"}
    with running_virtual_bus(servos, return_delay_time=0, clock=clock) as bus:
        sdk = sdk_on(bus, 2, 1_000_000)
        yield sdk, clock
        sdk.port.closePort()
        assert bus.errors == []


def write1(sdk: Sdk, servo_id: int, address: int, value: int) -> int:
    result, error = sdk.packet.write1ByteTxRx(sdk.port, servo_id, address, value)
    assert result == COMM_SUCCESS
    return error & 0x7F


def watchdog(sdk: Sdk, servo_id: int) -> int:
    value, result, _ = sdk.packet.read1ByteTxRx(sdk.port, servo_id, BUS_WATCHDOG)
    assert result == COMM_SUCCESS
    return int(value)


def arm(sdk: Sdk, servo_id: int = 1, torque: bool = True) -> None:
    assert write1(sdk, servo_id, BUS_WATCHDOG, TIMEOUT_UNITS) == 0
    if torque:
        assert write1(sdk, servo_id, TORQUE_ENABLE, 1) == 0


def goal_write(sdk: Sdk, servo_id: int, ticks: int) -> int:
    result, error = sdk.packet.write4ByteTxRx(sdk.port, servo_id, GOAL_POSITION, ticks)
    assert result == COMM_SUCCESS
    return error & 0x7F


def test_silence_longer_than_the_timeout_trips_it(wd):
    sdk, clock = wd
    arm(sdk)
    clock.advance(0.099)
    assert watchdog(sdk, 1) == TIMEOUT_UNITS  # the read itself restarts the timer
    clock.advance(0.101)
    assert watchdog(sdk, 1) == 0xFF  # -1: Bus Watchdog Error
    assert sdk.bus.register(1, N.BUS_WATCHDOG) == -1
    assert sdk.bus.register(1, N.TORQUE_ENABLE) == 1  # it stops, holding: torque stays on


def test_a_tripped_watchdog_refuses_goals_until_cleared_with_zero(wd):
    sdk, clock = wd
    arm(sdk)
    clock.advance(0.2)
    assert goal_write(sdk, 1, 3000) == RANGE_ERROR
    writer = GroupSyncWrite(sdk.port, sdk.packet, GOAL_POSITION, 4)
    writer.addParam(1, list((3000).to_bytes(4, "little")))
    writer.txPacket()  # no reply: silently not applied
    assert sdk.packet.ping(sdk.port, 2)[1] == COMM_SUCCESS  # the bus has taken the write
    assert sdk.bus.register(1, N.GOAL_POSITION) != 3000
    assert write1(sdk, 1, BUS_WATCHDOG, 7) == RANGE_ERROR  # only 0 clears it
    assert watchdog(sdk, 1) == 0xFF
    assert write1(sdk, 1, BUS_WATCHDOG, 0) == 0
    assert watchdog(sdk, 1) == 0
    assert goal_write(sdk, 1, 2100) == 0
    assert sdk.bus.register(1, N.GOAL_POSITION) == 2100


def test_minus_one_is_a_status_not_a_setting(wd):
    sdk, _ = wd
    assert write1(sdk, 1, BUS_WATCHDOG, 0xFF) == RANGE_ERROR
    assert watchdog(sdk, 1) == 0


def test_only_instructions_for_the_servo_feed_its_watchdog(wd):
    sdk, clock = wd
    arm(sdk, 1)
    arm(sdk, 2)
    for _ in range(5):  # 300 ms in steps of 60: servo 2 is pinged, servo 1 is not
        clock.advance(0.06)
        assert sdk.packet.ping(sdk.port, 2)[1] == COMM_SUCCESS
    assert watchdog(sdk, 2) == TIMEOUT_UNITS
    assert watchdog(sdk, 1) == 0xFF


def test_a_sync_write_that_lists_the_servo_feeds_it(wd):
    sdk, clock = wd
    arm(sdk, 1)
    writer = GroupSyncWrite(sdk.port, sdk.packet, GOAL_POSITION, 4)
    writer.addParam(1, list((2048).to_bytes(4, "little")))
    for _ in range(5):
        clock.advance(0.06)
        writer.txPacket()
        # a sync write has no reply: servo 2's answer shows the bus has taken it (and a
        # ping for servo 2 does not feed servo 1, see above)
        assert sdk.packet.ping(sdk.port, 2)[1] == COMM_SUCCESS
    assert watchdog(sdk, 1) == TIMEOUT_UNITS


def test_it_does_not_watch_while_torque_is_off(wd):
    sdk, clock = wd
    arm(sdk, torque=False)
    clock.advance(1.0)
    assert watchdog(sdk, 1) == TIMEOUT_UNITS
    assert write1(sdk, 1, TORQUE_ENABLE, 1) == 0  # from here it watches
    clock.advance(0.15)
    assert watchdog(sdk, 1) == 0xFF


def test_reboot_clears_it(wd):
    sdk, clock = wd
    arm(sdk)
    clock.advance(0.2)
    assert watchdog(sdk, 1) == 0xFF
    assert sdk.packet.reboot(sdk.port, 1)[0] == COMM_SUCCESS
    assert watchdog(sdk, 1) == 0


def test_the_servo_stops_where_it_was_when_the_watchdog_expired(sdk_on):
    """Twin buses, one armed: the armed servo stops at the deadline; the other keeps going."""
    positions = {}
    for armed in (True, False):
        clock = Clock()
        with running_virtual_bus({1: "XM430-W350"}, return_delay_time=0, clock=clock) as bus:
            sdk = sdk_on(bus, 2, 1_000_000)
            if armed:
                assert write1(sdk, 1, BUS_WATCHDOG, TIMEOUT_UNITS) == 0
            assert write1(sdk, 1, TORQUE_ENABLE, 1) == 0
            assert goal_write(sdk, 1, 4000) == 0  # far: about 0.3 s of travel
            clock.advance(0.1)
            at_deadline = bus.register(1, N.PRESENT_POSITION)
            clock.advance(0.4)
            later = bus.register(1, N.PRESENT_POSITION)
            goal = bus.register(1, N.GOAL_POSITION)
            positions[armed] = (at_deadline, later, goal)
            sdk.port.closePort()
    armed_at, armed_later, armed_goal = positions[True]
    free_at, free_later, _ = positions[False]
    assert armed_at == free_at  # same motion up to the deadline
    assert free_later > armed_at + 500  # unwatched, it kept going
    assert abs(armed_later - armed_at) < 150  # watched, it braked to a stop there
    assert abs(armed_goal - armed_later) < 150  # goal := present at the trip
