"""Tracking a continuous Cartesian path: every step reached, no jumps between branches."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics import spatial
from hilbot.kinematics.ik import BatchSolver, DLSSolver

PATHS = [
    ("ur5", "base_link", "tool0", [0.3, -1.4, 1.6, -1.8, -1.5, 0.4]),
    ("panda", "panda_link0", "panda_hand_tcp", [0.1, -0.4, 0.1, -2.1, 0.1, 1.9, 0.7]),
    ("widowx_250s", "base_link", "ee_gripper_link", [0.2, -0.3, 0.4, 0.1, 0.5, 0.1]),
]


def _path(start: np.ndarray, steps: int) -> list[np.ndarray]:
    """A circle of 6 cm radius with a slowly turning orientation, starting at ``start``."""
    poses = []
    for k in range(steps + 1):
        a = 2.0 * np.pi * k / steps
        offset = 0.06 * np.array([np.cos(a) - 1.0, np.sin(a), 0.3 * np.sin(2 * a)])
        turn = spatial.rpy_to_matrix([0.2 * np.sin(a), 0.15 * np.sin(2 * a), 0.25 * np.sin(a)])
        pose = start.copy()
        pose[:3, 3] += offset
        pose[:3, :3] = turn @ start[:3, :3]
        poses.append(pose)
    return poses


@pytest.mark.parametrize("case", PATHS, ids=[c[0] for c in PATHS])
def test_tracking_a_path_never_jumps(case, load):
    name, source, tip, q_start = case
    robot = load(name)
    chain = robot.path_between(source, tip)
    q = np.array(q_start)
    poses = _path(chain.fk(q), 240)
    solver = DLSSolver()
    steps = []
    for pose in poses:
        sol = solver.solve(
            robot,
            q,
            source,
            tip,
            pose,
            max_iterations=10,
            orientation_tolerance=1e-3,
            max_delta=0.2,
        )
        assert sol.reached and sol.orientation_residual <= 1e-3
        steps.append(np.max(np.abs(sol.q - q)))
        q = sol.q
    # ~1.6 mm and a few mrad per step: joints move smoothly, never by a branch flip.
    assert max(steps) < 0.05
    # Coming back around the loop lands on the same branch it started on (a redundant
    # arm may drift along its self-motion, slowly).
    np.testing.assert_allclose(q, q_start, atol=1e-2 if chain.dof <= 6 else 0.15)


def test_batched_tracking_follows_many_paths_at_once(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    rng = np.random.default_rng(5)
    q = np.array(PATHS[0][3]) + rng.uniform(-0.3, 0.3, (16, 6))
    paths = [_path(p, 120) for p in chain.fk_batch(q)]
    solver = BatchSolver()
    for k in range(121):
        targets = np.array([p[k] for p in paths])
        out = solver.solve_batch(
            robot, q, "base_link", "tool0", targets, max_iterations=10, as_arrays=True
        )
        assert out.reached.all()
        assert np.abs(out.q - q).max() < 0.05
        q = out.q
