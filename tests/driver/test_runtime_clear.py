"""Clearing targets (``clear_target``, ``clear_joint_targets``) in the loop on the sim backend."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hilbot.driver.runtime.backends import sim_backend
from hilbot.driver.runtime.errors import InvalidTarget, UnknownChain, UnknownJoint
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.state import Command, CycleRecord
from hilbot.driver.runtime.ticker import ManualClock


class Recorder:
    """Keeps a copy of every cycle's command, desired vector, write flag and target slots."""

    def __init__(self) -> None:
        self.commands: list[np.ndarray] = []
        self.desired: list[np.ndarray] = []
        self.written: list[bool] = []
        self.targets: list[frozenset[str]] = []
        self.clamps: list[int] = []

    def __call__(self, rec: CycleRecord) -> None:
        self.commands.append(rec.command.copy())
        self.desired.append(rec.desired.copy())
        self.written.append(rec.written)
        self.targets.append(frozenset(rec.targets))
        self.clamps.append(len(rec.clamps))

    def mark(self) -> int:
        return len(self.commands)


def _far_goal(rt: Runtime) -> np.ndarray:
    """A reachable pose target far enough that the safety layer needs many cycles for it."""
    goal = dict(rt.state().command)
    goal.update(joint1=goal["joint1"] + 0.9, joint2=goal["joint2"] + 0.5)
    chain = rt.robot.path_between("link1", "end_effector_link")
    pose: np.ndarray = chain.fk(chain.q_from(goal))[:3, 3]
    return pose


def _assert_held(rec: Recorder, since: int, rate: float = 200.0) -> np.ndarray:
    """From ``since``: a controlled stop (at most 0.4 s), then the command holds still."""
    after = rec.commands[since:]
    assert all(rec.written[since:])
    moving = [i for i, (a, b) in enumerate(itertools.pairwise(after)) if (a != b).any()]
    rest = moving[-1] + 1 if moving else 0
    assert rest <= 0.4 * rate, f"still moving {rest} cycles after the stop began"
    assert len(after) - rest > 10, "too few cycles at rest to call it held"
    assert not any(rec.clamps[since:])
    return after[-1]


@pytest.fixture
def arm(make_config):
    # A long watchdog so that a target sent once stays fresh for the whole test.
    return make_config("openmanipulator_x", safety={"watchdog_timeout": 5.0})


async def test_clear_target_holds_the_commanded_pose_mid_motion(arm, clock):
    rec = Recorder()
    async with Runtime(arm, sim_backend(arm, clock=clock), clock=clock) as rt:
        rt.add_cycle_listener(rec)
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        goal = _far_goal(rt)
        rt.set_target("arm", goal)
        await rt.wait_cycles(20)
        moving = np.abs(rec.commands[-1] - rec.commands[-2]).max()
        assert moving > 1e-3  # cleared while the safety layer is still stepping
        last_step = rec.commands[-1] - rec.commands[-2]
        rt.clear_target("arm")
        since = rec.mark()
        await rt.wait_cycles(150)
        last = _assert_held(rec, since)
        # no jump on the first cycle: the stop continues the motion and decelerates
        first_step = rec.commands[since] - rec.commands[since - 1]
        assert np.abs(first_step - last_step).max() <= rt.safety._accel_step.max()
        assert all("arm" not in t for t in rec.targets[since:])
        state = rt.state()
        assert not state.watchdog_tripped and state.stats.watchdog_trips == 0
        assert state.mode.value == "armed"
        # The joints settle where the command is.
        np.testing.assert_allclose(state.joints.position, last, atol=2e-3)
        # A new target resumes tracking.
        rt.set_target("arm", goal)
        await rt.wait_cycles(int(2.0 * arm.rate_hz))
        assert np.linalg.norm(rt.state().poses["arm"][:3, 3] - goal) < 2e-3
    written = [c for c, w in zip(rec.commands, rec.written, strict=True) if w]
    for prev, cmd in itertools.pairwise(written):
        assert np.all(np.abs(cmd - prev) <= rt.safety.step_bound + 1e-12)


async def test_clear_target_of_an_unknown_chain_raises_like_set_target(arm, clock):
    async with Runtime(arm, sim_backend(arm, clock=clock), clock=clock) as rt:
        with pytest.raises(UnknownChain) as set_err:
            rt.set_target("leg", (0.2, 0.0, 0.1))
        with pytest.raises(UnknownChain) as clear_err:
            rt.clear_target("leg")
        assert (clear_err.value.chain, clear_err.value.known) == ("leg", ("arm",))
        assert str(clear_err.value) == str(set_err.value)


async def test_clear_target_before_any_target_and_while_disarmed_is_harmless(arm, clock):
    rec = Recorder()
    async with Runtime(arm, sim_backend(arm, clock=clock), clock=clock) as rt:
        rt.add_cycle_listener(rec)
        rt.clear_target("arm")  # disarmed, no target yet
        await rt.command(Command.ENABLE)
        rt.clear_target("arm")  # armed, no target yet
        since = rec.mark()
        await rt.wait_cycles(20)
        _assert_held(rec, since)


