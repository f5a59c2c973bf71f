"""A chain takes a target as settled once the solver can do no better, by the honest ``reached``.

``Solution.reached`` now needs the orientation of a pose target met. A 4-DoF arm asked
for a pose it cannot take meets the position and stalls ("position wins"): solving
the same target again changes nothing, so the runner does not. A solve that ran out of
iterations with the position met but the orientation still improving is solved again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hilbot.driver.runtime.chains import ChainRunner
from hilbot.driver.runtime.config import ChainConfig
from hilbot.kinematics import load_urdf, spatial

ROBOTS = Path(__file__).resolve().parents[2] / "configs" / "robots"


def _runner(**options: float | int) -> tuple[ChainRunner, np.ndarray, np.ndarray]:
    robot = load_urdf(ROBOTS / "openmanipulator_x.urdf")
    config = ChainConfig(
        name="arm", source_link="world", target_link="end_effector_link", options=options
    )
    chain = robot.path_between("world", "end_effector_link")
    names = [joint for joint, _ in chain.jacobian_columns]
    runner = ChainRunner(robot, config, names, max_delta=0.1)
    q_true = np.array([0.4, -0.3, 0.5, 0.2])
    target = chain.fk(q_true)
    return runner, q_true, target


def test_position_wins_is_settled() -> None:
    runner, q_true, target = _runner()
    rolled = target.copy()
    rolled[:3, :3] = target[:3, :3] @ spatial.rot_x(0.6)  # a 4-DoF arm cannot roll
    values, solution, settled = runner.solve(rolled, 1, q_true + 0.05)
    assert values is not None
    assert solution.position_reached and not solution.reached
    assert settled and not runner.needs_solve(1)


def test_a_met_pose_is_settled() -> None:
    runner, q_true, target = _runner()
    _, solution, settled = runner.solve(target, 1, q_true + 0.05)
    assert solution.reached and settled and not runner.needs_solve(1)


def test_out_of_iterations_with_the_orientation_unmet_is_solved_again() -> None:
    # One iteration from a seed whose wrist roll is 0.5 rad off: the position lands
    # within the 1 cm tolerance, the orientation is still 0.05 rad off.
    robot = load_urdf(ROBOTS / "ur5.urdf")
    config = ChainConfig(
        name="arm",
        source_link="base_link",
        target_link="tool0",
        options={"max_iterations": 1, "tolerance": 0.01},
    )
    chain = robot.path_between("base_link", "tool0")
    names = [joint for joint, _ in chain.jacobian_columns]
    runner = ChainRunner(robot, config, names, max_delta=0.1)
    q_true = np.array([0.3, -1.2, 1.4, -1.8, -1.5, 0.2])
    seed = q_true.copy()
    seed[5] += 0.5
    _, solution, settled = runner.solve(chain.fk(q_true), 1, seed)
    assert solution.status == "timeout"
    assert solution.position_reached and not solution.reached
    assert not settled and runner.needs_solve(1)
