"""Every solver refuses a bad call option with the same message (one validator in core).

``MultiTaskSolver.solve_tasks`` had its own copy, whose messages read "must be finite
and > 0" where the others said what the option is ("a finite positive distance [m]").
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from hilbot.kinematics.ik import BatchSolver, DLSSolver, FrameTask, MultiTaskSolver, QPSolver

SOURCE, TIP = "panda_link0", "panda_hand_tcp"
BAD = {
    "max_iterations": (0, "max_iterations must be an int >= 1, got 0"),
    "tolerance": (float("nan"), "tolerance must be a finite positive distance [m], got nan"),
    "orientation_tolerance": (
        -1.0,
        "orientation_tolerance must be a finite positive angle [rad], got -1.0",
    ),
}


def _calls(load):
    robot = load("panda")
    chain = robot.path_between(SOURCE, TIP)
    q = np.zeros(chain.dof)
    point = chain.fk(q)[:3, 3]
    return {
        "dls": lambda **o: DLSSolver().solve(robot, q, SOURCE, TIP, point, **o),
        "qp": lambda **o: QPSolver().solve(robot, q, SOURCE, TIP, point, **o),
        "batch": lambda **o: BatchSolver().solve_batch(robot, q, SOURCE, TIP, point[None], **o),
        "multitask": lambda **o: MultiTaskSolver().solve(robot, q, SOURCE, TIP, point, **o),
        "tasks": lambda **o: MultiTaskSolver().solve_tasks(
            robot, q, [FrameTask(TIP, point)], root_link=SOURCE, **o
        ),
    }


@pytest.mark.parametrize("option", sorted(BAD))
@pytest.mark.parametrize("solver", ["batch", "dls", "multitask", "qp", "tasks"])
def test_a_bad_option_is_refused_alike(load, solver, option):
    value, message = BAD[option]
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _calls(load)[solver](**{option: value})
