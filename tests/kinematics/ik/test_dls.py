"""DLSSolver and the shared Solver.solve contract: reachability, errors, forms, limits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hilbot.hal.backend import JointState
from hilbot.kinematics import load_urdf, spatial
from hilbot.kinematics.ik import (
    DLSSolver,
    NoDofs,
    NoSolution,
    OrientationUnreachable,
    Solution,
    Status,
    Unreachable,
    solve,
)
from hilbot.kinematics.ik.core.residual import rotation_error


def _state(names, position):
    n = len(names)
    return JointState(
        names=tuple(names),
        position=np.asarray(position, dtype=float),
        velocity=np.zeros(n),
        effort=np.zeros(n),
        temperature=np.zeros(n),
        hardware_errors=(0,) * n,  # type: ignore[arg-type]
        timestamp=0.0,
    )


def _within(chain, q, slack=1e-12):
    return bool(np.all(q >= chain.lower - slack) and np.all(q <= chain.upper + slack))


def _pose_errors(chain, q, target):
    pose = chain.fk(q)
    return (
        float(np.linalg.norm(pose[:3, 3] - target[:3, 3])),
        rotation_error(target[:3, :3], pose)[1],
    )


def test_random_reachable_poses_from_near_seeds(arm, rng, sample):
    robot, source, tip, chain = arm
    solver = DLSSolver()
    for _ in range(12):
        q_true = sample(chain, rng, margin=0.05)
        target = chain.fk(q_true)
        seed = q_true + rng.uniform(-0.25, 0.25, chain.dof)
        seed = np.clip(seed, chain.lower, chain.upper)
        sol = solver.solve(
            robot, seed, source, tip, target, max_iterations=100, orientation_tolerance=1e-3
        )
        assert sol.reached and sol.status is Status.CONVERGED
        position, angle = _pose_errors(chain, sol.q, target)
        assert position <= 1e-4 and angle <= 1e-3
        assert position == pytest.approx(sol.residual, abs=1e-12)
        assert _within(chain, sol.q)


def test_position_only_targets_on_every_arm(arm, rng, sample):
    robot, source, tip, chain = arm
    for _ in range(8):
        q_true = sample(chain, rng, margin=0.05)
        point = chain.fk(q_true)[:3, 3]
        seed = np.clip(q_true + rng.uniform(-0.3, 0.3, chain.dof), chain.lower, chain.upper)
        sol = solve(robot, seed, source, tip, point)
        assert sol.reached and sol.orientation_residual is None
        assert np.linalg.norm(chain.fk(sol.q)[:3, 3] - point) <= 1e-4
        assert _within(chain, sol.q)


def test_unreachable_target_raises_with_best_effort_positions(arm, rng, sample):
    robot, source, tip, chain = arm
    solver = DLSSolver()
    info = solver.info(chain)
    if not math.isfinite(info.reach):
        pytest.skip("a floating base reaches everywhere")
    direction = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    far = info.base_origin + direction * (info.reach * 2.0 + 0.5)
    seed = sample(chain, rng, margin=0.05)
    with pytest.raises(Unreachable) as caught:
        solver.solve(robot, seed, source, tip, far)
    err = caught.value
    assert err.reach == pytest.approx(info.reach)
    assert err.distance > err.reach
    assert set(chain.q_to_dict(np.zeros(chain.dof))) <= set(err.positions)
    q = chain.q_from(err.positions)
    assert _within(chain, q)
    # best effort: the tip got closer to the target than the seed was
    before = np.linalg.norm(chain.fk(seed)[:3, 3] - far)
    after = np.linalg.norm(chain.fk(q)[:3, 3] - far)
    assert after < before
    assert err.solution.residual == pytest.approx(after, abs=1e-9)


def test_no_dofs(load):
    robot = load("ur5")
    chain = robot.path_between("wrist_3_link", "tool0")
    with pytest.raises(NoDofs) as caught:
        solve(robot, {}, "wrist_3_link", "tool0", np.zeros(3))
    assert caught.value.chain is chain
    assert caught.value.source == "wrist_3_link" and caught.value.target == "tool0"


def test_no_solution_when_the_limits_block_the_target(planar_2r):
    robot = planar_2r
    # Within reach (2 m) but behind the arm: the shoulder may only turn by 0.5 rad.
    with pytest.raises(NoSolution) as caught:
        solve(robot, {"shoulder": 0.0, "elbow": 0.5}, "base", "tip", [-1.0, 0.2, 0.0])
    err = caught.value
    assert err.status in (Status.STALLED, Status.DIVERGED)
    assert err.residual > 1e-4 and err.solution.reached is False
    assert -0.5 <= err.positions["shoulder"] <= 0.5 and 0.0 <= err.positions["elbow"] <= 1.0
    assert err.orientation_residual is None


def test_limits_redistribute_the_error(planar_2r):
    robot = planar_2r
    chain = robot.path_between("base", "tip")
    # Reachable only with the shoulder at its bound: clipping after solving would miss it.
    q_true = np.array([0.5, 0.9])
    target = chain.fk(q_true)[:3, 3]
    sol = solve(robot, {"shoulder": 0.0, "elbow": 0.1}, "base", "tip", target)
    assert sol.reached
    np.testing.assert_allclose(sol.q, q_true, atol=1e-3)


def test_strict_orientation_raises_when_the_arm_lacks_dofs(load, rng, sample):
    robot = load("openmanipulator_x")
    chain = robot.path_between("world", "end_effector_link")
    target = chain.fk(sample(chain, rng, margin=0.1))
    # Roll the target about its own x-axis: a 4-DoF arm cannot roll its gripper.
    rolled = target.copy()
    rolled[:3, :3] = target[:3, :3] @ spatial.rot_x(0.6)
    seed = np.zeros(chain.dof)
    with pytest.raises(OrientationUnreachable) as caught:
        solve(robot, seed, "world", "end_effector_link", rolled, strict_orientation=True)
    err = caught.value
    assert err.orientation_residual > err.tolerance == 0.01
    assert err.solution.residual <= 1e-4
    # Not strict: position wins, orientation is best effort.
    sol = solve(robot, seed, "world", "end_effector_link", rolled)
    assert sol.position_reached and sol.residual <= 1e-4
    assert not sol.reached  # reached is honest: the orientation was not met
    assert sol.orientation_residual is not None and sol.orientation_residual > 0.01


@pytest.mark.parametrize("form", ["position", "none", "axis", "quaternion", "matrix", "transform"])
def test_every_target_form(form, load, rng, sample):
    robot = load("panda")
    chain = robot.path_between("panda_link0", "panda_hand_tcp")
    q_true = sample(chain, rng, margin=0.2)
    pose = chain.fk(q_true)
    p, rot = pose[:3, 3], pose[:3, :3]
    target = {
        "position": p,
        "none": (p, None),
        "axis": (p, rot[:, 2] * 3.0),
        "quaternion": (p, spatial.matrix_to_quat(rot)),
        "matrix": (p, rot),
        "transform": pose,
    }[form]
    seed = np.clip(q_true + 0.2, chain.lower, chain.upper)
    sol = DLSSolver().solve(robot, seed, "panda_link0", "panda_hand_tcp", target)
    assert sol.reached and sol.status is Status.CONVERGED
    got = chain.fk(sol.q)
    assert np.linalg.norm(got[:3, 3] - p) <= 1e-4
    if form == "axis":
        assert np.dot(got[:3, 2], rot[:, 2]) >= math.cos(0.01)
    elif form in ("quaternion", "matrix", "transform"):
        assert rotation_error(rot, got)[1] <= 0.01
    else:
        assert sol.orientation_residual is None


def test_state_forms_and_joints_outside_the_chain(load):
    robot = load("bimanual")
    chain = robot.path_between("world", "left_tool")
    names = [j.name for j in robot.joints.values() if j.dof == 1]
    values = np.linspace(-0.3, 0.3, len(names))
    target = chain.fk(chain.q_from(dict(zip(names, values, strict=True))) + 0.1)
    state = _state(names, values)
    by_state = solve(robot, state, "world", "left_tool", target)
    by_mapping = solve(robot, dict(zip(names, values, strict=True)), "world", "left_tool", target)
    np.testing.assert_allclose(by_state.q, by_mapping.q, atol=1e-12)
    positions = by_state.positions
    assert set(positions) == set(names)
    for name, value in zip(names, values, strict=True):
        if name not in chain.q_to_dict(by_state.q):
            assert positions[name] == value  # untouched
    assert chain.q_from(positions) == pytest.approx(by_state.q)
    flat = solve(robot, chain.q_from(state.positions()), "world", "left_tool", target)
    np.testing.assert_allclose(flat.q, by_state.q, atol=1e-12)
    assert set(flat.positions) == set(chain.q_to_dict(flat.q))


def test_missing_joint_in_mapping_names_it(load):
    robot = load("ur5")
    with pytest.raises(KeyError, match="shoulder_pan_joint"):
        solve(robot, {"elbow_joint": 0.0}, "base_link", "tool0", np.array([0.3, 0.1, 0.4]))


def test_max_delta_bounds_each_call_and_tracking_continues(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    q0 = np.array([0.0, -1.2, 1.4, -1.8, -1.5, 0.2])
    q_goal = q0 + np.array([0.6, -0.3, 0.4, 0.2, -0.5, 0.7])
    target = chain.fk(q_goal)
    q = q0
    calls = 0
    for _ in range(40):
        calls += 1
        sol = solve(robot, q, "base_link", "tool0", target, max_delta=0.05)
        assert np.max(np.abs(sol.q - q)) <= 0.05 + 1e-12
        q = sol.q
        if sol.status is Status.CONVERGED:
            break
        assert not sol.reached or sol.orientation_residual <= 0.01
    assert sol.reached and calls >= 10  # it had to take many bounded calls
    assert sol.orientation_residual <= 0.01


def test_initial_positions_seed_the_iteration(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    state = np.zeros(chain.dof)
    seed = np.array([0.1, -1.0, 1.2, -1.7, -1.4, 0.3])
    target = chain.fk(seed + 0.02)
    sol = solve(robot, state, "base_link", "tool0", target, initial_positions=seed, max_delta=0.1)
    assert np.max(np.abs(sol.q - seed)) <= 0.1 + 1e-12
    assert sol.reached


def test_respect_limits_false_may_leave_the_limits(planar_2r):
    robot = planar_2r
    chain = robot.path_between("base", "tip")
    target = chain.fk(np.array([1.0, 0.4]))[:3, 3]  # shoulder beyond its 0.5 rad limit
    sol = solve(robot, {"shoulder": 0.4, "elbow": 0.4}, "base", "tip", target, respect_limits=False)
    assert sol.reached and sol.q[0] > 0.5


def test_rest_pose_is_pulled_in_the_null_space(load):
    robot = load("panda")
    chain = robot.path_between("panda_link0", "panda_hand_tcp")
    q0 = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])
    point = chain.fk(q0 + 0.15)[:3, 3]
    rest = dict(zip([n for n, _ in chain.jacobian_columns], q0 - 0.6, strict=True))
    plain = DLSSolver().solve(robot, q0, "panda_link0", "panda_hand_tcp", point)
    pulled = DLSSolver(rest=rest, rest_gain=0.2).solve(
        robot, q0, "panda_link0", "panda_hand_tcp", point, tolerance=1e-6, max_iterations=200
    )
    assert plain.reached and pulled.reached
    rest_q = chain.q_from(rest)
    assert np.linalg.norm(pulled.q - rest_q) < np.linalg.norm(plain.q - rest_q) - 0.05


def test_svd_damping_option_converges_near_a_singularity(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    q_true = np.array([0.2, -1.3, 1.5, -1.6, 1e-4, 0.3])  # wrist singular (q5 ~ 0)
    target = chain.fk(q_true + np.array([0.0, 0.0, 0.0, 0.0, 0.3, 0.0]))
    sol = DLSSolver(svd=True).solve(robot, q_true, "base_link", "tool0", target, max_iterations=200)
    assert sol.reached
    assert _pose_errors(chain, sol.q, target)[0] <= 1e-4


def test_timeout_is_returned_not_raised(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    q0 = np.array([0.0, -1.2, 1.4, -1.8, -1.5, 0.2])
    target = chain.fk(q0 + 0.4)
    sol = solve(robot, q0, "base_link", "tool0", target, max_iterations=1)
    assert sol.status is Status.TIMEOUT and not sol.reached and sol.iterations == 1
    assert sol.residual < np.linalg.norm(chain.fk(q0)[:3, 3] - target[:3, 3])


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_iterations", 0),
        ("tolerance", 0.0),
        ("tolerance", math.nan),
        ("orientation_tolerance", -1.0),
        ("max_delta", 0.0),
        ("max_delta", math.inf),
    ],
)
def test_bad_options_are_rejected(option, value, load):
    with pytest.raises(ValueError, match=option):
        solve(
            load("ur5"),
            np.zeros(6),
            "base_link",
            "tool0",
            np.array([0.3, 0.1, 0.4]),
            **{option: value},
        )


@pytest.mark.parametrize("option", ["damping", "orientation_weight", "max_step", "rest_gain"])
def test_bad_solver_parameters_are_rejected(option):
    with pytest.raises(ValueError, match=option):
        DLSSolver(**{option: -1.0})


def test_bad_state_types_are_rejected(load):
    with pytest.raises(TypeError, match="state_or_positions"):
        solve(load("ur5"), 3.0, "base_link", "tool0", np.array([0.3, 0.1, 0.4]))
    with pytest.raises(ValueError, match=r"shape \(6,\)"):
        solve(load("ur5"), np.zeros(5), "base_link", "tool0", np.array([0.3, 0.1, 0.4]))


def test_solution_repr_and_positions_copy(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    sol = solve(robot, np.zeros(6) + 0.3, "base_link", "tool0", chain.fk(np.zeros(6) + 0.35))
    assert isinstance(sol, Solution) and "converged" in repr(sol)
    positions = sol.positions
    positions["shoulder_pan_joint"] = 99.0
    assert sol.positions["shoulder_pan_joint"] != 99.0


PLANAR_BASE = """
<robot name="slider">
  <link name="ground"/><link name="cart"/><link name="arm"/><link name="tip"/>
  <joint name="table" type="planar">
    <parent link="ground"/><child link="cart"/><axis xyz="0 0 1"/>
  </joint>
  <joint name="hinge" type="revolute">
    <parent link="cart"/><child link="arm"/><origin xyz="0.5 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" velocity="1" effort="1"/>
  </joint>
  <joint name="tip_joint" type="fixed">
    <parent link="arm"/><child link="tip"/><origin xyz="0.3 0 0"/>
  </joint>
</robot>
"""


def test_planar_and_floating_chains_use_the_generic_path(load):
    robot = load_urdf(PLANAR_BASE)
    chain = robot.path_between("ground", "tip")
    q_true = np.array([0.4, -0.3, 0.7, 0.5])
    target = chain.fk(q_true)
    sol = DLSSolver().solve(robot, np.zeros(4), "ground", "tip", target, max_iterations=100)
    assert sol.reached and sol.status is Status.CONVERGED
    assert _pose_errors(chain, sol.q, target)[0] <= 1e-4
    assert -1.0 <= sol.q[3] <= 1.0
    assert isinstance(sol.positions["table"], np.ndarray)  # a planar joint's pose
    hexapod = load("hexapod")
    legs = hexapod.path_between("world", "leg2_foot")
    q = np.zeros(legs.dof)
    goal = legs.fk(q + 0.2)
    sol = solve(hexapod, q, "world", "leg2_foot", goal, max_delta=0.3, max_iterations=100)
    assert sol.reached and np.max(np.abs(sol.q - q)) <= 0.3 + 1e-12
