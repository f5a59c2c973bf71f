"""One door for pose targets: parsed once into the IK package's ``Target``, one set of tolerances.

A rotation matrix off by 5e-5 used to pass ``Runtime.set_target`` (its own tolerance
was 1e-4) and be refused inside the loop by the solver's parse (1e-5), an IK failure
instead of a rejection at the door. Now the door parses with ``parse_target`` itself:
what it refuses, the IK package refuses for the same reason, and what it accepts is
stored parsed and solved as given.
"""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.driver.runtime.errors import InvalidTarget, TargetProblem
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command
from hilbot.driver.runtime.targets import parse_pose_target
from hilbot.kinematics import tolerances
from hilbot.kinematics.ik import DLSSolver, OrientationKind, Target, parse_target
from hilbot.kinematics.ik import InvalidTarget as Unparsable

ROTATION = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def _skewed(error: float) -> np.ndarray:
    """``ROTATION`` with one entry off by ``error`` (so ``|R^T R - I|`` is about ``error``)."""
    rotation = ROTATION.copy()
    rotation[0, 1] -= error / 2  # that column's squared norm is 1 + error (to first order)
    return rotation


def _pose_of(rt: Runtime, q: dict[str, float]) -> np.ndarray:
    chain = rt.robot.path_between("link1", "end_effector_link")
    return chain.fk(chain.q_from(q))


def test_the_door_and_the_solvers_share_one_set_of_tolerances():
    from hilbot.kinematics.ik.core import target

    assert target.ROTATION_TOLERANCE is tolerances.ROTATION_TOLERANCE
    assert target.QUATERNION_TOLERANCE is tolerances.QUATERNION_TOLERANCE


def test_a_rotation_off_by_5e_5_is_refused_at_the_door_with_the_solvers_reason():
    target = ((0.2, 0.0, 0.1), _skewed(5e-5))
    with pytest.raises(Unparsable) as parsed:
        parse_target(target)
    with pytest.raises(InvalidTarget) as door:
        parse_pose_target("arm", target)
    assert door.value.reason is TargetProblem.INVALID and door.value.chain == "arm"
    assert door.value.detail == parsed.value.reason
    assert door.value.detail == "the rotation is not orthonormal (|R^T R - I| = 5e-05)"
    assert "\n" not in str(door.value)


@pytest.mark.parametrize("scale", [0.5, 0.9, 1.1, 2.0, 5.0])
def test_the_door_accepts_exactly_what_the_solvers_parse(scale):
    """Around each tolerance the door and ``parse_target`` agree, value by value."""
    error = scale * tolerances.ROTATION_TOLERANCE
    quat_error = scale * tolerances.QUATERNION_TOLERANCE
    cases = [
        ((0.2, 0.0, 0.1), _skewed(error)),
        ((0.2, 0.0, 0.1), (1.0 + quat_error, 0.0, 0.0, 0.0)),
        ((0.2, 0.0, 0.1), (scale * tolerances.MIN_DIRECTION_NORM, 0.0, 0.0)),
    ]
    transform = np.eye(4)
    transform[:3, :3] = _skewed(error)
    cases.append(transform)
    for value in cases:
        try:
            parsed = parse_target(value)
        except Unparsable:
            with pytest.raises(InvalidTarget):
                parse_pose_target("arm", value)
        else:
            assert parse_pose_target("arm", value) == parsed


def test_a_target_built_elsewhere_is_checked_again_at_the_door():
    good = parse_target(((0.2, 0.0, 0.1), ROTATION))
    assert parse_pose_target("arm", good) == good
    skewed = Target((0.2, 0.0, 0.1), OrientationKind.FULL, tuple(_skewed(5e-5).ravel()))
    with pytest.raises(InvalidTarget, match="not orthonormal"):
        parse_pose_target("arm", skewed)
    with pytest.raises(InvalidTarget, match=r"beyond 100\.0 m"):
        parse_pose_target("arm", Target((1e300, 0.0, 0.0)))
    with pytest.raises(InvalidTarget) as err:
        parse_pose_target("arm", Target((float("nan"), 0.0, 0.0)))
    assert err.value.reason is TargetProblem.NON_FINITE


