"""QPBatchSolver: each world's answer is QPSolver's on the same inputs, limits hold exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hilbot.kinematics import load_urdf
from hilbot.kinematics.ik import (
    Capsule,
    CollisionAvoidance,
    ConfigurationLimit,
    InvalidTarget,
    LinearInequality,
    NoDofs,
    QPBatchSolver,
    QPSolver,
    Status,
    VelocityLimit,
)
from hilbot.kinematics.ik.batch.qp_run import STATUSES
from hilbot.kinematics.ik.batch.qp_solver import ERRORS
from hilbot.kinematics.ik.core.errors import IKError

ROBOTS = Path(__file__).resolve().parents[3] / "configs" / "robots"
ARMS = {
    "panda": ("panda.urdf", "panda_link0", "panda_hand_tcp"),
    "ur5": ("ur5.urdf", "base_link", "tool0"),
    "widowx": ("widowx_250s.urdf", "base_link", "ee_gripper_link"),
}


def _arm(name):
    urdf, source, tip = ARMS[name]
    robot = load_urdf(ROBOTS / urdf)
    return robot, source, tip, robot.path_between(source, tip)


def _worlds(chain, count, seed, spread=0.3, near_limits=False):
    rng = np.random.default_rng(seed)
    lo, hi = np.maximum(chain.lower, -np.pi), np.minimum(chain.upper, np.pi)
    q_true = rng.uniform(lo, hi, (count, chain.dof))
    seeds = np.clip(q_true + rng.uniform(-spread, spread, q_true.shape), chain.lower, chain.upper)
    if near_limits:  # half the worlds start within 0.05 rad of a limit, heading out
        pick = rng.integers(0, chain.dof, count // 2)
        rows = np.arange(count // 2)
        seeds[rows, pick] = chain.upper[pick] - 0.05 * rng.uniform(0, 1, count // 2)
        q_true[rows, pick] = chain.upper[pick]
    return seeds, q_true


def _one_by_one(solver, robot, source, tip, seeds, targets, **options):
    out = []
    for seed, target in zip(seeds, targets, strict=True):
        try:
            out.append((solver.solve(robot, seed, source, tip, target, **options), None))
        except IKError as exc:
            solution = getattr(exc, "solution", None)
            out.append((solution, type(exc).__name__))
    return out


def _check_same(result, singles):
    worst = 0.0
    for b, (solution, error) in enumerate(singles):
        assert ERRORS[result.error[b]] == error, b
        assert solution is not None
        worst = max(worst, float(np.abs(solution.q - result.q[b]).max()))
        assert STATUSES[result.status[b]] is solution.status, b
        assert result.iterations[b] == solution.iterations, b
        assert result.residual[b] == pytest.approx(solution.residual, abs=1e-9)
        assert bool(result.reached[b]) == solution.reached, b
        assert bool(result.position_reached[b]) == solution.position_reached, b
    # 1e-9 held with NumPy 2.4; with NumPy 2.2 (Python 3.10) one run gave 2.6e-9, on a busy
    # machine (the BLAS may sum in another order): still the same steps, to the last bits.
    assert worst <= 1e-8


CASES = {
    # name: (limits, options, seeds near limits)
    "velocity": (lambda chain: [VelocityLimit(dt=0.01)], {}, False),
    "joint-limits-active": (lambda chain: [ConfigurationLimit(gain=0.5)], {}, True),
    "velocity-max-delta": (lambda chain: [VelocityLimit(dt=0.005)], {"max_delta": 0.05}, True),
    "step-row": (
        lambda chain: [VelocityLimit(dt=0.01), LinearInequality(_row(chain, 1.0), [0.004])],
        {},
        False,
    ),
    "configuration-row": (
        lambda chain: [LinearInequality(_row(chain, 1.0), [0.3], on="configuration")],
        {"max_iterations": 30},
        False,
    ),
    "no-limits": (lambda chain: [], {"respect_limits": False}, False),
}


def _row(chain, value):
    g = np.zeros((1, chain.dof))
    g[0, 1] = value
    g[0, 2] = 0.5 * value
    return g


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", ["panda", "ur5"])
def test_each_world_equals_qpsolver(name, case):
    robot, source, tip, chain = _arm(name)
    make, options, near = CASES[case]
    seeds, q_true = _worlds(chain, 120, seed=hash((name, case)) % 2**32, near_limits=near)
    targets = chain.fk_batch(q_true)
    limits = make(chain)
    result = QPBatchSolver(limits).solve_batch(
        robot, seeds, source, tip, targets, as_arrays=True, **options
    )
    singles = _one_by_one(QPSolver(limits), robot, source, tip, seeds, targets, **options)
    _check_same(result, singles)


def test_the_general_rows_bind_and_hold():
    """The half-space is active in most worlds and holds at every returned step."""
    robot, source, tip, chain = _arm("panda")
    seeds, q_true = _worlds(chain, 100, seed=5)
    g = _row(chain, 1.0)
    limits = [VelocityLimit(dt=0.01), LinearInequality(g, [0.002])]
    result = QPBatchSolver(limits).solve_batch(
        robot, seeds, source, tip, chain.fk_batch(q_true), max_iterations=1, as_arrays=True
    )
    step = result.q - seeds
    assert ((step @ g.T)[:, 0] <= 0.002 + 1e-12).all()
    assert (np.abs(step) <= chain.velocity_limit * 0.01 + 1e-15).all()
    free = QPBatchSolver([VelocityLimit(dt=0.01)]).solve_batch(
        robot, seeds, source, tip, chain.fk_batch(q_true), max_iterations=1, as_arrays=True
    )
    binding = ((free.q - seeds) @ g.T)[:, 0] > 0.002
    assert binding.sum() >= 20  # the row changes many worlds' steps
    singles = _one_by_one(
        QPSolver(limits), robot, source, tip, seeds, chain.fk_batch(q_true), max_iterations=1
    )
    _check_same(result, singles)


def test_collision_rows_per_world():
    robot, source, tip, chain = _arm("ur5")
    tool = Capsule("tool0", 0.04, (0, 0, -0.1), (0, 0, 0))
    column = Capsule("base_link", 0.08, (0, 0, 0), (0, 0, 0.5))
    limits = [CollisionAvoidance([(tool, column)], margin=0.02, detection_distance=0.3)]
    seeds, q_true = _worlds(chain, 30, seed=9, spread=0.5)
    targets = chain.fk_batch(q_true)
    result = QPBatchSolver(limits).solve_batch(
        robot, seeds, source, tip, targets, max_iterations=15, as_arrays=True
    )
    singles = _one_by_one(QPSolver(limits), robot, source, tip, seeds, targets, max_iterations=15)
    _check_same(result, singles)


@pytest.mark.parametrize("form", ["position", "axis"])
def test_position_and_axis_targets(form):
    robot, source, tip, chain = _arm("ur5")
    seeds, q_true = _worlds(chain, 60, seed=11)
    poses = chain.fk_batch(q_true)
    if form == "position":
        targets = poses[:, :3, 3]
        singles_targets = list(targets)
    else:
        targets = [(p[:3, 3], p[:3, 2]) for p in poses]
        singles_targets = targets
    limits = [VelocityLimit(dt=0.01)]
    result = QPBatchSolver(limits).solve_batch(robot, seeds, source, tip, targets, as_arrays=True)
    singles = _one_by_one(QPSolver(limits), robot, source, tip, seeds, singles_targets)
    _check_same(result, singles)


def test_unreachable_and_strict_orientation_errors_per_world():
    robot, source, tip, chain = _arm("panda")
    seeds, q_true = _worlds(chain, 20, seed=13)
    targets = chain.fk_batch(q_true)
    targets[:5, :3, 3] *= 10.0  # far beyond reach
    options = {"strict_orientation": True, "max_iterations": 8}
    result = QPBatchSolver().solve_batch(
        robot, seeds, source, tip, targets, as_arrays=True, **options
    )
    singles = _one_by_one(QPSolver(), robot, source, tip, seeds, targets, **options)
    _check_same(result, singles)
    assert {ERRORS[e] for e in result.error[:5]} == {"Unreachable"}


def test_solutions_form_and_limits_hold():
    robot, source, tip, chain = _arm("widowx")
    seeds, q_true = _worlds(chain, 40, seed=17, spread=0.6)
    solutions = QPBatchSolver([VelocityLimit(dt=0.02)]).solve_batch(
        robot, seeds, source, tip, chain.fk_batch(q_true)[:, :3, 3], max_iterations=5
    )
    assert len(solutions) == 40
    for seed, solution in zip(seeds, solutions, strict=True):
        assert isinstance(solution.status, Status)
        assert (solution.q >= chain.lower).all() and (solution.q <= chain.upper).all()
        assert set(solution.positions) >= {j.name for j in chain.joints}
        assert solution.orientation_residual is None
        # 5 iterations of at most v dt each
        assert (np.abs(solution.q - seed) <= 5 * 0.02 * chain.velocity_limit + 1e-12).all()


def test_bad_inputs_raise_one_clear_error():
    robot, source, tip, chain = _arm("ur5")
    solver = QPBatchSolver()
    seeds = np.zeros((2, chain.dof))
    good = chain.fk_batch(seeds)
    bad = good.copy()
    bad[1, 0, 3] = np.nan
    with pytest.raises(InvalidTarget, match="NaN"):
        solver.solve_batch(robot, seeds, source, tip, bad)
    with pytest.raises(InvalidTarget, match="one kind"):
        solver.solve_batch(robot, seeds, source, tip, [good[0], good[1, :3, 3]])
    with pytest.raises(ValueError, match="shape"):
        solver.solve_batch(robot, np.zeros((3, chain.dof)), source, tip, good)
    with pytest.raises(ValueError, match="empty"):
        solver.solve_batch(robot, seeds, source, tip, [])
    with pytest.raises(ValueError, match="max_iterations"):
        solver.solve_batch(robot, seeds, source, tip, good, max_iterations=0)
    with pytest.raises(NoDofs):
        solver.solve_batch(robot, seeds, tip, tip, good)
    with pytest.raises(TypeError, match="Limit"):
        QPBatchSolver(["not a limit"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="damping"):
        QPBatchSolver(damping=0.0)


def test_floating_base_chain():
    """Chains with a floating joint take the generic batched kinematics and integration."""
    robot = load_urdf(ROBOTS / "hexapod.urdf")
    chain = robot.path_between("world", "leg4_foot")
    rng = np.random.default_rng(21)
    seeds = np.zeros((12, chain.dof))
    seeds[:, 6:] = rng.uniform(-0.3, 0.3, (12, chain.dof - 6))
    truth = seeds + rng.uniform(-0.05, 0.05, seeds.shape)
    points = np.array([chain.fk(q)[:3, 3] for q in truth])
    limits = [VelocityLimit(dt=0.05)]
    result = QPBatchSolver(limits).solve_batch(
        robot, seeds, "world", "leg4_foot", points, max_iterations=20, as_arrays=True
    )
    singles = _one_by_one(
        QPSolver(limits), robot, "world", "leg4_foot", seeds, list(points), max_iterations=20
    )
    _check_same(result, singles)
