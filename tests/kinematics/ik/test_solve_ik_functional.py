"""solve_ik: mink's functional call on hilbot chains, one world or a batch, under hard limits."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from hilbot.kinematics import load_urdf
from hilbot.kinematics.ik import (
    Configuration,
    ConfigurationLimit,
    FrameTargets,
    FrameTask,
    LinearInequality,
    PostureTask,
    QPBatchSolver,
    QPSolver,
    VelocityLimit,
    solve_ik,
)
from hilbot.kinematics.ik.core.target import parse_target
from hilbot.kinematics.ik.qp.qp_solver import ChainContext, _Weights, task_rows
from hilbot.kinematics.ik.qp.step import solve_step

ROBOTS = Path(__file__).resolve().parents[3] / "configs" / "robots"
DT = 0.01


@pytest.fixture(scope="module")
def panda():
    robot = load_urdf(ROBOTS / "panda.urdf")
    return robot.path_between("panda_link0", "panda_hand_tcp")


def _worlds(chain, count, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = np.maximum(chain.lower, -np.pi), np.minimum(chain.upper, np.pi)
    q_true = rng.uniform(lo, hi, (count, chain.dof))
    q = np.clip(q_true + rng.uniform(-0.3, 0.3, q_true.shape), chain.lower, chain.upper)
    return q, chain.fk_batch(q_true)


def _reference_step(chain, q, target, limits):
    """The QP of one QPSolver iteration, built from its own pieces (qp_solver, step)."""
    pose, jac = chain.fk_jacobian(q)
    a, b, _, _ = task_rows(pose, jac, parse_target(target), _Weights(1.0, 0.3))
    h_mat = a.T @ a + (1e-9 + 1e-3 * float(b @ b)) * np.eye(chain.dof)
    context = ChainContext(chain, q, tuple(j.name for j in chain.joints))
    inf = np.full(chain.dof, np.inf)
    dq, _ = solve_step(h_mat, -(a.T @ b), limits, context, -inf, inf)
    return dq


@pytest.mark.parametrize(
    "limits",
    [
        [ConfigurationLimit()],
        [VelocityLimit(dt=DT)],
        [VelocityLimit(dt=DT), LinearInequality(np.eye(1, 7, 1), [0.003])],
    ],
    ids=["configuration", "velocity", "velocity+row"],
)
def test_each_world_is_one_qpsolver_step(panda, limits):
    q, targets = _worlds(panda, 40)
    v = solve_ik(
        Configuration(panda, q), [FrameTargets("panda_hand_tcp", targets)], DT, limits=limits
    )
    for b in range(40):
        dq = _reference_step(panda, q[b], targets[b], limits)
        # 1e-12 held with NumPy 2.4; with NumPy 2.2 (Python 3.10) one step was 1.03e-12 off
        np.testing.assert_allclose(v[b] * DT, dq, rtol=0, atol=1e-11)


def test_limits_none_is_the_default_configuration_limit_and_empty_is_unconstrained(panda):
    q, targets = _worlds(panda, 20, seed=1)
    q[:, 3] = panda.upper[3] - 1e-3  # the elbow next to its limit
    config = Configuration(panda, q)
    tasks = [FrameTargets("panda_hand_tcp", targets)]
    default = solve_ik(config, tasks, DT)
    explicit = solve_ik(config, tasks, DT, limits=[ConfigurationLimit()])
    assert np.array_equal(solve_ik(config, tasks, DT, limits=None), default)
    assert np.array_equal(default, explicit)
    assert (q + default * DT <= panda.upper + 1e-15).all()
    free = solve_ik(config, tasks, DT, limits=[])
    assert (q + free * DT > panda.upper).any()  # unconstrained: steps out of the limits
    for b in range(20):  # and it is the damped least-squares step
        pose, jac = panda.fk_jacobian(q[b])
        a, e, _, _ = task_rows(pose, jac, parse_target(targets[b]), _Weights(1.0, 0.3))
        h_mat = a.T @ a + (1e-9 + 1e-3 * float(e @ e)) * np.eye(7)
        np.testing.assert_allclose(free[b] * DT, np.linalg.solve(h_mat, a.T @ e), atol=1e-12)


def test_single_world_equals_its_row_of_the_batch(panda):
    q, targets = _worlds(panda, 8, seed=2)
    limits = [VelocityLimit(dt=DT)]
    batch = solve_ik(
        Configuration(panda, q), [FrameTargets("panda_hand_tcp", targets)], DT, limits=limits
    )
    for b in range(8):
        one = solve_ik(
            Configuration(panda, q[b]), [FrameTask("panda_hand_tcp", targets[b])], DT, limits=limits
        )
        assert one.shape == (7,)
        # FrameTask parses its transform with parse_target, FrameTargets takes the array
        # as it is: the rotations may differ in the last bit.
        np.testing.assert_allclose(one, batch[b], rtol=0, atol=1e-12)


def test_solver_and_limits_together_raise(panda):
    config = Configuration(panda, np.zeros(7))
    task = [FrameTask("panda_hand_tcp", panda.fk(np.full(7, 0.1)))]
    solver = QPSolver([VelocityLimit(dt=DT)])
    with pytest.raises(ValueError, match="not both"):
        solve_ik(config, task, DT, solver=solver, limits=[])
    with pytest.raises(ValueError, match="not both"):
        solve_ik(config, task, DT, solver=solver, limits=None)
    v = solve_ik(config, task, DT, solver=QPBatchSolver([VelocityLimit(dt=DT)]))
    np.testing.assert_array_equal(v, solve_ik(config, task, DT, solver=solver))
    assert (np.abs(v) <= panda.velocity_limit + 1e-12).all()


def test_velocity_limit_uses_the_call_dt(panda):
    q, targets = _worlds(panda, 30, seed=3)
    v = solve_ik(
        Configuration(panda, q),
        [FrameTargets("panda_hand_tcp", targets)],
        0.002,
        limits=[VelocityLimit(dt=0.5)],
    )
    assert (np.abs(v) <= panda.velocity_limit * (1 + 1e-12)).all()
    assert np.isclose(np.abs(v) / panda.velocity_limit, 1.0).any()  # some joint at its limit


def test_stepping_reaches_the_targets_within_the_limits(panda):
    q, targets = _worlds(panda, 50, seed=4)
    config = Configuration(panda, q)
    tasks = [FrameTargets("panda_hand_tcp", targets)]
    limits = [ConfigurationLimit(), VelocityLimit(dt=DT)]
    for _ in range(40):
        v = solve_ik(config, tasks, DT, limits=limits)
        assert (np.abs(v) <= panda.velocity_limit * (1 + 1e-12)).all()
        config = config.integrate(v, DT)
        assert ((config.q >= panda.lower) & (config.q <= panda.upper)).all()
    error = np.linalg.norm(panda.fk_batch(config.q)[:, :3, 3] - targets[:, :3, 3], axis=1)
    assert np.median(error) < 1e-3


def test_posture_and_an_intermediate_link(panda):
    q = np.full(7, 0.2)
    q[3] = -1.0
    config = Configuration(panda, q)
    home = {"panda_joint1": 0.5}
    v = solve_ik(config, [PostureTask(home, weight=1.0)], DT, limits=[])
    assert v[0] > 0 and np.allclose(v[1:], 0.0)
    elbow = FrameTask(
        "panda_link4", config.chain.link_poses(q)["panda_link4"][:3, 3] + [0.0, 0.0, 0.01]
    )
    v = solve_ik(config, [elbow], DT, limits=[])
    moved = config.integrate(v, DT).chain.link_poses(config.integrate(v, DT).q)["panda_link4"]
    assert moved[2, 3] > config.chain.link_poses(q)["panda_link4"][2, 3]
    assert np.allclose(v[4:], 0.0)  # joints after the elbow do not move it


def test_bad_calls_raise_one_clear_error(panda):
    config = Configuration(panda, np.zeros((2, 7)))
    target = panda.fk(np.zeros(7))
    with pytest.raises(ValueError, match="dt"):
        solve_ik(config, [FrameTask("panda_hand_tcp", target)], 0.0)
    with pytest.raises(ValueError, match="at least one task"):
        solve_ik(config, [], DT)
    with pytest.raises(ValueError, match="not on"):
        solve_ik(config, [FrameTask("nowhere", target)], DT)
    with pytest.raises(ValueError, match="source_link"):
        solve_ik(config, [FrameTask("panda_hand_tcp", target, source_link="panda_link3")], DT)
    with pytest.raises(ValueError, match="3 targets for 2 worlds"):
        solve_ik(config, [FrameTargets("panda_hand_tcp", np.stack([target] * 3))], DT)
    with pytest.raises(ValueError, match="not on the chain"):
        solve_ik(config, [PostureTask({"elbow": 0.0})], DT)
    with pytest.raises(TypeError, match="FrameTask"):
        solve_ik(config, ["reach"], DT)  # type: ignore[list-item]
    # a posture-like task of the caller's own kind (PostureTask checks itself)
    home = SimpleNamespace(pose={"panda_joint2": float("nan")}, weight=1.0)
    with pytest.raises(ValueError, match=r"home positions must be finite: \['panda_joint2'\]"):
        solve_ik(config, [home], DT)  # type: ignore[list-item]
    heavy = SimpleNamespace(pose={"panda_joint2": 0.0}, weight=float("inf"))
    with pytest.raises(ValueError, match="weight must be finite and > 0, got inf"):
        solve_ik(config, [heavy], DT)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="Limit"):
        solve_ik(config, [FrameTask("panda_hand_tcp", target)], DT, limits=["fast"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="shape"):
        Configuration(panda, np.zeros(6))
    with pytest.raises(ValueError, match="finite"):
        Configuration(panda, np.full(7, np.nan))
    with pytest.raises(ValueError, match=r"within ±1e\+09 .*panda_joint1"):
        Configuration(panda, np.full(7, 1e300))  # finite, but no arm is there
    with pytest.raises(ValueError, match="dt must be finite and > 0"):
        config.integrate(np.zeros((2, 7)), -1.0)
    with pytest.raises(ValueError, match="dt must be finite and > 0"):
        config.integrate(np.zeros((2, 7)), float("nan"))


@pytest.mark.parametrize(
    "limits",
    [
        [ConfigurationLimit(), VelocityLimit(dt=DT)],
        [ConfigurationLimit(), VelocityLimit(dt=DT), LinearInequality(np.eye(1, 7, 1), [0.003])],
    ],
    ids=["box", "box+row"],
)
@pytest.mark.parametrize("prioritized", [False, True], ids=["weighted", "prioritized"])
def test_a_multi_task_batch_is_the_multitask_solvers_step_per_world(panda, limits, prioritized):
    """Several tasks per world: each world's step is MultiTaskSolver's from the same q.

    Weighted: two frame tasks (the hand on one target per world, the elbow on a
    shared point) and a posture task in one QP. Prioritized: the hand's QP, then the
    posture's QP in the hand rows' null space (the Panda's redundant direction),
    under the same limits. Joint and velocity limits (and a half-space row) bind in
    many worlds; the rows are the multi-task solver's own task objects'.
    """
    from hilbot.kinematics.ik import MultiTaskSolver
    from hilbot.kinematics.ik.multitask.iterate import _step, evaluate
    from hilbot.kinematics.ik.multitask.model import TreeModel

    q, targets = _worlds(panda, 30, seed=3)
    # Half the worlds near their targets: steps no limit holds, a free null space.
    near = np.random.default_rng(4).uniform(-0.005, 0.005, (15, 7))
    targets[15:] = panda.fk_batch(q[15:] + near)
    elbow = FrameTask("panda_link4", [0.1, 0.05, 0.5], position_weight=0.5)
    posture = PostureTask({"panda_joint1": 0.3, "panda_joint3": -0.2}, weight=0.1)
    config = Configuration(panda, q)
    hand = FrameTargets("panda_hand_tcp", targets)
    others = [posture] if prioritized else [elbow, posture]
    v = solve_ik(config, [hand, *others], DT, limits=limits, prioritized=prioritized)
    solver = MultiTaskSolver(limits, prioritized=prioritized)
    model = TreeModel.from_chain(panda)
    inf = np.full(7, np.inf)
    capped = bound = 0
    for b in range(q.shape[0]):
        tasks = [FrameTask("panda_hand_tcp", targets[b]), *others]
        problem = solver._problem(model, tasks, True, None)
        dq, held = _step(problem, evaluate(problem, q[b], q[b]), q[b], -inf, inf, 0.0)
        capped += held
        np.testing.assert_allclose(v[b] * DT, dq, rtol=0, atol=1e-12)
        bound += bool(np.isclose(dq[1], 0.003, rtol=0, atol=1e-12))
    assert capped >= 10  # the limits bind in many worlds: the comparison covers them
    assert bound >= 5 or len(limits) == 2  # and so does the row, where there is one
    if prioritized:  # the posture moved the null space where the limits let it
        alone = solve_ik(Configuration(panda, q), [hand], DT, limits=limits)
        moved = np.abs(v - alone).max(axis=1) > 1e-9
        assert moved.sum() >= 10


def test_prioritized_needs_a_frame_task(panda):
    config = Configuration(panda, np.zeros((2, 7)))
    with pytest.raises(ValueError, match="frame task"):
        solve_ik(config, [PostureTask({"panda_joint1": 0.0})], DT, prioritized=True)
