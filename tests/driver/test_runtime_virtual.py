"""The full loop through the real DynamixelBackend, against the virtual bus on a pty.

The virtual bus serves the real protocol (wire timing, control tables, servo dynamics)
in-process; the runtime, its precise ticker and the real backend run unchanged. Every
test runs twice: plain, and with the backend pipelined (``pipeline=True``: while goals
stream, the state returned is the one read a cycle earlier, the next read being queued
before the cycle's write), which must change none of the outcomes.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hilbot.driver.runtime.errors import RuntimeStateError
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command, FaultKind
from hilbot.driver.runtime.targets import MAX_JOINT_VALUE
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.tables import RegisterName
from tests.driver.conftest import cycles_until, wait_at_rest

RATE = 100.0  # modest: the virtual servos share this (busy, 2-core) machine


@pytest.fixture
def config(make_config):
    return make_config("openmanipulator_x", chains=[], rate_hz=RATE)


def torque(vbus, servo_id):
    return vbus.register(servo_id, RegisterName.TORQUE_ENABLE)


async def test_tracks_targets_without_a_start_jump_and_shuts_down_torque(config, running):
    async with running(config) as (vbus, rt):
        start = rt.state().joints.positions()
        await rt.wait_cycles(5)
        assert torque(vbus, 11) == 0  # disarmed: torque as found
        await rt.command(Command.ENABLE)
        assert all(torque(vbus, i) == 1 for i in range(11, 16))
        await rt.wait_cycles(3)
        after = rt.state().joints.positions()
        for joint, value in start.items():
            assert after[joint] == pytest.approx(value, abs=0.01)  # no jump
        # The servo-side dead-man is armed (Bus Watchdog, 20 ms units).
        expected = round(config.safety.bus_watchdog / 0.02)
        assert vbus.register(11, RegisterName.BUS_WATCHDOG) == expected
        for _ in range(int(1.5 * RATE)):
            rt.set_joint_targets({"joint1": 0.4})
            await rt.wait_cycles(1)
        assert rt.state().joints.positions()["joint1"] == pytest.approx(0.4, abs=0.02)
    assert all(torque(vbus, i) == 0 for i in range(11, 16))


async def test_hostile_targets_stay_inside_the_limits_and_the_max_delta(config, running):
    rng = np.random.default_rng(11)
    seen: list[tuple[np.ndarray, bool]] = []
    async with running(config) as (_vbus, rt):
        rt.add_cycle_listener(lambda r: seen.append((r.command.copy(), r.written)))
        await rt.command(Command.ENABLE)
        names = rt.joint_names
        for i in range(150):
            values = rng.normal(0.0, 3.0, len(names))
            if i % 7 == 0:  # absurdly far, as far as the door lets through
                values = np.clip(values * 1e6, -MAX_JOINT_VALUE, MAX_JOINT_VALUE)
            rt.set_joint_targets(dict(zip(names, values, strict=True)))
            await rt.wait_cycles(1)
        lower, upper = rt.limits.lower, rt.limits.upper
        bound = rt.safety.step_bound
        last = next(c for c, w in reversed(seen) if w)
        await rt.wait_cycles(3)
        state = rt.state()
        assert state.mode is Mode.ARMED
    written = [c for c, w in seen if w]
    assert len(written) > 100
    for prev, cmd in itertools.pairwise(written):
        assert np.all(cmd >= lower) and np.all(cmd <= upper)
        assert np.all(np.abs(cmd - prev) <= bound + 1e-12)
    assert np.all(np.isfinite(last))


async def test_servo_overload_disarms_and_reboot_recovers(config, running):
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(3)
        vbus.raise_hardware_error(12, HardwareErrorFlags.OVERLOAD)
        await cycles_until(rt, Mode.FAULTED, 50)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        assert any(f.kind is FaultKind.HARDWARE and f.joint == "joint2" for f in state.faults)
        await rt.wait_cycles(2)
        assert all(torque(vbus, i) == 0 for i in range(11, 16))
        await rt.command(Command.REBOOT)
        await rt.command(Command.RESET)
        await rt.command(Command.ENABLE)
        assert rt.mode is Mode.ARMED


async def test_lost_replies_mid_run_are_survived_and_reported(config, running):
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(3)
        # Lost until one cycle's read has failed (with its retry), then answered again: how
        # long that takes depends on the reply margin, which this host's load sets, so the
        # drop window is counted in failed reads, not cycles (three 2 x 60 ms failures would
        # be a bus down for BUS_FAULT_TIME).
        vbus.fault(13).drop_rate = 1.0
        for _ in range(100):
            await rt.wait_cycles(1)
            if rt.state().stats.bus_errors:
                break
        vbus.fault(13).drop_rate = 0.0
        await rt.wait_cycles(10)
        state = rt.state()
        assert state.mode is Mode.ARMED
        assert state.stats.bus_errors >= 1
        assert any(f.kind is FaultKind.BUS for f in state.fault_log)
        assert not state.faults


async def test_clear_target_holds_the_goal_on_the_bus(make_config, running):
    config = make_config("openmanipulator_x", rate_hz=RATE, safety={"watchdog_timeout": 5.0})
    seen: list[tuple[np.ndarray, bool]] = []
    async with running(config) as (vbus, rt):
        rt.add_cycle_listener(lambda r: seen.append((r.command.copy(), r.written)))
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        goal = dict(rt.state().command)
        goal.update(joint1=goal["joint1"] + 0.8)
        chain = rt.robot.path_between("link1", "end_effector_link")
        rt.set_target("arm", chain.fk(chain.q_from(goal))[:3, 3])
        await rt.wait_cycles(8)
        assert np.abs(seen[-1][0] - seen[-2][0]).max() > 1e-3  # still stepping
        step_before = seen[-1][0] - seen[-2][0]
        rt.clear_target("arm")
        since = len(seen)
        await wait_at_rest(rt)  # a controlled stop from the command
        rest = len(seen)
        goals = [vbus.register(i, RegisterName.GOAL_POSITION) for i in range(11, 16)]
        await rt.wait_cycles(30)
        assert [vbus.register(i, RegisterName.GOAL_POSITION) for i in range(11, 16)] == goals
        assert all(w for _, w in seen[since:])
        for cmd, _ in seen[rest:]:
            np.testing.assert_array_equal(cmd, seen[rest][0])
        # no jump: the stop's first step continues the motion within the acceleration limit
        first = seen[since][0] - seen[since - 1][0]
        assert np.abs(first - step_before).max() <= rt.safety._accel_step.max()
        assert rt.mode is Mode.ARMED and not rt.state().watchdog_tripped


def goals(vbus):
    return [vbus.register(i, RegisterName.GOAL_POSITION) for i in range(11, 16)]


async def test_watchdog_trips_and_holds(make_config, running):
    config = make_config(
        "openmanipulator_x", chains=[], rate_hz=RATE, safety={"watchdog_timeout": 0.1}
    )
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        start = rt.state().command["joint1"]
        rt.set_joint_targets({"joint1": start + 2.0})  # far: ~0.5 s at the velocity limit
        await rt.wait_cycles(int(0.3 * RATE))
        state = rt.state()
        assert state.watchdog_tripped and state.stats.watchdog_trips == 1
        held = (await wait_at_rest(rt))["joint1"]  # a controlled stop, then a hold
        assert start < held < start + 2.0
        on_bus = goals(vbus)
        await rt.wait_cycles(20)
        assert rt.state().command["joint1"] == held
        assert goals(vbus) == on_bus  # the servos are told to hold, cycle after cycle
        assert rt.mode is Mode.ARMED


async def test_estop_latches_and_holds_until_reset(config, running):
    reads: list[tuple[Mode, np.ndarray]] = []
    async with running(config) as (vbus, rt):
        rt.add_cycle_listener(
            lambda r: reads.append((r.mode, r.state.position.copy())) if r.state else None
        )
        await rt.command(Command.ENABLE)
        start = rt.state().command["joint1"]
        for _ in range(10):
            rt.set_joint_targets({"joint1": start + 1.0})
            await rt.wait_cycles(1)
        moving = np.array(list(rt.state().command.values()))
        speed = np.array(list(rt.state().velocity.values()))
        accel = rt.motion.acceleration.copy()
        await rt.command(Command.ESTOP)
        # A controlled stop from the command (never toward a reading): it decelerates
        # within the motion limits and holds where it came to rest, ahead of where the
        # arm was measured, never behind it.
        hold = np.array(list((await wait_at_rest(rt)).values()))
        # the e-stop runs a cycle or two after our snapshot: a cycle's travel more each
        bound = rt.motion.limits.stopping_distance(speed, accel)
        assert np.all(np.abs(hold - moving) <= bound + 3 * rt.motion.limits.velocity * rt.period)
        report = rt.state().last_stop
        assert report is not None and report.reason == "estop" and report.within_bounds
        await rt.wait_cycles(2)
        on_bus = goals(vbus)
        for _ in range(20):
            rt.set_joint_targets({"joint1": start - 1.0})  # ignored while latched
            await rt.wait_cycles(1)
        assert rt.mode is Mode.ESTOPPED
        assert goals(vbus) == on_bus
        assert all(torque(vbus, i) == 1 for i in range(11, 16))  # estop_action: hold
        with pytest.raises(RuntimeStateError):
            await rt.command(Command.ENABLE)
        await rt.command(Command.RESET)
        assert rt.mode is Mode.DISARMED
        assert all(torque(vbus, i) == 0 for i in range(11, 16))


async def test_estop_torque_off(make_config, running):
    config = make_config(
        "openmanipulator_x", chains=[], rate_hz=RATE, safety={"estop_action": "torque_off"}
    )
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        await rt.command(Command.ESTOP)
        assert all(torque(vbus, i) == 0 for i in range(11, 16))
        await rt.wait_cycles(5)
        assert rt.mode is Mode.ESTOPPED


async def test_bus_down_faults_and_turns_torque_off(config, running):
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(3)
        vbus.fault(13).drop_rate = 1.0  # servo 13 hears everything, answers nothing
        await cycles_until(rt, Mode.FAULTED, int(2.0 * RATE))
        await rt.wait_cycles(3)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        assert any(f.kind is FaultKind.BUS for f in state.faults)
        # The torque-off sync write reaches every servo; only its read-back fails (13).
        assert all(torque(vbus, i) == 0 for i in range(11, 16))
        vbus.fault(13).drop_rate = 0.0
        await rt.wait_cycles(5)
        assert not rt.state().faults and rt.mode is Mode.FAULTED
        await rt.command(Command.RESET)
        await rt.command(Command.ENABLE)
        assert rt.mode is Mode.ARMED
