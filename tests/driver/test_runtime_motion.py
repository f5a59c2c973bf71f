"""The motion layer in the runtime, on the sim backend and on the real backends over virtual buses.

Glitches are injected at the byte level: the virtual bus rewrites Present Position in a
reply and recomputes its CRC, so the real backend decodes a valid packet.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from hilbot.driver.runtime.backends import sim_backend
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command, CycleRecord, FaultKind
from hilbot.hal.dynamixel.tables import RegisterName
from tests.driver.conftest import wait_at_rest

RATE = 200.0


class Commands:
    """Every written command, with the cycle's time."""

    def __init__(self) -> None:
        self.q: list[np.ndarray] = []
        self.t: list[float] = []
        self.clamps = 0

    def __call__(self, rec: CycleRecord) -> None:
        self.clamps += len(rec.clamps)
        if rec.written:
            self.q.append(rec.command.copy())
            self.t.append(rec.deadline)

    def steps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q = np.array(self.q)
        dt = 1.0 / RATE
        v = np.diff(q, axis=0) / dt
        a = np.diff(v, axis=0) / dt
        return v, a, np.diff(a, axis=0) / dt


def hand(t: float, start: np.ndarray) -> np.ndarray:
    wave = 0.25 * np.sin(2 * np.pi * 0.7 * t) + 0.1 * np.sin(2 * np.pi * 0.3 * t)
    return start + np.array([wave, -0.5 * wave, 0.5 * wave, 0.3 * wave, 0.0])


async def _stream_30hz(rt: Runtime, seconds: float, *, real_time: bool) -> None:
    """Joint targets at 30 Hz with ±5 ms jitter, as a phone or a VR headset sends them."""
    rng = np.random.default_rng(5)
    start = np.array(list(rt.state().command.values()))
    names = rt.joint_names
    for k in range(int(seconds * 30)):
        values = hand(k / 30.0, start)
        rt.set_joint_targets(dict(zip(names, values.tolist(), strict=True)))
        wait = 1 / 30 + rng.uniform(-0.005, 0.005)
        if real_time:
            await asyncio.sleep(wait)
        else:
            await rt.wait_cycles(max(1, round(wait * RATE)))


def _assert_within_limits(rt: Runtime, rec: Commands) -> None:
    v, a, j = rec.steps()
    motion = rt.motion.limits
    assert rec.clamps == 0
    assert np.all(np.abs(v) <= motion.velocity * (1 + 1e-6) + 1e-9)
    # per cycle, the acceleration and jerk of the written command stay within the limits
    assert np.all(np.abs(a) <= rt.acceleration_limits + 1e-6)
    assert np.all(np.abs(j) <= motion.jerk * (1 + 1e-6) + 1e-3)


async def test_a_30hz_stream_on_the_sim_backend_moves_every_cycle_within_the_limits(
    make_config, clock
):
    config = make_config("openmanipulator_x", chains=[], rate_hz=RATE)
    rec = Commands()
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        rt.add_cycle_listener(rec)
        await _stream_30hz(rt, 4.0, real_time=False)
    _assert_within_limits(rt, rec)
    moving = np.abs(np.diff(np.array(rec.q)[60:, 0]))  # after the stream's rate is known
    assert np.count_nonzero(moving == 0.0) == 0  # no staircase: every cycle moves


async def test_a_30hz_stream_over_the_virtual_bus_stays_within_the_limits(make_config, running):
    config = make_config("openmanipulator_x", chains=[], rate_hz=RATE)
    rec = Commands()
    async with running(config) as (_vbus, rt):
        await rt.command(Command.ENABLE)
        rt.add_cycle_listener(rec)
        await _stream_30hz(rt, 2.0, real_time=True)
    # Real time on a shared host: a late cycle changes the spacing of goals, not their
    # values, which come from the motion layer's own period. The limits hold per goal.
    _assert_within_limits(rt, rec)


async def test_a_far_target_is_reached_by_a_limited_motion(make_config, clock):
    # a target sent once stays fresh (the watchdog would otherwise stop the motion)
    config = make_config(
        "openmanipulator_x", chains=[], rate_hz=RATE, safety={"watchdog_timeout": 5.0}
    )
    rec = Commands()
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        rt.add_cycle_listener(rec)
        start = rt.state().command["joint1"]
        goal = min(start + 2.0, float(rt.limits.upper[0]) - 0.01)  # far, within the limits
        rt.set_joint_targets({"joint1": goal})  # sent once
        await rt.wait_cycles(int(1.5 * RATE))
        assert rt.state().command["joint1"] == pytest.approx(goal, abs=1e-6)
    _assert_within_limits(rt, rec)


