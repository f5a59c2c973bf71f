"""No solve runs past ``max_iterations``, and the batch polishes each item with its own budget.

The "position wins" polish of an unmet pose used to get ``max(max_iterations -
iterations, 10)`` more iterations (a solve reported up to 10 past its budget), and the
batch gave every polished item the budget left to the one that had used the fewest,
so items ran past ``max_iterations`` and ended away from the one-by-one answer.
"""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics import spatial
from hilbot.kinematics.ik import BatchSolver, DLSSolver, IKError


def _solve(solver, robot, seed, source, target_link, target, **options):
    try:
        return solver.solve(robot, seed, source, target_link, target, **options)
    except IKError as err:
        solution = getattr(err, "solution", None)
        assert solution is not None, err
        return solution


@pytest.mark.parametrize("max_iterations", [5, 10, 20])
def test_the_position_wins_polish_stays_within_the_budget(load, rng, sample, max_iterations):
    # A 5-DoF arm asked for poses rolled about the tool x-axis: the orientation cannot
    # be met, so the weighted solve stalls and the position is polished on its own.
    robot = load("koch_v1_1")
    chain = robot.path_between("base_link", "tool")
    solver = DLSSolver()
    polished = 0
    for _ in range(60):
        target = chain.fk(sample(chain, rng, margin=0.1))
        target[:3, :3] = target[:3, :3] @ spatial.rot_x(1.2)
        seed = sample(chain, rng)
        sol = _solve(
            solver, robot, seed, "base_link", "tool", target, max_iterations=max_iterations
        )
        assert sol.iterations <= max_iterations
        polished += sol.status.value == "stalled" and sol.residual <= 1e-4
    if max_iterations >= 20:
        assert polished > 0  # the polish ran (and met the position) on some of them


def test_the_general_path_polish_stays_within_the_budget(load, rng, sample):
    # A tool-axis target takes the general loop (not the fused iteration).
    robot = load("openmanipulator_x")
    chain = robot.path_between("world", "end_effector_link")
    solver = DLSSolver()
    for _ in range(40):
        point = chain.fk(sample(chain, rng, margin=0.1))[:3, 3]
        axis = rng.normal(size=3)
        sol = _solve(
            solver, robot, sample(chain, rng), "world", "end_effector_link", (point, axis),
            max_iterations=8,
        )  # fmt: skip
        assert sol.iterations <= 8


def test_batch_equals_one_by_one_on_cold_starts_of_a_7_dof_arm(load, rng):
    robot = load("panda")
    source, tip = "panda_link0", "panda_hand_tcp"
    chain = robot.path_between(source, tip)
    size, budget = 300, 20
    targets = np.array([chain.fk(rng.uniform(chain.lower, chain.upper)) for _ in range(size)])
    seeds = rng.uniform(chain.lower, chain.upper, size=(size, chain.dof))
    batch = BatchSolver().solve_batch(
        robot, seeds, source, tip, targets, max_iterations=budget, as_arrays=True
    )
    assert int(batch.iterations.max()) <= budget
    single = DLSSolver()
    worst = 0.0
    for b in range(size):
        sol = _solve(single, robot, seeds[b], source, tip, targets[b], max_iterations=budget)
        assert sol.iterations == batch.iterations[b], b
        worst = max(worst, float(np.abs(sol.q - batch.q[b]).max()))
    assert worst <= 1e-9
