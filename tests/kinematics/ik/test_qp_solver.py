"""QPSolver on the shipped arms: reaching, hard limits, max_delta, collisions, limit approach."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hilbot.kinematics import load_urdf
from hilbot.kinematics.ik.core.errors import (
    IKError,
    InvalidTarget,
    OrientationUnreachable,
    Unreachable,
)
from hilbot.kinematics.ik.core.solution import Status
from hilbot.kinematics.ik.multitask.multitask_solver import MultiTaskSolver
from hilbot.kinematics.ik.qp.limits import (
    Capsule,
    CollisionAvoidance,
    LinearInequality,
    VelocityLimit,
)
from hilbot.kinematics.ik.qp.qp_solver import ChainContext, QPSolver

ROBOTS = Path(__file__).resolve().parents[3] / "configs" / "robots"
ARMS = {
    "ur5": ("ur5.urdf", "base_link", "tool0"),
    "panda": ("panda.urdf", "panda_link0", "panda_hand_tcp"),
    "widowx-250s": ("widowx_250s.urdf", "base_link", "ee_gripper_link"),
    "koch-v1.1": ("koch_v1_1.urdf", "base_link", "tool"),
    "openmanipulator-x": ("openmanipulator_x.urdf", "world", "end_effector_link"),
    "bimanual-left": ("bimanual.urdf", "torso", "left_tool"),
    "bimanual-right": ("bimanual.urdf", "torso", "right_tool"),
}


@pytest.fixture(scope="module", params=sorted(ARMS), ids=sorted(ARMS))
def arm(request):
    urdf, source, tip = ARMS[request.param]
    robot = load_urdf(ROBOTS / urdf)
    return robot, source, tip, robot.path_between(source, tip)


def _random_q(chain, rng, span=np.pi):
    return rng.uniform(np.maximum(chain.lower, -span), np.minimum(chain.upper, span))


@pytest.mark.parametrize("solver_class", [QPSolver, MultiTaskSolver], ids=["qp", "multitask"])
def test_reaches_random_reachable_poses(arm, solver_class):
    """Full poses on 6- and 7-DoF arms, positions on the 4- and 5-DoF ones."""
    robot, source, tip, chain = arm
    rng = np.random.default_rng(20)
    solver = solver_class()
    for _ in range(25):
        q_true = _random_q(chain, rng)
        seed = np.clip(q_true + rng.uniform(-0.3, 0.3, chain.dof), chain.lower, chain.upper)
        pose = chain.fk(q_true)
        target = pose if chain.dof >= 6 else pose[:3, 3]
        solution = solver.solve(robot, seed, source, tip, target, max_iterations=100)
        assert solution.reached
        assert solution.status is Status.CONVERGED
        assert solution.residual <= 1e-4
        if chain.dof >= 6:
            assert solution.orientation_residual <= 0.01
        assert np.all(solution.q >= chain.lower) and np.all(solution.q <= chain.upper)


@pytest.mark.parametrize("solver_class", [QPSolver, MultiTaskSolver], ids=["qp", "multitask"])
def test_tracking_a_path_never_jumps(solver_class):
    """Small steps along a Cartesian circle: consecutive solutions stay close."""
    robot = load_urdf(ROBOTS / "ur5.urdf")
    chain = robot.path_between("base_link", "tool0")
    q = np.array([0.0, -1.4, 1.6, -1.8, -1.57, 0.0])
    start = chain.fk(q)
    solver = solver_class()
    for k in range(1, 120):
        angle = 2 * np.pi * k / 120
        target = start.copy()
        target[:3, 3] += 0.1 * np.array([np.cos(angle) - 1.0, np.sin(angle), 0.3 * np.sin(angle)])
        solution = solver.solve(robot, q, "base_link", "tool0", target, max_iterations=20)
        assert solution.reached
        assert np.max(np.abs(solution.q - q)) < 0.1
        q = solution.q


@pytest.mark.parametrize("solver_class", [QPSolver, MultiTaskSolver], ids=["qp", "multitask"])
def test_position_wins_over_an_unreachable_orientation(solver_class):
    """A 4-DoF arm cannot take any orientation: position is met, orientation best effort."""
    robot = load_urdf(ROBOTS / "openmanipulator_x.urdf")
    chain = robot.path_between("world", "end_effector_link")
    q_true = np.array([0.4, -0.3, 0.5, 0.2])
    target = chain.fk(q_true)
    rotation = target[:3, :3] @ np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]])  # 90° about x
    seed = q_true + 0.1
    solution = solver_class().solve(
        robot, seed, "world", "end_effector_link", (target[:3, 3], rotation), max_iterations=100
    )
    assert solution.position_reached and not solution.reached
    assert solution.residual <= 1e-4
    assert solution.orientation_residual > 0.1
    with pytest.raises(OrientationUnreachable):
        solver_class().solve(
            robot,
            seed,
            "world",
            "end_effector_link",
            (target[:3, 3], rotation),
            strict_orientation=True,
            max_iterations=100,
        )


@pytest.mark.parametrize("form", ["position", "axis", "quaternion", "matrix"])
def test_every_target_form(form):
    robot = load_urdf(ROBOTS / "ur5.urdf")
    chain = robot.path_between("base_link", "tool0")
    q_true = np.array([0.3, -1.2, 1.4, -0.8, 1.2, 0.4])
    pose = chain.fk(q_true)
    rotation = pose[:3, :3]
    w = np.sqrt(1.0 + np.trace(rotation)) / 2
    quaternion = np.array(
        [
            w,
            (rotation[2, 1] - rotation[1, 2]) / (4 * w),
            (rotation[0, 2] - rotation[2, 0]) / (4 * w),
            (rotation[1, 0] - rotation[0, 1]) / (4 * w),
        ]
    )
    target = {
        "position": pose[:3, 3],
        "axis": (pose[:3, 3], rotation[:, 2]),
        "quaternion": (pose[:3, 3], quaternion),
        "matrix": (pose[:3, 3], rotation),
    }[form]
    seed = q_true + 0.2
    solution = QPSolver().solve(robot, seed, "base_link", "tool0", target, max_iterations=100)
    assert solution.reached
    reached_pose = chain.fk(solution.q)
    np.testing.assert_allclose(reached_pose[:3, 3], pose[:3, 3], atol=1e-4)
    if form == "axis":
        assert reached_pose[:3, 2] @ rotation[:, 2] > np.cos(0.01)
    elif form != "position":
        assert solution.orientation_residual <= 0.01


def test_positions_keep_joints_outside_the_chain():
    robot = load_urdf(ROBOTS / "bimanual.urdf")
    chain = robot.path_between("torso", "left_tool")
    state = {name: 0.1 for name in robot.movable_joints}
    target = chain.fk(np.full(6, 0.3))[:3, 3]
    solution = QPSolver().solve(robot, state, "torso", "left_tool", target)
    assert solution.positions["right_joint3"] == 0.1
    assert set(solution.positions) == set(state)


def test_nan_target_raises_invalid_target():
    robot = load_urdf(ROBOTS / "ur5.urdf")
    with pytest.raises(InvalidTarget):
        QPSolver().solve(robot, np.zeros(6), "base_link", "tool0", [np.nan, 0.0, 0.5])


def test_unreachable_target_carries_positions_within_limits():
    robot = load_urdf(ROBOTS / "ur5.urdf")
    chain = robot.path_between("base_link", "tool0")
    with pytest.raises(Unreachable) as info:
        QPSolver().solve(robot, np.zeros(6), "base_link", "tool0", [3.0, 0.0, 0.5])
    q = chain.q_from(info.value.positions)
    assert np.all(q >= chain.lower) and np.all(q <= chain.upper)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    max_delta=st.one_of(st.none(), st.floats(0.001, 0.5)),
    target_scale=st.floats(0.0, 2.0),
    velocity=st.booleans(),
    bad=st.sampled_from([None, np.nan, np.inf, -np.inf]),
)
def test_limits_and_max_delta_are_never_violated(seed, max_delta, target_scale, velocity, bad):
    robot = load_urdf(ROBOTS / "ur5.urdf")
    chain = robot.path_between("base_link", "tool0")
    rng = np.random.default_rng(seed)
    q0 = _random_q(chain, rng)
    target = rng.normal(size=3) * target_scale
    limits = [VelocityLimit(dt=0.05)] if velocity else []
    solver = QPSolver(limits)
    if bad is not None:
        target[rng.integers(3)] = bad
        with pytest.raises(InvalidTarget):
            solver.solve(robot, q0, "base_link", "tool0", target, max_delta=max_delta)
        return
    try:
        solution = solver.solve(
            robot, q0, "base_link", "tool0", target, max_delta=max_delta, max_iterations=15
        )
        q = solution.q
    except IKError as error:
        q = chain.q_from(error.positions)
    assert np.all(q >= chain.lower) and np.all(q <= chain.upper)
    if max_delta is not None:
        assert np.max(np.abs(q - q0)) <= max_delta + 1e-12


def test_velocity_limit_bounds_each_iteration():
    robot = load_urdf(ROBOTS / "ur5.urdf")
    chain = robot.path_between("base_link", "tool0")
    q0 = np.array([0.0, -1.0, 1.0, -1.0, 1.0, 0.0])
    target = chain.fk(q0 + 0.5)
    solver = QPSolver([VelocityLimit(dt=0.01)])
    solution = solver.solve(robot, q0, "base_link", "tool0", target, max_iterations=1)
    assert np.all(np.abs(solution.q - q0) <= chain.velocity_limit * 0.01 + 1e-12)
    assert not solution.reached and solution.status is Status.TIMEOUT


def test_linear_inequality_holds_at_the_solution():
    robot = load_urdf(ROBOTS / "ur5.urdf")
    chain = robot.path_between("base_link", "tool0")
    q0 = np.array([0.0, -1.0, 1.0, -1.0, 1.0, 0.0])
    target = chain.fk(np.array([0.6, -1.0, 1.0, -1.0, 1.0, 0.0]))[:3, 3]
    # The pan joint may not pass 0.3 rad: q1 <= 0.3 on the configuration.
    row = np.zeros((1, 6))
    row[0, 0] = 1.0
    solver = QPSolver([LinearInequality(row, [0.3], on="configuration")])
    try:
        q = solver.solve(robot, q0, "base_link", "tool0", target, max_iterations=100).q
    except IKError as error:
        q = chain.q_from(error.positions)
    assert q[0] <= 0.3 + 1e-9
    assert q[0] >= 0.3 - 1e-3  # pushed against the row: the error went to it, then around it
    # On the step instead: no iteration may turn the pan joint by more than 0.01 rad.
    solver = QPSolver([LinearInequality(np.vstack([row, -row]), [0.01, 0.01])])
    solution = solver.solve(robot, q0, "base_link", "tool0", target, max_iterations=3)
    assert abs(solution.q[0] - q0[0]) <= 3 * 0.01 + 1e-9


def test_collision_avoidance_keeps_the_margin():
    robot = load_urdf(ROBOTS / "ur5.urdf")
    chain = robot.path_between("base_link", "tool0")
    wrist = Capsule("tool0", 0.04, (0, 0, -0.12), (0, 0, 0.0))  # wrist 3 and the flange
    column = Capsule("base_link", 0.08, (0, 0, 0.0), (0, 0, 0.6))
    limit = CollisionAvoidance([(wrist, column)], margin=0.02, detection_distance=0.3)
    names = tuple(name for name, _ in chain.jacobian_columns)
    q0 = np.array([0.0, -1.2, 1.2, -1.5, -1.57, 0.0])
    assert limit.distances(ChainContext(chain, q0, names))[0] > 0.02
    target = np.array([0.05, 0.0, 0.3])  # inside the column
    solver = QPSolver([limit])
    try:
        q = solver.solve(robot, q0, "base_link", "tool0", target, max_iterations=60).q
    except IKError as error:
        q = chain.q_from(error.positions)
    (distance,) = limit.distances(ChainContext(chain, q, names))
    assert np.linalg.norm(chain.fk(q)[:3, 3] - target) > 0.05  # it stopped at the column
    assert distance >= 0.02 - 1e-3


@pytest.mark.parametrize("velocity", [False, True], ids=["position-limit", "with-velocity-limit"])
def test_no_oscillation_at_a_position_limit(velocity):
    """A target past a joint limit: tracking calls approach the limit monotonically."""
    robot = load_urdf(ROBOTS / "bimanual.urdf")
    chain = robot.path_between("torso", "left_tool")
    names = [name for name, _ in chain.jacobian_columns]
    elbow = names.index("left_joint3")
    q = np.zeros(6)
    q_goal = np.zeros(6)
    q_goal[elbow] = chain.upper[elbow] + 0.4
    # With a velocity limit the full pose (a position alone is reachable another way
    # when the steps are short).
    target = chain.fk(q_goal) if velocity else chain.fk(q_goal)[:3, 3]
    solver = QPSolver([VelocityLimit(dt=0.02)] if velocity else [])
    history = []
    for _ in range(60):
        try:
            q = solver.solve(robot, q, "torso", "left_tool", target, max_iterations=2).q
        except IKError as error:
            q = chain.q_from(error.positions)
        history.append(q[elbow])
    history = np.array(history)
    assert np.all(history <= chain.upper[elbow])
    steps = np.diff(history)
    assert np.all(steps >= -1e-9), "the joint moved back and forth"
    if velocity:
        assert history[-1] > 1.2  # it went most of the way, v dt per iteration at most
    else:
        assert chain.upper[elbow] - history[-1] < 0.02


def test_rejects_non_limits_and_bad_weights():
    with pytest.raises(TypeError, match="Limit"):
        QPSolver(["not a limit"])
    with pytest.raises(ValueError, match="damping"):
        QPSolver(damping=0.0)


@pytest.mark.parametrize("solver_class", [QPSolver, MultiTaskSolver], ids=["qp", "multitask"])
def test_floating_base_chain(solver_class):
    """A chain through the hexapod's floating joint: the base moves with the leg."""
    robot = load_urdf(ROBOTS / "hexapod.urdf")
    chain = robot.path_between("world", "leg1_foot")
    q = np.zeros(chain.dof)
    q[6:] = [0.1, 0.2, 0.3]
    target = chain.fk(q)[:3, 3] + np.array([0.02, 0.01, -0.03])
    solution = solver_class().solve(robot, np.zeros(chain.dof), "world", "leg1_foot", target)
    assert solution.reached
    np.testing.assert_allclose(chain.fk(solution.q)[:3, 3], target, atol=1e-4)
    assert np.any(solution.q[:6] != 0.0)  # the base took part


@pytest.mark.parametrize("solver_class", [QPSolver, MultiTaskSolver], ids=["qp", "multitask"])
def test_max_delta_bound_call_returns_quickly_and_the_next_calls_arrive(solver_class):
    """A teleop target beyond one call's max_delta: each call moves at most max_delta,
    stops early (no crawling along the box), and a few calls reach the target."""
    robot = load_urdf(ROBOTS / "ur5.urdf")
    chain = robot.path_between("base_link", "tool0")
    q = np.array([0.0, -1.2, 1.2, -1.5, -1.57, 0.0])
    target = chain.fk(q + 0.05)
    solver = solver_class()
    for _ in range(8):
        solution = solver.solve(robot, q, "base_link", "tool0", target, max_delta=0.02)
        assert np.max(np.abs(solution.q - q)) <= 0.02 + 1e-12
        assert solution.iterations <= 10
        q = solution.q
        if solution.reached:
            break
    assert solution.reached
