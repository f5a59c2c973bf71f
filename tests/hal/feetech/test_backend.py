"""FeetechBackend against the virtual Feetech bus: start-up checks, the cycle, faults, torque."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator

import pytest

from hilbot.hal.backend import Backend, HardwareErrorFlags
from hilbot.hal.errors import (
    CommandError,
    CommTimeout,
    CrcError,
    HardwareFault,
    ServoLimitError,
    StartupError,
    StartupProblem,
)
from hilbot.hal.feetech.backend import FeetechBackend
from hilbot.hal.feetech.tables import FeetechRegister as N
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim.virtual_bus import FeetechVirtualBus

MARGIN_MS = 30.0  # the loaded test machine: generous reply slack
SERVOS = [ServoSpec(1, "STS3215", "a"), ServoSpec(2, "STS3215", "b", direction=-1, offset=0.2)]


@pytest.fixture
def vbus() -> Iterator[FeetechVirtualBus]:
    with FeetechVirtualBus({1: "STS3215", 2: "STS3215"}, 1_000_000, return_delay_time=0) as bus:
        yield bus
        assert bus.errors == []


def backend(port: str, servos=SERVOS, **options) -> FeetechBackend:
    options.setdefault("margin_ms", MARGIN_MS)
    return FeetechBackend(BusSpec(port, family="feetech"), servos, **options)


async def test_it_is_a_backend_reading_si_units_at_the_center_tick(vbus):
    async with backend(vbus.port) as arm:
        assert isinstance(arm, Backend)
        state = await arm.read()
        assert state.names == ("a", "b")
        assert state.position.tolist() == pytest.approx([0.0, 0.2])  # center + offset
        assert state.hardware_errors == (HardwareErrorFlags.NONE,) * 2
        assert state.counters.transactions > 0
        assert [i.model_number for i in arm.infos] == [777, 777]


async def test_goals_reach_the_servos_through_offset_and_direction(vbus):
    async with backend(vbus.port) as arm:
        await arm.set_torque(True)
        assert [vbus.register(i, N.TORQUE_ENABLE) for i in (1, 2)] == [1, 1]
        await arm.write({"a": 0.5, "b": 0.2 - 0.5})
        await arm.read()  # queued behind the write
        ticks = round(0.5 / (2 * math.pi / 4096))
        assert vbus.register(1, N.GOAL_POSITION) == 2048 + ticks
        assert vbus.register(2, N.GOAL_POSITION) == 2048 + ticks  # direction -1
    assert [vbus.register(i, N.TORQUE_ENABLE) for i in (1, 2)] == [0, 0]


@pytest.mark.parametrize("bad", [math.nan, math.inf, 1e308, 3.5], ids=str)
async def test_a_goal_the_servo_cannot_take_is_refused_and_nothing_is_sent(vbus, bad):
    async with backend(vbus.port) as arm:
        before = vbus.register(1, N.GOAL_POSITION)
        with pytest.raises(CommandError) as info:
            await arm.write({"a": 0.1, "b": bad})
        assert info.value.joint == "b"
        await arm.read()
        assert vbus.register(1, N.GOAL_POSITION) == before
        with pytest.raises(CommandError):
            await arm.write({"nope": 0.0})


async def test_a_missing_servo_fails_start_up_naming_it(vbus):
    servos = [*SERVOS, ServoSpec(7, "STS3215", "c")]
    with pytest.raises(StartupError) as info:
        async with backend(vbus.port, servos):
            pass
    assert info.value.servo_id == 7 and info.value.problem is StartupProblem.MISSING


async def test_the_wrong_model_fails_start_up(vbus):
    servos = [SERVOS[0], ServoSpec(2, "STS3250", "b")]
    with pytest.raises(StartupError) as info:
        async with backend(vbus.port, servos):
            pass
    assert info.value.problem is StartupProblem.WRONG_MODEL
    assert (info.value.expected, info.value.found) == (2825, 777)


async def test_a_servo_not_in_position_mode_fails_start_up(vbus):
    vbus.servo(2).memory.set(N.OPERATING_MODE, 1)
    with pytest.raises(StartupError) as info:
        async with backend(vbus.port):
            pass
    assert info.value.problem is StartupProblem.WRONG_MODE and info.value.found == 1


async def test_joint_limits_beyond_the_angle_limits_fail_with_the_fix(vbus):
    vbus.servo(1).memory.set(N.MAX_ANGLE_LIMIT, 3000)
    with pytest.raises(ServoLimitError) as info:
        async with backend(vbus.port, joint_limits={"a": (-1.0, 1.5)}):
            pass
    assert info.value.register == "Max Angle Limit" and info.value.found == 3000
    assert "--max-angle-limit" in info.value.command


async def test_corrupt_replies_are_retried_and_counted(vbus):
    async with backend(vbus.port, retries=3) as arm:
        vbus.fault(2).corrupt_rate = 1.0
        with pytest.raises(CrcError):
            await arm.read()
        vbus.fault(2).corrupt_rate = 0.0
        state = await arm.read()
        assert state.counters.crc_errors >= 4 and state.counters.retries >= 3


async def test_a_lost_servo_times_out_and_the_bus_recovers(vbus):
    async with backend(vbus.port) as arm:
        vbus.fault(1).unplug()
        with pytest.raises(CommTimeout) as info:
            await arm.read()
        assert info.value.servo_id == 1
        vbus.fault(1).replug()
        state = await arm.read()
        assert state.counters.timeouts >= 2


async def test_a_hardware_error_is_reported_and_blocks_torque_until_reboot(vbus):
    async with backend(vbus.port) as arm:
        await arm.set_torque(True)
        vbus.raise_hardware_error(2, HardwareErrorFlags.OVERLOAD)
        state = await arm.read()
        assert state.faults == {"b": HardwareErrorFlags.OVERLOAD}
        with pytest.raises(HardwareFault) as info:
            await arm.set_torque(True)
        assert info.value.servo_id == 2
        await arm.reboot(["b"])
        assert (await arm.read()).faults == {}
        await arm.set_torque(True)


async def test_scs_servos_are_read_one_by_one_in_their_byte_order():
    servos = [ServoSpec(1, "SCS0009", "a"), ServoSpec(2, "SCS0009", "b")]
    with FeetechVirtualBus({1: "SCS0009", 2: "SCS0009"}, 1_000_000) as vbus:
        async with backend(vbus.port, servos) as arm:
            await arm.set_torque(True)
            await arm.write({"a": 0.3})
            state = await arm.read()
            assert state.position[1] == pytest.approx(0.0)
            assert vbus.register(1, N.GOAL_POSITION) == 511 + round(0.3 / (2 * math.pi / 1228.8))
        assert vbus.errors == []


async def test_the_backend_is_not_reentrant_and_closes_twice(vbus):
    arm = backend(vbus.port)
    async with arm:
        with pytest.raises(RuntimeError):
            await arm.__aenter__()
    await arm.close()
    with pytest.raises(RuntimeError):
        await arm.read()


async def test_speed_and_load_keep_their_sign_magnitude_sign(vbus):
    async with backend(vbus.port) as arm:
        await arm.set_torque(True)
        await arm.write({"a": -1.0, "b": 0.2 - 1.0})  # b turns the other way (direction -1)
        seen = []
        for _ in range(40):
            state = await arm.read()
            seen.append(state.velocity.copy())
        fastest = min(seen, key=lambda v: v[0])
        assert fastest[0] < -0.5 and fastest[1] < -0.5  # [rad/s], joint frame for both
        vbus.set_load(1, 0.5)
        for _ in range(20):
            state = await arm.read()
        assert state.effort[0] != 0.0


async def test_a_reply_later_than_its_deadline_is_not_taken_for_the_next_one(vbus):
    async with backend(vbus.port, retries=0) as arm:
        await arm.set_torque(True)
        vbus.fault(1).delay = 0.2  # [s] past the deadline (wire time + 30 ms)
        with pytest.raises(CommTimeout):
            await arm.read()
        vbus.fault(1).delay = 0.0
        await arm.write({"a": 0.5})
        await asyncio.sleep(0.8)  # the late reply (a = 0) is in, the servo is at 0.5
        state = await arm.read()
        assert state.position[0] == pytest.approx(0.5, abs=0.01)


async def test_pipelined_reads_are_queued_ahead_while_goals_stream(vbus):
    async with backend(vbus.port, pipeline=True) as arm:
        await arm.set_torque(True)
        await arm.read()
        assert arm._ahead is None  # no goal written since: read fresh, nothing ahead
        for k in range(20):
            await arm.write({"a": 0.01 * k})
            state = await arm.read()
            assert arm._ahead is not None  # the next cycle's read is already queued
        assert state.position[0] < 0.19  # still on its way (and one cycle old)
        # The last goal goes out (queued behind the read; a busy host may send it late) ...
        last = 2048 + round(0.19 / (2 * math.pi / 4096))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20.0
        while vbus.register(1, N.GOAL_POSITION) != last:
            assert loop.time() < deadline, "the last goal never went out"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.6)  # ... and is reached
        await arm.set_torque(False)  # any other call drops the read queued ahead
        assert arm._ahead is None
        assert (await arm.read()).position[0] == pytest.approx(0.19, abs=0.02)
