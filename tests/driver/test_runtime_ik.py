"""Pose targets through IK chains, in the full loop on the simulated backend."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hilbot.driver.runtime.backends import sim_backend
from hilbot.driver.runtime.config import load_config
from hilbot.driver.runtime.errors import InvalidTarget
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.state import Command


def _position(state, chain):
    return state.poses[chain][:3, 3]


@pytest.mark.parametrize("robot", ["openmanipulator_x", "widowx_250s", "koch_v1_1_follower"])
async def test_pose_target_is_tracked(robot, clock):
    config = load_config(robot)
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        start = _position(rt.state(), "arm").copy()
        target = start + np.array([0.0, 0.03, 0.02])
        for _ in range(int(1.5 * config.rate_hz)):
            rt.set_target("arm", target)
            await rt.wait_cycles(1)
        state = rt.state()
        assert np.linalg.norm(_position(state, "arm") - target) < 2e-3
        assert state.stats.ik_failures <= 3  # a transient "diverged" step is held, not fatal


async def test_both_arms_of_the_bimanual_rig_track(clock):
    config = load_config("bimanual")
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        assert rt.chains == ("left", "right")
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        start = {c: _position(rt.state(), c).copy() for c in rt.chains}
        goal = {"left": start["left"] + [0.0, 0.02, 0.02], "right": start["right"] + [0.02, 0, 0]}
        for _ in range(300):
            for chain, target in goal.items():
                rt.set_target(chain, target)
            await rt.wait_cycles(1)
        state = rt.state()
        for chain, target in goal.items():
            assert np.linalg.norm(_position(state, chain) - target) < 2e-3


async def test_unreachable_target_moves_safely_and_is_reported(clock):
    config = load_config("openmanipulator_x")
    seen = []
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        rt.add_cycle_listener(lambda r: seen.append((r.command.copy(), r.written)))
        await rt.command(Command.ENABLE)
        for _ in range(200):
            rt.set_target("arm", (5.0, 0.0, 0.0))  # 5 m away: out of reach
            await rt.wait_cycles(1)
        state = rt.state()
        lower, upper, bound = rt.limits.lower, rt.limits.upper, rt.safety.step_bound
    written = [c for c, w in seen if w]
    for prev, cmd in itertools.pairwise(written):
        assert np.all((cmd >= lower) & (cmd <= upper))
        assert np.all(np.abs(cmd - prev) <= bound + 1e-12)
    assert state.mode.value == "armed"
    reach = np.linalg.norm(_position(state, "arm"))
    assert reach > 0.3  # stretched towards the target


@pytest.mark.parametrize(
    "target",
    [
        (0.1, 0.0),
        (0.1, float("nan"), 0.2),
        ((0.1, 0.0, 0.2), (1.0, 0.0, 0.0, 0.5)),
        ((0.1, 0.0, 0.2), np.eye(3) * 2),
        np.eye(4) * 2,
        "up",
    ],
    ids=["short", "nan", "non-unit-quat", "non-rotation", "bad-4x4", "string"],
)
async def test_invalid_pose_targets_are_refused(target, clock):
    config = load_config("openmanipulator_x")
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        with pytest.raises(InvalidTarget) as err:
            rt.set_target("arm", target)
        assert err.value.chain == "arm"


@pytest.mark.parametrize(
    "target",
    [
        (0.2, 0.0, 0.15),
        ((0.2, 0.0, 0.15), None),
        ((0.2, 0.0, 0.15), (0.0, 0.0, -1.0)),
        ((0.2, 0.0, 0.15), (1.0, 0.0, 0.0, 0.0)),
        np.eye(4),
    ],
    ids=["position", "no-orientation", "axis", "quaternion", "4x4"],
)
async def test_valid_pose_target_forms(target, clock):
    config = load_config("openmanipulator_x")
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        rt.set_target("arm", target)
        await rt.wait_cycles(3)
        assert rt.mode.value == "armed"


async def test_a_target_sent_once_is_reached_by_a_limited_motion(clock, make_config):
    # Sent once: the chain is solved and the motion layer moves there within its limits.
    config = make_config("widowx_250s", safety={"watchdog_timeout": 5.0, "velocity_limit": 0.2})
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        # A reachable target well inside the limits: the FK of a nearby configuration.
        goal = dict(rt.state().command)
        goal.update(waist=0.4, shoulder=goal["shoulder"] + 0.3, elbow=goal["elbow"] - 0.4)
        chain = rt.robot.path_between("base_link", "ee_gripper_link")
        target = chain.fk(chain.q_from(goal))[:3, 3]
        rt.set_target("arm", target)
        await rt.wait_cycles(int(2.0 * config.rate_hz))
        state = rt.state()
        assert sum(state.clamp_counts.values()) == 0  # the motion stayed within the envelope
        assert np.linalg.norm(_position(state, "arm") - target) < 3e-3


async def test_hexapod_legs_each_track_their_foot(clock):
    config = load_config("hexapod")
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        assert rt.chains == tuple(f"leg{i}" for i in range(1, 7))
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        down = np.array([0.0, 0.0, -0.01])  # feet down: the body rises
        goal = {c: _position(rt.state(), c) + down for c in rt.chains}
        for _ in range(100):
            for chain, target in goal.items():
                rt.set_target(chain, target)
            await rt.wait_cycles(1)
        state = rt.state()
        for chain, target in goal.items():
            assert np.linalg.norm(_position(state, chain) - target) < 2e-3
