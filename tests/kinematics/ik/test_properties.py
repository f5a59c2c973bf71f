"""Property tests: whatever the target, seed and options, limits and max_delta hold."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hilbot.kinematics import load_urdf, spatial
from hilbot.kinematics.ik import (
    BatchSolver,
    DLSSolver,
    FABRIKSolver,
    IKError,
    InvalidTarget,
    MultiStartSolver,
    NoSolution,
    OrientationUnreachable,
    Unreachable,
)
from hilbot.kinematics.ik.core.target import parse_target

ROBOTS = Path(__file__).resolve().parents[3] / "configs" / "robots"
ARMS = [
    ("ur5", "base_link", "tool0"),
    ("panda", "panda_link0", "panda_hand_tcp"),
    ("widowx_250s", "base_link", "ee_gripper_link"),
    ("openmanipulator_x", "world", "end_effector_link"),
    ("koch_v1_1", "base_link", "tool"),
]
_ROBOTS = {name: load_urdf(ROBOTS / f"{name}.urdf") for name, _, _ in ARMS}
SOLVERS = {
    "dls": DLSSolver(),
    "dls-svd": DLSSolver(svd=True),
    "batch": BatchSolver(),
    "multi": MultiStartSolver(restarts=2, seed=0),
    "fabrik": FABRIKSolver(),
}
SPECIAL = st.sampled_from([math.nan, math.inf, -math.inf])
finite = st.floats(-1.5, 1.5, allow_nan=False)


@st.composite
def targets(draw):
    """A target in any form, sometimes with a non-finite entry."""
    point = [draw(finite) for _ in range(3)]
    form = draw(st.sampled_from(["point", "none", "axis", "quat", "matrix", "transform"]))
    rpy = [draw(st.floats(-3.0, 3.0)) for _ in range(3)]
    rotation = spatial.rpy_to_matrix(rpy)
    value = {
        "point": np.array(point),
        "none": (np.array(point), None),
        "axis": (np.array(point), rotation[:, 2] * draw(st.floats(0.1, 5.0))),
        "quat": (np.array(point), spatial.matrix_to_quat(rotation)),
        "matrix": (np.array(point), rotation),
        "transform": spatial.transform(rotation, point),
    }[form]
    if draw(st.booleans()) and draw(st.integers(0, 4)) == 0:
        bad = draw(SPECIAL)
        if isinstance(value, tuple):
            value = (np.array(value[0], dtype=float), value[1])
            value[0][draw(st.integers(0, 2))] = bad
        else:
            value = np.array(value, dtype=float)
            value.flat[draw(st.integers(0, 2))] = bad
    return value


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    arm=st.sampled_from(ARMS),
    solver=st.sampled_from(sorted(SOLVERS)),
    target=targets(),
    seed=st.integers(0, 2**31),
    max_delta=st.one_of(st.none(), st.floats(1e-3, 0.8)),
    max_iterations=st.integers(1, 30),
    strict=st.booleans(),
)
def test_limits_and_max_delta_are_never_violated(
    arm, solver, target, seed, max_delta, max_iterations, strict
):
    name, source, tip = arm
    robot = _ROBOTS[name]
    chain = robot.path_between(source, tip)
    rng = np.random.default_rng(seed)
    lo = np.where(np.isfinite(chain.lower), chain.lower, -math.pi)
    hi = np.where(np.isfinite(chain.upper), chain.upper, math.pi)
    q0 = rng.uniform(lo, hi)
    finite_target = True
    try:
        parsed = parse_target(target)
    except InvalidTarget:
        finite_target = False
    position_only = finite_target and parsed.rows == 3
    try:
        sol = SOLVERS[solver].solve(
            robot,
            q0,
            source,
            tip,
            target,
            max_iterations=max_iterations,
            max_delta=max_delta,
            strict_orientation=strict,
        )
        q = sol.q
        assert np.isfinite(q).all()
    except InvalidTarget:
        assert not finite_target or (solver == "fabrik" and not position_only)
        return
    except (Unreachable, NoSolution, OrientationUnreachable) as err:
        q = chain.q_from(err.positions)
    assert finite_target
    assert np.all(q >= chain.lower - 1e-12) and np.all(q <= chain.upper + 1e-12)
    if max_delta is not None:
        assert np.max(np.abs(q - q0)) <= max_delta + 1e-12


@settings(max_examples=40, deadline=None, derandomize=True)
@given(arm=st.sampled_from(ARMS), seed=st.integers(0, 2**31))
def test_reachable_targets_are_reached_from_near_seeds(arm, seed):
    name, source, tip = arm
    robot = _ROBOTS[name]
    chain = robot.path_between(source, tip)
    rng = np.random.default_rng(seed)
    lo = np.where(np.isfinite(chain.lower), chain.lower + 0.05, -math.pi)
    hi = np.where(np.isfinite(chain.upper), chain.upper - 0.05, math.pi)
    q_true = rng.uniform(lo, hi)
    q0 = np.clip(q_true + rng.uniform(-0.1, 0.1, chain.dof), chain.lower, chain.upper)
    sol = DLSSolver().solve(robot, q0, source, tip, chain.fk(q_true), orientation_tolerance=1e-3)
    assert sol.reached and sol.orientation_residual <= 1e-3


def test_errors_are_ik_errors():
    for err in (Unreachable, NoSolution, OrientationUnreachable, InvalidTarget):
        assert issubclass(err, IKError)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_seed_is_rejected(bad):
    robot = _ROBOTS["ur5"]
    seed = np.zeros(6)
    seed[2] = bad
    with pytest.raises(ValueError, match="finite"):
        DLSSolver().solve(robot, seed, "base_link", "tool0", np.array([0.3, 0.1, 0.4]))
