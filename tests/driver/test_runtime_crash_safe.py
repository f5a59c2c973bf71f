"""The loop never dies: any exception in a cycle ends in the configured safe state.

Found by fuzzing (issue 11): ``set_target("arm", (1e155, 0, 0))`` was accepted and the
next solve raised ``OverflowError`` (not a ``KinematicsError``), which ended the loop
with the servos' torque on; ``command(ESTOP)`` then raised "the runtime is not
running". These tests drive the real loop on the simulated backend; exceptions are
injected through ``FaultyBackend`` (our own Backend protocol, around the real
``SimBackend``), a raising cycle listener, or a safety layer that raises.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from hilbot.driver.runtime.errors import InvalidTarget, TargetProblem
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode, SafetyLayer
from hilbot.driver.runtime.state import Command, FaultKind
from hilbot.kinematics.ik import OrientationKind, Target

RATE = 200.0


class Injected(Exception):
    """An exception no code under test expects."""


@pytest.fixture
def arm_config(make_config):
    def make(**safety):
        return make_config("openmanipulator_x", rate_hz=RATE, safety=safety)

    return make


def internal_faults(state):
    return [f for f in state.faults if f.kind is FaultKind.INTERNAL]


def internal_logs(caplog):
    return [r for r in caplog.records if "fault (internal)" in r.getMessage()]


class _OverflowingSolver:
    """The chain's real solver, raising as it did on a 1e155 target (``math.sqrt`` in
    ``ChainInfo.distance_from_base``) for targets beyond ``far`` [m]. The solvers now
    refuse such targets themselves; this keeps the loop's side of the hole tested."""

    def __init__(self, inner, far=1e100):
        self.inner, self.far = inner, far

    def solve(self, robot, seed, source, target_link, target, **options):
        for values in (target.point, target.orientation):  # the runtime passes a Target
            if values is not None and np.max(np.abs(values)) > self.far:
                raise OverflowError("math range error")
        return self.inner.solve(robot, seed, source, target_link, target, **options)


async def _bypass_the_door(rt, chain, target):
    """Put a target in the slot as a validation bug would (the door refuses it now).

    The door stores what ``parse_target`` returns: a ``Target``; a bug would store one
    built without it.
    """
    runner = rt._chains[chain]
    runner.solver = _OverflowingSolver(runner.solver)
    if isinstance(target, tuple):
        position, axis = target
        target = Target(tuple(position.tolist()), OrientationKind.AXIS, tuple(axis.tolist()))
    else:
        target = Target(tuple(target.tolist()))
    rt._targets._store(chain, target)
    await rt.wait_cycles(1)


async def test_huge_target_is_refused_at_the_door_and_nothing_moves(arm_config, sim_factory, clock):
    config = arm_config()
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        before = rt.state().command
        with pytest.raises(InvalidTarget) as err:
            rt.set_target("arm", (1e155, 0, 0))
        assert err.value.reason is TargetProblem.INVALID and "100.0 m" in str(err.value)
        await rt.wait_cycles(5)
        state = rt.state()
        assert state.mode is Mode.ARMED and not state.faults
        assert state.command == before


async def test_solver_overflow_faults_into_hold_and_the_runtime_stays_in_command(
    arm_config, sim_factory, clock, caplog
):
    config = arm_config()  # estop_action: hold
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        # The old hole: a huge target reaching the solver (ChainInfo.distance_from_base
        # and the axis norm overflow). Before the fix the loop died here.
        await _bypass_the_door(rt, "arm", np.array([1e155, 0.0, 0.0]))
        await rt.wait_cycles(3)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        (fault,) = internal_faults(state)
        assert fault.detail == "solver: OverflowError: math range error"
        assert backend.model.torque_enabled.all()  # hold: torque stays on ...
        present = state.joints.position
        np.testing.assert_allclose(  # ... and goal := present, written
            list(state.command.values()), np.clip(present, rt.limits.lower, rt.limits.upper)
        )
        assert state.stats.internal_errors == 1
        # Still in command: e-stop, reset, enable all answer.
        await rt.command(Command.ESTOP)
        assert rt.mode is Mode.ESTOPPED
        await rt.command(Command.RESET)
        assert rt.mode is Mode.DISARMED and not internal_faults(rt.state())
        await rt.command(Command.ENABLE)
        rt.set_joint_targets({"joint1": 0.3})
        await rt.wait_cycles(100)
        assert rt.mode is Mode.ARMED
        assert rt.state().joints.positions()["joint1"] == pytest.approx(0.3, abs=0.01)
    assert len(internal_logs(caplog)) == 1


