"""QPSolver under a velocity limit keeps converging on orientation (the capped-step stall).

Steps capped by ``VelocityLimit`` shrink the error by a fixed fraction per iteration.
The position-wins rule read that linear decrease as an orientation the arm cannot
take, cut the orientation weight tenfold per iteration, and the solve ended
``stalled`` with the position met and the orientation 0.03-0.6 rad off.
"""

from __future__ import annotations

import pytest

from hilbot.kinematics.ik import QPBatchSolver, QPSolver, Status, VelocityLimit


@pytest.mark.parametrize("name", ["panda", "ur5"])
def test_velocity_limited_solves_meet_the_orientation(name, poses):
    """Before the fix 93 of these 200 Panda solves (36 UR5) ended stalled, 0.03-0.6 rad off."""
    robot, source, tip, seeds, targets = poses(name, 200)
    solver = QPSolver([VelocityLimit(dt=0.01)])
    stalled = 0
    for seed, target in zip(seeds, targets, strict=True):
        solution = solver.solve(robot, seed, source, tip, target)
        stalled += solution.status is Status.STALLED
        assert solution.status is Status.CONVERGED, solution
        assert solution.orientation_residual is not None
        assert solution.orientation_residual <= 0.01
    assert stalled == 0


def test_batched_velocity_limited_solves_meet_the_orientation(poses):
    robot, source, tip, seeds, targets = poses("panda", 200)
    out = QPBatchSolver([VelocityLimit(dt=0.01)]).solve_batch(
        robot, seeds, source, tip, targets, as_arrays=True
    )
    assert (out.status == 0).all()  # converged
    assert out.orientation_residual.max() <= 0.01
