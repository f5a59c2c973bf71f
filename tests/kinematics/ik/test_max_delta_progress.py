"""A target beyond one call's max_delta box: the solver moves towards it, it does not give up.

This is the teleop case: the driver calls IK every cycle with a small per-call max delta,
and a target a few centimetres away must be approached over several calls.
"""

from importlib.resources import files

import numpy as np
import pytest

from hilbot.kinematics import load_urdf
from hilbot.kinematics.ik import DLSSolver, QPSolver

KOCH_HOME = {
    "shoulder_pan": 0.0,
    "shoulder_lift": -1.5,
    "elbow_flex": 1.5,
    "wrist_flex": 0.6,
    "wrist_roll": 0.0,
    "gripper": 0.0,
}


@pytest.mark.parametrize("solver", [DLSSolver(), QPSolver()], ids=["dls", "qp"])
@pytest.mark.parametrize("offset", [(0.01, 0.0, 0.0), (0.03, 0.02, -0.01), (0.0, 0.0, 0.02)])
def test_a_target_beyond_the_box_is_approached_over_calls(solver, offset):
    robot = load_urdf(str(files("hilbot.configs") / "robots/koch_v1_1.urdf"))
    chain = robot.path_between("base_link", "tool")
    seed = dict(KOCH_HOME)
    target = chain.fk(chain.q_from(seed))[:3, 3] + np.array(offset)
    errors = []
    for _ in range(120):
        before = chain.q_from(seed)
        solution = solver.solve(robot, seed, "base_link", "tool", target, max_delta=0.02)
        after = chain.q_from(solution.positions)
        assert np.max(np.abs(after - before)) <= 0.02 + 1e-12
        seed = dict(solution.positions)
        errors.append(float(np.linalg.norm(chain.fk(after)[:3, 3] - target)))
        if solution.reached:
            break
    assert errors[0] < np.linalg.norm(offset)  # the first call already moved towards it
    assert errors[-1] < 1e-4
