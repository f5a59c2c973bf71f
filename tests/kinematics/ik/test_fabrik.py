"""FABRIKSolver: position targets on serial chains, refusal of multi-DoF joints."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics import load_urdf
from hilbot.kinematics.ik import (
    FABRIKSolver,
    InvalidTarget,
    MultiStartSolver,
    Status,
    UnsupportedJoint,
)

SERIAL = [
    ("ur5", "base_link", "tool0"),
    ("panda", "panda_link0", "panda_hand_tcp"),
    ("widowx_250s", "base_link", "ee_gripper_link"),
    ("openmanipulator_x", "world", "end_effector_link"),
    ("openmanipulator_x", "world", "gripper_link_sub"),  # prismatic + mimic follower
    ("koch_v1_1", "base_link", "tool"),
    ("hexapod", "base_link", "leg2_foot"),
]


@pytest.mark.parametrize("case", SERIAL, ids=[f"{r}:{t}" for r, _, t in SERIAL])
def test_position_targets_from_near_seeds(case, load, rng, sample):
    name, source, tip = case
    robot = load(name)
    chain = robot.path_between(source, tip)
    solver = FABRIKSolver()
    for _ in range(4):
        q_true = sample(chain, rng, margin=0.05)
        point = chain.fk(q_true)[:3, 3]
        seed = np.clip(q_true + rng.uniform(-0.2, 0.2, chain.dof), chain.lower, chain.upper)
        sol = solver.solve(robot, seed, source, tip, point, max_iterations=300)
        assert sol.reached and sol.status is Status.CONVERGED
        assert np.linalg.norm(chain.fk(sol.q)[:3, 3] - point) <= 1e-4
        assert np.all(sol.q >= chain.lower) and np.all(sol.q <= chain.upper)
        assert sol.orientation_residual is None


def test_cold_starts_with_restarts(load, rng, sample):
    robot = load("widowx_250s")
    chain = robot.path_between("base_link", "ee_gripper_link")
    solver = MultiStartSolver(FABRIKSolver(), restarts=10, seed=3)
    for _ in range(4):
        point = chain.fk(sample(chain, rng))[:3, 3]
        sol = solver.solve(robot, sample(chain, rng), "base_link", "ee_gripper_link", point)
        assert sol.reached


def test_max_delta_and_limits_hold(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    q0 = np.array([0.0, -1.2, 1.4, -1.8, -1.5, 0.2])
    point = chain.fk(q0 + 0.5)[:3, 3]
    sol = FABRIKSolver().solve(robot, q0, "base_link", "tool0", point, max_delta=0.05)
    assert np.max(np.abs(sol.q - q0)) <= 0.05 + 1e-12
    assert sol.residual < np.linalg.norm(chain.fk(q0)[:3, 3] - point)


def test_refuses_floating_joints(load):
    robot = load("hexapod")
    with pytest.raises(UnsupportedJoint) as caught:
        FABRIKSolver().solve(robot, np.zeros(9), "world", "leg1_foot", np.zeros(3))
    err = caught.value
    assert (err.joint, err.joint_type, err.solver) == ("base_floating", "floating", "FABRIKSolver")
    assert "DLSSolver" in str(err)


PLANAR = """
<robot name="slider">
  <link name="ground"/><link name="cart"/><link name="arm"/>
  <joint name="table" type="planar">
    <parent link="ground"/><child link="cart"/><axis xyz="0 0 1"/>
  </joint>
  <joint name="hinge" type="revolute">
    <parent link="cart"/><child link="arm"/><origin xyz="0.5 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" velocity="1" effort="1"/>
  </joint>
</robot>
"""


def test_refuses_planar_joints():
    robot = load_urdf(PLANAR)
    with pytest.raises(UnsupportedJoint) as caught:
        FABRIKSolver().solve(robot, np.zeros(4), "ground", "arm", np.array([0.2, 0.1, 0.0]))
    assert (caught.value.joint, caught.value.joint_type) == ("table", "planar")


def test_refuses_orientation_targets(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    with pytest.raises(InvalidTarget, match="position-only"):
        FABRIKSolver().solve(robot, np.zeros(6), "base_link", "tool0", chain.fk(np.zeros(6) + 0.1))


def test_bad_parameters():
    with pytest.raises(ValueError, match="stall_iterations"):
        FABRIKSolver(stall_iterations=0)