@pytest.mark.parametrize("planner", ["stream", "off"])
async def test_refused_at_the_door_nothing_moves_and_no_ik_failure(
    planner, make_config, sim_factory, clock
):
    config = make_config("openmanipulator_x", motion={"planner": planner})
    async with Runtime(config, sim_factory(config), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        before = rt.state().command
        pose = _pose_of(rt, {**before, "joint1": before["joint1"] + 0.2})
        pose[:3, :3] = pose[:3, :3] @ np.diag([1.0 + 2.5e-5, 1.0, 1.0])  # |R^T R - I| = 5e-5
        with pytest.raises(InvalidTarget, match="not orthonormal"):
            rt.set_target("arm", pose)
        await rt.wait_cycles(20)
        state = rt.state()
        assert state.mode is Mode.ARMED and not state.faults
        assert state.command == before  # nothing moved
        assert state.stats.ik_failures == 0


@pytest.mark.parametrize("planner", ["stream", "off"])
async def test_accepted_at_the_door_never_refused_by_the_solver(
    planner, make_config, sim_factory, clock
):
    """Just inside the tolerance: stored as a ``Target`` and solved, never an invalid target."""
    config = make_config("openmanipulator_x", motion={"planner": planner})
    async with Runtime(config, sim_factory(config), clock=clock) as rt:
        seen: list[object] = []
        rt.add_cycle_listener(lambda rec: seen.extend(rec.ik.values()))
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        start = rt.state().command
        pose = _pose_of(rt, {**start, "joint1": start["joint1"] + 0.1})
        pose[:3, :3] = pose[:3, :3] @ np.diag([1.0 + 0.2 * tolerances.ROTATION_TOLERANCE, 1, 1])
        rt.set_target("arm", pose)
        await rt.wait_cycles(int(0.5 * config.rate_hz))
        assert seen, "the chain was never solved"
        refused = [r for r in seen if isinstance(r, Unparsable)]
        assert not refused
        assert rt.state().command["joint1"] > start["joint1"] + 0.05  # it moved toward it


def test_the_solver_takes_the_door_s_target_as_given():
    from hilbot.driver.runtime.config import load_config
    from hilbot.kinematics import load_urdf

    config = load_config("openmanipulator_x")
    robot = load_urdf(config.urdf)
    chain = robot.path_between("link1", "end_effector_link")
    q = np.array([0.2, -0.3, 0.4, 0.1])
    pose = chain.fk(q)
    rng = np.random.default_rng(7)
    solver = DLSSolver()
    for _ in range(20):
        noise = rng.uniform(-1.0, 1.0, (3, 3)) * 0.4 * tolerances.ROTATION_TOLERANCE
        value = ((pose[:3, 3] * 1.0).tolist(), pose[:3, :3] + noise)
        try:
            target = parse_pose_target("arm", value)
        except InvalidTarget:
            continue
        solution = solver.solve(robot, q, "link1", "end_effector_link", target)
        assert solution.position_reached


@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_mqtt_and_the_python_api_agree_on_the_shortest_tool_axis(scale):
    import json

    from hilbot.driver.teleop.messages import MessageRejected, Vocabulary, parse

    axis = [scale * tolerances.MIN_DIRECTION_NORM, 0.0, 0.0]
    vocabulary = Vocabulary("hilbot/r", frozenset({"arm"}), frozenset({"joint1"}))
    body = {"seq": 1, "position": [0.2, 0.0, 0.1], "orientation": {"axis": axis}}
    try:
        message = parse("hilbot/r/target/arm", json.dumps(body).encode(), vocabulary)
    except MessageRejected:
        on_mqtt = False
    else:
        on_mqtt = True
        assert parse_pose_target("arm", message.runtime_target()).kind is OrientationKind.AXIS
    try:
        parse_pose_target("arm", ((0.2, 0.0, 0.1), axis))
    except InvalidTarget:
        in_python = False
    else:
        in_python = True
    assert on_mqtt == in_python == (scale > 1.0)
