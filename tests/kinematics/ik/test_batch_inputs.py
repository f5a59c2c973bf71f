"""Both batch solvers check their inputs with the one validator, so they refuse alike.

Before it was shared, each had its own copy and each had a hole the other had not:
``BatchSolver`` failed on (B, 3, 3) arrays with an ``IndexError`` and solved an empty
(0, 3) array, ``QPBatchSolver`` took a position coordinate beyond ``MAX_COORDINATE``,
and their messages for a non-finite seed and a non-rigid transform differed.
"""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics.ik import (
    BatchSolver,
    InvalidPositions,
    InvalidTarget,
    QPBatchSolver,
)

SOLVERS = {"dls": BatchSolver, "qp": QPBatchSolver}
SOURCE, TIP = "panda_link0", "panda_hand_tcp"


@pytest.fixture(params=sorted(SOLVERS))
def solver(request: pytest.FixtureRequest) -> BatchSolver | QPBatchSolver:
    return SOLVERS[request.param]()


def _poses(load, size: int) -> tuple[object, np.ndarray, np.ndarray]:
    robot = load("panda")
    chain = robot.path_between(SOURCE, TIP)
    q = np.zeros((size, chain.dof))
    return robot, q, chain.fk_batch(q)


def test_rotation_only_arrays_are_refused(solver, load):
    robot, q, poses = _poses(load, 2)
    with pytest.raises(InvalidTarget, match=r"unsupported batch shape \(2, 3, 3\)"):
        solver.solve_batch(robot, q, SOURCE, TIP, poses[:, :3, :3])


def test_an_empty_array_of_points_is_refused(solver, load):
    robot, q, _ = _poses(load, 1)
    with pytest.raises(ValueError, match="the batch is empty"):
        solver.solve_batch(robot, q[:0], SOURCE, TIP, np.zeros((0, 3)))


@pytest.mark.parametrize("form", ["points", "transforms"])
def test_a_coordinate_beyond_the_bound_is_refused(solver, load, form):
    robot, q, poses = _poses(load, 2)
    poses[1, 0, 3] = 1e10
    targets = poses[:, :3, 3] if form == "points" else poses
    with pytest.raises(InvalidTarget, match="beyond"):
        solver.solve_batch(robot, q, SOURCE, TIP, targets)


@pytest.mark.parametrize("size", [3, 100])  # both ways of checking (small and large batches)
@pytest.mark.parametrize("flaw", ["scaled", "reflected", "last row"])
def test_the_first_transform_that_is_not_rigid_is_named(solver, load, size, flaw):
    robot, q, poses = _poses(load, size)
    if flaw == "scaled":
        poses[1, :3, :3] *= 1.01
    elif flaw == "reflected":
        poses[1, :3, 0] *= -1.0
    else:
        poses[1, 3, 0] = 1e-3
    poses[2] = poses[1]
    with pytest.raises(InvalidTarget, match="transform 1 is not rigid"):
        solver.solve_batch(robot, q, SOURCE, TIP, poses)


def test_a_seed_that_is_not_finite_names_its_joint(solver, load):
    robot, q, poses = _poses(load, 2)
    q[1, 3] = np.nan
    with pytest.raises(InvalidPositions, match="panda_joint4"):
        solver.solve_batch(robot, q, SOURCE, TIP, poses)