async def test_clearing_a_stale_target_untrips_the_watchdog_and_keeps_holding(make_config, clock):
    config = make_config("openmanipulator_x", chains=[], safety={"watchdog_timeout": 0.1})
    rec = Recorder()
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        rt.add_cycle_listener(rec)
        await rt.command(Command.ENABLE)
        start = rt.state().command["joint1"]
        rt.set_joint_targets({"joint1": start + 2.0})
        await rt.wait_cycles(int(0.3 * config.rate_hz))
        assert rt.state().watchdog_tripped
        rt.clear_joint_targets()
        since = rec.mark()
        await rt.wait_cycles(100)
        state = rt.state()
        assert not state.watchdog_tripped  # no stream left to be stale
        assert state.stats.watchdog_trips == 1  # the trip stays counted
        held = float(_assert_held(rec, since)[0])
        assert state.command["joint1"] == held
        # A fresh target after the clear is tracked as usual, and trips the watchdog
        # again once it goes stale.
        for _ in range(int(0.6 * config.rate_hz)):  # a stream, fresh until it reached
            rt.set_joint_targets({"joint1": held - 0.05})
            await rt.wait_cycles(1)
        await rt.wait_cycles(int(0.3 * config.rate_hz))
        state = rt.state()
        assert state.command["joint1"] == pytest.approx(held - 0.05)
        assert state.watchdog_tripped and state.stats.watchdog_trips == 2


async def test_clear_target_drops_the_joint_targets_it_overrode(arm, clock):
    rec = Recorder()
    async with Runtime(arm, sim_backend(arm, clock=clock), clock=clock) as rt:
        rt.add_cycle_listener(rec)
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        start = rt.state().command
        # joint1 far away (overridden by the arm's pose target), the gripper not in the chain.
        rt.set_joint_targets({"joint1": start["joint1"] - 1.0, "gripper": start["gripper"]})
        rt.set_target("arm", _far_goal(rt))
        await rt.wait_cycles(20)
        rt.clear_target("arm")
        since = rec.mark()
        await rt.wait_cycles(120)
        _assert_held(rec, since)  # joint1 does not head for its old joint target
        assert all(t == frozenset({"joints"}) for t in rec.targets[since:])  # gripper kept


async def test_clear_joint_targets_by_name_keeps_the_others(make_config, clock):
    config = make_config("openmanipulator_x", chains=[], safety={"watchdog_timeout": 5.0})
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        start = rt.state().command
        rt.set_joint_targets({"joint1": start["joint1"] + 1.0, "joint2": start["joint2"] + 0.5})
        await rt.wait_cycles(10)
        with pytest.raises(UnknownJoint) as err:
            rt.clear_joint_targets(["joint1", "joint9"])
        assert err.value.joint == "joint9"
        rt.clear_joint_targets(["joint1"])
        await rt.wait_cycles(int(0.5 * config.rate_hz))  # a controlled stop
        held = rt.state().command["joint1"]
        await rt.wait_cycles(int(0.5 * config.rate_hz))
        state = rt.state()
        assert state.command["joint1"] == held  # cleared: holds
        assert state.command["joint2"] == pytest.approx(start["joint2"] + 0.5)  # kept: reached
        rt.clear_joint_targets("joint2")  # one name as a string
        rt.clear_joint_targets("joint2")  # clearing again is harmless
        rt.clear_joint_targets()


async def test_clear_target_ends_a_home_move(arm, clock):
    rec = Recorder()
    backend = sim_backend(arm, clock=clock, initial_positions={**arm.home, "joint1": 0.8})
    async with Runtime(arm, backend, clock=clock) as rt:
        rt.add_cycle_listener(rec)
        await rt.command(Command.ENABLE)
        await rt.command(Command.HOME)
        await rt.wait_cycles(20)
        assert rt.state().homing
        rt.clear_target("arm")
        since = rec.mark()
        await rt.wait_cycles(120)
        assert not rt.state().homing
        _assert_held(rec, since)
        assert rt.state().command["joint1"] > 0.1  # stopped short of home (0.0)


coordinate = st.one_of(
    st.floats(-0.4, 0.4),  # around the arm, reachable or not
    st.floats(-1e6, 1e6),  # absurdly far
    st.sampled_from([float("nan"), float("inf")]),  # refused at the API
)
action = st.one_of(
    st.tuples(st.just("pose"), st.tuples(coordinate, coordinate, coordinate)),
    st.tuples(
        st.just("joints"),
        st.dictionaries(st.sampled_from(["joint1", "joint2", "joint3", "joint4"]), coordinate),
    ),
    st.tuples(st.just("clear"), st.sampled_from(["arm", "joints", "joint2"])),
)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.tuples(action, st.integers(1, 4)), min_size=5, max_size=40))
def test_property_pose_joint_and_clear_mix_never_writes_an_unsafe_command(steps, arm):
    """Pose targets through IK, joint targets and clears in any order: every write is safe."""

    async def scenario() -> tuple[list[np.ndarray], tuple[np.ndarray, ...]]:
        clock = ManualClock(0.0)
        seen: list[np.ndarray] = []
        async with Runtime(arm, sim_backend(arm, clock=clock), clock=clock) as rt:
            rt.add_cycle_listener(lambda r: r.written and seen.append(r.command.copy()))
            await rt.command(Command.ENABLE)
            for (kind, value), cycles in steps:
                with contextlib.suppress(InvalidTarget):
                    if kind == "pose":
                        rt.set_target("arm", value)
                    elif kind == "joints" and value:
                        rt.set_joint_targets(value)
                    elif value == "arm":
                        rt.clear_target("arm")
                    elif value == "joints":
                        rt.clear_joint_targets()
                    elif kind == "clear":
                        rt.clear_joint_targets([value])
                await rt.wait_cycles(cycles)
            bounds = (rt.limits.lower, rt.limits.upper, rt.safety.step_bound)
        return seen, bounds

    written, (lower, upper, bound) = asyncio.run(scenario())
    assert written
    for prev, cmd in itertools.pairwise(written):
        assert np.all(cmd >= lower) and np.all(cmd <= upper)
        assert np.all(np.abs(cmd - prev) <= bound + 1e-12)