async def test_solver_overflow_with_torque_off_action_turns_torque_off(
    arm_config, sim_factory, clock
):
    config = arm_config(estop_action="torque_off")
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await _bypass_the_door(rt, "arm", (np.array([1e155, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])))
        await rt.wait_cycles(2)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        assert "OverflowError" in internal_faults(state)[0].detail
        assert not backend.model.torque_enabled.any()
        await rt.command(Command.ESTOP)  # answers
        await rt.command(Command.RESET)
        assert rt.mode is Mode.DISARMED


@pytest.mark.parametrize("stage", ["read", "write"])
@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
async def test_backend_exception_faults_and_is_reported_once(
    stage, after, arm_config, sim_factory, clock, faulty, caplog
):
    config = arm_config(estop_action="torque_off")
    backend = faulty(sim_factory(config))
    async with Runtime(config, backend, clock=clock) as rt:
        backend.watch(rt.limits.lower, rt.limits.upper, rt.safety.step_bound)
        await rt.command(Command.ENABLE)
        rt.set_joint_targets({"joint1": 0.5})
        await rt.wait_cycles(3)
        backend.fail(stage, times=50, after=after, exc=Injected("bus gremlin"))
        await rt.wait_cycles(60)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        (fault,) = internal_faults(state)
        assert fault.detail == f"backend {stage}: Injected: bus gremlin"
        assert not backend.inner.model.torque_enabled.any()
        failures = backend.injected[stage]
        backend.clear_plans()
        await rt.command(Command.RESET)
        await rt.command(Command.ENABLE)
        assert rt.mode is Mode.ARMED
    # Faulted with torque off, the loop reads on (each read failing) but writes nothing.
    assert failures == (50 if stage == "read" else 1)
    assert len(internal_logs(caplog)) == 1  # one report, however often it failed
    assert backend.violations == []


async def test_failing_hold_write_is_retried_until_it_goes_through(
    arm_config, sim_factory, clock, faulty
):
    config = arm_config()  # hold
    backend = faulty(sim_factory(config))
    async with Runtime(config, backend, clock=clock) as rt:
        backend.watch(rt.limits.lower, rt.limits.upper, rt.safety.step_bound)
        await rt.command(Command.ENABLE)
        start = rt.state().command["joint1"]
        for _ in range(20):  # moving fast: the goal leads the present position
            rt.set_joint_targets({"joint1": start + 1.0})
            await rt.wait_cycles(1)
        writes = backend.goals_written
        rt.add_cycle_listener(_raise_once())
        backend.fail("write", times=10, exc=Injected("hold write lost"))
        await rt.wait_cycles(15)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        details = {f.detail for f in state.fault_log if f.kind is FaultKind.INTERNAL}
        assert any(d.startswith("cycle listener") for d in details)
        assert "backend write: Injected: hold write lost" in details
        assert backend.goals_written > writes  # the stop went out after the failures
        for _ in range(200):  # the controlled stop from the command comes to rest
            if all(v == 0.0 for v in rt.state().velocity.values()):
                break
            await rt.wait_cycles(1)
        await rt.wait_cycles(1)
        hold = rt.state().command
        on_bus = backend.inner.model.goal.copy()
        await rt.wait_cycles(20)
        assert rt.state().command == hold
        np.testing.assert_array_equal(backend.inner.model.goal, on_bus)  # written once
        assert backend.inner.model.torque_enabled.all()
    assert backend.violations == []


def _raise_once():
    fired = []

    def listener(rec):
        if not fired:
            fired.append(rec.cycle)
            raise Injected("listener bug")

    return listener


async def test_failing_torque_off_is_retried_every_cycle(arm_config, sim_factory, clock, faulty):
    config = arm_config(estop_action="torque_off")
    backend = faulty(sim_factory(config))
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        backend.fail("set_torque", times=5, exc=Injected("torque write lost"))
        rt.add_cycle_listener(_raise_once())
        await rt.wait_cycles(3)
        assert rt.mode is Mode.FAULTED
        assert backend.inner.model.torque_enabled.all()  # still failing
        await rt.wait_cycles(5)
        assert not backend.inner.model.torque_enabled.any()
        assert backend.injected["set_torque"] == 5


async def test_estop_torque_off_is_retried_when_the_bus_refuses_it(
    arm_config, sim_factory, clock, faulty
):
    config = arm_config(estop_action="torque_off")
    backend = faulty(sim_factory(config))
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        backend.fail("set_torque", times=3, exc=Injected("torque write lost"))
        await rt.command(Command.ESTOP)  # latched even though torque off failed
        assert rt.mode is Mode.ESTOPPED
        await rt.wait_cycles(4)
        assert not backend.inner.model.torque_enabled.any()


