"""MultiStartSolver: random restarts within the limits, count and time budgets."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics.ik import DLSSolver, MultiStartSolver, NoSolution, Status


@pytest.mark.parametrize(
    "case",
    [
        ("ur5", "base_link", "tool0"),
        ("panda", "panda_link0", "panda_hand_tcp"),
        ("widowx_250s", "base_link", "ee_gripper_link"),
        ("koch_v1_1", "base_link", "tool"),
        ("openmanipulator_x", "world", "end_effector_link"),
        ("bimanual", "world", "right_tool"),
    ],
    ids=lambda c: f"{c[0]}:{c[2]}",
)
def test_cold_starts_reach_random_poses(case, load, rng, sample):
    name, source, tip = case
    robot = load(name)
    chain = robot.path_between(source, tip)
    solver = MultiStartSolver(restarts=40, seed=1)
    for _ in range(8):
        target = chain.fk(sample(chain, rng))
        seed = sample(chain, rng)
        sol = solver.solve(
            robot, seed, source, tip, target, max_iterations=40, orientation_tolerance=1e-3
        )
        assert sol.reached and sol.status is Status.CONVERGED
        assert sol.orientation_residual <= 1e-3
        assert np.all(sol.q >= chain.lower) and np.all(sol.q <= chain.upper)


def test_a_good_seed_costs_one_attempt(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    q0 = np.array([0.1, -1.1, 1.3, -1.7, -1.5, 0.2])
    target = chain.fk(q0 + 0.01)
    plain = DLSSolver().solve(robot, q0, "base_link", "tool0", target)
    multi = MultiStartSolver(restarts=10).solve(robot, q0, "base_link", "tool0", target)
    assert multi.iterations == plain.iterations
    np.testing.assert_allclose(multi.q, plain.q)


def test_reproducible_with_a_seed(load, rng, sample):
    robot = load("panda")
    chain = robot.path_between("panda_link0", "panda_hand_tcp")
    target = chain.fk(sample(chain, rng))
    start = sample(chain, rng)
    a = MultiStartSolver(restarts=20, seed=7).solve(
        robot, start, "panda_link0", "panda_hand_tcp", target
    )
    b = MultiStartSolver(restarts=20, seed=7).solve(
        robot, start, "panda_link0", "panda_hand_tcp", target
    )
    np.testing.assert_array_equal(a.q, b.q)


def test_budget_exhausted_reports_the_best_attempt(planar_2r):
    robot = planar_2r
    solver = MultiStartSolver(restarts=5, seed=0)
    with pytest.raises(NoSolution) as caught:
        solver.solve(robot, {"shoulder": 0.0, "elbow": 0.5}, "base", "tip", [-1.0, 0.2, 0.0])
    assert caught.value.solution.iterations >= 6  # every attempt ran at least once
    timed = MultiStartSolver(restarts=10_000, time_budget=0.05, seed=0)
    # Out of time is a budget, not a verdict: the best attempt comes back unreached.
    sol = timed.solve(robot, {"shoulder": 0.0, "elbow": 0.5}, "base", "tip", [-1.0, 0.2, 0.0])
    assert sol.status is Status.TIMEOUT and not sol.reached
    assert -0.5 <= sol.positions["shoulder"] <= 0.5


def test_bad_parameters():
    with pytest.raises(ValueError, match="restarts"):
        MultiStartSolver(restarts=-1)
    with pytest.raises(ValueError, match="time_budget"):
        MultiStartSolver(time_budget=0.0)


def test_wraps_any_solver(load, rng, sample):
    from hilbot.kinematics.ik import BatchSolver, QPSolver

    robot = load("widowx_250s")
    chain = robot.path_between("base_link", "ee_gripper_link")
    target = chain.fk(sample(chain, rng, margin=0.2))
    for inner in (QPSolver(), BatchSolver()):
        sol = MultiStartSolver(inner, restarts=20, seed=0).solve(
            robot, np.zeros(6), "base_link", "ee_gripper_link", target, max_iterations=40
        )
        assert sol.reached and sol.status is Status.CONVERGED


def cold_iterations(robot, chain, solvers, rng, sample, cases=40):
    """Total iterations of each solver over the same ``cases`` cold starts (random target,
    random seed) on the WidowX gripper chain; every solve must succeed within the limits."""
    totals = [0] * len(solvers)
    for _ in range(cases):
        target = chain.fk(sample(chain, rng))
        args = (robot, sample(chain, rng), "base_link", "ee_gripper_link", target)
        for k, solver in enumerate(solvers):
            sol = solver.solve(*args, orientation_tolerance=1e-3)
            assert sol.reached and sol.orientation_residual <= 1e-3
            assert np.all(sol.q >= chain.lower) and np.all(sol.q <= chain.upper)
            totals[k] += sol.iterations
    return totals


def test_restarts_give_up_early_on_slow_progress(load, rng, sample):
    robot = load("widowx_250s")
    chain = robot.path_between("base_link", "ee_gripper_link")
    strict = MultiStartSolver(restarts=60, seed=3, attempt_iterations=25)
    lenient = MultiStartSolver(restarts=60, seed=3, attempt_iterations=25, attempt_stall_ratio=0.0)
    total_strict, total_lenient = cold_iterations(robot, chain, (strict, lenient), rng, sample)
    assert total_strict < 0.9 * total_lenient


def test_dls_honours_a_stricter_stall_rule(load):
    from hilbot.kinematics.ik.core.solver import _options
    from hilbot.kinematics.ik.core.target import parse_target

    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    solver = DLSSolver()
    target = parse_target(chain.fk(np.array([0.1, -1.1, 1.3, -1.7, -1.5, 0.2])))
    q0 = np.array([2.5, -2.0, -2.0, 1.0, 1.5, -2.0])
    box = solver.info(chain).box(q0, True, None)
    options = _options(50, 1e-4, 0.01, False, True, None)
    # Every accepted step "makes little progress" when it must shrink the error 100-fold.
    _, meta = solver._solve(chain, q0, target, box, options._replace(stall=(1, 0.99)))
    assert meta.status is Status.STALLED and meta.iterations <= 2
    _, own = solver._solve(chain, q0, target, box, options)
    assert own.iterations > meta.iterations


@pytest.mark.parametrize(
    ("option", "value"), [("attempt_stall_iterations", 0), ("attempt_stall_ratio", 1.0)]
)
def test_bad_attempt_stall_rule_is_rejected(option, value):
    with pytest.raises(ValueError, match=option):
        MultiStartSolver(**{option: value})


def test_restarts_start_from_the_closest_candidate(load, rng, sample):
    """Ranking restarts by the task error saves attempts; every solve still succeeds."""
    robot = load("widowx_250s")
    chain = robot.path_between("base_link", "ee_gripper_link")
    ranked = MultiStartSolver(restarts=60, seed=3, attempt_iterations=25)
    plain = MultiStartSolver(
        restarts=60, seed=3, attempt_iterations=25, candidates=1, screen_seed=False
    )
    total_ranked, total_plain = cold_iterations(robot, chain, (ranked, plain), rng, sample)
    assert total_ranked < 0.9 * total_plain


def test_candidates_are_drawn_within_a_max_delta_box(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    q0 = np.array([0.1, -1.1, 1.3, -1.7, -1.5, 0.2])
    target = chain.fk(np.array([2.0, -0.5, 0.5, -1.0, 1.0, 1.0]))  # far: screening kicks in
    solver = MultiStartSolver(restarts=5, seed=0)
    sol = solver.solve(robot, q0, "base_link", "tool0", target, max_delta=0.1)
    assert np.max(np.abs(sol.q - q0)) <= 0.1 + 1e-12


def test_task_costs_match_the_evaluated_error(load, rng, sample):
    from hilbot.kinematics.ik.core.residual import rotation_error
    from hilbot.kinematics.ik.core.target import Target, parse_target

    robot = load("panda")
    chain = robot.path_between("panda_link0", "panda_hand_tcp")
    solver = DLSSolver()
    pose = chain.fk(sample(chain, rng))
    qs = [sample(chain, rng) for _ in range(5)]
    costs = solver.task_costs(chain, parse_target(pose), [q.tolist() for q in qs])
    points = solver.task_costs(chain, Target(tuple(pose[:3, 3])), [q.tolist() for q in qs])
    for q, cost, point in zip(qs, costs, points, strict=True):
        at = chain.fk(q)
        d2 = float(np.sum((at[:3, 3] - pose[:3, 3]) ** 2))
        angle = rotation_error(pose[:3, :3], at)[1]
        assert cost == pytest.approx(d2 + solver.orientation_weight**2 * angle**2, rel=1e-9)
        assert point == pytest.approx(d2, rel=1e-9)


def test_rejects_no_candidates():
    with pytest.raises(ValueError, match="candidates"):
        MultiStartSolver(candidates=0)
