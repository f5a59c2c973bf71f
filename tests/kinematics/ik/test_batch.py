"""BatchSolver: vectorised DLS giving the same answers as one-by-one solves."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics import spatial
from hilbot.kinematics.codegen.batch_kernel import BatchKernel
from hilbot.kinematics.ik import BatchResult, BatchSolver, DLSSolver, InvalidTarget, NoDofs, Status
from hilbot.kinematics.ik.batch.dls_step import damped

CASES = [
    ("ur5", "base_link", "tool0"),
    ("panda", "panda_link0", "panda_hand_tcp"),
    ("openmanipulator_x", "world", "end_effector_link"),
    ("hexapod", "world", "leg5_foot"),
]


def _seeds(chain, rng, sample, size, noise):
    q_true = np.array([sample(chain, rng, margin=0.05) for _ in range(size)])
    seeds = np.clip(q_true + rng.uniform(-noise, noise, q_true.shape), chain.lower, chain.upper)
    return q_true, seeds


@pytest.mark.parametrize("case", CASES, ids=[f"{r}:{t}" for r, _, t in CASES])
@pytest.mark.parametrize("form", ["transform", "position", "axis"])
def test_batch_equals_one_by_one(case, form, load, rng, sample):
    name, source, tip = case
    robot = load(name)
    chain = robot.path_between(source, tip)
    q_true, seeds = _seeds(chain, rng, sample, 24, 0.3)
    poses = chain.fk_batch(q_true)
    if form == "transform":
        targets = poses
    elif form == "position":
        targets = poses[:, :3, 3]
    else:
        targets = [(p[:3, 3], p[:3, 2]) for p in poses]
    batch = BatchSolver().solve_batch(robot, seeds, source, tip, targets, max_delta=0.4)
    single = DLSSolver()
    for b, sol in enumerate(batch):
        target = targets[b]
        try:
            one = single.solve(robot, seeds[b], source, tip, target, max_delta=0.4)
        except Exception as exc:  # the batch reports failures in its fields instead
            one = exc.solution  # type: ignore[attr-defined]
        np.testing.assert_allclose(sol.q, one.q, atol=1e-9)
        assert sol.status is one.status and sol.iterations == one.iterations
        assert sol.residual == pytest.approx(one.residual, abs=1e-9)
        assert np.max(np.abs(sol.q - seeds[b])) <= 0.4 + 1e-12


@pytest.mark.parametrize(
    ("name", "source", "tip"),
    [
        ("panda", "panda_link0", "panda_rightfinger"),  # a prismatic mimic follower
        ("widowx_250s", "base_link", "left_finger_link"),
        ("ur5", "base_link", "tool0"),
    ],
)
@pytest.mark.parametrize("size", [40, 3])  # numpy arrays, and Python floats item by item
def test_batch_kernel_equals_the_chain(name, source, tip, size, load, rng):
    chain = load(name).path_between(source, tip)
    q = rng.uniform(-2.0, 2.0, (size, chain.dof))
    pose, jac = chain.fk_jacobian_batch(q)
    pose12, cols = BatchKernel(chain)(q)
    np.testing.assert_allclose(pose12.T.reshape(size, 3, 4), pose[:, :3], atol=1e-12)
    np.testing.assert_allclose(cols.transpose(2, 0, 1), jac, atol=1e-12)


def test_task_errors_on_floats_equal_the_array_path(rng):
    """A few items go through Python floats; a half turn goes through the scalar path."""
    from hilbot.kinematics.ik.batch.dls_run import _full_errors, _full_errors_floats

    target = np.array([spatial.so3_exp(rng.normal(size=3)) for _ in range(6)])
    pose = np.zeros((6, 3, 4))
    pose[:, :, 3] = rng.normal(size=(6, 3))
    for b in range(6):
        turn = np.diag([1.0, -1.0, -1.0]) if b % 3 == 0 else spatial.so3_exp(rng.normal(size=3))
        pose[b, :, :3] = target[b] @ turn
    point = rng.normal(size=(6, 3))
    floats = _full_errors_floats(pose, point, target)
    arrays = _full_errors(
        np.tile(pose, (3, 1, 1)), np.tile(point, (3, 1)), np.tile(target, (3, 1, 1))
    )
    for a, b in zip(floats, arrays, strict=True):
        np.testing.assert_allclose(a, b[:6], atol=1e-15)
    assert floats[2][0] == pytest.approx(np.pi)


@pytest.mark.parametrize(("rows", "columns"), [(6, 7), (6, 6), (6, 4), (3, 7)])
def test_batched_damped_step_solves_the_normal_equations(rows, columns, rng):
    size = 300
    cols = rng.normal(size=(rows, columns, size))  # (m, n, B): the batch last
    r = rng.normal(size=(size, rows))
    lam2 = rng.uniform(1e-6, 1e-2, size)
    dq = damped(cols, r, lam2)
    jac = cols.transpose(2, 0, 1)
    normal = jac.transpose(0, 2, 1) @ jac + lam2[:, None, None] * np.eye(columns)
    expected = np.linalg.solve(normal, np.einsum("bij,bi->bj", jac, r)[:, :, None])[:, :, 0]
    np.testing.assert_allclose(dq, expected, rtol=1e-8, atol=1e-10)


def test_a_large_batch_equals_one_by_one(load, rng, sample):
    """Over 128 items the step is the batched Cholesky, not numpy.linalg.solve."""
    robot = load("panda")
    chain = robot.path_between("panda_link0", "panda_hand_tcp")
    q_true, seeds = _seeds(chain, rng, sample, 160, 0.1)
    targets = chain.fk_batch(q_true)
    batch = BatchSolver().solve_batch(robot, seeds, "panda_link0", "panda_hand_tcp", targets)
    single = DLSSolver()
    for b, sol in enumerate(batch):
        one = single.solve(robot, seeds[b], "panda_link0", "panda_hand_tcp", targets[b])
        np.testing.assert_allclose(sol.q, one.q, atol=1e-9)
        assert sol.status is one.status and sol.iterations == one.iterations


def test_arrays_result_and_limits(load, rng, sample):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    q_true, seeds = _seeds(chain, rng, sample, 200, 0.05)
    out = BatchSolver().solve_batch(
        robot, seeds, "base_link", "tool0", chain.fk_batch(q_true), as_arrays=True
    )
    assert isinstance(out, BatchResult)
    assert out.q.shape == (200, 6) and out.reached.all()
    assert (out.status == 0).all() and (out.residual <= 1e-4).all()
    assert np.all(out.q >= chain.lower) and np.all(out.q <= chain.upper)


def test_seeds_as_states_and_single_seed(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    q0 = np.array([0.1, -1.1, 1.3, -1.7, -1.5, 0.2])
    targets = chain.fk_batch(np.array([q0 + 0.02, q0 - 0.02]))
    names = [n for n, _ in chain.jacobian_columns]
    mapping = dict(zip(names, q0, strict=True)) | {"other": 1.0}
    sols = BatchSolver().solve_batch(robot, [mapping, mapping], "base_link", "tool0", targets)
    assert all(s.reached for s in sols) and sols[0].positions["other"] == 1.0
    same = BatchSolver().solve_batch(robot, q0, "base_link", "tool0", targets)
    np.testing.assert_allclose(same[1].q, sols[1].q)


def test_single_solve_through_the_solver_interface(load):
    robot = load("panda")
    chain = robot.path_between("panda_link0", "panda_hand_tcp")
    q0 = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])
    target = (chain.fk(q0 + 0.05)[:3, 3], spatial.matrix_to_quat(chain.fk(q0 + 0.05)[:3, :3]))
    sol = BatchSolver().solve(robot, q0, "panda_link0", "panda_hand_tcp", target)
    ref = DLSSolver().solve(robot, q0, "panda_link0", "panda_hand_tcp", target)
    assert sol.status is Status.CONVERGED
    np.testing.assert_allclose(sol.q, ref.q, atol=1e-9)


def test_bad_batches(load):
    robot = load("ur5")
    with pytest.raises(InvalidTarget, match="NaN"):
        BatchSolver().solve_batch(robot, np.zeros(6), "base_link", "tool0", np.full((3, 3), np.nan))
    with pytest.raises(InvalidTarget, match="one kind"):
        BatchSolver().solve_batch(
            robot, np.zeros(6), "base_link", "tool0", [np.zeros(3), np.eye(4)]
        )
    with pytest.raises(InvalidTarget, match="not rigid"):
        BatchSolver().solve_batch(robot, np.zeros(6), "base_link", "tool0", np.zeros((2, 4, 4)))
    with pytest.raises(ValueError, match="seeds"):
        BatchSolver().solve_batch(robot, np.zeros((3, 6)), "base_link", "tool0", np.zeros((2, 3)))
    with pytest.raises(NoDofs):
        BatchSolver().solve_batch(robot, np.zeros(0), "wrist_3_link", "tool0", np.zeros((1, 3)))


def test_batch_equals_one_by_one_when_the_max_delta_box_binds(load, rng):
    """Targets beyond one call's box: pinned steps fall back to a scaled step in both."""
    robot = load("koch_v1_1")
    chain = robot.path_between("base_link", "tool")
    q0 = np.array([0.0, -1.5, 1.5, 0.6, 0.0])
    base = chain.fk(q0)[:3, 3]
    targets = base + rng.uniform(-0.03, 0.03, (24, 3))
    targets[0] = base + np.array([0.01, 0.0, 0.0])  # pinning all three pitch joints stalls
    seeds = np.tile(q0, (24, 1))
    batch = BatchSolver().solve_batch(robot, seeds, "base_link", "tool", targets, max_delta=0.02)
    single = DLSSolver()
    moved = 0
    for b, sol in enumerate(batch):
        try:
            one = single.solve(robot, q0, "base_link", "tool", targets[b], max_delta=0.02)
        except Exception as exc:  # the batch reports failures in its fields instead
            one = exc.solution  # type: ignore[attr-defined]
        np.testing.assert_allclose(sol.q, one.q, atol=1e-9)
        assert sol.status is one.status and sol.iterations == one.iterations
        assert np.max(np.abs(sol.q - q0)) <= 0.02 + 1e-12
        moved += sol.residual < np.linalg.norm(targets[b] - base) - 1e-6
    assert moved == 24  # every call moved towards its target