class _RaisingSafety(SafetyLayer):
    """The real safety layer, raising from its ``raise_from`` call on."""

    raise_from = 10**9
    calls = 0

    def apply(self, desired, last, cycle=0, *, possible=None, last_step=None):
        self.calls += 1
        if self.calls >= self.raise_from:
            raise Injected("safety bug")
        return super().apply(desired, last, cycle, possible=possible, last_step=last_step)


async def test_failing_safety_layer_means_no_write_at_all(arm_config, sim_factory, clock, faulty):
    config = arm_config()  # hold: the hold goal would go through the safety layer too
    backend = faulty(sim_factory(config))
    async with Runtime(config, backend, clock=clock) as rt:
        safety = _RaisingSafety(
            rt.limits, rt.max_delta, rt.period, acceleration=rt.acceleration_limits
        )
        rt.safety = safety
        await rt.command(Command.ENABLE)
        rt.set_joint_targets({"joint1": 1.0})
        await rt.wait_cycles(5)
        writes = backend.goals_written
        safety.raise_from = safety.calls + 1
        await rt.wait_cycles(30)
        assert backend.goals_written == writes  # never an unclamped write
        state = rt.state()
        assert state.mode is Mode.FAULTED
        assert internal_faults(state)[0].detail == "safety layer: Injected: safety bug"
        await rt.command(Command.ESTOP)
        await rt.command(Command.RESET)
        assert rt.mode is Mode.DISARMED


async def test_unexpected_command_error_faults_and_reaches_the_caller(
    arm_config, sim_factory, clock, faulty
):
    config = arm_config(estop_action="torque_off")
    backend = faulty(sim_factory(config))
    async with Runtime(config, backend, clock=clock) as rt:
        backend.fail("set_torque", after=True, exc=Injected("enable half done"))
        with pytest.raises(Injected):
            await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        assert rt.mode is Mode.FAULTED
        assert internal_faults(rt.state())[0].detail.startswith("command enable: Injected")
        assert not backend.inner.model.torque_enabled.any()  # the half-done enable undone
        await rt.command(Command.RESET)
        await rt.command(Command.ENABLE)
        assert rt.mode is Mode.ARMED


async def test_a_listener_that_always_raises_is_reported_once_per_reset(
    arm_config, sim_factory, clock, caplog
):
    config = arm_config()
    async with Runtime(config, sim_factory(config), clock=clock) as rt:

        def broken(rec):
            raise Injected("telemetry bug")

        rt.add_cycle_listener(broken)
        await rt.wait_cycles(200)
        assert rt.state().stats.internal_errors >= 200
        assert len(internal_logs(caplog)) == 1
        await rt.command(Command.RESET)
        await rt.wait_cycles(10)
        assert len(internal_logs(caplog)) == 2  # reported again once after a reset
        rt.remove_cycle_listener(broken)
        await rt.command(Command.RESET)
        await rt.command(Command.ENABLE)
        assert rt.mode is Mode.ARMED


async def test_many_distinct_errors_stop_being_logged(arm_config, sim_factory, clock, caplog):
    config = arm_config()
    async with Runtime(config, sim_factory(config), clock=clock) as rt:

        def broken(rec):
            raise Injected(f"cycle {rec.cycle}")  # a new message every cycle

        rt.add_cycle_listener(broken)
        await rt.wait_cycles(100)
    logs = internal_logs(caplog)
    assert len(logs) == 17  # 16 distinct problems, then one "further ones are counted"
    assert "further ones are counted" in logs[-1].getMessage()
    assert all(r.levelno == logging.ERROR for r in logs)


async def test_nan_positions_from_a_backend_fault_instead_of_reaching_the_command(
    arm_config, sim_factory, clock
):
    config = arm_config()
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.wait_cycles(2)
        real_read = backend.read

        async def nan_read():
            state = await real_read()
            state.position[0] = np.nan
            return state

        backend.read = nan_read
        await rt.wait_cycles(3)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        assert internal_faults(state)[0].detail.startswith("backend read: ValueError")
        assert all(np.isfinite(list(state.command.values())))


async def test_shutdown_retries_torque_off_after_an_unexpected_error(
    arm_config, sim_factory, clock, faulty
):
    config = arm_config()
    backend = faulty(sim_factory(config))
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        backend.fail("set_torque", times=2, exc=Injected("torque write lost"))
    assert not backend.inner.model.torque_enabled.any()  # the third attempt went through
    assert backend.injected["set_torque"] == 2