async def _full_speed(rt: Runtime, joint: str, towards: float, cycles: int) -> None:
    for _ in range(cycles):
        rt.set_joint_targets({joint: towards})
        await rt.wait_cycles(1)


async def test_estop_at_full_speed_stops_within_the_bound_and_ignores_a_glitch(
    make_config, running
):
    config = make_config("openmanipulator_x", chains=[], rate_hz=RATE)
    rec = Commands()
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        rt.add_cycle_listener(rec)
        start = rt.state().command["joint1"]
        await _full_speed(rt, "joint1", start + 2.5, int(0.3 * RATE))
        state = rt.state()
        moving_at = state.command["joint1"]
        assert state.velocity["joint1"] > 0.9 * rt.motion.limits.velocity[0]
        # the next replies of joint1's servo read 0.46 rad behind: a valid packet
        vbus.faults(11).glitch(-0.46, unit="rad", replies=3)
        await rt.command(Command.ESTOP)
        hold = (await wait_at_rest(rt))["joint1"]
        on_bus = vbus.register(11, RegisterName.GOAL_POSITION)
        await rt.wait_cycles(10)
        assert vbus.register(11, RegisterName.GOAL_POSITION) == on_bus
        assert rt.mode is Mode.ESTOPPED
    report = rt.state().last_stop
    assert report is not None and report.reason == "estop" and report.within_bounds
    # it never moved toward the glitch: the command went on forward and stopped
    assert hold > moving_at
    assert all(q[0] >= moving_at - 1e-9 for q in rec.q[-int(0.2 * RATE) :])
    assert rt.state().glitches.get("joint1", 0) >= 1
    _assert_within_limits(rt, rec)


async def test_enable_with_a_glitched_first_reading_does_not_jump(make_config, running):
    config = make_config("openmanipulator_x", chains=[], rate_hz=RATE)
    rec = Commands()
    async with running(config) as (vbus, rt):
        present = np.array(list(rt.state().command.values()))
        rt.add_cycle_listener(rec)
        vbus.faults(12).glitch(0.46, unit="rad", replies=1)  # the next read of joint2
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(20)
        goal_ticks = vbus.register(12, RegisterName.GOAL_POSITION)
        present_ticks = vbus.register(12, RegisterName.PRESENT_POSITION)
    first = rec.q[0]
    np.testing.assert_allclose(first, present, atol=0.01)  # the verified pose, no jump
    assert abs(goal_ticks - present_ticks) <= 20  # the servo holds where it is
    assert all(np.abs(q - present).max() < 0.02 for q in rec.q)


async def test_enable_on_the_sim_backend_ignores_a_glitched_reading(make_config, clock):
    config = make_config("openmanipulator_x", chains=[], rate_hz=RATE)
    backend = sim_backend(config, clock=clock)
    rec = Commands()
    async with Runtime(config, backend, clock=clock) as rt:
        present = np.array(list(rt.state().command.values()))
        rt.add_cycle_listener(rec)
        backend.fault("joint2").glitch(300, replies=1)  # the next reading, 300 ticks off
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(20)
    np.testing.assert_allclose(rec.q[0], present, atol=0.01)
    assert all(np.abs(q - present).max() < 0.02 for q in rec.q)


async def test_repeated_glitches_fault_the_servo_by_name(make_config, running):
    config = make_config("openmanipulator_x", chains=[], rate_hz=RATE)
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(5)
        vbus.faults(13).glitch(400, replies=None, rate=0.3)  # joint3: 30 % of replies
        for _ in range(int(2 * RATE)):
            await rt.wait_cycles(1)
            if rt.mode is Mode.FAULTED:
                break
        state = rt.state()
        assert state.mode is Mode.FAULTED
        (fault,) = [f for f in state.faults if f.kind is FaultKind.GLITCH]
        assert fault.joint == "joint3" and "implausible readings" in fault.detail
        assert state.glitches["joint3"] >= 5 and set(state.glitches) == {"joint3"}
        vbus.faults.clear()
        await wait_at_rest(rt)  # the fault's controlled stop, from the command
